package chat_test

import (
	"testing"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/domain"
)

// movedEvents returns the thread.moved events of the client log, oldest
// first.
func movedEvents(t *testing.T, env *moduletest.Env) []events.Event {
	t.Helper()
	return eventsOfType(t, env, events.ThreadMoved)
}

// threadOf returns the thread as robin (the owner, who reads everything)
// reads it now through the use case.
func threadOf(t *testing.T, env *moduletest.Env, id string) chat.Thread {
	t.Helper()
	th, err := env.Modules.ChatUseCases.Thread(t.Context(), env.Principal("robin"), id)
	if err != nil {
		t.Fatalf("robin reads thread %s: %v", id, err)
	}
	return th
}

// TestMoveRules pins chat.UseCases.Move beyond TestMoveThread, on the use
// cases as the modules wire them (docs/design/rights.md#action-table:
// thread.move needs trigger on the thread and on the target channel;
// docs/design/model.md#threads):
//   - an agent never moves (agents hold at most write:
//     level_insufficient); a target channel the mover cannot read is
//     refused exactly like an unknown one, as is an unknown thread; a
//     refused move changes nothing and announces nothing;
//   - into an archived channel: channel_read_only (channel_archived,
//     docs/design/rights.md#archive-cap), for an owner too;
//   - a thread moves only between channels of the same kind (text into a
//     forum: validation_failed invalid_reference on /channel_id);
//   - a move into the channel the thread is in answers it unchanged and
//     announces nothing; a main thread cannot move (conflict main_thread);
//   - an auto title taken from a parent message does not follow the thread
//     (cleared in the answer, in the stored thread and in both thread.moved
//     events, which name from_channel_id and the target), while an auto
//     title without parent and a person's own title stay;
//   - the move re-checks the triggers of the target channel at once
//     (docs/design/runs.md#loss-of-trigger): the queued run of a person who
//     keeps trigger there stays queued, one whose person has none there is
//     cancelled with trigger_revoked before any sweep.
func TestMoveRules(t *testing.T) {
	t.Parallel()
	w := newMoveWorld(t)
	t.Run("refused moves", w.refusedMoves)
	t.Run("archived target", w.archivedTarget)
	t.Run("kinds and places", w.kindsAndPlaces)
	t.Run("titles", w.titles)
	t.Run("triggers re-checked", w.triggersRechecked)
}

// moveWorld is the world of TestMoveRules: the use cases, the people and
// channels it moves between, and the threads it moves, which the
// subtests move in turn.
type moveWorld struct {
	env                              *moduletest.Env
	uc                               *chat.UseCases
	robin, alex, sam                 identity.Principal
	allgemein, eskalation, kampagnen string
	// own is alex's thread with its own title, agents lotse's thread
	// without parent (title_source auto), auto the thread under alex's
	// mention ask, with alex's queued run.
	own, agents chat.Thread
	ask         messaging.Message
	auto, run   string
}

// newMoveWorld builds the moveWorld in a world of its own.
func newMoveWorld(t *testing.T) *moveWorld {
	t.Helper()
	env := moduletest.New(t)
	ctx := t.Context()
	uc := env.Modules.ChatUseCases
	robin, alex, sam := env.Principal("robin"), env.Principal("alex"), env.Principal("sam")
	allgemein := env.World.Channel("Support/Allgemein").ID
	eskalation := env.World.Channel("Support/Eskalation").ID
	kampagnen := env.World.Channel("Marketing/Kampagnen").ID

	// A person's thread with its own title, and an agent's thread without
	// parent (title_source auto).
	own, _, _, err := env.Messaging.CreateThread(ctx, alex, allgemein,
		messaging.ThreadInput{Title: "Rota", First: messaging.Input{ClientMsgID: "mr-own", ContentMD: "Who is on call?"}})
	if err != nil {
		t.Fatal(err)
	}
	agents, _, _, err := env.Messaging.CreateThread(ctx, env.Principal("lotse"), allgemein,
		messaging.ThreadInput{First: messaging.Input{ClientMsgID: "mr-agent", ContentMD: "Nightly digest\nthree items"}})
	if err != nil {
		t.Fatal(err)
	}
	if agents.TitleSource != chat.TitleAuto || agents.Title != "Nightly digest" || agents.ParentMessageID != "" {
		t.Fatalf("the agent's thread %+v", agents)
	}
	// Alex asks Lotse in the main thread: an auto thread under the message
	// with a queued run of Alex's.
	ask := env.Post("alex", env.Main("Support/Allgemein"), "mr-ask", "@lotse summarise the outage\nwith details")
	var auto, run string
	if err := env.Pool.QueryRow(ctx, `SELECT id::text, thread_id::text FROM runs WHERE triggering_message_id = $1`, ask.ID).Scan(&run, &auto); err != nil {
		t.Fatalf("no run of the mention: %v", err)
	}
	if th := threadOf(t, env, auto); th.TitleSource != chat.TitleAuto || th.ParentMessageID != ask.ID || th.Title != "@lotse summarise the outage" {
		t.Fatalf("auto thread %+v", th)
	}
	return &moveWorld{env: env, uc: uc, robin: robin, alex: alex, sam: sam, allgemein: allgemein, eskalation: eskalation, kampagnen: kampagnen,
		own: own, agents: agents, ask: ask, auto: auto, run: run}
}

