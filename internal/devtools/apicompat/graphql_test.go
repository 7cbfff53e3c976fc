package apicompat

import (
	"reflect"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

func mustSchema(t *testing.T, sdl string) *ast.Schema {
	t.Helper()
	s, err := gqlparser.LoadSchema(&ast.Source{Name: "test.graphqls", Input: sdl})
	if err != nil {
		t.Fatalf("schema: %v\n%s", err, sdl)
	}
	return s
}

// breaksBase is the old schema of TestGraphQLBreaks: every kind of type
// with members whose change can break a client.
const breaksBase = `
type Query { run(id: ID!, verbose: Boolean): Run, runs(first: Int): [Run!]! }
interface Node { id: ID! }
type Run implements Node { id: ID!, state: State!, context: Ctx, note: String }
type Ctx { text: String }
enum State { QUEUED RUNNING }
union Item = Run | Ctx
input Filter { state: State, limit: Int! }
`

// graphQLBreakCase is a case of TestGraphQLBreaks: a current schema and the
// breaks from breaksBase to it, as "subject: detail" sorted by subject.
type graphQLBreakCase struct {
	name, cur string
	want      []string
}

// graphQLBreakCases returns the cases of TestGraphQLBreaks: changes that
// break nothing and changes that break each rule once.
func graphQLBreakCases() []graphQLBreakCase {
	return []graphQLBreakCase{
		{"unchanged", breaksBase, nil},
		{"additions only", breaksBase + `
extend type Run { extra: String }
extend enum State { DONE }
extend input Filter { more: Int }
type New { x: Int }`, nil},
		{"output made stricter", `
type Query { run(id: ID!, verbose: Boolean): Run, runs(first: Int): [Run!]! }
interface Node { id: ID! }
type Run implements Node { id: ID!, state: State!, context: Ctx!, note: String! }
type Ctx { text: String }
enum State { QUEUED RUNNING }
union Item = Run | Ctx
input Filter { state: State, limit: Int! }`, nil},
		{"input made looser and an optional argument added", `
type Query { run(id: ID, verbose: Boolean, deep: Int = 1, shallow: Int): Run, runs(first: Int): [Run!]! }
interface Node { id: ID! }
type Run implements Node { id: ID!, state: State!, context: Ctx, note: String }
type Ctx { text: String }
enum State { QUEUED RUNNING }
union Item = Run | Ctx
input Filter { state: State, limit: Int, since: Int! = 0 }`, nil},
		{"every kind of break", `
type Query { run(id: ID!, holder: String!): Run, runs(first: Int!): [Run]! }
interface Node { id: ID! }
type Run { id: ID!, state: String!, context: Ctx }
type Ctx { text: String }
enum State { QUEUED }
union Item = Run
input Filter { state: State!, must: Int! }`, []string{
			"Filter.limit: input field removed",
			"Filter.must: new required input field of type Int!",
			"Filter.state: type changed from State to State!",
			"Item: union member Ctx removed",
			"Query.run(holder): new required argument of type String!",
			"Query.run(verbose): argument removed",
			"Query.runs: type changed from [Run!]! to [Run]!",
			"Query.runs(first): type changed from Int to Int!",
			"Run: no longer implements Node",
			"Run.note: field removed",
			"Run.state: type changed from State! to String!",
			"State.RUNNING: enum value removed",
		}},
		{"output made looser", `
type Query { run(id: ID!, verbose: Boolean): Run, runs(first: Int): [Run!]! }
interface Node { id: ID! }
type Run implements Node { id: ID!, state: State, context: Ctx, note: String }
type Ctx { text: String }
enum State { QUEUED RUNNING }
union Item = Run | Ctx
input Filter { state: State, limit: Int! }`, []string{"Run.state: type changed from State! to State"}},
		{"type removed and kind changed", `
type Query { run(id: ID!, verbose: Boolean): Run, runs(first: Int): [Run!]! }
interface Node { id: ID! }
type Run implements Node { id: ID!, state: State!, context: Ctx, note: String }
interface Ctx { text: String }
enum State { QUEUED RUNNING }
input Filter { state: State, limit: Int! }`, []string{"Ctx: kind changed from OBJECT to INTERFACE", "Item: type removed"}},
	}
}

func TestGraphQLBreaks(t *testing.T) {
	t.Parallel()
	for _, tc := range graphQLBreakCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, b := range GraphQLBreaks(mustSchema(t, breaksBase), mustSchema(t, tc.cur)) {
				if b.Face != "GraphQL" {
					t.Errorf("face %q", b.Face)
				}
				got = append(got, b.Subject+": "+b.Detail)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("breaks:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
