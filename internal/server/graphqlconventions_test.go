package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// The GraphQL conventions clients expect (issue 24 item 3): every event has
// an id and a kind, and Query.node reads every object with an id that
// node can read again.

// conventionEvent is the common selection of both event interfaces.
type conventionEvent struct {
	Typename string `json:"__typename"`
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Type     string `json:"type"`
	Seq      string `json:"seq"`
	// RunID and MessageID are selected on AgentInvocationEvent only.
	RunID     string `json:"runId"`
	MessageID string `json:"messageId"`
}

// kindOf is the enum value of an event type: message.created is
// MESSAGE_CREATED.
func kindOf(typ string) string { return strings.ToUpper(strings.ReplaceAll(typ, ".", "_")) }

// enumValues reads the values of a GraphQL enum by introspection, sorted.
func enumValues(t *testing.T, env *apitest.Env, name string) []string {
	t.Helper()
	var out struct {
		Type struct {
			EnumValues []struct {
				Name string `json:"name"`
			} `json:"enumValues"`
		} `json:"__type"`
	}
	res := env.GraphQL(env.World.Token("robin"), `query($n: String!) { __type(name: $n) { enumValues { name } } }`, map[string]any{"n": name}, &out)
	if len(res.Errors) > 0 {
		t.Fatalf("introspect %s: %+v", name, res.Errors)
	}
	var vals []string
	for _, v := range out.Type.EnumValues {
		vals = append(vals, v.Name)
	}
	sort.Strings(vals)
	return vals
}

// mustGQL runs a GraphQL operation and fails the test on any error.
func mustGQL(t *testing.T, env *apitest.Env, who, query string, vars map[string]any, out any) {
	t.Helper()
	if res := env.GraphQL(env.World.Token(who), query, vars, out); len(res.Errors) > 0 {
		t.Fatalf("%s: %s: %+v", who, query, res.Errors)
	}
}

// checkEvents fails unless every event has the id prefix+seq (unique) and
// the kind of its type, and returns the kinds seen, sorted.
func checkEvents(t *testing.T, what, prefix string, evs []conventionEvent) []string {
	t.Helper()
	ids := map[string]bool{}
	kinds := map[string]bool{}
	for _, e := range evs {
		if e.ID != prefix+e.Seq || ids[e.ID] {
			t.Fatalf("%s: %s event %s has id %q (want %q, unique)", what, e.Type, e.Seq, e.ID, prefix+e.Seq)
		}
		if e.Kind != kindOf(e.Type) {
			t.Fatalf("%s: %s event %s has kind %q", what, e.Type, e.Seq, e.Kind)
		}
		ids[e.ID] = true
		kinds[e.Kind] = true
	}
	return slices.Sorted(maps.Keys(kinds))
}

