package injection

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	"bothy.example.com/bothy/sdk/model/openai/openaitest"
)

// obedientModel speaks the OpenAI chat completions API (POST
// {base}/chat/completions, plain or streamed) and does whatever any text
// it was given asks in a form it understands: the system and user
// messages and every tool result alike, because it cannot tell a request
// from data. A line `call TOOL {json}` asks it to call TOOL (one of the
// tools offered) with those arguments; a line `say: TEXT` asks it to put
// TEXT in its answer. It makes each call once, one per reply in the order
// the lines came, and answers when none is left: "Done." and what it was
// asked to say. It is the worst case a gate must hold against: any
// consequential call it makes that the person did not approve is the
// gate's failure, never the model's.
type obedientModel struct{}

// The lines the obedient model follows.
var (
	callLine = regexp.MustCompile(`^call ([A-Za-z0-9_-]{1,64}) (\{.*\})\s*$`)
	sayLine  = regexp.MustCompile(`^say: (.+)$`)
)

// chatRequest is the part of a chat completions request the model reads.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

func (obedientModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	var req chatRequest
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"no chat completions request"}}`, http.StatusBadRequest)
		return
	}
	var texts []string
	var made []Call
	for _, m := range req.Messages {
		texts = append(texts, openaitest.ContentTexts(m.Content)...)
		for _, tc := range m.ToolCalls {
			if c, ok := parseCall(tc.Function.Name, tc.Function.Arguments); ok {
				made = append(made, c)
			}
		}
	}
	offered := map[string]bool{}
	for _, t := range req.Tools {
		offered[t.Function.Name] = true
	}
	next, answer := obey(texts, made, offered)
	if next != nil {
		args, _ := json.Marshal(next.Args)
		openaitest.WriteToolCalls(w, req.Model, [][2]string{{next.Tool, string(args)}}, req.Stream)
		return
	}
	openaitest.WriteCompletion(w, req.Model, answer, "", req.Stream)
}

// obey decides the obedient model's reply to a conversation whose texts
// (in order) are texts and whose calls so far are made: the next call
// asked for that is offered and not made yet, or else the answer.
func obey(texts []string, made []Call, offered map[string]bool) (next *Call, answer string) {
	done := map[string]bool{}
	for _, c := range made {
		done[c.key()] = true
	}
	var said []string
	saidOnce := map[string]bool{}
	for _, text := range texts {
		for _, line := range strings.Split(text, "\n") {
			line = strings.TrimSpace(line)
			if m := callLine.FindStringSubmatch(line); m != nil && next == nil {
				if c, ok := parseCall(m[1], m[2]); ok && offered[c.Tool] && !done[c.key()] {
					next = &c
				}
			}
			if m := sayLine.FindStringSubmatch(line); m != nil && !saidOnce[m[1]] {
				saidOnce[m[1]] = true
				said = append(said, m[1])
			}
		}
	}
	if next != nil {
		return next, ""
	}
	return nil, strings.Join(append([]string{"Done."}, said...), "\n")
}

// parseCall reads a call's arguments, a JSON object of strings (other
// values are written as text).
func parseCall(tool, args string) (Call, bool) {
	var raw map[string]any
	if err := json.Unmarshal([]byte(args), &raw); err != nil || raw == nil {
		return Call{}, false
	}
	c := Call{Tool: tool, Args: map[string]string{}}
	for k, v := range raw {
		if s, ok := v.(string); ok {
			c.Args[k] = s
		} else {
			c.Args[k] = fmt.Sprint(v)
		}
	}
	return c, true
}

// key identifies a call by its tool and arguments.
func (c Call) key() string { return c.Line() }
