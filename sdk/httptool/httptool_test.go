package httptool_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"bothy.example.com/bothy/sdk/agent"
	"bothy.example.com/bothy/sdk/httptool"
)

// TestToolsFile: a tools file makes tools that POST the model's arguments
// with the secret header, say whether they are consequential, and hand the
// answer back; bad files are refused with the reason.
func TestToolsFile(t *testing.T) {
	t.Parallel()
	var got struct {
		auth, ctype string
		body        map[string]any
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.auth, got.ctype = r.Header.Get("Authorization"), r.Header.Get("Content-Type")
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &got.body)
		if strings.Contains(string(b), "fail") {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		io.WriteString(w, `{"ticket": "T-7"}`)
	}))
	defer srv.Close()
	doc := `tools:
  - name: file_ticket
    description: File a ticket.
    parameters: {type: object, properties: {title: {type: string}}, required: [title]}
    consequential: true
    url: ` + srv.URL + `/tickets
    secret_header: Authorization
    secret_env: TRACKER_TOKEN
  - name: search_wiki
    url: ` + srv.URL + `/search
`
	env := func(k string) string { return map[string]string{"TRACKER_TOKEN": "Bearer s3cret"}[k] }
	tools, err := httptool.Parse([]byte(doc), httptool.Options{Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	wantTicketAndWikiTools(t, tools)
	out, err := tools[0].Call(context.Background(), json.RawMessage(`{"title":"printer"}`))
	if err != nil || out != `{"ticket": "T-7"}` || got.auth != "Bearer s3cret" || got.ctype != "application/json" || got.body["title"] != "printer" {
		t.Fatalf("call: %q %v %+v", out, err, got)
	}
	if _, err := tools[0].Call(context.Background(), json.RawMessage(`{"title":"fail"}`)); err == nil || !strings.Contains(err.Error(), "502") {
		t.Fatalf("a failing endpoint: %v", err)
	}
	if _, err := tools[1].Call(context.Background(), json.RawMessage(`[1]`)); err == nil {
		t.Fatal("arguments that are no object were sent")
	}
	for name, bad := range map[string]string{
		"unknown member": "tools:\n  - name: a\n    url: http://x.example.com\n    method: GET\n",
		"bad name":       "tools:\n  - name: a b\n    url: http://x.example.com\n",
		"repeated":       "tools:\n  - name: a\n    url: http://x.example.com\n  - name: a\n    url: http://x.example.com\n",
		"no url":         "tools:\n  - name: a\n    url: ftp://x.example.com\n",
		"half secret":    "tools:\n  - name: a\n    url: http://x.example.com\n    secret_env: X\n",
		"empty secret":   "tools:\n  - name: a\n    url: http://x.example.com\n    secret_header: X\n    secret_env: NOPE\n",
	} {
		if _, err := httptool.Parse([]byte(bad), httptool.Options{Getenv: env}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// wantTicketAndWikiTools checks the two tools TestToolsFile parses: the
// consequential file_ticket with its declared parameters, and search_wiki,
// not consequential, whose parameters default to any object.
func wantTicketAndWikiTools(t *testing.T, tools []agent.Tool) {
	t.Helper()
	if len(tools) != 2 || !tools[0].Consequential || tools[1].Consequential || !strings.Contains(string(tools[0].Parameters), `"required":["title"]`) ||
		string(tools[1].Parameters) != `{"type":"object"}` {
		t.Fatalf("tools %+v", tools)
	}
}

// TestOutputTrust: output_trust declares how far a tool's answer may be
// trusted: unset and unverified are UNVERIFIED, system is SYSTEM (an
// internal source the operator trusts); any other value, a level that
// would let a tool's answer instruct the agent included, is refused at
// load, naming the tool and the values allowed.
func TestOutputTrust(t *testing.T) {
	t.Parallel()
	doc := func(v string) string {
		s := "tools:\n  - name: fetch_page\n    url: https://pages.example.com/fetch\n"
		if v != "" {
			s += "    output_trust: " + v + "\n"
		}
		return s
	}
	for v, want := range map[string]agent.Trust{"": agent.TrustUnverified, "unverified": agent.TrustUnverified, "system": agent.TrustSystem} {
		tools, err := httptool.Parse([]byte(doc(v)), httptool.Options{})
		if err != nil || len(tools) != 1 || tools[0].OutputTrust != want {
			t.Errorf("output_trust %q: %+v %v, want %s", v, tools, err, want)
		}
	}
	for _, v := range []string{"trigger", "authorized", "self", "SYSTEM", "trusted"} {
		_, err := httptool.Parse([]byte(doc(v)), httptool.Options{})
		if err == nil || !strings.Contains(err.Error(), "fetch_page") || !strings.Contains(err.Error(), "output_trust must be unverified or system") {
			t.Errorf("output_trust %s: %v", v, err)
		}
	}
}
