// Package mcpproxy serves MCP over stdio by forwarding every message to a
// remote gantry's streamable HTTP endpoint (/mcp), so that clients that only
// speak stdio can use a shared gantry. It is protocol-agnostic: it relays
// JSON-RPC messages as they are, whatever tools the server offers.
package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
)

// Proxy relays one stdio MCP client to a remote endpoint.
type Proxy struct {
	// Endpoint is the remote MCP URL, e.g. https://gantry.example.com/mcp.
	Endpoint string
	// APIKey is sent as a bearer token.
	APIKey string
	// Toolsets, when set, is sent as the X-MCP-Toolsets header: the groups
	// of tools the client sees (e.g. "code").
	Toolsets string
	Client   *http.Client
	Log      *slog.Logger

	out sync.Mutex
	w   io.Writer

	mu        sync.Mutex
	sessionID string
	version   string
	inflight  map[string]context.CancelFunc
}

// message is the part of a JSON-RPC message the proxy looks at.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
}

func (m message) isRequest() bool { return len(m.ID) > 0 && m.Method != "" }

// maxMessage bounds one message from the client.
const maxMessage = 64 << 20

// line is one message read from the client.
type line struct {
	raw []byte
	msg message
}

// Run relays messages from in to the endpoint and answers on out until in
// ends or ctx is done.
//
// Messages are sent in the order the client wrote them, however fast it
// writes (a client may pipeline initialize, notifications/initialized and a
// call without waiting): initialize is answered before anything after it is
// sent, so every later request carries the session id and protocol version
// it set, and each notification is delivered before what follows it.
// Requests then run concurrently, so a long call does not hold up the
// others and a cancellation can overtake the call it cancels.
func (p *Proxy) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	if p.Client == nil {
		p.Client = http.DefaultClient
	}
	if p.Log == nil {
		p.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p.w = out
	p.inflight = map[string]context.CancelFunc{}

	lines := make(chan line, 256)
	readErr := make(chan error, 1)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), maxMessage)
		for sc.Scan() {
			raw := bytes.TrimSpace(sc.Bytes())
			if len(raw) == 0 {
				continue
			}
			var m message
			if err := json.Unmarshal(raw, &m); err != nil {
				p.write(errorResponse(nil, -32700, "parse error: "+err.Error()))
				continue
			}
			if m.Method == "notifications/cancelled" {
				// At once, even while earlier messages wait their turn: the
				// call it names may be the one holding them up.
				p.cancelInflight(m.Params)
			}
			select {
			case lines <- line{append([]byte(nil), raw...), m}:
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()

	var wg sync.WaitGroup
	for l := range lines {
		switch {
		case l.msg.Method == "initialize":
			p.forward(ctx, l.raw, l.msg, p.track(ctx, l.msg))
		case l.msg.Method != "" && len(l.msg.ID) == 0: // a notification
			if l.msg.Method == "notifications/cancelled" {
				p.cancelInflight(l.msg.Params) // a call dispatched since it was read
			}
			p.forward(ctx, l.raw, l.msg, nil)
		default: // a request, or the client's answer to a server's request
			rctx := p.track(ctx, l.msg)
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.forward(ctx, l.raw, l.msg, rctx)
			}()
		}
	}
	wg.Wait()
	p.closeSession()
	var err error
	select {
	case err = <-readErr:
	default: // ctx ended the reader
	}
	if err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	return nil
}

// tracked is a request in flight: its context, and the cleanup that ends
// it.
type tracked struct {
	ctx  context.Context
	done func()
}

// track registers a request before it is sent, so that a cancellation read
// at any later moment finds it. It returns nil for anything else.
func (p *Proxy) track(ctx context.Context, m message) *tracked {
	if !m.isRequest() {
		return nil
	}
	rctx, cancel := context.WithCancel(ctx)
	key := string(m.ID)
	p.mu.Lock()
	p.inflight[key] = cancel
	p.mu.Unlock()
	return &tracked{ctx: rctx, done: func() {
		cancel()
		p.mu.Lock()
		delete(p.inflight, key)
		p.mu.Unlock()
	}}
}

