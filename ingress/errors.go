package ingress

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/store"
)

// APIError is the error body every failed request gets:
// {"error": {"code": ..., "message": ..., "field": ...}}.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Type is OpenAI's error type, set on the answers of the agent's
	// OpenAI-compatible route only, so that OpenAI SDKs read them.
	Type string `json:"type,omitempty"`
	// RetryAfter, in seconds, is sent as the Retry-After header.
	RetryAfter int `json:"-"`
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// Error codes of the HTTP API.
const (
	CodeInvalidArgument = "invalid_argument"
	CodeUnauthenticated = "unauthenticated"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodePayloadTooLarge = "payload_too_large"
	CodeRequestTimeout  = "request_timeout"
	CodeRateLimited     = "rate_limited"
	CodeUnavailable     = "unavailable"
	CodeUpstream        = "upstream_error"
	CodeInternal        = "internal"
)

// apiErrorCodes are every code above, in the order the document lists
// them.
var apiErrorCodes = []string{CodeInvalidArgument, CodeUnauthenticated, CodeNotFound, CodeConflict, CodePayloadTooLarge,
	CodeRequestTimeout, CodeRateLimited, CodeUnavailable, CodeUpstream, CodeInternal}

func badRequest(field, format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

// checkText refuses a value Postgres cannot store as text: NUL bytes, or
// bytes that are not UTF-8 (query strings can carry both, percent-encoded).
func checkText(field, v string) error {
	switch {
	case strings.ContainsRune(v, 0):
		return badRequest(field, "must not contain NUL bytes")
	case !utf8.ValidString(v):
		return badRequest(field, "must be valid UTF-8")
	}
	return nil
}

func notFound(what string) *APIError {
	return &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Message: what + " not found"}
}

// unavailable marks a failure of a dependency (queue, database) that a
// retry may fix.
func unavailable(format string, args ...any) *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: fmt.Sprintf(format, args...), RetryAfter: 1}
}

// toAPIError maps any error to what the client sees. It is the one place
// that decides status codes; errors it does not know are internal and their
// text is not shown.
func toAPIError(err error) (e *APIError, internal bool) {
	var apiErr *APIError
	var fieldErr *jobs.FieldError
	var maxErr *http.MaxBytesError
	var skillErr *skills.Error
	var cmErr *codemode.Error
	var upErr *codemode.UpstreamError
	switch {
	case errors.As(err, &cmErr):
		e := &APIError{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Message: cmErr.Message}
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
		return &APIError{Status: http.StatusBadGateway, Code: CodeUpstream, Message: codemode.UpstreamMessage(err)}, false
	case errors.As(err, &apiErr):
		return apiErr, false
	case errors.As(err, &maxErr):
		return &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge,
			Message: fmt.Sprintf("request body is larger than %d bytes", maxErr.Limit)}, false
	case errors.As(err, &fieldErr):
		return &APIError{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Field: fieldErr.Field, Message: fieldErr.Error()}, false
	case errors.As(err, &skillErr):
		return &APIError{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Field: skillErr.Field, Message: "invalid skill: " + skillErr.Error()}, false
	case errors.Is(err, store.ErrBuiltinSkill):
		return &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: err.Error()}, false
	case errors.Is(err, store.ErrNotFound), errors.Is(err, codemode.ErrNotFound):
		return notFound("object"), false
	case store.Unavailable(err):
		return unavailable("the database is unavailable; retry later"), false
	case store.Unstorable(err):
		// A field without its own check let through text Postgres refuses.
		return &APIError{Status: http.StatusBadRequest, Code: CodeInvalidArgument,
			Message: "the request holds text that cannot be stored: NUL bytes or invalid UTF-8"}, false
	case errors.Is(err, store.ErrConflict), errors.Is(err, codemode.ErrConflict):
		return &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: err.Error()}, false
	}
	return &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error; see the server log"}, true
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e, internal := toAPIError(err)
	if internal {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Status, errorBody{Error: *e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