// runState reads the state and end reason of alex's run as robin.
func (w *moveWorld) runState(t *testing.T) (domain.RunState, string) {
	t.Helper()
	rd, err := w.env.Runs.Read(t.Context(), w.robin, w.run)
	if err != nil {
		t.Fatal(err)
	}
	return rd.Run.State, rd.Run.EndReason
}

// refusedMoves checks that an agent never moves, that a hidden target
// channel and an unknown thread are refused like an unknown channel, and
// that refused moves change and announce nothing.
func (w *moveWorld) refusedMoves(t *testing.T) {
	env, uc, alex, allgemein, eskalation, kampagnen, own := w.env, w.uc, w.alex, w.allgemein, w.eskalation, w.kampagnen, w.own
	ctx := t.Context()
	missing := func(err error) {
		t.Helper()
		if p := problem.From("chat.TestMoveRules", err); p == nil || p.Code != problem.NotFound || p.Reason != "" {
			t.Fatalf("%v, want a bare not_found", err)
		}
	}
	_, err := uc.Move(ctx, env.Principal("lotse"), own.ID, eskalation)
	wantReason(t, "an agent moves", err, problem.Forbidden, "level_insufficient")
	hidden, err := uc.Move(ctx, alex, own.ID, kampagnen)
	missing(err)
	_, unknown := uc.Move(ctx, alex, own.ID, ids.New())
	missing(unknown)
	if err.Error() != unknown.Error() {
		t.Fatalf("a hidden target answers %q, an unknown one %q", err, unknown)
	}
	if hidden.ID != "" {
		t.Fatalf("a refused move answered a thread: %+v", hidden)
	}
	_, err = uc.Move(ctx, alex, ids.New(), eskalation)
	missing(err)
	if th := threadOf(t, env, own.ID); th.ChannelID != allgemein {
		t.Fatalf("a refused move moved the thread to %s", th.ChannelID)
	}
	if evs := movedEvents(t, env); len(evs) != 0 {
		t.Fatalf("refused moves announced %+v", evs)
	}
}

// archivedTarget checks that a move into an archived channel is refused
// channel_read_only, for an owner too.
func (w *moveWorld) archivedTarget(t *testing.T) {
	env, uc, robin, alex, allgemein, own := w.env, w.uc, w.robin, w.alex, w.allgemein, w.own
	ctx := t.Context()
	archiv, err := env.Admin.CreateChannel(ctx, robin, env.World.Spaces["Support"], admin.ChannelInput{Name: "archiv", Kind: chat.ChannelText})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Admin.ArchiveChannel(ctx, robin, archiv.ID); err != nil {
		t.Fatal(err)
	}
	_, err = uc.Move(ctx, alex, own.ID, archiv.ID)
	wantReason(t, "alex moves into an archived channel", err, problem.ChannelReadOnly, "channel_archived")
	// Owners are capped too.
	_, err = uc.Move(ctx, robin, own.ID, archiv.ID)
	wantReason(t, "robin moves into an archived channel", err, problem.ChannelReadOnly, "channel_archived")
	if th := threadOf(t, env, own.ID); th.ChannelID != allgemein {
		t.Fatalf("the thread moved into the archived channel: %+v", th)
	}
}

// kindsAndPlaces checks that a text thread does not move into a forum, a
// move into its own channel answers the thread unchanged, a main thread
// does not move, and none of these announces anything.
func (w *moveWorld) kindsAndPlaces(t *testing.T) {
	env, uc, robin, alex, allgemein, eskalation, own := w.env, w.uc, w.robin, w.alex, w.allgemein, w.eskalation, w.own
	ctx := t.Context()
	_, err := uc.Move(ctx, alex, own.ID, env.World.Channel("Support/Reports").ID)
	p := problem.From("chat.TestMoveRules", err)
	if p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Pointer != "/channel_id" || p.Fields[0].Code != "invalid_reference" {
		t.Fatalf("text thread into a forum: %+v", p)
	}
	same, err := uc.Move(ctx, alex, own.ID, allgemein)
	if err != nil || same.ID != own.ID || same.ChannelID != allgemein || same.Title != "Rota" {
		t.Fatalf("a move into its own channel: %+v %v", same, err)
	}
	_, err = uc.Move(ctx, robin, env.Main("Support/Allgemein"), eskalation)
	wantReason(t, "moving a main thread", err, problem.Conflict, "main_thread")
	if evs := movedEvents(t, env); len(evs) != 0 {
		t.Fatalf("moves that changed nothing announced %+v", evs)
	}
}

