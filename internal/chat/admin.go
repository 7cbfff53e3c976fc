package chat

import (
	"context"
	"fmt"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/text"
)

// MaxName is the longest space or channel name in characters.
const MaxName = 80

// CheckName validates a space or channel name at pointer: 1 to MaxName
// characters, no surrounding spaces, no control characters (NUL included,
// which PostgreSQL cannot store).
func CheckName(name, pointer string) error {
	if !text.Line(name, 1, MaxName) {
		return problem.Invalid(problem.FieldError{Pointer: pointer, Code: "invalid_format", Detail: "1 to 80 characters without surrounding spaces or control characters"})
	}
	return nil
}

// nameConflict turns a unique violation into 409 conflict name_taken.
func nameConflict(err error, what string) error {
	if db.IsUniqueViolation(err, "") {
		return problem.Newf(problem.Conflict, "name_taken", "the name is taken")
	}
	return fmt.Errorf("%s: %w", what, err)
}

// CheckSwitches validates the switches of a new channel.
func (s *Service) CheckSwitches(p SwitchesPatch, prefix string) error {
	if l := p.HistoryBackfillLimit; l != nil && (*l < 0 || *l > s.backfillMax) {
		return problem.Invalid(problem.FieldError{Pointer: prefix + "/history_backfill_limit", Code: "out_of_range",
			Detail: "must lie between 0 and channel.history_backfill_limit_max"})
	}
	return nil
}

// RenameSpace renames space id in the transaction of ctx; a taken name answers 409 name_taken.
func (w *Writer) RenameSpace(ctx context.Context, id, name string) error {
	s := w.s
	if err := CheckName(name, "/name"); err != nil {
		return err
	}
	return s.st.renameSpace(ctx, id, name)
}

// RenameChannel renames channel id in the transaction of ctx; a name taken in the space
// answers 409 name_taken.
func (w *Writer) RenameChannel(ctx context.Context, id, name string) error {
	s := w.s
	if err := CheckName(name, "/name"); err != nil {
		return err
	}
	return s.st.renameChannel(ctx, id, name)
}
