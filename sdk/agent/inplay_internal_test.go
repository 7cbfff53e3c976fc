package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
)

// TestLowerTrust: the lower of two levels in the order UNVERIFIED < SELF
// < SYSTEM < AUTHORIZED < TRIGGER; a level this code does not know (also
// in lower case, or empty) is UNVERIFIED on either side.
func TestLowerTrust(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ a, b, want Trust }{
		{TrustTrigger, TrustAuthorized, TrustAuthorized},
		{TrustAuthorized, TrustTrigger, TrustAuthorized},
		{TrustAuthorized, TrustSystem, TrustSystem},
		{TrustSystem, TrustSelf, TrustSelf},
		{TrustSelf, TrustSystem, TrustSelf},
		{TrustSelf, TrustUnverified, TrustUnverified},
		{TrustTrigger, TrustTrigger, TrustTrigger},
		{TrustTrigger, "", TrustUnverified},
		{TrustTrigger, "trigger", TrustUnverified},
		{TrustTrigger, "SOMETHING_NEW", TrustUnverified},
		{"SOMETHING_NEW", TrustTrigger, TrustUnverified},
		{"", "", TrustUnverified},
	} {
		if got := lowerTrust(c.a, c.b); got != c.want {
			t.Errorf("lowerTrust(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

// TestTaskLower: a Task's in-play trust starts at the prompt's lowest,
// goes down with every lower level and never up; a level this code does
// not know lowers it to UNVERIFIED. A Task the SDK did not make, and a nil
// Task, are UNVERIFIED and stay so.
func TestTaskLower(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		start Trust
		lower []Trust
		want  Trust
	}{
		{TrustTrigger, nil, TrustTrigger},
		{TrustTrigger, []Trust{TrustSystem}, TrustSystem},
		{TrustTrigger, []Trust{TrustSystem, TrustTrigger}, TrustSystem},
		{TrustAuthorized, []Trust{TrustSelf, TrustSystem, TrustAuthorized}, TrustSelf},
		{TrustSystem, []Trust{TrustUnverified, TrustTrigger}, TrustUnverified},
		{TrustTrigger, []Trust{"unverified"}, TrustUnverified},
		{TrustTrigger, []Trust{""}, TrustUnverified},
		{TrustTrigger, []Trust{"SOMETHING_NEW"}, TrustUnverified},
		{"", nil, TrustUnverified},
		{"SOMETHING_NEW", []Trust{TrustTrigger}, TrustUnverified},
	} {
		task := NewTask(Prompt{Lowest: c.start})
		for _, l := range c.lower {
			task.Lower(l)
		}
		if got := task.InPlay(); got != c.want {
			t.Errorf("start %q, lowered by %q: in play %q, want %q", c.start, c.lower, got, c.want)
		}
	}
	var none *Task
	none.Lower(TrustTrigger)
	zero := &Task{}
	zero.Lower(TrustTrigger)
	if none.InPlay() != TrustUnverified || zero.InPlay() != TrustUnverified {
		t.Fatalf("a nil Task is %q, a zero Task %q; want UNVERIFIED", none.InPlay(), zero.InPlay())
	}
}

// TestTaskLowerConcurrently: lowering from many goroutines at once ends
// at the lowest level any of them gave (run with -race).
func TestTaskLowerConcurrently(t *testing.T) {
	t.Parallel()
	task := NewTask(Prompt{Lowest: TrustTrigger})
	levels := []Trust{TrustAuthorized, TrustSystem, TrustSelf, TrustAuthorized}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task.Lower(levels[i%len(levels)])
			_ = task.InPlay()
		}()
	}
	wg.Wait()
	if got := task.InPlay(); got != TrustSelf {
		t.Fatalf("in play %q, want SELF", got)
	}
}

// TestToolOutputLowersInPlay: every tool RunTool runs lowers the in-play
// trust by its OutputTrust (unset: UNVERIFIED), a read-only one included;
// a tool outside a run changes nothing and needs no Task.
func TestToolOutputLowersInPlay(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		output Trust
		want   Trust
	}{{"", TrustUnverified}, {TrustUnverified, TrustUnverified}, {TrustSystem, TrustSystem}, {TrustTrigger, TrustTrigger}, {"system", TrustUnverified}} {
		task := NewTask(Prompt{Lowest: TrustTrigger})
		tool := Tool{Name: "fetch_page", OutputTrust: c.output, Call: func(ctx context.Context, _ json.RawMessage) (string, error) { return "page", nil }}
		if out, err := RunTool(WithTask(t.Context(), task), tool, nil); err != nil || out != "page" {
			t.Fatalf("RunTool: %q %v", out, err)
		}
		if got := task.InPlay(); got != c.want {
			t.Errorf("output trust %q: in play %q, want %q", c.output, got, c.want)
		}
	}
}