// testEveryEventHasIDAndKind: every event of a listEvents page and of the
// agentEvents stream carries id ("event:<seq>", "agent-event:<seq>") and
// kind (the type as an enum value), and the events written by the test
// cover every value of EventKind and AgentEventKind, so no type the server
// writes lacks its value.
func testEveryEventHasIDAndKind(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	allg := env.World.Channel("Support/Allgemein").ID
	esk := env.World.Channel("Support/Eskalation").ID

	writeClientEvents(t, env, allg, esk)

	// Alex addresses Lotse twice (agent.invocation, agent.followup, and
	// run.state_changed); Lotse starts the run and Alex cancels it
	// (run.cancel_requested).
	trigger := postGQL(t, env, "alex", env.Main("Support/Eskalation"), "conv-4", "@lotse conventions please")
	postGQL(t, env, "alex", env.Main("Support/Eskalation"), "conv-5", "@lotse and a follow-up")

	var run string
	for _, e := range agentEventsOf(t, env) {
		if e.Typename == "AgentInvocationEvent" && e.MessageID == trigger {
			run = e.RunID
		}
	}
	if run == "" {
		t.Fatal("no invocation for alex's trigger")
	}
	mustGQL(t, env, "lotse", `mutation($id: ID!) { startRun(id: $id) { id } }`, map[string]any{"id": run}, nil)
	// Lotse asks Alex, who answers (agent.approval_decided).
	var asked struct {
		RequestApproval struct{ ID string } `json:"requestApproval"`
	}
	mustGQL(t, env, "lotse", `mutation($id: ID!) { requestApproval(runId: $id, input: {title: "Go on?", options: [{id: "yes", label: "Yes"}]}) { id } }`,
		map[string]any{"id": run}, &asked)
	mustGQL(t, env, "alex", `mutation($id: ID!) { respondToApproval(id: $id, optionId: "yes") { id } }`, map[string]any{"id": asked.RequestApproval.ID}, nil)
	mustGQL(t, env, "alex", `mutation($id: ID!) { cancelRun(id: $id) { id } }`, map[string]any{"id": run}, nil)

	client := clientEventsOf(t, env)
	// run.live_updated is delivered by the subscription only, never listed.
	listed := slices.DeleteFunc(enumValues(t, env, "EventKind"), func(k string) bool { return k == "RUN_LIVE_UPDATED" })
	if got, want := checkEvents(t, "listEvents", "event:", client), listed; !slices.Equal(got, want) {
		t.Fatalf("client event kinds seen %v, EventKind has %v", got, want)
	}
	if got, want := checkEvents(t, "agentEvents", "agent-event:", agentEventsOf(t, env)), enumValues(t, env, "AgentEventKind"); !slices.Equal(got, want) {
		t.Fatalf("agent event kinds seen %v, AgentEventKind has %v", got, want)
	}
}

// writeClientEvents has robin (an owner, who sees every event) write one
// of each client event type but those of agents and runs, in the channels
// allg and esk.
func writeClientEvents(t *testing.T, env *apitest.Env, allg, esk string) {
	t.Helper()
	var space struct {
		CreateSpace struct{ ID string } `json:"createSpace"`
	}
	mustGQL(t, env, "robin", `mutation { createSpace(input: {name: "Conventions"}) { id } }`, nil, &space) // space.created
	sp := space.CreateSpace.ID
	mustGQL(t, env, "robin", `mutation($id: ID!) { updateSpace(id: $id, input: {name: "Conventions 2"}) { id } }`, map[string]any{"id": sp}, nil) // space.updated
	var channel struct {
		CreateChannel struct{ ID string } `json:"createChannel"`
	}
	mustGQL(t, env, "robin", `mutation($s: ID!) { createChannel(spaceId: $s, input: {name: "General", kind: TEXT}) { id } }`, map[string]any{"s": sp}, &channel)      // channel.created
	mustGQL(t, env, "robin", `mutation($id: ID!) { updateChannel(id: $id, input: {name: "General 2"}) { id } }`, map[string]any{"id": channel.CreateChannel.ID}, nil) // channel.updated
	var created struct {
		CreateThread struct {
			Thread struct{ ID string } `json:"thread"`
		} `json:"createThread"`
	}
	mustGQL(t, env, "robin", `mutation($c: ID!) { createThread(channelId: $c, input: {title: "Conventions", firstMessage: {clientMsgId: "conv-1", contentMd: "first"}}) { thread { id } } }`,
		map[string]any{"c": allg}, &created) // thread.created, message.created
	thread := created.CreateThread.Thread.ID
	gone := postGQL(t, env, "robin", thread, "conv-2", "to be deleted")
	mustGQL(t, env, "robin", `mutation($id: ID!) { deleteMessage(id: $id) { id } }`, map[string]any{"id": gone}, nil) // message.deleted
	mustGQL(t, env, "robin", `mutation($id: ID!) { closeThread(id: $id) { id } }`, map[string]any{"id": thread}, nil) // thread.closed
	postGQL(t, env, "robin", thread, "conv-3", "reopen it")                                                           // thread.reopened
	mustGQL(t, env, "robin", `mutation($id: ID!, $c: ID!) { moveThread(id: $id, channelId: $c) { id } }`,
		map[string]any{"id": thread, "c": esk}, nil) // thread.moved
	mustGQL(t, env, "robin", `mutation($c: ID!, $w: ID!) { createGrant(input: {subjectId: $w, subjectKind: PRINCIPAL, targetKind: CHANNEL, targetId: $c, level: READ}) { id } }`,
		map[string]any{"c": esk, "w": env.World.ID("writer")}, nil) // access.changed
}

