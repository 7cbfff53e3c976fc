package agent

import (
	"context"
	"testing"
	"time"
)

func followupEvent(seq, run, message string) (AgentEvent, RunRef) {
	return AgentEvent{Seq: seq, Type: EventFollowup}, RunRef{RunID: run, MessageID: message}
}

// TestAcksStopInFrontOfUnseenFollowUps: the position passes a follow-up of
// a run this process holds only once the run's answer covers it or the run
// ended, and never passes an event left for a later process.
func TestAcksStopInFrontOfUnseenFollowUps(t *testing.T) {
	t.Parallel()
	now := time.Now()
	l := newAcks()
	l.track("r1")
	l.add(AgentEvent{Seq: "1", Type: EventInvocation}, true, RunRef{}, now)
	ev, ref := followupEvent("2", "r1", "f1")
	l.add(ev, true, ref, now)
	l.add(AgentEvent{Seq: "3", Type: EventCancelRequested}, true, RunRef{}, now)
	if got := l.target(); got != "1" {
		t.Fatalf("target %q with an unseen follow-up at 2, want 1", got)
	}
	if h, report, due := l.head(now, time.Second); h.seq != "2" || !report || due {
		t.Fatalf("head %+v report %v due %v", h, report, due)
	}
	if _, report, _ := l.head(now, time.Second); report {
		t.Fatal("the same hold was reported twice")
	}
	l.cover("r1", []string{"f1"})
	if got := l.target(); got != "3" {
		t.Fatalf("target %q after the model saw the follow-up, want 3", got)
	}
	l.acked("3", "3")
	if got := l.target(); got != "" {
		t.Fatalf("target %q after everything was acknowledged", got)
	}
	if !l.runs["r1"].delivered["f1"] {
		t.Fatal("the acknowledged follow-up is not recorded as delivered")
	}

	// An event left for a later process holds everything behind it.
	l.add(AgentEvent{Seq: "4", Type: EventInvocation}, false, RunRef{}, now)
	l.add(AgentEvent{Seq: "5", Type: EventCancelRequested}, true, RunRef{}, now)
	l.release("r1", true)
	if got := l.target(); got != "" {
		t.Fatalf("target %q past a left invocation", got)
	}
}

// TestAcksReleaseOnEndOnly: the follow-ups of a run that ended are dealt
// with; those of a run whose claim was lost wait like those of any run
// held elsewhere.
func TestAcksReleaseOnEndOnly(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, ended := range []bool{true, false} {
		l := newAcks()
		l.track("r1")
		ev, ref := followupEvent("7", "r1", "f1")
		l.add(ev, true, ref, now)
		l.release("r1", ended)
		if got := l.target(); (got == "7") != ended {
			t.Fatalf("ended %v: target %q", ended, got)
		}
	}
}

// TestAcksFollowUpsOfOtherProcesses: a follow-up of a run this process
// does not hold waits until a check finds its run ended, or until the
// server's position (set by the holder's acknowledgement) has passed it.
func TestAcksFollowUpsOfOtherProcesses(t *testing.T) {
	t.Parallel()
	now := time.Now()
	l := newAcks()
	l.add(AgentEvent{Seq: "10", Type: EventInvocation}, true, RunRef{}, now)
	ev, ref := followupEvent("11", "r9", "f9")
	l.add(ev, true, ref, now)
	ev, ref = followupEvent("12", "r8", "f8")
	l.add(ev, true, ref, now)
	if _, _, due := l.head(now, time.Second); due {
		t.Fatal("the run was due for a check at once")
	}
	if h, _, due := l.head(now.Add(time.Second), time.Second); !due || h.runID != "r9" {
		t.Fatalf("head %+v due %v", h, due)
	}
	l.acked("10", "11") // the holder of r9 acknowledged its follow-up
	if got := l.target(); got != "" {
		t.Fatalf("target %q: only the stored position passed 11", got)
	}
	if len(l.pending) != 1 || l.pending[0].seq != "12" {
		t.Fatalf("pending %+v", l.pending)
	}
	l.runEnded("r8")
	if got := l.target(); got != "12" {
		t.Fatalf("target %q after r8 ended", got)
	}
}

// TestAcksAwaitDelivered: the wait ends with the acknowledgement that
// passes the follow-ups, or with its context.
func TestAcksAwaitDelivered(t *testing.T) {
	t.Parallel()
	now := time.Now()
	l := newAcks()
	l.track("r1")
	ev, ref := followupEvent("2", "r1", "f1")
	l.add(ev, true, ref, now)
	l.cover("r1", []string{"f1"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.awaitDelivered(ctx, "r1", []string{"f1"}); err == nil {
		t.Fatal("delivered without an acknowledgement")
	}
	<-l.kick // drained: the next poke comes from the waiter below
	done := make(chan error, 1)
	go func() { done <- l.awaitDelivered(t.Context(), "r1", []string{"f1"}) }()
	<-l.kick // the waiter asks the acknowledger to act
	l.acked(l.target(), "2")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
