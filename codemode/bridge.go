package codemode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// Bridge limits that do not depend on the job.
const (
	// MaxRequestBytes caps one request from the sandbox.
	MaxRequestBytes = 1 << 20
	// maxInFlight caps a job's concurrent upstream calls; more wait.
	maxInFlight = 8
	// maxDiscovery caps a job's discovery requests (search, servers,
	// tools, describe): they cost a database query each.
	maxDiscovery = 1000
	// maxRecorded caps how many calls a job's history keeps.
	maxRecorded = 1000
)

// Bridge serves one job's requests from its sandbox. It is safe for
// concurrent use: code may make calls from several threads at once.
type Bridge struct {
	reg      *Registry
	tenantID string
	budget   int
	// Detokenize, when set, turns privacy tokens in call arguments back
	// into the values they stand for.
	Detokenize func(ctx context.Context, s string) (string, error)

	slots chan struct{}

	mu        sync.Mutex
	calls     []jobs.ToolCall
	used      int
	discovery int
	dropped   int
}

// NewBridge returns the bridge for one job of tenantID allowed budget
// upstream calls.
func (r *Registry) NewBridge(tenantID string, budget int) *Bridge {
	return &Bridge{reg: r, tenantID: tenantID, budget: budget, slots: make(chan struct{}, maxInFlight)}
}

// Calls returns the calls made so far, in the order they started.
func (b *Bridge) Calls() []jobs.ToolCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]jobs.ToolCall(nil), b.calls...)
}

