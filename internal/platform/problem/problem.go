// Package problem owns the one error type of Bothy. Every layer speaks it;
// the GraphQL error presenter and the REST problem writer both read its
// closed table of codes, so the two faces answer alike.
package problem

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Code is one of the closed list of error codes of the API.
type Code string

// The closed list of codes (the Problem schema of docs/api/openapi.yaml).
const (
	ValidationFailed Code = "validation_failed"
	Unauthorized     Code = "unauthorized"
	Forbidden        Code = "forbidden"
	ChannelReadOnly  Code = "channel_read_only"
	NotFound         Code = "not_found"
	Conflict         Code = "conflict"
	PayloadTooLarge  Code = "payload_too_large"
	RateLimited      Code = "rate_limited"
	InternalError    Code = "internal_error"
	Unavailable      Code = "unavailable"
	// CursorExpired answers a cursor older than what retention keeps.
	CursorExpired Code = "cursor_expired"
	// MethodNotAllowed and UnsupportedMediaType are the refusals of the
	// HTTP layer itself (a wrong method or body type on /graphql).
	MethodNotAllowed     Code = "method_not_allowed"
	UnsupportedMediaType Code = "unsupported_media_type"
)

type codeInfo struct {
	status int
	title  string
}

var codes = map[Code]codeInfo{
	ValidationFailed:     {http.StatusBadRequest, "The request is not valid"},
	Unauthorized:         {http.StatusUnauthorized, "Authentication is required"},
	Forbidden:            {http.StatusForbidden, "The action is not allowed"},
	ChannelReadOnly:      {http.StatusForbidden, "The channel is read-only"},
	NotFound:             {http.StatusNotFound, "Not found"},
	Conflict:             {http.StatusConflict, "The request conflicts with the current state"},
	PayloadTooLarge:      {http.StatusRequestEntityTooLarge, "The request body is too large"},
	RateLimited:          {http.StatusTooManyRequests, "Too many requests"},
	InternalError:        {http.StatusInternalServerError, "Internal error"},
	Unavailable:          {http.StatusServiceUnavailable, "The service is unavailable"},
	CursorExpired:        {http.StatusGone, "The cursor is older than what is kept"},
	MethodNotAllowed:     {http.StatusMethodNotAllowed, "The method is not allowed here"},
	UnsupportedMediaType: {http.StatusUnsupportedMediaType, "The body type is not supported"},
}

// Codes returns every code of the closed list.
func Codes() []Code {
	out := make([]Code, 0, len(codes))
	for c := range codes {
		out = append(out, c)
	}
	return out
}

// Status returns the HTTP status of code c (500 for an unknown code).
func (c Code) Status() int {
	if i, ok := codes[c]; ok {
		return i.status
	}
	return http.StatusInternalServerError
}

// Title returns the fixed human title of code c.
func (c Code) Title() string {
	if i, ok := codes[c]; ok {
		return i.title
	}
	return codes[InternalError].title
}

// TypeURI returns the problem type URI of code c.
func (c Code) TypeURI() string { return "https://bothy.example.com/problems/" + string(c) }

// FieldError names one invalid part of a request: a JSON pointer into the
// body (or a parameter name), a machine code and an optional detail.
type FieldError struct {
	Pointer string `json:"pointer"`
	Code    string `json:"code"`
	Detail  string `json:"detail,omitempty"`
}

// Error is the error of every layer. Detail and field details are shown to
// the caller and must never carry content, tokens or whether an unseen thing
// exists; cause is for logs only and is never shown.
type Error struct {
	Code       Code
	Reason     string
	Detail     string
	Fields     []FieldError
	RetryAfter time.Duration
	// OldestCursor names the oldest valid cursor of a cursor_expired error.
	OldestCursor string
	// CurrentVersion names the current version of a live box in a
	// conflict live_version error (nil otherwise).
	CurrentVersion *int
	// Op names the operation that failed ("runs.finish"), for logs only:
	// an internal error says where it happened without a stack trace.
	Op    string
	cause error
}

// Error renders the code, reason and detail (never the cause).
func (e *Error) Error() string {
	s := string(e.Code)
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the internal cause, so that errors.Is sees through it.
func (e *Error) Unwrap() error { return e.cause }

// Cause returns the internal cause, for logs: the operation and the cause
// (`runs.finish: <driver error>`) when the error names its operation.
func (e *Error) Cause() error {
	if e.cause != nil && e.Op != "" {
		return fmt.Errorf("%s: %w", e.Op, e.cause)
	}
	return e.cause
}

// New returns an error of code with an optional reason (empty for none).
func New(code Code, reason string) *Error { return &Error{Code: code, Reason: reason} }

// Newf returns an error of code with a reason and a detail built from format.
// The detail is shown to the caller: never put content in it.
func Newf(code Code, reason, format string, args ...any) *Error {
	return &Error{Code: code, Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Invalid returns a validation_failed error listing fields.
func Invalid(fields ...FieldError) *Error {
	return &Error{Code: ValidationFailed, Fields: fields}
}

// Expired returns a cursor_expired error naming the oldest cursor that is
// still valid.
func Expired(oldest int64) *Error {
	return &Error{Code: CursorExpired, OldestCursor: fmt.Sprint(oldest),
		Detail: fmt.Sprintf("events up to cursor %d are no longer kept: continue from cursor %d", oldest, oldest)}
}

// Internal wraps cause as an internal_error of the operation op (a
// "package.operation" name such as "runs.finish"); op and cause are logged,
// never shown.
func Internal(op string, cause error) *Error {
	return &Error{Code: InternalError, Op: op, cause: cause}
}

// RateLimit returns a rate_limited error telling the caller to wait after.
func RateLimit(after time.Duration) *Error {
	return &Error{Code: RateLimited, RetryAfter: after}
}

// From returns err as an *Error of the operation op (a "package.operation"
// name such as "admin.createSpace"), like upspin's E(op, err): an *Error
// anywhere in err's chain keeps its code, reason and details and gets op
// when it names no operation yet (a copy: errors are shared values);
// any other error becomes an internal_error of op that keeps err as
// cause. The operation is for logs only. From(op, nil) is nil.
func From(op string, err error) *Error {
	if err == nil {
		return nil
	}
	var p *Error
	if errors.As(err, &p) {
		if p.Op != "" || op == "" {
			return p
		}
		c := *p
		c.Op = op
		return &c
	}
	return Internal(op, err)
}

// CodeOf returns the code of err: its *Error's code, internal_error for
// any other error, and "" for nil. It is the way to ask which kind of
// failure err is (errors.Is(err, ErrMissing) below the API).
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var p *Error
	if errors.As(err, &p) {
		return p.Code
	}
	return InternalError
}

// ErrMissing is the one kind of "no such thing" below the API: every
// module's lookup that finds nothing returns an error that wraps it (its
// own ErrNotFound names the module), so a caller that asks another module
// tests one kind, errors.Is(err, problem.ErrMissing), whichever module
// answered. At the door a missing and a hidden thing become the same
// not_found problem; this error never reaches a client as it is.
var ErrMissing = errors.New("not found")

// Is reports whether err carries the given code.
func Is(err error, code Code) bool {
	var p *Error
	return errors.As(err, &p) && p.Code == code
}

// Known reports whether c is a code of the closed list.
func (c Code) Known() bool {
	_, ok := codes[c]
	return ok
}
