package agent

import "strings"

// AnswerKey is the clientMsgId of the reference adapter's answer to one
// request of run runID: answer-<run id>-<message id>, where messageID is
// the run's triggering message or one of its follow-ups. The server stores
// one message per key and agent, so every retry, a restarted process and a
// takeover by another process send the same key for the same request and
// the request gets one answer. One answer may cover several requests; it
// is then keyed by the last of them (see answeredUpTo).
func AnswerKey(runID, messageID string) string {
	return "answer-" + runID + "-" + messageID
}

// legacyAnswerKey is the one key per run (answer-<run id>) of reference
// adapters before per-request keys. A run answered under it counts as
// having its trigger answered, so that a takeover of such an adapter's run
// does not answer the trigger again.
func legacyAnswerKey(runID string) string { return "answer-" + runID }

// requestsOf returns the requests of a run in the order they came: the
// triggering message, then the follow-ups (message ids, oldest first).
func requestsOf(trigger string, followUps []RunContextMessage) []string {
	out := make([]string, 0, 1+len(followUps))
	out = append(out, trigger)
	for _, f := range followUps {
		out = append(out, f.MessageID)
	}
	return out
}

// answeredUpTo returns how many of requests (requestsOf) the answers of
// run runID cover: an answer keyed by request i covers it and every
// request before it, because the adapter keys an answer by the last
// request of its prompt and the prompt holds every earlier request too.
// The requests after the returned count are open.
func answeredUpTo(runID string, requests []string, answers []RunAnswer) int {
	keys := make(map[string]bool, len(answers))
	for _, a := range answers {
		keys[a.ClientMsgID] = true
	}
	n := 0
	if keys[legacyAnswerKey(runID)] && len(requests) > 0 {
		n = 1
	}
	for i, id := range requests {
		if keys[AnswerKey(runID, id)] {
			n = i + 1
		}
	}
	return n
}

// answeredBeyond reports whether run runID has an answer keyed by a
// request that is not among requests: an answer of a later holder whose
// prompt held more follow-ups, which covers every request of this one.
func answeredBeyond(runID string, requests []string, answers []RunAnswer) bool {
	known := make(map[string]bool, len(requests))
	for _, id := range requests {
		known[AnswerKey(runID, id)] = true
	}
	prefix := AnswerKey(runID, "")
	for _, a := range answers {
		if strings.HasPrefix(a.ClientMsgID, prefix) && !known[a.ClientMsgID] {
			return true
		}
	}
	return false
}

// The end reasons that leave a failed run's request standing: the server
// gave up on the run (run.start_timeout or run.stall_timeout, or leases
// that lapsed run.max_attempts times), not the person who asked.
const (
	endReasonTimeout      = "timeout"
	endReasonLeaseExpired = "lease_expired"
	endReasonRevoked      = "trigger_revoked"
)

// requestStands reports whether a run that ended in state with reason
// left its request standing, so that a reply the adapter still holds may
// go out without runId (the adapter guide: when the run ended first):
// completed, or failed by timeout or lease_expired. Every other ending
// took the request away or may have: cancelled for any reason (a person's
// cancel, the agent's own, trigger_revoked when the person lost trigger),
// failed with a reason an adapter gave, and any state or reason this code
// does not know. A reply lost is better than a reply to a request its
// author withdrew or may no longer make.
func requestStands(state RunState, reason string) bool {
	switch state {
	case RunStateCompleted:
		return reason != endReasonRevoked
	case RunStateFailed:
		return reason == endReasonTimeout || reason == endReasonLeaseExpired
	default:
		// Cancelled, a state still active, or one this code does not know.
		return false
	}
}