func (p *Proxy) forward(ctx context.Context, body []byte, m message, tr *tracked) {
	if tr != nil {
		ctx = tr.ctx
		defer tr.done()
	}
	isRequest := m.isRequest()
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		p.Log.Warn("forward", "method", m.Method, "err", msg)
		if isRequest {
			p.write(errorResponse(m.ID, -32603, msg))
		}
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Endpoint, bytes.NewReader(body))
	if err != nil {
		fail("bad GANTRY_URL: %v", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+p.APIKey)
	if p.Toolsets != "" {
		req.Header.Set("X-MCP-Toolsets", p.Toolsets)
	}
	p.mu.Lock()
	if p.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", p.sessionID)
	}
	if p.version != "" {
		req.Header.Set("Mcp-Protocol-Version", p.version)
	}
	p.mu.Unlock()

	resp, err := p.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return // cancelled by the client: it expects no answer
		}
		fail("cannot reach gantry at %s: %v", p.Endpoint, err)
		return
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		p.mu.Lock()
		p.sessionID = sid
		p.mu.Unlock()
	}
	switch {
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent:
		return
	case resp.StatusCode >= 300:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if isJSONRPC(b) {
			p.write(b)
			return
		}
		fail("gantry at %s answered %d: %s", p.Endpoint, resp.StatusCode, apiErrorMessage(b))
		return
	}
	ctype := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ctype, "text/event-stream") {
		err = readSSE(resp.Body, func(data []byte) {
			if ctx.Err() != nil {
				return // cancelled by the client: the answer may race it
			}
			p.noteVersion(m, data)
			p.write(data)
		})
		if err != nil && ctx.Err() == nil {
			fail("reading the answer from gantry: %v", err)
		}
		return
	}
	b, err := io.ReadAll(resp.Body)
	if ctx.Err() != nil {
		return // cancelled by the client: it expects no answer, even one that raced the cancellation
	}
	if err != nil {
		fail("reading the answer from gantry: %v", err)
		return
	}
	if len(bytes.TrimSpace(b)) > 0 {
		p.noteVersion(m, b)
		p.write(b)
	}
}

// noteVersion remembers the protocol version the server chose in its answer
// to initialize; later requests carry it in the Mcp-Protocol-Version header.
func (p *Proxy) noteVersion(m message, answer []byte) {
	if m.Method != "initialize" {
		return
	}
	var r struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(answer, &r) == nil && r.Result.ProtocolVersion != "" {
		p.mu.Lock()
		p.version = r.Result.ProtocolVersion
		p.mu.Unlock()
	}
}

// cancelInflight aborts the HTTP request of a cancelled call: on protocol
// versions without transport sessions that is how the server learns of it.
func (p *Proxy) cancelInflight(params json.RawMessage) {
	var c struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &c) != nil || len(c.RequestID) == 0 {
		return
	}
	p.mu.Lock()
	cancel := p.inflight[string(c.RequestID)]
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (p *Proxy) closeSession() {
	p.mu.Lock()
	sid := p.sessionID
	p.mu.Unlock()
	if sid == "" {
		return
	}
	req, err := http.NewRequest(http.MethodDelete, p.Endpoint, nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+p.APIKey)
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, err := p.Client.Do(req); err == nil {
		resp.Body.Close()
	}
}

// write sends one message to the client, on one line.
func (p *Proxy) write(msg []byte) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, msg); err != nil {
		return
	}
	buf.WriteByte('\n')
	p.out.Lock()
	defer p.out.Unlock()
	_, _ = p.w.Write(buf.Bytes())
}

// readSSE calls fn with the data of each event in an event stream.
func readSSE(r io.Reader, fn func([]byte)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxMessage)
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if data.Len() > 0 {
				fn(data.Bytes())
				data.Reset()
			}
		case bytes.HasPrefix(line, []byte("data:")):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.Write(bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" ")))
			if data.Len() > maxMessage {
				return fmt.Errorf("an event of the stream is over %d bytes", maxMessage)
			}
		}
	}
	if data.Len() > 0 {
		fn(data.Bytes())
	}
	if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func isJSONRPC(b []byte) bool {
	var m struct {
		JSONRPC string `json:"jsonrpc"`
	}
	return json.Unmarshal(b, &m) == nil && m.JSONRPC == "2.0"
}

// apiErrorMessage extracts the message of a gantry API error body.
func apiErrorMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return strings.TrimSpace(string(b))
}

func errorResponse(id json.RawMessage, code int, msg string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": msg},
	})
	return b
}
