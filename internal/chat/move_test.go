package chat_test

import (
	"testing"

	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
)

// wantProblem fails the test unless err is a problem with code.
func wantProblem(t *testing.T, what string, err error, code problem.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %s", what, code)
	}
	if p := problem.From("chat.wantProblem", err); p.Code != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

// TestMoveThread: moving a thread needs trigger on the source and on the
// target (a target the mover cannot see is not found); the thread keeps
// its parent, the move is audited and announced in both channels, its
// messages then report the target channel; a main thread cannot move.
// That an unknown body member is refused on the wire is a case of
// TestUnknownMemberAndEnum in internal/server.
func TestMoveThread(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	threads := chat.NewUseCases(env.Chat, env.Authz, env.Events, env.DB)
	alex := env.Principal("alex")
	// Writer has no trigger right, so the message starts no run (and no auto
	// thread) and can be the parent of a thread.
	parent := env.Post("writer", env.Main("Support/Allgemein"), "m1", "Escalate this")
	th, _, _, err := env.Messaging.CreateThread(ctx, alex, env.World.Channel("Support/Allgemein").ID,
		messaging.ThreadInput{ParentMessageID: parent.ID, First: messaging.Input{ClientMsgID: "t1", ContentMD: "Details"}})
	if err != nil {
		t.Fatal(err)
	}
	target := env.World.Channel("Support/Eskalation").ID
	// Sam has trigger on Allgemein only and cannot see the target: 404.
	_, err = threads.Move(ctx, env.Principal("sam"), th.ID, target)
	wantProblem(t, "sam moves", err, problem.NotFound)
	// Writer lacks trigger on the source.
	_, err = threads.Move(ctx, env.Principal("writer"), th.ID, target)
	wantProblem(t, "writer moves", err, problem.Forbidden)
	moved, err := threads.Move(ctx, alex, th.ID, target)
	if err != nil || moved.ChannelID != target || moved.ParentMessageID != parent.ID {
		t.Fatalf("move: %+v %v", moved, err)
	}
	if n := env.Count(`SELECT count(*) FROM audit_log WHERE action = 'thread.move' AND decision = 'allow'`); n < 1 {
		t.Fatalf("move not audited")
	}
	if n := env.Count(`SELECT count(*) FROM event_log WHERE type = 'thread.moved'`); n != 2 {
		t.Fatalf("%d thread.moved events, want one per channel", n)
	}
	// Messages of the moved thread now report the target channel.
	page, err := env.Messaging.History(ctx, alex, th.ID, 0, 0)
	if err != nil || len(page.Messages) == 0 || page.Messages[0].ChannelID != target {
		t.Fatalf("message channel after move: %+v %v", page.Messages, err)
	}
	_, err = threads.Move(ctx, alex, env.Main("Support/Allgemein"), target)
	wantProblem(t, "moving a main thread", err, problem.Conflict)
}
