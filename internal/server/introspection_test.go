package server_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// standardIntrospectionQuery returns the text that graphql-js's
// getIntrospectionQuery(opts) produces, from the graphql package pinned
// beside the playground's GraphiQL (internal/playground/package.json), so the
// test sends byte for byte what GraphiQL, graphql-codegen and
// get-graphql-schema send.
func standardIntrospectionQuery(t *testing.T, opts string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: install Node.js and npm (make test runs internal/playground/fetch-assets.sh)")
	}
	dir, _ := filepath.Abs("../playground")
	cmd := exec.Command(node, "-e", `process.stdout.write(require("graphql").getIntrospectionQuery(`+opts+`))`)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("getIntrospectionQuery: %v (make test runs internal/playground/fetch-assets.sh first)", err)
	}
	if !strings.Contains(string(out), "query IntrospectionQuery") {
		t.Fatalf("unexpected introspection query text: %s", out)
	}
	return string(out)
}

// introspectionResult is the part of the standard answer the test checks.
type introspectionResult struct {
	Schema struct {
		QueryType        struct{ Name, Kind string }  `json:"queryType"`
		MutationType     struct{ Name, Kind string }  `json:"mutationType"`
		SubscriptionType *struct{ Name, Kind string } `json:"subscriptionType"`
		Description      *string                      `json:"description"`
		Types            []struct {
			Kind           string           `json:"kind"`
			Name           string           `json:"name"`
			Description    *string          `json:"description"`
			SpecifiedByURL *string          `json:"specifiedByURL"`
			Fields         []map[string]any `json:"fields"`
			InputFields    []map[string]any `json:"inputFields"`
			Interfaces     []map[string]any `json:"interfaces"`
			EnumValues     []map[string]any `json:"enumValues"`
			PossibleTypes  []map[string]any `json:"possibleTypes"`
			IsOneOf        *bool            `json:"isOneOf"`
		} `json:"types"`
		Directives []map[string]any `json:"directives"`
	} `json:"__schema"`
}

// testStandardIntrospectionAtDefaults sends the full standard introspection
// query (plain, as GraphiQL sends it, and with every option graphql-js has)
// at the default limits and gets the whole schema.
func testStandardIntrospectionAtDefaults(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	// "": graphql-js's defaults; the playground's GraphiQL adds
	// inputValueDeprecation; the last asks for everything graphql-js offers.
	for _, opts := range []string{"", `{inputValueDeprecation: true}`, `{descriptions: true, specifiedByUrl: true, directiveIsRepeatable: true, schemaDescription: true, inputValueDeprecation: true, oneOf: true}`} {
		q := standardIntrospectionQuery(t, opts)
		var out introspectionResult
		res := env.GraphQL(env.World.Token("alex"), q, nil, &out)
		if len(res.Errors) > 0 {
			t.Fatalf("standard introspection (%s) refused: %+v", opts, res.Errors)
		}
		if out.Schema.QueryType.Name != "Query" || out.Schema.MutationType.Name != "Mutation" {
			t.Fatalf("root types: %+v %+v", out.Schema.QueryType, out.Schema.MutationType)
		}
		names := map[string]bool{}
		for _, ty := range out.Schema.Types {
			names[ty.Name] = true
		}
		for _, want := range []string{"Query", "Mutation", "Message", "Run", "Thread", "__Schema", "__Type"} {
			if !names[want] {
				t.Fatalf("type %s missing from the introspection answer", want)
			}
		}
		if len(out.Schema.Directives) == 0 {
			t.Fatal("no directives in the introspection answer")
		}
	}
}

// testIntrospectionDepthBounded: introspection does not count towards
// graphql.depth_limit, but graphql.introspection_depth_limit still refuses
// deep ofType chains, alone or beside ordinary fields.
func testIntrospectionDepthBounded(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	tok := env.World.Token("alex")
	chain := func(n int) string {
		return `{ __type(name: "Query") { ` + strings.Repeat("ofType { ", n) + "name" + strings.Repeat(" }", n) + " } }"
	}
	res := env.GraphQL(tok, chain(20), nil, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "validation_failed" || res.Errors[0].Extensions.Reason != "introspection_depth_limit_exceeded" {
		t.Fatalf("20-deep ofType chain: %+v", res.Errors)
	}
	if string(res.Data) != "" && string(res.Data) != "null" {
		t.Fatalf("a refused query returned data: %s", res.Data)
	}
	deepSchema := `{ viewer { id } __schema { types { ` + strings.Repeat("ofType { ", 16) + "name" + strings.Repeat(" }", 16) + ` } } }`
	if res := env.GraphQL(tok, deepSchema, nil, nil); len(res.Errors) != 1 || res.Errors[0].Extensions.Reason != "introspection_depth_limit_exceeded" {
		t.Fatalf("deep __schema chain beside viewer: %+v", res.Errors)
	}
	// A short chain within the bound answers.
	var ok struct {
		Type struct {
			Name   string `json:"name"`
			OfType *struct {
				Name string `json:"name"`
			} `json:"ofType"`
		} `json:"__type"`
	}
	if res := env.GraphQL(tok, `{ __type(name: "Query") { name ofType { name } } }`, nil, &ok); len(res.Errors) > 0 || ok.Type.Name != "Query" {
		t.Fatalf("short chain: %+v %+v", res.Errors, ok)
	}

	// The bound is its own config key.
	low := apitest.Start(t, apitest.Options{Config: map[string]string{config.GraphQLIntrospectionDepthLimit: "3"}})
	if res := low.GraphQL(low.World.Token("alex"), chain(3), nil, nil); len(res.Errors) != 1 || res.Errors[0].Extensions.Reason != "introspection_depth_limit_exceeded" {
		t.Fatalf("chain of 3 with a bound of 3: %+v", res.Errors)
	}
}

// TestIntrospection runs the tests of introspection at the defaults and its depth bound as subtests: one
// top-level test per area keeps internal/server's list short enough to
// read (fewer than 80 top-level tests, issue 48).
func TestIntrospection(t *testing.T) {
	t.Run("StandardIntrospectionAtDefaults", testStandardIntrospectionAtDefaults)
	t.Run("IntrospectionDepthBounded", testIntrospectionDepthBounded)
}
