package codemode

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// The tool-list protocol between a process that cannot start stdio servers
// (an ingress) and runners, which can: a core NATS request on SubjectTools,
// answered by one runner of the queue group. The request carries the
// server's record with its credentials sealed (runners hold the same
// GANTRY_SECRET_KEY); the answer is the tool list, gzipped.
const (
	// SubjectTools is where runners answer tool-list requests.
	SubjectTools = "gantry.mcp.tools"
	toolsQueue   = "runners"
	// launchAllowance is what a stdio server's timeout grows by for its
	// sandbox to start.
	launchAllowance = 20 * time.Second
	// maxProbes is how many tool-list requests one runner serves at once.
	maxProbes = 4
)

// toolsRequest is a server to list the tools of: what a runner needs of
// its record, credentials sealed.
type toolsRequest struct {
	TenantID     string   `json:"tenant_id"`
	Name         string   `json:"name"`
	Command      []string `json:"command"`
	SecretSealed []byte   `json:"secret_sealed"`
	AllowTools   []string `json:"allow_tools,omitempty"`
	DenyTools    []string `json:"deny_tools,omitempty"`
	TimeoutMS    int      `json:"timeout_ms"`
	Version      int      `json:"version"`
}

func (q toolsRequest) record() ServerRecord {
	return ServerRecord{TenantID: q.TenantID, Name: q.Name, Transport: "stdio", Command: q.Command,
		SecretSealed: q.SecretSealed, AllowTools: q.AllowTools, DenyTools: q.DenyTools, TimeoutMS: q.TimeoutMS, Version: q.Version}
}

type toolsReply struct {
	Tools []Tool `json:"tools"`
	Error string `json:"error,omitempty"`
}

// RemoteTools asks a runner for a stdio server's tools.
type RemoteTools struct{ nc *nats.Conn }

// NewRemoteTools returns a RemoteTools that asks over nc.
func NewRemoteTools(nc *nats.Conn) *RemoteTools { return &RemoteTools{nc: nc} }

// list asks a runner to start m in a sandbox and list its tools.
func (r *RemoteTools) list(ctx context.Context, m ServerRecord) ([]Tool, error) {
	if r == nil {
		return nil, errNoLauncher
	}
	req, err := json.Marshal(toolsRequest{TenantID: m.TenantID, Name: m.Name, Command: m.Command, SecretSealed: m.SecretSealed,
		AllowTools: m.AllowTools, DenyTools: m.DenyTools, TimeoutMS: m.TimeoutMS, Version: m.Version})
	if err != nil {
		return nil, err
	}
	msg, err := r.nc.RequestWithContext(ctx, SubjectTools, req)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, errorf(CodeUnavailable, "no runner is running: stdio MCP servers start on runners, in sandbox containers; retry when one is up")
	case errors.Is(err, context.DeadlineExceeded):
		return nil, &UpstreamError{Server: m.Name, Err: errors.New("no answer in time from the runner starting it")}
	case err != nil:
		return nil, errorf(CodeUnavailable, "could not ask a runner to start the server: %v", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(msg.Data))
	if err != nil {
		return nil, fmt.Errorf("tool list from a runner: %w", err)
	}
	var rep toolsReply
	if err := json.NewDecoder(io.LimitReader(zr, 256<<20)).Decode(&rep); err != nil {
		return nil, fmt.Errorf("tool list from a runner: %w", err)
	}
	if rep.Error != "" {
		return nil, &UpstreamError{Server: m.Name, Err: errors.New(rep.Error)}
	}
	for i := range rep.Tools {
		rep.Tools[i].Server, rep.Tools[i].Allowed = m.Name, Allowed(m, rep.Tools[i].Name)
	}
	return rep.Tools, nil
}

// ServeTools answers tool-list requests with reg, whose Launcher starts
// each server, until stop is called; stop waits for the requests in
// flight, whose context is ctx. A runner serves them.
func ServeTools(ctx context.Context, nc *nats.Conn, reg *Registry, log *slog.Logger) (stop func(), err error) {
	if reg.cfg.Launcher == nil {
		return nil, errNoLauncher
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxProbes)
	sub, err := nc.QueueSubscribe(SubjectTools, toolsQueue, func(msg *nats.Msg) {
		select {
		case slots <- struct{}{}:
		default:
			reply(nc, msg, toolsReply{Error: "the runner is busy starting other MCP servers; retry"}, log)
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			reply(nc, msg, reg.serveTools(ctx, msg.Data), log)
		}()
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", SubjectTools, err)
	}
	// The server knows of the subscription when ServeTools returns: a
	// request sent after it finds this runner.
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe %s: %w", SubjectTools, err)
	}
	return func() { _ = sub.Unsubscribe(); wg.Wait() }, nil
}

func (r *Registry) serveTools(ctx context.Context, data []byte) toolsReply {
	var q toolsRequest
	if err := json.Unmarshal(data, &q); err != nil || q.TenantID == "" || len(q.Command) == 0 {
		return toolsReply{Error: "malformed request"}
	}
	m := q.record()
	sec, err := r.open(m)
	if err != nil {
		return toolsReply{Error: "the runner could not open the server's sealed settings (do the ingress and the runners share GANTRY_SECRET_KEY?)"}
	}
	tools, err := r.probeHere(ctx, m, sec)
	if err != nil {
		return toolsReply{Error: UpstreamMessage(err)}
	}
	return toolsReply{Tools: tools}
}

func reply(nc *nats.Conn, msg *nats.Msg, rep toolsReply, log *slog.Logger) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(rep); err != nil || zw.Close() != nil {
		return
	}
	if size, max := int64(buf.Len()), nc.MaxPayload(); size > max {
		buf.Reset()
		zw = gzip.NewWriter(&buf)
		_ = json.NewEncoder(zw).Encode(toolsReply{Error: fmt.Sprintf("its tool list is too large to hand over (%d bytes compressed, at most %d)", size, max)})
		_ = zw.Close()
	}
	if err := msg.Respond(buf.Bytes()); err != nil {
		log.Warn("answer a tool-list request", "err", err)
	}
}