// postGQL posts content into thread as who with createMessage, and returns
// the message's id.
func postGQL(t *testing.T, env *apitest.Env, who, thread, cid, content string) string {
	t.Helper()
	var out struct {
		CreateMessage struct {
			Message struct{ ID string } `json:"message"`
		} `json:"createMessage"`
	}
	mustGQL(t, env, who, `mutation($t: ID!, $c: String!, $m: String!) { createMessage(threadId: $t, input: {clientMsgId: $c, contentMd: $m}) { message { id } } }`,
		map[string]any{"t": thread, "c": cid, "m": content}, &out)
	return out.CreateMessage.Message.ID
}

// agentEventsOf reads lotse's whole agentEvents stream, page by page.
func agentEventsOf(t *testing.T, env *apitest.Env) []conventionEvent {
	t.Helper()
	const agentPage = `query($a: String) { agentEvents(after: $a) { events { __typename id kind type seq
		... on AgentInvocationEvent { runId messageId } } nextAfter } }`
	var all []conventionEvent
	after := "0"
	for {
		var out struct {
			AgentEvents struct {
				Events    []conventionEvent `json:"events"`
				NextAfter string            `json:"nextAfter"`
			} `json:"agentEvents"`
		}
		mustGQL(t, env, "lotse", agentPage, map[string]any{"a": after}, &out)
		if len(out.AgentEvents.Events) == 0 {
			return all
		}
		all = append(all, out.AgentEvents.Events...)
		after = out.AgentEvents.NextAfter
	}
}

// clientEventsOf reads robin's whole list of client events, page by page.
func clientEventsOf(t *testing.T, env *apitest.Env) []conventionEvent {
	t.Helper()
	var client []conventionEvent
	after := "0"
	for {
		var out struct {
			Events struct {
				Events    []conventionEvent `json:"events"`
				NextAfter string            `json:"nextAfter"`
			} `json:"events"`
		}
		mustGQL(t, env, "robin", `query($a: String) { events(after: $a) { events { __typename id kind type seq } nextAfter } }`, map[string]any{"a": after}, &out)
		if len(out.Events.Events) == 0 {
			return client
		}
		client = append(client, out.Events.Events...)
		after = out.Events.NextAfter
	}
}

// testNode: Query.node reads every kind it answers as that kind's own
// reader does, answers an id the caller may not read exactly as one that
// names nothing, and takes one token. One server serves the cases in turn:
// the statement counts and the token counts need no other request between
// their steps.
func testNode(t *testing.T) {
	t.Parallel()
	counter := &apitest.StatementCounter{}
	// A refill of one rl.read token a minute keeps the token counts exact.
	env := apitest.Start(t, apitest.Options{Tracer: counter, Config: map[string]string{config.RateReadPerMinute: "1"}})

	t.Run("one token", func(t *testing.T) { nodeTakesOneToken(t, env) })
	t.Run("answers what its reader answers", func(t *testing.T) { nodeAnswersAsReader(t, env) })
	t.Run("hidden answers like missing", func(t *testing.T) { nodeHiddenLikeMissing(t, env, counter) })
}

// nodeMissingID is an id that names nothing.
const nodeMissingID = "01a22d00-0000-7000-8000-000000000000"

