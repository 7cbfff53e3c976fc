package rest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"bothy.example.com/bothy/graph/generated"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/text"
)

// FuzzBodyDecoding feeds arbitrary bodies, paths and query strings to the
// variable building of every route with a body or parameters: it never
// panics, refuses with validation_failed and field errors only, and what
// it accepts holds only storable strings.
func FuzzBodyDecoding(f *testing.F) {
	s, err := New(generated.NewExecutableSchema(generated.Config{}).Schema(), nil, table, 0)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []struct {
		route int
		param string
		query string
		body  string
	}{
		{6, "t1", "", `{"client_msg_id":"a","content_md":"hi"}`},
		{6, "t1", "", `{"client_msg_id":"a","content_md":"hi\u0000"}`},
		{6, "t1", "", `{"client_msg_id":null}`},
		{8, "c1", "", `{"title":"T","first_message":{"client_msg_id":"a","content_md":"x"}}`},
		{15, "", "", `{"subject_id":"s","subject_kind":"principal","target_kind":"channel","target_id":"c","level":"read","expires_at":"yesterday"}`},
		{20, "r1", "", `{"outcome":"failed","reason":"\u0000"}`},
		{1, "", "after=%00&limit=99999999999", ``},
		{4, "t\xff", "after=-1&limit=abc", ``},
		{24, "t1", "", `{"external_ref":"x"} {}`},
		{10, "t1", "", `[1,2,3]`},
	} {
		f.Add(seed.route, seed.param, seed.query, seed.body)
	}
	f.Fuzz(func(t *testing.T, route int, param, query, body string) {
		if route < 0 {
			route = -route
		}
		c := s.routes[route%len(s.routes)]
		vars, err := s.variables(fuzzRequest(c, param, query, body), c)
		if err != nil {
			wantFieldRefusal(t, c.OperationID, err)
			return
		}
		wantStorable(t, c.OperationID, map[string]any(vars))
	})
}

// fuzzRequest builds a request to route c with body, the raw query and
// param as the value of every path parameter.
func fuzzRequest(c *compiled, param, query, body string) *http.Request {
	r := httptest.NewRequest(c.Method, "/", bytes.NewReader([]byte(body)))
	r.URL.RawQuery = query
	for _, p := range c.Params {
		if p.In == InPath {
			r.SetPathValue(p.Name, param)
		}
	}
	return r
}

// wantFieldRefusal fails the test unless err, the refusal of operation op,
// is validation_failed with field errors only, each naming its code.
func wantFieldRefusal(t *testing.T, op string, err error) {
	t.Helper()
	p := problem.From("rest.fuzzBodyDecoding", err)
	if p.Code != problem.ValidationFailed || len(p.Fields) == 0 {
		t.Fatalf("%s: refusal %v", op, err)
	}
	for _, fe := range p.Fields {
		if fe.Code == "" {
			t.Fatalf("%s: field error %+v", op, fe)
		}
	}
}

// wantStorable fails the test if v, what operation op accepted, holds
// anywhere a string that cannot be stored.
func wantStorable(t *testing.T, op string, v any) {
	t.Helper()
	switch x := v.(type) {
	case string:
		if !text.Storable(x) {
			t.Fatalf("%s: accepted an unstorable string", op)
		}
	case map[string]any:
		for _, e := range x {
			wantStorable(t, op, e)
		}
	case []any:
		for _, e := range x {
			wantStorable(t, op, e)
		}
	}
}
