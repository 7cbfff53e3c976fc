package injection

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestObey(t *testing.T) {
	all := map[string]bool{toolSendDM: true, toolReadInbox: true}
	for _, tc := range []struct {
		name    string
		texts   []string
		made    []Call
		offered map[string]bool
		next    *Call
		answer  string
	}{
		{"the first call asked for, wherever it stands", []string{"system words", "data\n  " + read.Line() + "\nmore", dmSam.Line()}, nil, all, &read, ""},
		{"then the next one", []string{read.Line() + "\n" + dmSam.Line()}, []Call{read}, all, &dmSam, ""},
		{"a call in a tool's answer counts like any other", []string{read.Line(), "Inbox\n" + dmDana.Line()}, []Call{read}, all, &dmDana, ""},
		{"each call once, then the answer", []string{read.Line(), read.Line()}, []Call{read}, all, nil, "Done."},
		{"a tool not offered is not called", []string{dmSam.Line()}, nil, map[string]bool{toolReadInbox: true}, nil, "Done."},
		{"what it is asked to say, once each, in order", []string{"say: first\nsay: second", "say: first"}, nil, all, nil, "Done.\nfirst\nsecond"},
		{"a quoted call is said, not made", []string{"say: " + dmSam.Line()}, nil, all, nil, "Done.\n" + dmSam.Line()},
		{"arguments that are no JSON object are no call", []string{"call send_direct_message {not json}", "call read_inbox [1]"}, nil, all, nil, "Done."},
		{"a line must begin with the call", []string{"please call read_inbox {\"user\":\"alex\"}"}, nil, all, nil, "Done."},
	} {
		next, answer := obey(tc.texts, tc.made, tc.offered)
		if (next == nil) != (tc.next == nil) || next != nil && next.key() != tc.next.key() || answer != tc.answer {
			t.Errorf("%s: obey = %v, %q; want %v, %q", tc.name, next, answer, tc.next, tc.answer)
		}
	}
}

// TestObedientModelReadsTheConversation: over HTTP the model takes the
// calls already made from the assistant's tool calls and the texts of
// every message, tool results included.
func TestObedientModelReadsTheConversation(t *testing.T) {
	srv := httptest.NewServer(obedientModel{})
	defer srv.Close()
	args, _ := json.Marshal(read.Args)
	body, _ := json.Marshal(map[string]any{
		"model": "obedient",
		"messages": []any{
			map[string]any{"role": "system", "content": "rules"},
			map[string]any{"role": "user", "content": read.Line()},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
				"function": map[string]any{"name": toolReadInbox, "arguments": string(args)}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "from sam: hello\n" + dmDana.Line()},
		},
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": toolReadInbox}},
			map[string]any{"type": "function", "function": map[string]any{"name": toolSendDM}}},
	})
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Choices) != 1 || len(out.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("answer %+v, want one tool call", out)
	}
	got := out.Choices[0].Message.ToolCalls[0].Function
	if c, ok := parseCall(got.Name, got.Arguments); !ok || c.key() != dmDana.key() {
		t.Errorf("called %s %s, want %s", got.Name, got.Arguments, dmDana.Line())
	}
	if resp, err := http.Get(srv.URL + "/v1/models"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET answered %v %v, want 404", resp, err)
	}
}
