package problem_test

import (
	"errors"
	"testing"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
)

// TestOneMissingKind: every module's "no such thing" is one kind,
// problem.ErrMissing, while each still names its module.
func TestOneMissingKind(t *testing.T) {
	t.Parallel()
	for _, err := range []error{identity.ErrNotFound, identity.ErrGroupNotFound, chat.ErrNotFound, messaging.ErrNotFound,
		runs.ErrNotFound, authz.ErrGrantNotFound} {
		if !errors.Is(err, problem.ErrMissing) {
			t.Errorf("%v is not problem.ErrMissing", err)
		}
	}
	if errors.Is(chat.ErrNotFound, identity.ErrNotFound) {
		t.Error("the modules' sentinels are told apart")
	}
}
