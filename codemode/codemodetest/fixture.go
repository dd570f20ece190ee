// Package codemodetest gives tests real upstream MCP servers, written with
// the MCP library and served over streamable HTTP or stdio: a small CRM
// (customers and orders) and a billing server, plus tools that misbehave
// (hang, fail, flood, return garbage) and enough filler tools to make
// discovery matter.
package codemodetest

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Token is the credential the fixture servers require
// ("Authorization: Bearer <Token>" over HTTP, CRM_TOKEN over stdio). Tests
// check that it never reaches a sandbox.
const Token = "crm-secret-7f3a9c1e5b"

// Customers and orders of the CRM fixture.
var (
	Customers = []map[string]any{
		{"id": 1, "name": "Ada Lovelace", "email": "ada@example.com", "phone": "+44 20 7946 0958", "tier": "gold"},
		{"id": 2, "name": "Grace Hopper", "email": "grace@example.com", "phone": "+1 202-555-0143", "tier": "silver"},
		{"id": 3, "name": "Alan Turing", "email": "alan@example.com", "phone": "+44 161 496 0000", "tier": "gold"},
	}
	Orders = []map[string]any{
		{"id": 101, "customer_id": 1, "total": 120.5, "status": "late"},
		{"id": 102, "customer_id": 1, "total": 80.0, "status": "shipped"},
		{"id": 103, "customer_id": 1, "total": 42.25, "status": "late"},
		{"id": 104, "customer_id": 2, "total": 300.0, "status": "late"},
		{"id": 105, "customer_id": 3, "total": 15.0, "status": "shipped"},
	}
)

// FillerTools is how many extra tools the CRM fixture lists, so that it
// offers 50+ tools in all.
const FillerTools = 48

var fillerTopics = []string{"invoice", "ticket", "campaign", "lead", "contract", "shipment", "refund", "survey",
	"webhook", "segment", "quote", "product"}
var fillerVerbs = []string{"create", "get", "list", "archive"}

