package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// graphQLRaw sends a GraphQL request by POST (a JSON body) or GET (query
// parameters) with the media type accept, and returns the status and the
// decoded top-level members of the answer.
func graphQLRaw(t *testing.T, env *apitest.Env, method, token, query, accept string) (int, map[string]json.RawMessage) {
	t.Helper()
	var req *http.Request
	if method == http.MethodGet {
		req, _ = http.NewRequest(method, env.URL+"/graphql?query="+url.QueryEscape(query), nil)
	} else {
		body, _ := json.Marshal(map[string]any{"query": query})
		req, _ = http.NewRequest(method, env.URL+"/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v\n%s", resp.StatusCode, err, raw)
	}
	return resp.StatusCode, doc
}

// testSubscriptionOverHTTPRefused: a subscription sent by POST or GET
// answers 400 validation_failed (reason subscription_over_http) at once,
// without data, in both media types; it never waits for an event.
func testSubscriptionOverHTTPRefused(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		for _, accept := range []string{"application/json", "application/graphql-response+json"} {
			status, doc := graphQLRaw(t, env, method, env.World.Token("alex"),
				`subscription { events { seq ... on MessageEvent { message { contentMd } } } }`, accept)
			if status != http.StatusBadRequest {
				t.Fatalf("%s %s: status %d, want 400: %s", method, accept, status, doc["errors"])
			}
			if _, has := doc["data"]; has {
				t.Errorf("%s %s: the refusal has a data entry", method, accept)
			}
			var errs []apitest.GQLError
			if err := json.Unmarshal(doc["errors"], &errs); err != nil || len(errs) != 1 {
				t.Fatalf("%s %s: errors %s", method, accept, doc["errors"])
			}
			if e := errs[0].Extensions; e.Code != "validation_failed" || e.Reason != "subscription_over_http" || e.Status != 400 {
				t.Fatalf("%s %s: extensions %+v", method, accept, e)
			}
		}
	}
	// A query on the same transport still runs.
	if status, doc := graphQLRaw(t, env, http.MethodPost, env.World.Token("alex"), `{ viewer { handle } }`, "application/json"); status != http.StatusOK || string(doc["data"]) != `{"viewer":{"handle":"alex"}}` {
		t.Fatalf("query: %d %s", status, doc["data"])
	}
}

// testRequestErrorsHaveNoData: an answer to a request refused before it ran
// (a parse error, a validation error, a limit) has no data entry, in both
// media types (GraphQL over HTTP); an error during execution keeps data.
func testRequestErrorsHaveNoData(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	for _, accept := range []string{"application/json", "application/graphql-response+json"} {
		for _, query := range []string{`{ viewer { handle `, `{ viewer { nosuchfield } }`} {
			status, doc := graphQLRaw(t, env, http.MethodPost, env.World.Token("alex"), query, accept)
			if _, has := doc["data"]; has || len(doc["errors"]) == 0 {
				t.Errorf("%s %q: %d with data %s errors %s", accept, query, status, doc["data"], doc["errors"])
			}
		}
		// Refused during execution (a thread that does not exist): data stays.
		status, doc := graphQLRaw(t, env, http.MethodPost, env.World.Token("alex"),
			`{ thread(id: "01a22d00-0000-7000-8000-000000000000") { id } }`, accept)
		if string(doc["data"]) != `{"thread":null}` || len(doc["errors"]) == 0 {
			t.Errorf("%s execution error: %d data %s errors %s", accept, status, doc["data"], doc["errors"])
		}
	}
}

// TestRequestsRefusedBeforeTheyRun runs the cases of GraphQL requests refused before they run.
func TestRequestsRefusedBeforeTheyRun(t *testing.T) {
	t.Parallel()
	t.Run("subscription over plain HTTP", testSubscriptionOverHTTPRefused)
	t.Run("no data on request errors", testRequestErrorsHaveNoData)
	t.Run("defer neither advertised nor ignored", testDeferRefused)
}

// testDeferRefused: introspection lists no @defer (Bothy answers every
// operation in one response) and an operation using it is refused by
// validation rather than answered without its deferred fragment; @skip and
// @include, which Bothy honours, stay.
func testDeferRefused(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	alex := env.World.Token("alex")
	_, doc := graphQLRaw(t, env, http.MethodPost, alex, `{ __schema { directives { name } } }`, "application/json")
	var data struct {
		Schema struct {
			Directives []struct{ Name string }
		} `json:"__schema"`
	}
	if err := json.Unmarshal(doc["data"], &data); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range data.Schema.Directives {
		names[d.Name] = true
	}
	if names["defer"] || !names["skip"] || !names["include"] || !names["deprecated"] {
		t.Fatalf("advertised directives %v", names)
	}
	_, doc = graphQLRaw(t, env, http.MethodPost, alex, `{ viewer { id ... @defer { handle } } }`, "application/json")
	if _, has := doc["data"]; has || !strings.Contains(string(doc["errors"]), `"validation_failed"`) {
		t.Fatalf("@defer answered data %s errors %s", doc["data"], doc["errors"])
	}
}