// titles checks that a person's title and an auto title without parent
// follow the thread, while an auto title from a parent message is cleared
// in the answer, the stored thread and both thread.moved events.
func (w *moveWorld) titles(t *testing.T) {
	env, uc, alex, eskalation, own, agents := w.env, w.uc, w.alex, w.eskalation, w.own, w.agents
	ctx := t.Context()
	for _, c := range []struct {
		name, id, title string
	}{
		{"a person's title", own.ID, "Rota"},
		{"an auto title without parent", agents.ID, "Nightly digest"},
	} {
		moved, err := uc.Move(ctx, alex, c.id, eskalation)
		if err != nil || moved.ChannelID != eskalation || moved.Title != c.title {
			t.Fatalf("%s: moved %+v %v", c.name, moved, err)
		}
		if th := threadOf(t, env, c.id); th.Title != c.title || th.ChannelID != eskalation {
			t.Fatalf("%s: stored %+v", c.name, th)
		}
	}
	w.autoTitleCleared(t)
}

// autoTitleCleared moves the thread auto, titled from its parent message,
// and checks that its title is cleared in the answer, the stored thread
// and both thread.moved events.
func (w *moveWorld) autoTitleCleared(t *testing.T) {
	t.Helper()
	env, uc, alex, eskalation, ask, auto := w.env, w.uc, w.alex, w.eskalation, w.ask, w.auto
	before := len(movedEvents(t, env))
	moved, err := uc.Move(t.Context(), alex, auto, eskalation)
	if err != nil || moved.ChannelID != eskalation || moved.Title != "" || moved.TitleSource != "" || moved.ParentMessageID != ask.ID {
		t.Fatalf("the auto thread moved: %+v %v", moved, err)
	}
	if th := threadOf(t, env, auto); th.Title != "" || th.TitleSource != "" || th.ParentMessageID != ask.ID {
		t.Fatalf("the auto thread is stored as %+v", th)
	}
	w.wantAutoMovedEvents(t, movedEvents(t, env)[before:])
}

// wantAutoMovedEvents checks the thread.moved events of the move of auto
// from allgemein to eskalation: one in each channel, each naming both
// channels and carrying no title.
func (w *moveWorld) wantAutoMovedEvents(t *testing.T, evs []events.Event) {
	t.Helper()
	allgemein, eskalation, auto := w.allgemein, w.eskalation, w.auto
	if len(evs) != 2 || evs[0].ChannelID != allgemein || evs[1].ChannelID != eskalation {
		t.Fatalf("thread.moved events %+v, want one in the source, one in the target", evs)
	}
	for _, e := range evs {
		_, titled := e.Payload["title"]
		if e.ThreadID != auto || e.Payload["from_channel_id"] != allgemein || e.Payload["channel_id"] != eskalation || titled || e.Payload["title_source"] != nil {
			t.Fatalf("thread.moved %+v", e)
		}
	}
}

// triggersRechecked checks that a move re-checks the triggers of the
// target channel at once: alex's queued run stays while alex keeps trigger,
// and is cancelled trigger_revoked by a move out of alex's reach.
func (w *moveWorld) triggersRechecked(t *testing.T) {
	uc, robin, alex, sam, kampagnen, auto := w.uc, w.robin, w.alex, w.sam, w.kampagnen, w.auto
	ctx := t.Context()
	// Alex keeps trigger in Eskalation: the move above left the run.
	if state, _ := w.runState(t); state != domain.RunQueued {
		t.Fatalf("alex's run after a move where alex keeps trigger: %s", state)
	}
	// Robin moves it to Marketing, where Alex has no trigger: the move
	// itself cancels the queued run, and Alex no longer finds the thread.
	if _, err := uc.Move(ctx, robin, auto, kampagnen); err != nil {
		t.Fatal(err)
	}
	if state, reason := w.runState(t); state != domain.RunCancelled || reason != "trigger_revoked" {
		t.Fatalf("alex's run after the move out of reach: %s %s", state, reason)
	}
	_, err := uc.Thread(ctx, alex, auto)
	wantProblem(t, "alex reads the moved thread", err, problem.NotFound)
	if th, err := uc.Thread(ctx, sam, auto); err != nil || th.ChannelID != kampagnen {
		t.Fatalf("sam reads the moved thread: %+v %v", th, err)
	}
}
