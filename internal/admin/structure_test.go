package admin_test

import (
	"testing"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// wantField fails the test unless err is a validation problem with the one
// field error "pointer code".
func wantField(t *testing.T, what string, err error, field string) {
	t.Helper()
	p := problem.From("admin.wantField", err)
	if p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Pointer+" "+p.Fields[0].Code != field {
		t.Fatalf("%s: %+v, want validation_failed %s", what, p, field)
	}
}

// eventLog reads the events appended since its last call.
type eventLog struct {
	t    *testing.T
	env  *moduletest.Env
	seen int64
}

// next returns the events appended since the last call.
func (l *eventLog) next() []events.Event {
	l.t.Helper()
	evs, err := l.env.Events.AfterIn(l.t.Context(), l.seen, 1000, true, nil, nil, nil)
	if err != nil {
		l.t.Fatal(err)
	}
	if len(evs) > 0 {
		l.seen = evs[len(evs)-1].Seq
	}
	return evs
}

// wantEvents fails the test unless evs are, by "type" (or "type change"
// for an access.changed), as many as want says.
func wantEvents(t *testing.T, what string, evs []events.Event, want map[string]int) {
	t.Helper()
	got := map[string]int{}
	for _, e := range evs {
		key := string(e.Type)
		if c, ok := e.Payload["change"].(string); ok {
			key += " " + c
		}
		got[key]++
	}
	if len(got) != len(want) {
		t.Fatalf("%s: events %v, want %v", what, got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("%s: events %v, want %v", what, got, want)
		}
	}
}

// TestSpacesAndChannels pins the owner's structure use cases of admin:
// only the owner creates and changes spaces and channels (a person who
// cannot see the target does not find it, others are forbidden, and a
// refusal writes nothing); a space is created with its default operator
// (which must be an active agent) and announced by space.created; a text
// channel gets its main thread, a forum none, each announced by
// channel.created; the operator of a channel is inherit, none or agent,
// and only mode agent names an (active) agent; a space update may set or
// clear the default operator, not both, and tells every channel of the
// space access.changed; renaming a channel emits channel.updated;
// archiving, unarchiving, switches and operator changes each emit
// access.changed with their change in the channel, and the state is read
// back as written.
func TestSpacesAndChannels(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	ctx := t.Context()
	alex, lotse := env.Principal("alex"), env.Principal("lotse")
	log := &eventLog{t: t, env: env}

	// Refusals change nothing.
	_, err := env.Admin.CreateSpace(ctx, alex, "Operations", "")
	moduletest.WantProblem(t, "alex creates a space", err, problem.Forbidden, "")
	_, err = env.Admin.CreateSpace(ctx, lotse, "Operations", "")
	moduletest.WantProblem(t, "lotse creates a space", err, problem.Forbidden, "")
	_, err = env.Admin.CreateChannel(ctx, alex, env.World.Spaces["Marketing"], admin.ChannelInput{Name: "Leaks", Kind: chat.ChannelText})
	moduletest.WantProblem(t, "alex creates a channel in a space he cannot see", err, problem.NotFound, "")
	_, err = env.Admin.RenameChannel(ctx, alex, env.World.Channel("Support/Allgemein").ID, "General")
	moduletest.WantProblem(t, "alex renames a channel", err, problem.Forbidden, "")
	wantEvents(t, "refusals", log.next(), nil)

	sp := createOperationsSpace(t, env, log)
	text := createOperationsChannels(t, env, log, sp)
	updateOperationsSpace(t, env, log, sp)
	changeDispatchChannel(t, env, log, text)
}

// createOperationsSpace is the spaces step of TestSpacesAndChannels: a
// default operator that is no active agent is refused, and the owner
// creates space Operations with lotse as its default operator, announced
// by space.created.
func createOperationsSpace(t *testing.T, env *moduletest.Env, log *eventLog) chat.Space {
	t.Helper()
	ctx, robin := t.Context(), env.Principal("robin")
	lotseID, samID := env.World.ID("lotse"), env.World.ID("sam")
	for _, c := range []struct {
		operator, field string
	}{
		{samID, "/default_operator_agent_id invalid_reference"},
		{ids.New(), "/default_operator_agent_id invalid_reference"},
		{"junk", "/default_operator_agent_id invalid_reference"},
	} {
		_, err := env.Admin.CreateSpace(ctx, robin, "Operations", c.operator)
		wantField(t, "default operator "+c.operator, err, c.field)
	}
	sp, err := env.Admin.CreateSpace(ctx, robin, "Operations", lotseID)
	if err != nil || sp.Name != "Operations" || sp.DefaultOperatorAgentID != lotseID || sp.ArchivedAt != nil {
		t.Fatalf("create space: %+v %v", sp, err)
	}
	evs := log.next()
	wantEvents(t, "create space", evs, map[string]int{"space.created": 1})
	if evs[0].SpaceID != sp.ID || evs[0].Payload["name"] != "Operations" || evs[0].Payload["default_operator_agent_id"] != lotseID {
		t.Fatalf("space.created %+v", evs[0])
	}
	return sp
}

// createOperationsChannels is the channels step of TestSpacesAndChannels:
// invalid operators are refused without an event, and the owner creates
// the text channel Dispatch (with its main thread, inheriting the space's
// operator) and the forum Wiki in sp, each announced by channel.created.
// It returns Dispatch.
func createOperationsChannels(t *testing.T, env *moduletest.Env, log *eventLog, sp chat.Space) chat.Channel {
	t.Helper()
	ctx, robin := t.Context(), env.Principal("robin")
	lotseID, samID := env.World.ID("lotse"), env.World.ID("sam")
	for _, c := range []struct {
		in    admin.ChannelInput
		field string
	}{
		{admin.ChannelInput{Name: "Dispatch", Kind: chat.ChannelText, OperatorMode: chat.OperatorNone, OperatorID: lotseID}, "/operator/agent_id not_allowed"},
		{admin.ChannelInput{Name: "Dispatch", Kind: chat.ChannelText, OperatorID: lotseID}, "/operator/agent_id not_allowed"},
		{admin.ChannelInput{Name: "Dispatch", Kind: chat.ChannelText, OperatorMode: chat.OperatorAgent, OperatorID: samID}, "/operator/agent_id invalid_reference"},
		{admin.ChannelInput{Name: "Dispatch", Kind: chat.ChannelText, OperatorMode: "boss"}, "/operator/mode invalid_enum"},
	} {
		_, err := env.Admin.CreateChannel(ctx, robin, sp.ID, c.in)
		wantField(t, "channel "+string(c.in.OperatorMode), err, c.field)
	}
	wantEvents(t, "invalid channels", log.next(), nil)
	text := createDispatchChannel(t, env, log, sp)
	forum, err := env.Admin.CreateChannel(ctx, robin, sp.ID, admin.ChannelInput{Name: "Wiki", Kind: chat.ChannelForum, OperatorMode: chat.OperatorNone})
	if err != nil || forum.MainThreadID != "" || forum.EffectiveOperator() != "" {
		t.Fatalf("create forum: %+v %v", forum, err)
	}
	wantEvents(t, "create forum", log.next(), map[string]int{"channel.created": 1})
	return text
}

// createDispatchChannel creates the text channel Dispatch in sp as the
// owner and checks it: a main thread of its own, inheriting the space's
// operator lotse, announced by one channel.created naming its main thread.
func createDispatchChannel(t *testing.T, env *moduletest.Env, log *eventLog, sp chat.Space) chat.Channel {
	t.Helper()
	ctx, robin := t.Context(), env.Principal("robin")
	lotseID := env.World.ID("lotse")
	text, err := env.Admin.CreateChannel(ctx, robin, sp.ID, admin.ChannelInput{Name: "Dispatch", Kind: chat.ChannelText})
	if err != nil || text.MainThreadID == "" || text.OperatorMode != chat.OperatorInherit || text.EffectiveOperator() != lotseID || text.SpaceID != sp.ID {
		t.Fatalf("create text channel: %+v %v", text, err)
	}
	evs := log.next()
	wantEvents(t, "create text channel", evs, map[string]int{"channel.created": 1})
	if evs[0].ChannelID != text.ID || evs[0].Payload["main_thread_id"] != text.MainThreadID || evs[0].Payload["kind"] != "text" {
		t.Fatalf("channel.created %+v", evs[0])
	}
	if th, _, err := env.Chat.ThreadInfo(ctx, text.MainThreadID); err != nil || th.ChannelID != text.ID || th.Kind != chat.ThreadMain {
		t.Fatalf("main thread of the new channel: %+v %v", th, err)
	}
	return text
}

// updateOperationsSpace is the space updates step of
// TestSpacesAndChannels: setting and clearing the default operator at once
// is refused; renaming sp emits space.updated, clearing its default
// operator access.changed in both its channels too.
func updateOperationsSpace(t *testing.T, env *moduletest.Env, log *eventLog, sp chat.Space) {
	t.Helper()
	ctx, robin := t.Context(), env.Principal("robin")
	lotseID := env.World.ID("lotse")
	_, err := env.Admin.UpdateSpace(ctx, robin, sp.ID, admin.SpacePatch{DefaultOperator: &lotseID, ClearDefaultOperator: true})
	wantField(t, "set and clear the default operator", err, "/clear_default_operator not_allowed")
	name := "Ops"
	sp, err = env.Admin.UpdateSpace(ctx, robin, sp.ID, admin.SpacePatch{Name: &name})
	if err != nil || sp.Name != "Ops" || sp.DefaultOperatorAgentID != lotseID {
		t.Fatalf("rename space: %+v %v", sp, err)
	}
	wantEvents(t, "rename space", log.next(), map[string]int{"space.updated": 1})
	sp, err = env.Admin.UpdateSpace(ctx, robin, sp.ID, admin.SpacePatch{ClearDefaultOperator: true})
	if err != nil || sp.DefaultOperatorAgentID != "" {
		t.Fatalf("clear the default operator: %+v %v", sp, err)
	}
	wantEvents(t, "clear the default operator", log.next(), map[string]int{"space.updated": 1, "access.changed space.operator_set": 2})
}

// changeDispatchChannel is the channel changes step of
// TestSpacesAndChannels: renaming the channel text emits channel.updated;
// invalid operators are refused; setting the operator, the switches,
// archiving and unarchiving each emit access.changed with their change and
// are read back as written.
func changeDispatchChannel(t *testing.T, env *moduletest.Env, log *eventLog, text chat.Channel) {
	t.Helper()
	ctx, robin := t.Context(), env.Principal("robin")
	lotseID, samID := env.World.ID("lotse"), env.World.ID("sam")
	text, err := env.Admin.RenameChannel(ctx, robin, text.ID, "Dispatch desk")
	if err != nil || text.Name != "Dispatch desk" {
		t.Fatalf("rename channel: %+v %v", text, err)
	}
	wantEvents(t, "rename channel", log.next(), map[string]int{"channel.updated": 1})
	for _, c := range []struct {
		mode        chat.OperatorMode
		agent, want string
	}{
		{chat.OperatorAgent, samID, "/agent_id invalid_reference"},
		{chat.OperatorInherit, lotseID, "/agent_id not_allowed"},
		{chat.OperatorNone, lotseID, "/agent_id not_allowed"},
		{"boss", "", "/mode invalid_enum"},
	} {
		_, err := env.Admin.SetOperator(ctx, robin, text.ID, c.mode, c.agent)
		wantField(t, "operator "+string(c.mode), err, c.want)
	}
	text, err = env.Admin.SetOperator(ctx, robin, text.ID, chat.OperatorAgent, lotseID)
	if err != nil || text.OperatorMode != chat.OperatorAgent || text.EffectiveOperator() != lotseID {
		t.Fatalf("set operator: %+v %v", text, err)
	}
	wantEvents(t, "set operator", log.next(), map[string]int{"access.changed channel.operator_set": 1})
	off := false
	text, err = env.Admin.UpdateSwitches(ctx, robin, text.ID, chat.SwitchesPatch{AutoThread: &off})
	if err != nil || text.Switches.AutoThread {
		t.Fatalf("switches: %+v %v", text, err)
	}
	wantEvents(t, "switches", log.next(), map[string]int{"access.changed channel.switches_updated": 1})
	text, err = env.Admin.ArchiveChannel(ctx, robin, text.ID)
	if err != nil || !text.Archived() {
		t.Fatalf("archive: %+v %v", text, err)
	}
	wantEvents(t, "archive", log.next(), map[string]int{"access.changed channel.archived": 1})
	text, err = env.Admin.UnarchiveChannel(ctx, robin, text.ID)
	if err != nil || text.Archived() {
		t.Fatalf("unarchive: %+v %v", text, err)
	}
	wantEvents(t, "unarchive", log.next(), map[string]int{"channel.updated": 1, "access.changed channel.unarchived": 1})
}
