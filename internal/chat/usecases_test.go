package chat_test

import (
	"slices"
	"sort"
	"testing"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
)

// wantReason fails the test unless err is a problem with code and reason.
func wantReason(t *testing.T, what string, err error, code problem.Code, reason string) {
	t.Helper()
	if p := problem.From("chat.wantReason", err); p == nil || p.Code != code || p.Reason != reason {
		t.Fatalf("%s: %v, want %s (%s)", what, err, code, reason)
	}
}

// TestCloseThread pins chat.UseCases.Close: closing needs write on the
// thread (Sam, who only reads the forum Support/Bulletin, is refused;
// someone who cannot read it does not find it, and neither changes it); a close sets the thread done, which a read
// then answers, and emits one thread.closed in its channel with the
// thread's payload; closing a done thread answers it unchanged and emits
// nothing more; a main thread cannot be closed (conflict main_thread).
func TestCloseThread(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	uc := env.Modules.ChatUseCases
	alex := env.Principal("alex")
	allgemein := env.World.Channel("Support/Allgemein").ID
	th, _, _, err := env.Messaging.CreateThread(ctx, alex, allgemein,
		messaging.ThreadInput{Title: "Printer on floor 2", First: messaging.Input{ClientMsgID: "c1", ContentMD: "It jams again"}})
	if err != nil {
		t.Fatal(err)
	}
	checkRefusedCloses(t, env, th.ID)
	checkWriterCloses(t, env, th.ID, allgemein)

	again, err := uc.Close(ctx, alex, th.ID)
	if err != nil || again.State != chat.ThreadDone {
		t.Fatalf("closing a done thread: %+v %v", again, err)
	}
	if n := len(eventsOfType(t, env, events.ThreadClosed)); n != 1 {
		t.Fatalf("closing a done thread emitted again: %d thread.closed", n)
	}

	_, err = uc.Close(ctx, env.Principal("robin"), env.Main("Support/Allgemein"))
	wantReason(t, "closing a main thread", err, problem.Conflict, "main_thread")
}

