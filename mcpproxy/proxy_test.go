package mcpproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/mcpproxy"
)

// upstream is a real MCP server over streamable HTTP (with transport
// sessions, as gantry's /mcp has for older clients) that records the
// methods it receives in arrival order and the headers they carried.
type upstream struct {
	url string

	mu       sync.Mutex
	methods  []string
	toolsets []string
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	s := server.NewMCPServer("upstream", "1", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("echo", mcp.WithString("text", mcp.Required())), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("echo: " + req.GetString("text", "")), nil
	})
	s.AddTool(mcp.NewTool("sleep"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
		return mcp.NewToolResultText("woke"), nil
	})
	h := server.NewStreamableHTTPServer(s)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var m struct{ Method string }
			_ = json.Unmarshal(body, &m)
			u.mu.Lock()
			u.methods = append(u.methods, m.Method)
			u.toolsets = append(u.toolsets, r.Header.Get("X-MCP-Toolsets"))
			u.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u.url = ts.URL + "/mcp"
	return u
}

// answers runs the proxy over input and returns its answers by id.
func answers(t *testing.T, p *mcpproxy.Proxy, in io.Reader) map[string]json.RawMessage {
	t.Helper()
	got, err := runProxy(p, in)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// runProxy is answers for a goroutine other than the test's: it reports
// instead of failing the test.
func runProxy(p *mcpproxy.Proxy, in io.Reader) (map[string]json.RawMessage, error) {
	var out bytes.Buffer
	if err := p.Run(context.Background(), in, &out); err != nil {
		return nil, err
	}
	got := map[string]json.RawMessage{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			return nil, fmt.Errorf("not JSON-RPC: %s", l)
		}
		got[string(m.ID)] = json.RawMessage(l)
	}
	return got, nil
}

const (
	initialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// TestPipelinedMessages: a client that writes initialize, the initialized
// notification and its calls at once gets every answer, never "Invalid
// session ID", and the server sees initialize first and the notification
// before the calls.
func TestPipelinedMessages(t *testing.T) {
	for i := range 20 {
		u := newUpstream(t)
		input := strings.Join([]string{initialize, initialized,
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}}`,
		}, "\n") + "\n"
		got := answers(t, &mcpproxy.Proxy{Endpoint: u.url, APIKey: "k", Toolsets: "code"}, strings.NewReader(input))
		for id, want := range map[string]string{"1": `"protocolVersion":"2025-06-18"`, "2": "echo: a", "3": `"name":"sleep"`, "4": "echo: b"} {
			if !strings.Contains(string(got[id]), want) || strings.Contains(string(got[id]), `"error"`) {
				t.Fatalf("run %d: answer to %s: %s", i, id, got[id])
			}
		}
		u.mu.Lock()
		if len(u.methods) < 5 || u.methods[0] != "initialize" || u.methods[1] != "notifications/initialized" {
			t.Fatalf("run %d: the server saw %v", i, u.methods)
		}
		for _, ts := range u.toolsets {
			if ts != "code" {
				t.Fatalf("X-MCP-Toolsets %q", ts)
			}
		}
		u.mu.Unlock()
	}
}

// TestCancelOvertakesACall: requests still run concurrently after
// initialize, so a cancellation aborts a long call and a later call is
// answered while it runs.
func TestCancelOvertakesACall(t *testing.T) {
	u := newUpstream(t)
	pr, pw := io.Pipe()
	type ran struct {
		got map[string]json.RawMessage
		err error
	}
	done := make(chan ran)
	go func() {
		got, err := runProxy(&mcpproxy.Proxy{Endpoint: u.url, APIKey: "k"}, pr)
		done <- ran{got, err}
	}()
	write := func(s string) {
		if _, err := io.WriteString(pw, s+"\n"); err != nil {
			t.Error(err)
		}
	}
	write(initialize)
	write(initialized)
	write(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"sleep"}}`)
	write(`{"jsonrpc":"2.0","id":"fast","method":"tools/call","params":{"name":"echo","arguments":{"text":"c"}}}`)
	// Wait until the server has the slow call, then cancel it.
	eventually.True(t, 10*time.Second, "the calls to reach the server", func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		return len(u.methods) >= 4
	})
	start := time.Now()
	write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow"}}`)
	pw.Close()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		got := r.got
		if !strings.Contains(string(got[`"fast"`]), "echo: c") {
			t.Errorf("fast call: %s", got[`"fast"`])
		}
		if _, ok := got[`"slow"`]; ok {
			t.Errorf("the cancelled call was answered: %s", got[`"slow"`])
		}
		if time.Since(start) > 30*time.Second {
			t.Error("the cancellation did not end the call")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy did not end: the cancellation did not abort the call")
	}
}
