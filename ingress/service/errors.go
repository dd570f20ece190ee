package service

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/membudget"
	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/store"
)

// Error is an error the caller can act on, as every adapter reports it:
// a code, a message in plain words and, for a bad argument, the field it
// names. The HTTP API sends it as its error body
// ({"error": {"code": ..., "message": ..., "field": ...}}) with Status;
// MCP as a tool error with Message.
type Error struct {
	// Status is the HTTP status the code answers with.
	Status  int    `json:"-"`
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Type is OpenAI's error type, set on the answers of the agent's
	// OpenAI-compatible route only, so that OpenAI SDKs read them.
	Type string `json:"type,omitempty"`
	// RetryAfter, in seconds, is sent as the Retry-After header.
	RetryAfter int `json:"-"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Code says what kind of error an Error is.
type Code string

// The error codes of gantry's API.
const (
	CodeInvalidArgument Code = "invalid_argument"
	CodeUnauthenticated Code = "unauthenticated"
	CodeNotFound        Code = "not_found"
	CodeConflict        Code = "conflict"
	CodePayloadTooLarge Code = "payload_too_large"
	CodeRequestTimeout  Code = "request_timeout"
	CodeRateLimited     Code = "rate_limited"
	CodeUnavailable     Code = "unavailable"
	CodeUpstream        Code = "upstream_error"
	CodeInternal        Code = "internal"
)

// Codes are every code above, in the order the document lists them.
var Codes = []Code{CodeInvalidArgument, CodeUnauthenticated, CodeNotFound, CodeConflict, CodePayloadTooLarge,
	CodeRequestTimeout, CodeRateLimited, CodeUnavailable, CodeUpstream, CodeInternal}

// BadRequest is an invalid argument, naming the field that holds it.
func BadRequest(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

// CheckText refuses a value Postgres cannot store as text: NUL bytes, or
// bytes that are not UTF-8 (query strings can carry both, percent-encoded).
func CheckText(field, v string) error {
	switch {
	case strings.ContainsRune(v, 0):
		return BadRequest(field, "must not contain NUL bytes")
	case !utf8.ValidString(v):
		return BadRequest(field, "must be valid UTF-8")
	}
	return nil
}

// NotFound says that what was asked for does not exist for the caller.
func NotFound(what string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: what + " not found"}
}

// Unavailable marks a failure of a dependency (queue, database) that a
// retry may fix.
func Unavailable(format string, args ...any) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: fmt.Sprintf(format, args...), RetryAfter: 1}
}

// ToError maps any error to what the caller sees. It is the one place that
// decides codes (and status codes); errors it does not know are internal
// and their text is not shown.
func ToError(err error) (e *Error, internal bool) {
	var apiErr *Error
	var fieldErr *jobs.FieldError
	var maxErr *http.MaxBytesError
	var skillErr *skills.Error
	var cmErr *codemode.Error
	var upErr *codemode.UpstreamError
	var budgetErr *membudget.Error
	var uncertain *UncertainJob
	switch {
	case errors.As(err, &uncertain):
		return Unavailable("recording job %s failed after it was queued, and it may run all the same: "+
			"look it up (GET /v1/jobs/%s), or retry with an idempotency key", uncertain.JobID, uncertain.JobID), true
	case errors.As(err, &budgetErr):
		return bufferError(budgetErr), false
	case errors.As(err, &cmErr):
		e := &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Message: cmErr.Message}
		switch cmErr.Code {
		case codemode.CodeUnknownServer, codemode.CodeUnknownTool:
			e.Status, e.Code = http.StatusNotFound, CodeNotFound
		case codemode.CodeUnavailable:
			e.Status, e.Code = http.StatusServiceUnavailable, CodeUnavailable
		case codemode.CodeUpstreamError:
			e.Status, e.Code = http.StatusBadGateway, CodeUpstream
		case codemode.CodeTimeout:
			e.Status, e.Code = http.StatusGatewayTimeout, CodeUpstream
		}
		return e, false
	case errors.As(err, &upErr):
		return &Error{Status: http.StatusBadGateway, Code: CodeUpstream, Message: codemode.UpstreamMessage(err)}, false
	case errors.As(err, &apiErr):
		return apiErr, false
	case errors.As(err, &maxErr):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge,
			Message: fmt.Sprintf("request body is larger than %d bytes", maxErr.Limit)}, false
	case errors.As(err, &fieldErr):
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Field: fieldErr.Field, Message: fieldErr.Error()}, false
	case errors.As(err, &skillErr):
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Field: skillErr.Field, Message: "invalid skill: " + skillErr.Error()}, false
	case errors.Is(err, store.ErrBuiltinSkill):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: err.Error()}, false
	case errors.Is(err, store.ErrNotFound), errors.Is(err, codemode.ErrNotFound):
		return NotFound("object"), false
	case blob.Down(err):
		// Before the database's case: a network error looks the same.
		return Unavailable("the object store is unavailable; retry later"), false
	case store.Unavailable(err):
		return Unavailable("the database is unavailable; retry later"), false
	case store.Unstorable(err):
		// A field without its own check let through text Postgres refuses.
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument,
			Message: "the request holds text that cannot be stored: NUL bytes or invalid UTF-8"}, false
	case errors.Is(err, store.ErrConflict), errors.Is(err, codemode.ErrConflict):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: err.Error()}, false
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error; see the server log"}, true
}