// eventsOfType returns the events of type typ in the whole event log,
// oldest first: the tests of chat's use cases count what a step emitted.
func eventsOfType(t *testing.T, env *moduletest.Env, typ events.Type) []events.Event {
	t.Helper()
	evs, err := env.Events.AfterIn(t.Context(), 0, 1000, true, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(evs, func(e events.Event) bool { return e.Type != typ })
}

// checkRefusedCloses checks that closing needs write on the thread: sam,
// who only reads Support/Bulletin (granted here), is refused forbidden
// there, and neither sam nor alex finds a thread they cannot read; the
// thread threadID stays open and no thread.closed is emitted.
func checkRefusedCloses(t *testing.T, env *moduletest.Env, threadID string) {
	t.Helper()
	ctx := t.Context()
	uc := env.Modules.ChatUseCases
	alex := env.Principal("alex")
	// Sam reads Support/Bulletin by a read grant and writes nowhere there.
	if _, err := env.Admin.CreateGrant(ctx, env.Principal("robin"), admin.GrantInput{SubjectID: env.World.ID("sam"), SubjectKind: authz.SubjectPrincipal,
		TargetKind: authz.KindChannel, TargetID: env.World.Channel("Support/Bulletin").ID, Level: authz.Read}); err != nil {
		t.Fatal(err)
	}
	post, _, _, err := env.Messaging.CreateThread(ctx, alex, env.World.Channel("Support/Bulletin").ID,
		messaging.ThreadInput{Title: "Rota", First: messaging.Input{ClientMsgID: "b1", ContentMD: "Who is on call?"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		who    string
		thread string
		code   problem.Code
	}{
		{"sam", post.ID, problem.Forbidden},
		{"sam", env.Main("Support/Eskalation"), problem.NotFound},
		{"alex", env.Main("Marketing/Kampagnen"), problem.NotFound},
	} {
		_, err := uc.Close(ctx, env.Principal(c.who), c.thread)
		wantProblem(t, c.who+" closes", err, c.code)
	}
	if got, err := uc.Thread(ctx, alex, threadID); err != nil || got.State != chat.ThreadOpen {
		t.Fatalf("a refused close changed the thread: %+v %v", got, err)
	}
	if n := len(eventsOfType(t, env, events.ThreadClosed)); n != 0 {
		t.Fatalf("refused closes emitted %d thread.closed", n)
	}
}

// checkWriterCloses checks that writer closes the thread threadID of the
// channel channelID: it is done, a read (by sam) answers it done, and one
// thread.closed in its channel carries the thread's payload.
func checkWriterCloses(t *testing.T, env *moduletest.Env, threadID, channelID string) {
	t.Helper()
	ctx := t.Context()
	uc := env.Modules.ChatUseCases
	done, err := uc.Close(ctx, env.Principal("writer"), threadID)
	if err != nil || done.ID != threadID || done.State != chat.ThreadDone {
		t.Fatalf("writer closes: %+v %v", done, err)
	}
	if got, err := uc.Thread(ctx, env.Principal("sam"), threadID); err != nil || got.State != chat.ThreadDone {
		t.Fatalf("the closed thread reads %+v %v", got, err)
	}
	evs := eventsOfType(t, env, events.ThreadClosed)
	if len(evs) != 1 || evs[0].ChannelID != channelID || evs[0].ThreadID != threadID ||
		evs[0].Payload["state"] != string(chat.ThreadDone) || evs[0].Payload["id"] != threadID || evs[0].Payload["title"] != "Printer on floor 2" {
		t.Fatalf("thread.closed events %+v", evs)
	}
}

// TestChannels pins chat.UseCases.Channels: each principal of the example
// world lists exactly the channels it may read (by grant on the space or
// the channel, as an operator agent, every channel for the owner), each of
// which its own read answers; a page holds at most limit channels in
// creation order and the next continues after its last; a limit outside 1
// to 100 and an after that is no channel id are invalid (invalid_cursor);
// a disabled principal lists nothing (not found).
func TestChannels(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	uc := env.Modules.ChatUseCases
	keyOf := map[string]string{}
	for k, c := range env.World.Channels {
		keyOf[c.ID] = k
	}
	for _, c := range []struct {
		who  string
		want []string
	}{
		{"robin", []string{"Marketing/Ideas", "Marketing/Kampagnen", "Support/Allgemein", "Support/Bulletin", "Support/Eskalation", "Support/Reports"}},
		{"alex", []string{"Support/Allgemein", "Support/Bulletin", "Support/Eskalation", "Support/Reports"}},
		{"sam", []string{"Marketing/Ideas", "Marketing/Kampagnen", "Support/Allgemein"}},
		{"writer", []string{"Support/Allgemein"}},
		{"lotse", []string{"Support/Allgemein", "Support/Bulletin", "Support/Eskalation", "Support/Reports"}},
		{"texter", []string{"Marketing/Ideas", "Marketing/Kampagnen", "Support/Allgemein"}},
		{"feedbot", []string{"Support/Allgemein"}},
	} {
		actor := env.Principal(c.who)
		page, err := uc.Channels(ctx, actor, "", 100)
		if err != nil {
			t.Fatalf("%s lists: %v", c.who, err)
		}
		var got []string
		for _, ch := range page.Channels {
			got = append(got, keyOf[ch.ID])
			if _, err := uc.Channel(ctx, actor, ch.ID); err != nil {
				t.Errorf("%s lists %s but cannot read it: %v", c.who, keyOf[ch.ID], err)
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, c.want) || page.More {
			t.Errorf("%s lists %v (more %v), want %v", c.who, got, page.More, c.want)
		}
	}

	robin := env.Principal("robin")
	checkChannelPages(t, uc, robin)

	for _, c := range []struct {
		name  string
		after string
		limit int
		field string
	}{
		{"limit 0", "", 0, "first out_of_range"},
		{"limit 101", "", 101, "first out_of_range"},
		{"after not an id", "nope", 10, "after invalid_cursor"},
	} {
		_, err := uc.Channels(ctx, robin, c.after, c.limit)
		p := problem.From("chat.TestChannels", err)
		if p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Pointer+" "+p.Fields[0].Code != c.field {
			t.Errorf("%s: %+v, want validation_failed on %s", c.name, p, c.field)
		}
	}

	env.SetStatus("sam", identity.StatusDisabled)
	_, err := uc.Channels(ctx, env.Principal("sam"), "", 10)
	wantProblem(t, "a disabled principal lists", err, problem.NotFound)
}

// checkChannelPages checks that robin's channels, read by pages of four,
// are the one page of all of them: the first page says more follow, the
// second, after the first's last channel, holds the remaining two.
func checkChannelPages(t *testing.T, uc *chat.UseCases, robin identity.Principal) {
	t.Helper()
	ctx := t.Context()
	all, err := uc.Channels(ctx, robin, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	first, err := uc.Channels(ctx, robin, "", 4)
	if err != nil || len(first.Channels) != 4 || !first.More {
		t.Fatalf("first page: %d channels, more %v, %v", len(first.Channels), first.More, err)
	}
	rest, err := uc.Channels(ctx, robin, first.Channels[3].ID, 4)
	if err != nil || len(rest.Channels) != 2 || rest.More {
		t.Fatalf("second page: %d channels, more %v, %v", len(rest.Channels), rest.More, err)
	}
	var paged []string
	for _, ch := range append(first.Channels, rest.Channels...) {
		paged = append(paged, ch.ID)
	}
	var whole []string
	for _, ch := range all.Channels {
		whole = append(whole, ch.ID)
	}
	if !slices.Equal(paged, whole) {
		t.Fatalf("pages %v, one page %v", paged, whole)
	}
}