// CRM returns the CRM MCP server. Its tools: find_customer, list_orders,
// fail (reports an error), slow (never answers in time), huge (a result of
// the given size), whoami (says whether the credential came through, never
// echoes it), and FillerTools more.
func CRM(credentialOK func(ctx context.Context) bool) *server.MCPServer {
	s := server.NewMCPServer("crm-fixture", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("find_customer",
		mcp.WithDescription("Find a customer by e-mail address. Returns id, name, email, phone and tier."),
		mcp.WithString("email", mcp.Required(), mcp.Description("The customer's e-mail address")),
		mcp.WithRawOutputSchema(json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"},"email":{"type":"string"},"phone":{"type":"string"},"tier":{"type":"string"}}}`)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		email := req.GetString("email", "")
		for _, c := range Customers {
			if strings.EqualFold(c["email"].(string), email) {
				return mcp.NewToolResultStructured(c, fmt.Sprint(c)), nil
			}
		}
		return mcp.NewToolResultError("no customer with e-mail " + email), nil
	})
	s.AddTool(mcp.NewTool("list_orders",
		mcp.WithDescription("List a customer's orders with their totals and shipping status."),
		mcp.WithNumber("customer_id", mcp.Required()),
		mcp.WithRawOutputSchema(json.RawMessage(`{"type":"object","properties":{"orders":{"type":"array","items":{"type":"object"}}}}`)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		id := int(req.GetFloat("customer_id", -1))
		out := []map[string]any{}
		for _, o := range Orders {
			if o["customer_id"] == id {
				out = append(out, o)
			}
		}
		return mcp.NewToolResultStructured(map[string]any{"orders": out}, fmt.Sprint(out)), nil
	})
	s.AddTool(mcp.NewTool("fail", mcp.WithDescription("Always fails with the message 'quota exhausted for account 42'.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("quota exhausted for account 42"), nil
		})
	s.AddTool(mcp.NewTool("slow", mcp.WithDescription("Sleeps for a minute before answering.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(time.Minute):
			case <-ctx.Done():
			}
			return mcp.NewToolResultText("finally"), nil
		})
	s.AddTool(mcp.NewTool("huge", mcp.WithDescription("Returns a text of the given number of bytes."), mcp.WithNumber("bytes")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strings.Repeat("x", int(req.GetFloat("bytes", 10)))), nil
		})
	s.AddTool(mcp.NewTool("garbage", mcp.WithDescription("Over HTTP, answered with bytes that are not JSON-RPC.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("not garbage over stdio"), nil
		})
	s.AddTool(mcp.NewTool("whoami", mcp.WithDescription("Says whether the request carried the right credential.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultStructured(map[string]any{"authorized": credentialOK(ctx)}, "ok"), nil
		})
	for i := 0; i < FillerTools; i++ {
		verb, topic := fillerVerbs[i%len(fillerVerbs)], fillerTopics[i/len(fillerVerbs)%len(fillerTopics)]
		name := fmt.Sprintf("%s_%s", verb, topic)
		s.AddTool(mcp.NewTool(name,
			mcp.WithDescription(fmt.Sprintf("%s a %s record in the CRM. Use it to manage %ss for marketing and sales teams.", strings.ToUpper(verb[:1])+verb[1:], topic, topic)),
			mcp.WithString("id", mcp.Description("The "+topic+" id")),
			mcp.WithString("note", mcp.Description("A free-text note")),
		), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(name + " done"), nil
		})
	}
	return s
}

// Billing returns a second server with one tool, invoice_total.
func Billing() *server.MCPServer {
	s := server.NewMCPServer("billing-fixture", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("invoice_total",
		mcp.WithDescription("Sum of the open invoices of a customer, in EUR."),
		mcp.WithNumber("customer_id", mcp.Required()),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		id := int(req.GetFloat("customer_id", -1))
		return mcp.NewToolResultStructured(map[string]any{"customer_id": id, "open_eur": float64(id) * 100.5}, "ok"), nil
	})
	return s
}

type authKey struct{}

// ServeHTTP serves a fixture server over streamable HTTP at <url>/mcp; a
// request without "Authorization: Bearer <Token>" gets 401. A tools/call of
// a tool named "garbage" is answered with bytes that are not JSON-RPC.
func ServeHTTP(t testing.TB, s *server.MCPServer) string {
	srv := httptest.NewServer(Handler(s))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// Handler is the HTTP handler ServeHTTP serves.
func Handler(s *server.MCPServer) http.Handler {
	h := server.NewStreamableHTTPServer(s, server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		return context.WithValue(ctx, authKey{}, r.Header.Get("Authorization") == "Bearer "+Token)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+Token)) != 1 {
			http.Error(w, "missing or wrong token", http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if strings.Contains(string(body), `"name":"garbage"`) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("}{ this is not JSON-RPC \x00\xff"))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// CredentialOK reports whether the request a tool runs for carried the
// credential (HTTP: the header; stdio: CRM_TOKEN).
func CredentialOK(ctx context.Context) bool {
	if v, ok := ctx.Value(authKey{}).(bool); ok {
		return v
	}
	return os.Getenv("CRM_TOKEN") == Token
}

// StdioEnv is the environment variable that makes a test binary serve the
// CRM fixture over stdio instead of running tests (see MaybeServeStdio).
const StdioEnv = "MCP_FIXTURE"

// MaybeServeStdio serves the named fixture ("crm" or "billing") on
// stdin/stdout and exits when StdioEnv names it: call it first in TestMain,
// then register os.Args[0] as a stdio command with env StdioEnv=<name>.
func MaybeServeStdio() {
	name := os.Getenv(StdioEnv)
	if name == "" {
		return
	}
	var s *server.MCPServer
	switch name {
	case "crm":
		if os.Getenv("CRM_TOKEN") != Token {
			fmt.Fprintln(os.Stderr, "CRM_TOKEN is missing or wrong")
			os.Exit(3)
		}
		s = CRM(CredentialOK)
	case "billing":
		s = Billing()
	default:
		fmt.Fprintln(os.Stderr, "unknown fixture", name)
		os.Exit(2)
	}
	if err := server.ServeStdio(s); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// Marks counts the calls of the Marker fixture's mark tool per key.
type Marks struct {
	mu sync.Mutex
	n  map[string]int
}

// Count is how many times key was marked.
func (m *Marks) Count(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[key]
}

// Marker returns a server whose one tool, mark {key}, counts its calls per
// key: a side effect a test can count, to prove a program ran exactly once.
func Marker() (*server.MCPServer, *Marks) {
	marks := &Marks{n: map[string]int{}}
	s := server.NewMCPServer("marker-fixture", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("mark", mcp.WithDescription("Counts one call for key."), mcp.WithString("key", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			key := req.GetString("key", "")
			marks.mu.Lock()
			marks.n[key]++
			n := marks.n[key]
			marks.mu.Unlock()
			return mcp.NewToolResultStructured(map[string]int{"count": n}, fmt.Sprint(n)), nil
		})
	return s, marks
}