// nodeTakesOneToken checks that node takes one rl.read token per node
// field, found or not.
func nodeTakesOneToken(t *testing.T, env *apitest.Env) {
	// node is one root field, so it takes one rl.read token, found or
	// not, however many readers it tries; two node fields are two
	// operations.
	alex := env.World.Token("alex")
	left := func(res *apitest.GQLResult) int {
		t.Helper()
		v := res.Header.Get("RateLimit")
		m := regexp.MustCompile(`^"rl.read";r=(\d+);`).FindStringSubmatch(v)
		if m == nil {
			t.Fatalf("RateLimit %q, want the rl.read class", v)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	space := env.World.Spaces["Support"]
	before := left(env.GraphQL(alex, `{ viewer { id } }`, nil, nil))
	for _, c := range []struct {
		what  string
		query string
		vars  map[string]any
		took  int
	}{
		{"a missing id", `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": nodeMissingID}, 1},
		{"a space, the last kind node tries", `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": space}, 1},
		{"two node fields", `query($a: ID!, $b: ID!) { a: node(id: $a) { id } b: node(id: $b) { id } }`,
			map[string]any{"a": space, "b": env.World.ID("alex")}, 2},
	} {
		res := env.GraphQL(alex, c.query, c.vars, nil)
		if after := left(res); before-after != c.took {
			t.Fatalf("%s took %d tokens, want %d", c.what, before-after, c.took)
		}
		before -= c.took
	}
}

// nodeAnswersAsReader checks that node answers every kind alex may read
// as that kind's own reader does.
func nodeAnswersAsReader(t *testing.T, env *apitest.Env) {
	// Each kind Alex may read (space, channel, thread, message, run,
	// and Alex itself as viewer) answers node exactly as its own
	// reader answers it, under its own __typename.
	for _, c := range nodeReads(t, env) {
		var byNode struct {
			Node map[string]json.RawMessage `json:"node"`
		}
		var byReader struct {
			Reader map[string]json.RawMessage `json:"reader"`
		}
		mustGQL(t, env, "alex", `query($id: ID!) { node(id: $id) { __typename id ... on `+c.kind+` { `+c.fields+` } } }`, map[string]any{"id": c.id}, &byNode)
		q := `query($id: ID!) { reader: ` + c.reader + ` { __typename ` + c.fields + ` } }`
		vars := map[string]any{"id": c.id}
		if c.reader == "viewer" {
			q, vars = `{ reader: viewer { __typename `+c.fields+` } }`, nil
		}
		mustGQL(t, env, "alex", q, vars, &byReader)
		if byNode.Node == nil || string(byNode.Node["__typename"]) != `"`+c.kind+`"` || string(byNode.Node["id"]) != `"`+c.id+`"` {
			t.Fatalf("node(%s) of a %s: %v", c.id, c.kind, byNode.Node)
		}
		if !reflect.DeepEqual(compact(byNode.Node), compact(byReader.Reader)) {
			t.Fatalf("node answers a %s otherwise than %s:\n%v\n%v", c.kind, c.reader, compact(byNode.Node), compact(byReader.Reader))
		}
	}
}

// nodeHiddenLikeMissing checks that node answers an id alex may not read
// exactly as one that names nothing, statements (counted by counter)
// included.
func nodeHiddenLikeMissing(t *testing.T, env *apitest.Env, counter *apitest.StatementCounter) {
	// An id Alex may not read (Marketing, its channel Kampagnen, its
	// main thread, a message and a run there, another principal)
	// answers node exactly as an id that names nothing: null with the
	// same not_found error, after the same statements, so neither the
	// answer nor its timing tells them apart.
	kamp := env.Main("Marketing/Kampagnen")
	msg := env.MustPost("sam", kamp, "hidden-1", "campaign plans")["id"].(string)
	run := runOf(t, env, env.MustPost("sam", kamp, "hidden-2", "@texter a run alex cannot see")["id"].(string))
	nodeOnce := func(id string) (*apitest.GQLResult, []string) {
		t.Helper()
		from := counter.Count()
		res := env.GraphQL(env.World.Token("alex"), `query($id: ID!) { node(id: $id) { __typename id } }`, map[string]any{"id": id}, nil)
		if string(res.Data) != `{"node":null}` {
			t.Fatalf("node(%s) answered %s", id, res.Data)
		}
		// Compared as multisets: the door takes the rate-limit token
		// on its own goroutine while it reads the target.
		statements := counter.Since(from)
		slices.Sort(statements)
		return res, statements
	}
	// The counter sees the whole server: background work (the run's
	// invocation, a sweep, the other subtests' requests) may add
	// statements to one read, never take any away, so the fewest of
	// five reads is what the read runs.
	node := func(id string) (*apitest.GQLResult, []string) {
		t.Helper()
		res, least := nodeOnce(id)
		for range 4 {
			if _, s := nodeOnce(id); len(s) < len(least) {
				least = s
			}
		}
		return res, least
	}
	want, wantStatements := node(nodeMissingID)
	if len(want.Errors) != 1 || want.Errors[0].Extensions.Code != "not_found" || want.Errors[0].Extensions.Status != 404 ||
		!reflect.DeepEqual(want.Errors[0].Path, []any{"node"}) {
		t.Fatalf("node of a missing id: %+v", want.Errors)
	}
	for _, c := range []struct{ what, id string }{
		{"space", env.World.Spaces["Marketing"]},
		{"channel", env.World.Channel("Marketing/Kampagnen").ID},
		{"thread", kamp},
		{"message", msg},
		{"run", run},
		{"principal", env.World.ID("robin")},
		{"not a uuid", "event:1"},
	} {
		res, statements := node(c.id)
		if !reflect.DeepEqual(res.Errors, want.Errors) {
			t.Fatalf("hidden %s: errors %+v, a missing id's %+v", c.what, res.Errors, want.Errors)
		}
		if c.what == "not a uuid" {
			continue // no reader looks such an id up
		}
		if !slices.Equal(statements, wantStatements) {
			t.Fatalf("hidden %s ran other statements than a missing id:\n%q\n%q", c.what, statements, wantStatements)
		}
	}
}

// runOf returns the run that message started.
func runOf(t *testing.T, env *apitest.Env, message string) string {
	t.Helper()
	var run string
	if err := env.Pool.QueryRow(context.Background(), `SELECT id::text FROM runs WHERE triggering_message_id = $1`, message).Scan(&run); err != nil {
		t.Fatalf("no run of message %s: %v", message, err)
	}
	return run
}

// nodeReads are objects Alex may read in the example world, one of each
// kind node answers, with the reader that answers the same object and the
// selection both are compared on.
func nodeReads(t *testing.T, env *apitest.Env) []struct{ kind, id, reader, fields string } {
	t.Helper()
	esk := env.Main("Support/Eskalation")
	msg := env.MustPost("alex", esk, "node-1", "a message to read by id")["id"].(string)
	run := runOf(t, env, env.MustPost("alex", esk, "node-2", "@lotse a run to read by id")["id"].(string))
	return []struct{ kind, id, reader, fields string }{
		{"Space", env.World.Spaces["Support"], "space(id: $id)", "id name defaultOperatorAgentId archived"},
		{"Channel", env.World.Channel("Support/Allgemein").ID, "channel(id: $id)",
			"id spaceId name kind archived operatorMode effectiveOperatorId switches { freeResponse autoThread } mainThreadId"},
		{"Thread", esk, "thread(id: $id)", "id channelId kind title state lastSeq createdAt messages(limit: 2) { messages { id contentMd } nextAfter }"},
		{"Message", msg, "message(id: $id)", "id threadId channelId threadSeq author { id handle } origin kind contentMd createdAt"},
		{"Run", run, "run(id: $id)", "id threadId state version triggerKind agent { handle } triggeredBy { handle } triggeringMessageId session { mode } queuedAt"},
		{"Principal", env.World.ID("alex"), "viewer", "id kind handle displayName email status isOwner createdAt"},
	}
}

// compact renders the members of an answer object in a comparable form.
func compact(m map[string]json.RawMessage) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		var b bytes.Buffer
		_ = json.Compact(&b, v)
		out[k] = b.String()
	}
	return out
}

// TestGraphQLConventions runs the cases of the conventions GraphQL clients expect (event ids and kinds, node).
func TestGraphQLConventions(t *testing.T) {
	t.Parallel()
	t.Run("event ids and kinds", testEveryEventHasIDAndKind)
	t.Run("node", testNode)
}
