package agent_test

import (
	"context"
	"strings"
	"testing"

	"bothy.example.com/bothy/sdk/agent"
)

// echoModel answers every prompt with the same note.
type echoModel struct{}

func (echoModel) Answer(ctx context.Context, p agent.Prompt) (string, error) { return "noted", nil }

// TestOneMeaningPerField: New and Run read the same Config with the same
// defaults, and neither drops a field it does not use without a word: Run
// refuses a Model (its Handler answers), New needs one, and both make the
// Client from Server and Token when none is given.
func TestOneMeaningPerField(t *testing.T) {
	t.Parallel()
	handler := func(ctx context.Context, task *agent.Task) error { return task.Answer(ctx, "noted") }
	for _, c := range []struct {
		name string
		run  func() error
		want string // part of the error; "" for none
	}{
		{"New makes the client", func() error {
			_, err := agent.New(agent.Config{Server: "https://chat.example.com", Token: "bothy_a_example", Model: echoModel{}})
			return err
		}, ""},
		{"New needs a model", func() error {
			_, err := agent.New(agent.Config{Server: "https://chat.example.com", Token: "bothy_a_example"})
			return err
		}, "needs a Model"},
		{"New needs a token", func() error {
			_, err := agent.New(agent.Config{Server: "https://chat.example.com", Model: echoModel{}})
			return err
		}, "needs a Token"},
		{"New refuses an unknown transport", func() error {
			_, err := agent.New(agent.Config{Server: "https://chat.example.com", Token: "bothy_a_example", Model: echoModel{}, Transport: "carrier-pigeon"})
			return err
		}, "unknown transport"},
		{"Run refuses a model", func() error {
			return agent.Run(t.Context(), agent.Config{Server: "https://chat.example.com", Token: "bothy_a_example", Model: echoModel{}}, handler)
		}, "leave Config.Model nil"},
		{"Run needs a handler", func() error {
			return agent.Run(t.Context(), agent.Config{Server: "https://chat.example.com", Token: "bothy_a_example"}, nil)
		}, "needs a Handler"},
		{"Run needs a token", func() error {
			return agent.Run(t.Context(), agent.Config{Server: "https://chat.example.com"}, handler)
		}, "needs a Token"},
	} {
		err := c.run()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