// request is what the sandbox's client library sends.
type request struct {
	Op     string          `json:"op"`
	Query  string          `json:"query"`
	Detail string          `json:"detail"`
	Limit  int             `json:"limit"`
	Server string          `json:"server"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
}

type response struct {
	OK     bool   `json:"ok"`
	Result any    `json:"result,omitempty"`
	Error  *Error `json:"error,omitempty"`
}

// Handle answers one request from the sandbox with the response to send
// back. It never fails: every problem becomes an error response the code
// raises as an exception. ctx bounds the job; each upstream call is also
// bounded by its server's timeout.
func (b *Bridge) Handle(ctx context.Context, raw []byte) []byte {
	res, err := b.handle(ctx, raw)
	var out response
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = errorf(CodeUnavailable, "gantry could not answer: %v", err)
			b.reg.log.Warn("code-mode bridge request failed", "tenant_id", b.tenantID, "err", err)
		}
		out.Error = e
	} else {
		out.OK, out.Result = true, res
	}
	data, err := json.Marshal(out)
	if err != nil {
		data, _ = json.Marshal(response{Error: errorf(CodeUnavailable, "gantry could not encode the answer: %v", err)})
	}
	return data
}

func (b *Bridge) handle(ctx context.Context, raw []byte) (any, error) {
	if len(raw) > MaxRequestBytes {
		return nil, errorf(CodeTooLarge, "the request is %d bytes; at most %d are accepted", len(raw), MaxRequestBytes)
	}
	var req request
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, errorf(CodeBadRequest, "malformed request: %v", err)
	}
	if req.Op != "call" {
		b.mu.Lock()
		b.discovery++
		over := b.discovery > maxDiscovery
		b.mu.Unlock()
		if over {
			return nil, errorf(CodeBudgetExceeded, "this job made more than %d discovery requests", maxDiscovery)
		}
	}
	if err := b.reg.requireKey(); err != nil {
		return nil, err
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 10
	}
	limit = min(limit, 100)
	switch req.Op {
	case "search":
		return throughOutage(ctx, func() ([]ToolInfo, error) { return b.reg.Search(ctx, b.tenantID, req.Query, req.Detail, limit) })
	case "servers":
		return throughOutage(ctx, func() ([]serverInfo, error) { return b.servers(ctx) })
	case "tools":
		return throughOutage(ctx, func() ([]ToolInfo, error) { return b.reg.Tools(ctx, b.tenantID, req.Server, req.Detail) })
	case "describe":
		return throughOutage(ctx, func() (ToolInfo, error) { return b.reg.Describe(ctx, b.tenantID, req.Server, req.Tool) })
	case "call":
		return b.call(ctx, req)
	default:
		return nil, errorf(CodeBadRequest, "unknown op %q (search, servers, tools, describe, call)", req.Op)
	}
}

// throughOutage runs a read that needs the database and, while the database
// is unavailable (an outage or a restart), tries it again with backoff for
// as long as the job lives: a program that asks during a short outage
// waits for the answer instead of failing on an error it could not cause.
// Only reads go through it; nothing is called upstream twice.
func throughOutage[T any](ctx context.Context, read func() (T, error)) (T, error) {
	wait := 100 * time.Millisecond
	for {
		v, err := read()
		if err == nil || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

type serverInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Transport   string `json:"transport"`
	Tools       int    `json:"tools"`
}

func (b *Bridge) servers(ctx context.Context) ([]serverInfo, error) {
	ms, err := b.reg.st.ListMCPServers(ctx, b.tenantID)
	if err != nil {
		return nil, err
	}
	out := make([]serverInfo, 0, len(ms))
	for _, m := range ms {
		out = append(out, serverInfo{Name: m.Name, Description: m.Description, Transport: m.Transport, Tools: m.ToolCount})
	}
	return out, nil
}

// call makes one upstream call and records it.
func (b *Bridge) call(ctx context.Context, req request) (res any, err error) {
	rec := jobs.ToolCall{Server: req.Server, Tool: req.Tool, StartedAt: time.Now().UTC(), BytesIn: len(req.Args)}
	defer func() {
		rec.DurationMS = time.Since(rec.StartedAt).Milliseconds()
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				rec.Status, rec.Error = e.Code, e.Message
			} else {
				rec.Status, rec.Error = CodeUnavailable, "gantry could not make the call"
			}
		} else {
			rec.Status = "ok"
		}
		b.record(rec)
	}()

	if req.Server == "" || req.Tool == "" {
		return nil, errorf(CodeBadRequest, "call needs a server and a tool")
	}
	b.mu.Lock()
	b.used++
	over := b.used > b.budget
	b.mu.Unlock()
	if over {
		return nil, errorf(CodeBudgetExceeded, "this job may make %d tool calls (limits.tool_calls) and has used them all", b.budget)
	}
	var args map[string]any
	if len(req.Args) > 0 && string(req.Args) != "null" {
		if err := json.Unmarshal(req.Args, &args); err != nil {
			return nil, errorf(CodeBadRequest, "args must be a JSON object")
		}
		if b.Detokenize != nil {
			// Each try starts from the arguments as sent: detokenizeValue
			// replaces values in place.
			v, err := throughOutage(ctx, func() (any, error) {
				var fresh map[string]any
				_ = json.Unmarshal(req.Args, &fresh) // decoded above
				return detokenizeValue(ctx, fresh, b.Detokenize)
			})
			if err != nil {
				return nil, err
			}
			args = v.(map[string]any)
		}
	}
	m, err := throughOutage(ctx, func() (ServerRecord, error) { return b.reg.server(ctx, b.tenantID, req.Server) })
	if err != nil {
		return nil, err
	}
	if _, err := throughOutage(ctx, func() (Tool, error) { return b.reg.tool(ctx, m, req.Tool) }); err != nil {
		return nil, err
	}
	sec, err := b.reg.open(m)
	if err != nil {
		return nil, err
	}

	select {
	case b.slots <- struct{}{}:
		defer func() { <-b.slots }()
	case <-ctx.Done():
		return nil, errorf(CodeTimeout, "the job ended before the call could start")
	}
	timeout := time.Duration(m.TimeoutMS) * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := b.reg.up.call(cctx, m, sec, req.Tool, args)
	switch {
	case err != nil && cctx.Err() != nil && ctx.Err() == nil:
		return nil, errorf(CodeTimeout, "%s.%s did not answer within %s (the server's timeout_ms)", m.Name, req.Tool, timeout)
	case err != nil && ctx.Err() != nil:
		return nil, errorf(CodeTimeout, "the job ended while %s.%s was running", m.Name, req.Tool)
	case err != nil:
		return nil, errorf(CodeUpstreamError, "%s", UpstreamMessage(err))
	}
	size := len(out.Content) + len(out.Structured)
	rec.BytesOut = size
	if size > b.reg.cfg.MaxResultBytes {
		return nil, errorf(CodeTooLarge, "%s.%s returned %d bytes; at most %d are passed to the sandbox", m.Name, req.Tool, size, b.reg.cfg.MaxResultBytes)
	}
	if out.IsError {
		return nil, errorf(CodeToolError, "%s", out.errorText())
	}
	return out, nil
}

// UpstreamMessage describes a failed upstream call without quoting
// anything that may hold a credential (the library's errors can include
// the request URL).
func UpstreamMessage(err error) string {
	var ue *UpstreamError
	if errors.As(err, &ue) {
		msg := ue.Err.Error()
		if errors.Is(err, errResponseTooLarge) {
			msg = errResponseTooLarge.Error()
		}
		return fmt.Sprintf("MCP server %q failed: %s", ue.Server, redactURLs(msg))
	}
	return redactURLs(err.Error())
}

// redactURLs cuts query strings out of URLs quoted in a message.
func redactURLs(s string) string {
	var out strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			out.WriteString(s)
			return out.String()
		}
		end := i + 3 + strings.IndexAny(s[i+3:]+" ", " \"'\n")
		u := s[:end]
		if q := strings.IndexAny(u[i:], "?#"); q >= 0 {
			u = u[:i+q] + "?…"
		}
		if at := strings.LastIndex(u[i:], "@"); at >= 0 {
			u = u[:i+3] + "…@" + u[i+at+1:]
		}
		out.WriteString(u)
		s = s[end:]
	}
}

func (b *Bridge) record(c jobs.ToolCall) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.calls) >= maxRecorded {
		b.dropped++
		return
	}
	b.calls = append(b.calls, c)
}

// detokenizeValue applies detok to every string in a decoded JSON value.
func detokenizeValue(ctx context.Context, v any, detok func(context.Context, string) (string, error)) (any, error) {
	switch x := v.(type) {
	case string:
		return detok(ctx, x)
	case map[string]any:
		for k, e := range x {
			d, err := detokenizeValue(ctx, e, detok)
			if err != nil {
				return nil, err
			}
			x[k] = d
		}
	case []any:
		for i, e := range x {
			d, err := detokenizeValue(ctx, e, detok)
			if err != nil {
				return nil, err
			}
			x[i] = d
		}
	}
	return v, nil
}
