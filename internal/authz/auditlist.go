package authz

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// AuditFilter narrows a read of the audit log; a zero member does not
// narrow.
type AuditFilter struct {
	// ActorID is the principal whose decisions to read.
	ActorID string
	// Action is an action of the action table (Table), such as
	// "grant.create".
	Action string
	// Decision is "allow" or "deny".
	Decision string
	// Since and Until bound when the entry's decisions were taken: an
	// entry is read when its last decision is at or after Since and its
	// first before Until.
	Since, Until *time.Time
}

// AuditEntry is one row of the audit log: one audited allow, or the
// denials of one actor, action and reason within one aggregation window
// (audit.deny_aggregate_window), counted.
type AuditEntry struct {
	ID           string
	ActorID      string
	Action       string
	Decision     string
	Reason       string
	ResourceKind string
	// ResourceID is the resource decided on; empty for instance-level
	// actions and ids that were no valid id.
	ResourceID      string
	Count           int
	FirstAt, LastAt time.Time
}

// AuditPage is a page of audit entries, oldest first.
type AuditPage struct {
	Entries []AuditEntry
	// EndCursor continues behind the page's last entry (the after given
	// when the page is empty).
	EndCursor string
	// More says whether entries follow the page.
	More bool
}

// AuditList reads the audit log (owners only; audit.list is itself
// audited): the entries that match f, oldest first (by their first
// decision), after the cursor after (an EndCursor; empty for the
// first), at most limit (1 to 1000). Entries follow retention.audit_log.
//
// Errors: forbidden for anyone but an owner (subject_kind_not_allowed for
// agents and apps, level_insufficient for people); invalid for a limit
// out of range, an unknown action or decision, a malformed actor id, an
// until before since, or a cursor that is not one (invalid_cursor);
// rate_limited.
func (s *Service) AuditList(ctx context.Context, actor identity.Principal, f AuditFilter, after string, limit int) (AuditPage, error) {
	at, id, fields := checkAuditQuery(f, after, limit)
	if len(fields) > 0 {
		return AuditPage{}, problem.Invalid(fields...)
	}
	if _, _, err := s.Authorize(ctx, actor, AuditList, Instance()); err != nil {
		return AuditPage{}, err
	}
	list, err := s.st.auditPage(ctx, f, at, id, limit+1)
	if err != nil {
		return AuditPage{}, problem.Internal("authz.auditList", err)
	}
	page := AuditPage{Entries: list, EndCursor: after}
	if len(list) > limit {
		page.Entries, page.More = list[:limit], true
	}
	if n := len(page.Entries); n > 0 {
		page.EndCursor = AuditCursor(page.Entries[n-1])
	}
	return page, nil
}

// checkAuditQuery validates the arguments of AuditList and returns the
// position the cursor after stands for. It collects every invalid field
// (none when the query is valid), so that one answer names them all; it
// runs before the authorization, as AuditList always did.
func checkAuditQuery(f AuditFilter, after string, limit int) (at time.Time, id string, fields []problem.FieldError) {
	if limit < 1 || limit > 1000 {
		fields = append(fields, problem.FieldError{Pointer: "limit", Code: "out_of_range", Detail: "must lie between 1 and 1000"})
	}
	fields = append(fields, checkAuditFilter(f)...)
	at, id, ok := parseAuditCursor(after)
	if !ok {
		fields = append(fields, problem.FieldError{Pointer: "after", Code: "invalid_cursor"})
	}
	return at, id, fields
}

// checkAuditFilter returns the invalid fields of an audit filter: a
// malformed actor id, an unknown action or decision, an until before
// since.
func checkAuditFilter(f AuditFilter) []problem.FieldError {
	var fields []problem.FieldError
	if f.ActorID != "" && !ids.Valid(f.ActorID) {
		fields = append(fields, problem.FieldError{Pointer: "filter/actor", Code: "invalid_format", Detail: "a principal id"})
	}
	if _, ok := table[Action(f.Action)]; f.Action != "" && !ok {
		fields = append(fields, problem.FieldError{Pointer: "filter/action", Code: "invalid", Detail: "an action of the action table"})
	}
	if f.Decision != "" && f.Decision != "allow" && f.Decision != "deny" {
		fields = append(fields, problem.FieldError{Pointer: "filter/decision", Code: "invalid", Detail: "allow or deny"})
	}
	if f.Since != nil && f.Until != nil && f.Until.Before(*f.Since) {
		fields = append(fields, problem.FieldError{Pointer: "filter/until", Code: "out_of_range", Detail: "must not lie before since"})
	}
	return fields
}

// AuditCursor is the opaque cursor behind e (an edge's cursor): its first
// decision's time and its id.
func AuditCursor(e AuditEntry) string {
	return base64.RawURLEncoding.EncodeToString([]byte(e.FirstAt.UTC().Format(time.RFC3339Nano) + "|" + e.ID))
}

// parseAuditCursor reads an auditCursor; ok is false for a malformed one.
// The empty cursor is the start (zero time, no id).
func parseAuditCursor(c string) (at time.Time, id string, ok bool) {
	if c == "" {
		return time.Time{}, "", true
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", false
	}
	ts, id, found := strings.Cut(string(raw), "|")
	if !found || !ids.Valid(id) {
		return time.Time{}, "", false
	}
	at, err = time.Parse(time.RFC3339Nano, ts)
	return at, id, err == nil
}