// TestApprovalCardNamesTheInputs: the card's title is short and names the
// tool; its detail names the untrusted inputs in play (the context, each
// tool whose untrusted output was read, once and in order, input a handler
// reported), then the arguments. Tools of trusted output are not named.
func TestApprovalCardNamesTheInputs(t *testing.T) {
	t.Parallel()
	send := Tool{Name: "send_email", Consequential: true}
	args := json.RawMessage(`{"to":"sam@example.com"}`)
	for _, c := range []struct {
		name   string
		start  Trust
		read   []Tool
		other  Trust
		want   string
		absent []string
	}{
		{"a tool read", TrustTrigger, []Tool{{Name: "fetch_page"}}, "",
			"The agent wants to call send_email after reading the output of fetch_page. Arguments:\n" + string(args),
			[]string{"messages"}},
		{"the context", TrustUnverified, nil, "",
			"The agent wants to call send_email with untrusted messages in the conversation. Arguments:\n" + string(args),
			[]string{"output of"}},
		{"both, tools once each", TrustUnverified, []Tool{{Name: "fetch_page"}, {Name: "wiki", OutputTrust: TrustSystem}, {Name: "read_inbox"}, {Name: "fetch_page"}}, "",
			"The agent wants to call send_email with untrusted messages in the conversation, after reading the output of fetch_page and read_inbox. Arguments:",
			[]string{"wiki"}},
		{"reported by a handler", TrustTrigger, nil, TrustUnverified,
			"The agent wants to call send_email after reading other untrusted input. Arguments:", nil},
		{"another person's request", TrustAuthorized, nil, "",
			"The agent wants to call send_email with requests of other people in the conversation. Arguments:", []string{"untrusted"}},
	} {
		task := NewTask(Prompt{Lowest: c.start})
		for _, tool := range c.read {
			task.lowerTool(tool)
		}
		if c.other != "" {
			task.Lower(c.other)
		}
		card := approvalFor(send, args, task.untrustedInputs())
		if card.Title != "Run send_email?" || !strings.HasPrefix(card.Detail, c.want) {
			t.Errorf("%s: card %q\n%q\nwant the detail to begin %q", c.name, card.Title, card.Detail, c.want)
		}
		for _, a := range c.absent {
			if strings.Contains(card.Detail, a) {
				t.Errorf("%s: the detail names %q: %q", c.name, a, card.Detail)
			}
		}
		if len(card.Options) != 2 || card.Options[0].ID != OptionApprove || card.Options[1].ID != OptionDeny {
			t.Errorf("%s: options %+v", c.name, card.Options)
		}
	}
	// Outside a run nothing is on record: a generic line, still naming the call.
	if d := approvalFor(send, args, nil).Detail; !strings.HasPrefix(d, "The agent wants to call send_email with untrusted input in play. Arguments:") {
		t.Errorf("detail without a record %q", d)
	}
}

// TestRunToolOutsideARunFailsClosed: with no Task on ctx a read-only tool
// runs, and a consequential one does not run (nobody can approve it),
// whatever a caller might believe about the conversation.
func TestRunToolOutsideARunFailsClosed(t *testing.T) {
	t.Parallel()
	ran := 0
	call := func(context.Context, json.RawMessage) (string, error) { ran++; return "ok", nil }
	if out, err := RunTool(t.Context(), Tool{Name: "fetch_page", Call: call}, nil); err != nil || out != "ok" || ran != 1 {
		t.Fatalf("read-only tool: %q %v, ran %d", out, err, ran)
	}
	if _, err := RunTool(t.Context(), Tool{Name: "send_email", Consequential: true, Call: call}, nil); !errors.Is(err, ErrNoApprover) || ran != 1 {
		t.Fatalf("consequential tool outside a run: %v, ran %d", err, ran)
	}
	trusted := WithTask(t.Context(), NewTask(Prompt{Lowest: TrustTrigger}))
	if out, err := RunTool(trusted, Tool{Name: "send_email", Consequential: true, Call: call}, nil); err != nil || out != "ok" || ran != 2 {
		t.Fatalf("consequential tool on a trusted Task: %q %v, ran %d", out, err, ran)
	}
}

// TestAnotherPersonsRequestAsks: a consequential call asks the person who
// triggered the run while another person's request (AUTHORIZED) is in
// play, also when a system line ranks the context's lowest below it; the
// trigger alone, and the trigger with a system line, run it at once.
func TestAnotherPersonsRequestAsks(t *testing.T) {
	t.Parallel()
	msg := func(trust Trust) RunContextMessage { return RunContextMessage{Trust: trust, Provenance: trust} }
	for _, c := range []struct {
		name   string
		lowest Trust
		thread []RunContextMessage
		follow []RunContextMessage
		asks   bool
	}{
		{"the trigger alone", TrustTrigger, nil, nil, false},
		{"the trigger and a system line", TrustSystem, []RunContextMessage{msg(TrustSystem)}, nil, false},
		{"a colleague in the thread", TrustAuthorized, []RunContextMessage{msg(TrustAuthorized)}, nil, true},
		{"a colleague and a system line", TrustSystem, []RunContextMessage{msg(TrustSystem), msg(TrustAuthorized)}, nil, true},
		{"a colleague's follow-up beside a system line", TrustSystem, []RunContextMessage{msg(TrustSystem)}, []RunContextMessage{msg(TrustAuthorized)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := RunContext{TriggerMessage: msg(TrustTrigger), ThreadContext: c.thread, FollowUps: c.follow}
			task := NewTask(Prompt{Lowest: c.lowest, Context: rc})
			ran := 0
			send := Tool{Name: "send_email", Consequential: true, Call: func(context.Context, json.RawMessage) (string, error) { ran++; return "sent", nil }}
			_, err := RunTool(WithTask(t.Context(), task), send, json.RawMessage(`{}`))
			// Outside an adapter's run there is nobody to ask: asking
			// shows as ErrNoApprover, and the tool does not run.
			if asked := errors.Is(err, ErrNoApprover); asked != c.asks || (ran == 1) == c.asks {
				t.Fatalf("asked %v (err %v), ran %d; want asked %v", asked, err, ran, c.asks)
			}
			if c.asks {
				if in := task.untrustedInputs(); len(in) != 1 || in[0] != inputOthers {
					t.Fatalf("the card would name %q", in)
				}
			}
		})
	}
}
