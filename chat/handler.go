package chat

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gantryhq/gantry/localapi"
)

// maxRequestBytes caps a chat-completions request body.
const maxRequestBytes = 4 << 20

// maxMessages caps the messages of one request.
const maxMessages = 500

// Request is a chat-completions request as clients send it. Fields gantry
// does not use (top_p, user, ...) are accepted and ignored, as OpenAI SDKs
// send them. It is only decoded: omitempty marks the fields a client may
// leave out, as the OpenAPI document (reflected from it) says.
type Request struct {
	Model         string    `json:"model,omitempty"`
	Messages      []Message `json:"messages"`
	Stream        bool      `json:"stream,omitempty"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage,omitempty"`
	} `json:"stream_options,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	N                   *int            `json:"n,omitempty"`
	Tools               json.RawMessage `json:"tools,omitempty"`
	// MaxSteps is gantry's: at most this many model calls (never more than
	// the operator's GANTRY_LLM_MAX_STEPS).
	MaxSteps int `json:"max_steps,omitempty"`
}

// RequestError is a request refused before the loop started.
type RequestError struct {
	Field   string
	Message string
}

func (e *RequestError) Error() string { return e.Field + ": " + e.Message }

// DecodeRequest reads and checks a request body.
func DecodeRequest(body []byte) (Request, error) {
	var req Request
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return req, &RequestError{Field: te.Field, Message: "has the wrong type: want " + te.Type.String()}
		}
		return req, &RequestError{Field: "body", Message: "is not a chat-completions request: " + err.Error()}
	}
	if dec.More() {
		return req, &RequestError{Field: "body", Message: "holds more than one JSON value"}
	}
	if len(req.Messages) == 0 {
		return req, &RequestError{Field: "messages", Message: "is required: at least one message"}
	}
	if len(req.Messages) > maxMessages {
		return req, &RequestError{Field: "messages", Message: fmt.Sprintf("has %d messages; at most %d", len(req.Messages), maxMessages)}
	}
	for i, m := range req.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer", "user":
		case "assistant":
			if len(m.ToolCalls) > 0 {
				return req, &RequestError{Field: field + ".tool_calls", Message: "gantry runs its own tools; send the conversation's text only"}
			}
		case "tool":
			return req, &RequestError{Field: field + ".role", Message: `"tool" messages are not accepted: gantry runs its own tools`}
		default:
			return req, &RequestError{Field: field + ".role", Message: fmt.Sprintf("must be system, user or assistant, not %q", m.Role)}
		}
		if m.Role == "developer" {
			req.Messages[i].Role = "system"
		}
		if strings.ContainsRune(string(m.Content), 0) {
			return req, &RequestError{Field: field + ".content", Message: "contains a NUL byte"}
		}
	}
	if t := bytes.TrimSpace(req.Tools); len(t) > 0 && !bytes.Equal(t, []byte("null")) && !bytes.Equal(t, []byte("[]")) {
		return req, &RequestError{Field: "tools", Message: "client-side tools are not supported: the agent brings gantry's own (execute_code, search_skills, ...)"}
	}
	if req.N != nil && *req.N != 1 {
		return req, &RequestError{Field: "n", Message: "must be 1"}
	}
	if req.MaxSteps < 0 {
		return req, &RequestError{Field: "max_steps", Message: "must be positive"}
	}
	if req.MaxTokens == nil {
		req.MaxTokens = req.MaxCompletionTokens
	}
	return req, nil
}

// ServeChatCompletions answers POST /v1/agent/chat/completions for a request
// the ingress has authenticated: the loop acts as the request's tenant by
// calling api with the request's own API key.
func (a *Loop) ServeChatCompletions(w http.ResponseWriter, r *http.Request, api http.Handler) {
	key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large", "body", fmt.Sprintf("the request body is larger than %d bytes", maxRequestBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_argument", "body", "cannot read the request body: "+err.Error())
		return
	}
	req, err := DecodeRequest(body)
	if err != nil {
		var re *RequestError
		errors.As(err, &re)
		writeError(w, http.StatusBadRequest, "invalid_argument", re.Field, re.Field+" "+re.Message)
		return
	}
	client := localapi.New(api, strings.TrimSpace(key))
	opt := Options{MaxSteps: req.MaxSteps, Temperature: req.Temperature, MaxTokens: req.MaxTokens}
	id, created := "chatcmpl-"+rand.Text(), time.Now().Unix()
	start := time.Now()
	log := a.log.With("completion_id", id)
	if !req.Stream {
		run, err := a.Run(r.Context(), client, req.Messages, opt, Sink{})
		if err != nil {
			a.fail(w, log, err)
			return
		}
		log.Info("agent answered", "steps", run.Trace.Steps, "tool_calls", len(run.Trace.ToolCalls), "finish", run.FinishReason, "duration", time.Since(start))
		usage := run.Usage
		trace := run.Trace
		writeJSON(w, http.StatusOK, Completion{
			ID: id, Object: "chat.completion", Created: created, Model: a.cfg.Model,
			Choices: []Choice{{Message: Message{Role: "assistant", Content: Content(run.Content)}, FinishReason: run.FinishReason}},
			Usage:   &usage, Gantry: &trace,
		})
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(v any) {
		b, _ := json.Marshal(v)
		_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
		_ = rc.Flush()
	}
	chunk := func(d Delta, finish *string, ev *Event) Chunk {
		return Chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: a.cfg.Model,
			Choices: []ChunkChoice{{Delta: d, FinishReason: finish}}, Gantry: ev}
	}
	send(chunk(Delta{Role: "assistant"}, nil, nil))
	run, err := a.Run(r.Context(), client, req.Messages, opt, Sink{
		Text:  func(s string) { send(chunk(Delta{Content: s}, nil, nil)) },
		Event: func(ev Event) { send(chunk(Delta{}, nil, &ev)) },
	})
	if err != nil {
		if r.Context().Err() != nil {
			return // the client left
		}
		code, msg := failure(err)
		logFailure(log, err, msg)
		send(map[string]any{"error": map[string]string{"code": code, "message": msg, "type": "server_error"}})
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
		return
	}
	log.Info("agent answered", "steps", run.Trace.Steps, "tool_calls", len(run.Trace.ToolCalls), "finish", run.FinishReason, "duration", time.Since(start))
	finish := run.FinishReason
	send(chunk(Delta{}, &finish, nil))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		usage := run.Usage
		send(Chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: a.cfg.Model, Choices: []ChunkChoice{}, Usage: &usage})
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// fail answers a request whose loop failed before anything was sent.
func (a *Loop) fail(w http.ResponseWriter, log interface{ Warn(string, ...any) }, err error) {
	code, msg := failure(err)
	logFailure(log, err, msg)
	status := http.StatusServiceUnavailable
	if code == "internal" {
		status = http.StatusInternalServerError
	}
	writeError(w, status, code, "", msg)
}

// logFailure logs a failed request: what the client was told, and what
// it was not (the model server's own error).
func logFailure(log interface{ Warn(string, ...any) }, err error, msg string) {
	if me := (*ModelError)(nil); errors.As(err, &me) && me.Detail != "" {
		log.Warn("agent failed", "err", msg, "detail", me.Detail)
		return
	}
	log.Warn("agent failed", "err", msg)
}

// failure maps a loop error to an API error code and message.
func failure(err error) (code, msg string) {
	if isModelError(err) {
		return "unavailable", err.Error()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "unavailable", "the request ended before the agent answered"
	}
	return "internal", "the agent failed: " + err.Error()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes gantry's error body, with OpenAI's "type" beside the
// code so that OpenAI SDKs read it too.
func writeError(w http.ResponseWriter, status int, code, field, msg string) {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	e := map[string]string{"code": code, "message": msg, "type": typ}
	if field != "" {
		e["field"] = field
	}
	writeJSON(w, status, map[string]any{"error": e})
}
