package codemode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/codemode/codemodetest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

func TestMain(m *testing.M) {
	codemodetest.MaybeServeStdio()
	os.Exit(m.Run())
}

// The store is code mode's Store.
var _ codemode.Store = (*store.Store)(nil)

type env struct {
	st   *store.Store
	reg  *codemode.Registry
	logs *bytes.Buffer
	a, b string // tenants
	crm  string // the CRM fixture's URL
}

func setup(t *testing.T, cfg codemode.Config) *env {
	t.Helper()
	st := storetest.New(t)
	box, err := secret.New(bytes.Repeat([]byte{1}, secret.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.AllowPrivate = true
	up := codemode.NewUpstreams(cfg, log)
	t.Cleanup(up.Close)
	e := &env{st: st, reg: codemode.NewRegistry(st, box, up, log), logs: logs,
		crm: codemodetest.ServeHTTP(t, codemodetest.CRM(codemodetest.CredentialOK))}
	e.a, _ = storetest.Tenant(t, st, "a")
	e.b, _ = storetest.Tenant(t, st, "b")
	return e
}

func (e *env) registerCRM(t *testing.T, tenant string, mod func(*codemode.Registration)) codemode.Server {
	t.Helper()
	r := codemode.Registration{Name: "crm", Description: "Customers and orders", URL: e.crm + "?api_key=" + codemodetest.Token,
		Headers: map[string]string{"Authorization": "Bearer " + codemodetest.Token}}
	if mod != nil {
		mod(&r)
	}
	srv, err := e.reg.Register(context.Background(), tenant, r)
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	return srv
}

type reply struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  *codemode.Error `json:"error"`
}

func ask(t *testing.T, b *codemode.Bridge, req any) reply {
	t.Helper()
	raw, _ := json.Marshal(req)
	var r reply
	if err := json.Unmarshal(b.Handle(context.Background(), raw), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegistryHTTP(t *testing.T) {
	e := setup(t, codemode.Config{})
	ctx := context.Background()
	srv := e.registerCRM(t, e.a, nil)
	if srv.Transport != "http" || srv.Tools < 50 || srv.URL != e.crm || strings.Contains(srv.URL, "api_key") {
		t.Fatalf("registered: %+v", srv)
	}
	if len(srv.Headers) != 1 || srv.Headers[0] != "Authorization" {
		t.Fatalf("headers shown as %v", srv.Headers)
	}
	// Nothing in the API view, the database row or the logs holds the token.
	view, _ := json.Marshal(srv)
	stored, err := e.st.GetMCPServer(ctx, e.a, "crm")
	if err != nil {
		t.Fatal(err)
	}
	row, _ := json.Marshal(stored)
	for what, b := range map[string][]byte{"API view": view, "database row": row, "logs": e.logs.Bytes()} {
		if bytes.Contains(b, []byte(codemodetest.Token)) {
			t.Errorf("%s holds the credential", what)
		}
	}

	// A second registration of the name conflicts; tenant b may use it.
	if _, err := e.reg.Register(ctx, e.a, codemode.Registration{Name: "crm", URL: e.crm}); !errors.Is(err, codemode.ErrConflict) {
		t.Errorf("duplicate: %v", err)
	}
	// The store answers in code mode's sentinels: a second row of the
	// name conflicts, and a missing server is not found.
	if _, err := e.st.CreateMCPServer(ctx, stored, nil); !errors.Is(err, codemode.ErrConflict) {
		t.Errorf("duplicate row: %v", err)
	}
	if _, err := e.reg.Get(ctx, e.b, "crm"); !errors.Is(err, codemode.ErrNotFound) {
		t.Errorf("another tenant's server: %v", err)
	}
	if err := e.reg.Delete(ctx, e.a, "nope"); !errors.Is(err, codemode.ErrNotFound) {
		t.Errorf("delete of a missing server: %v", err)
	}
	// A wrong token fails at registration, with the upstream's answer.
	_, err = e.reg.Register(ctx, e.b, codemode.Registration{Name: "crm", URL: e.crm, Headers: map[string]string{"Authorization": "Bearer nope"}})
	var ue *codemode.UpstreamError
	if !errors.As(err, &ue) {
		t.Fatalf("wrong token: %v", err)
	}
	if list, _ := e.reg.List(ctx, e.b); len(list) != 0 {
		t.Fatalf("a failed registration left %v", list)
	}

	// Search ranks the right tool first, at each detail level.
	for _, detail := range []string{"name", "description", "full"} {
		hits, err := e.reg.Search(ctx, e.a, "find a customer by email", detail, 5)
		if err != nil || len(hits) == 0 || hits[0].Name != "find_customer" {
			t.Fatalf("search (%s): %+v %v", detail, hits, err)
		}
		h := hits[0]
		if (detail == "name") != (h.Description == "") || (detail == "full") != (len(h.InputSchema) > 0) {
			t.Errorf("detail %s gave %+v", detail, h)
		}
	}
	if hits, _ := e.reg.Search(ctx, e.a, "crm.list_orders", "name", 3); len(hits) == 0 || hits[0].Name != "list_orders" {
		t.Errorf("exact name: %+v", hits)
	}
	if hits, _ := e.reg.Search(ctx, e.b, "customer", "name", 3); len(hits) != 0 {
		t.Errorf("tenant b sees a's tools: %+v", hits)
	}

	// Denying a tool hides it from search and from calls.
	if _, err := e.reg.Update(ctx, e.a, "crm", codemode.Update{DenyTools: &[]string{"list_*"}}); err != nil {
		t.Fatal(err)
	}
	if hits, _ := e.reg.Search(ctx, e.a, "orders", "name", 20); containsTool(hits, "list_orders") {
		t.Errorf("denied tool still found: %+v", hits)
	}
	b := e.reg.NewBridge(e.a, 10)
	if r := ask(t, b, map[string]any{"op": "call", "server": "crm", "tool": "list_orders", "args": map[string]any{"customer_id": 1}}); r.OK || r.Error.Code != "denied" {
		t.Errorf("denied call: %+v", r)
	}
	if _, err := e.reg.Update(ctx, e.a, "crm", codemode.Update{DenyTools: &[]string{}, AllowTools: &[]string{"find_*", "whoami"}}); err != nil {
		t.Fatal(err)
	}
	if r := ask(t, b, map[string]any{"op": "call", "server": "crm", "tool": "list_orders", "args": map[string]any{"customer_id": 1}}); r.OK || r.Error.Code != "denied" {
		t.Errorf("call outside the allow list: %+v", r)
	}
	if r := ask(t, b, map[string]any{"op": "call", "server": "crm", "tool": "whoami"}); !r.OK || !strings.Contains(string(r.Result), `"authorized":true`) {
		t.Errorf("whoami: %+v", r)
	}

	// Refresh and delete.
	if _, err := e.reg.Refresh(ctx, e.a, "crm"); err != nil {
		t.Fatal(err)
	}
	if err := e.reg.Delete(ctx, e.a, "crm"); err != nil {
		t.Fatal(err)
	}
	if r := ask(t, b, map[string]any{"op": "call", "server": "crm", "tool": "whoami"}); r.OK || r.Error.Code != "unknown_server" {
		t.Errorf("call after delete: %+v", r)
	}
}

func containsTool(ts []codemode.ToolInfo, name string) bool {
	for _, t := range ts {
		if t.Name == name {
			return true
		}
	}
	return false
}

func TestBridgeAbuse(t *testing.T) {
	e := setup(t, codemode.Config{MaxResultBytes: 64 << 10})
	e.registerCRM(t, e.a, func(r *codemode.Registration) { r.TimeoutMS = 500 })
	b := e.reg.NewBridge(e.a, 8)
	call := func(tool string, args any) reply {
		return ask(t, b, map[string]any{"op": "call", "server": "crm", "tool": tool, "args": args})
	}
	cases := []struct {
		name string
		r    reply
		code string
		msg  string
	}{
		{"tool error", call("fail", nil), "error", "quota exhausted for account 42"},
		{"hang", call("slow", nil), "timeout", "did not answer within 500ms"},
		{"garbage", call("garbage", nil), "upstream_error", "crm"},
		{"huge", call("huge", map[string]any{"bytes": 200 << 10}), "too_large", "at most 65536"},
		{"unknown tool", call("nope", nil), "unknown_tool", `no tool "nope"`},
		{"unknown server", ask(t, b, map[string]any{"op": "call", "server": "erp", "tool": "x"}), "unknown_server", `"erp"`},
		{"bad args", call("find_customer", []int{1}), "bad_request", "args must be a JSON object"},
		{"bad op", ask(t, b, map[string]any{"op": "rm"}), "bad_request", "unknown op"},
	}
	for _, c := range cases {
		if c.r.OK || c.r.Error == nil || c.r.Error.Code != c.code || !strings.Contains(c.r.Error.Message, c.msg) {
			t.Errorf("%s: got %+v, want code %s with %q", c.name, c.r.Error, c.code, c.msg)
		}
	}
	var raw reply
	_ = json.Unmarshal(b.Handle(context.Background(), []byte("{not json")), &raw)
	if raw.OK || raw.Error.Code != "bad_request" {
		t.Errorf("malformed request: %+v", raw)
	}
	// The upstream still works after a garbage answer and a timeout.
	if r := call("find_customer", map[string]any{"email": "ada@example.com"}); !r.OK {
		t.Fatalf("after abuse: %+v", r.Error)
	}
	// The budget: 8 calls; 6 were made above (unknown tool/server, bad
	// args count too), then one more succeeds and the rest are refused.
	var refused int
	for i := 0; i < 5; i++ {
		if r := call("whoami", nil); !r.OK && r.Error.Code == "budget_exceeded" {
			refused++
		}
	}
	calls := b.Calls()
	if refused == 0 || len(calls) != 8+5 {
		t.Fatalf("budget: refused %d, recorded %d calls", refused, len(calls))
	}
	for _, c := range calls {
		if c.Status == "" || c.StartedAt.IsZero() {
			t.Errorf("incomplete record %+v", c)
		}
	}
	if calls[0].Tool != "fail" || calls[0].Status != "error" || calls[1].Status != "timeout" || calls[1].DurationMS < 400 {
		t.Errorf("records: %+v", calls[:2])
	}
	if huge := calls[3]; huge.Status != "too_large" || huge.BytesOut < 200<<10 {
		t.Errorf("huge record: %+v", huge)
	}
	// Tenant b's bridge cannot reach a's server.
	if r := ask(t, e.reg.NewBridge(e.b, 5), map[string]any{"op": "call", "server": "crm", "tool": "whoami"}); r.OK || r.Error.Code != "unknown_server" {
		t.Errorf("cross-tenant call: %+v", r)
	}
}

func TestStdioServer(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t, codemode.Config{Commands: []string{self}})
	ctx := context.Background()
	// A command the operator did not allow is refused.
	_, err = e.reg.Register(ctx, e.a, codemode.Registration{Name: "sh", Command: []string{"/bin/sh", "-c", "id"}})
	var fe *jobs.FieldError
	if !errors.As(err, &fe) || fe.Field != "command" {
		t.Fatalf("unlisted command: %v", err)
	}
	srv, err := e.reg.Register(ctx, e.a, codemode.Registration{Name: "crm", Command: []string{self},
		Env: map[string]string{codemodetest.StdioEnv: "crm", "CRM_TOKEN": codemodetest.Token}})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Transport != "stdio" || srv.Tools < 50 || len(srv.Env) != 2 {
		t.Fatalf("stdio server: %+v", srv)
	}
	b := e.reg.NewBridge(e.a, 10)
	r := ask(t, b, map[string]any{"op": "call", "server": "crm", "tool": "list_orders", "args": map[string]any{"customer_id": 1}})
	if !r.OK || !strings.Contains(string(r.Result), `"id":101`) {
		t.Fatalf("stdio call: %+v %s", r.Error, r.Result)
	}
	if r := ask(t, b, map[string]any{"op": "call", "server": "crm", "tool": "whoami"}); !r.OK || !strings.Contains(string(r.Result), `"authorized":true`) {
		t.Fatalf("stdio whoami: %+v %s", r.Error, r.Result)
	}
	if r := ask(t, b, map[string]any{"op": "describe", "server": "crm", "tool": "list_orders"}); !r.OK || !strings.Contains(string(r.Result), `"customer_id"`) {
		t.Fatalf("describe: %+v %s", r.Error, r.Result)
	}
}

func TestValidation(t *testing.T) {
	e := setup(t, codemode.Config{})
	ctx := context.Background()
	bad := []struct {
		reg   codemode.Registration
		field string
	}{
		{codemode.Registration{Name: "CRM", URL: e.crm}, "name"},
		{codemode.Registration{Name: "crm-1", URL: e.crm}, "name"},
		{codemode.Registration{Name: "crm"}, "url"},
		{codemode.Registration{Name: "crm", URL: "ftp://x/mcp"}, "url"},
		{codemode.Registration{Name: "crm", URL: "https://user:pw@x/mcp"}, "url"},
		{codemode.Registration{Name: "crm", URL: e.crm, Command: []string{"x"}}, "url"},
		{codemode.Registration{Name: "crm", URL: e.crm, Headers: map[string]string{"Bad Header": "x"}}, "headers"},
		{codemode.Registration{Name: "crm", URL: e.crm, Headers: map[string]string{"X-A": "a\r\nInjected: 1"}}, "headers"},
		{codemode.Registration{Name: "crm", URL: e.crm, Headers: map[string]string{"Host": "evil"}}, "headers"},
		{codemode.Registration{Name: "crm", URL: e.crm, Env: map[string]string{"A": "b"}}, "env"},
		{codemode.Registration{Name: "crm", URL: e.crm, AllowTools: []string{"[x"}}, "allow_tools"},
		{codemode.Registration{Name: "crm", URL: e.crm, TimeoutMS: 10}, "timeout_ms"},
		{codemode.Registration{Name: "crm", Command: []string{"/bin/sh"}}, "command"},
	}
	for _, c := range bad {
		_, err := e.reg.Register(ctx, e.a, c.reg)
		var fe *jobs.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: got %v, want an error on %s", c.reg, err, c.field)
		}
	}
	// Private addresses are refused unless the operator allows them.
	st := e.st
	box, _ := secret.New(bytes.Repeat([]byte{2}, secret.KeySize))
	strict := codemode.NewRegistry(st, box, codemode.NewUpstreams(codemode.Config{}, slog.New(slog.DiscardHandler)), slog.New(slog.DiscardHandler))
	_, err := strict.Register(ctx, e.a, codemode.Registration{Name: "crm", URL: e.crm, Headers: map[string]string{"Authorization": "Bearer " + codemodetest.Token}})
	if err == nil || !strings.Contains(err.Error(), "not public") {
		t.Errorf("private address: %v", err)
	}
	// Without a secret key nothing can be registered.
	off := codemode.NewRegistry(st, nil, codemode.NewUpstreams(codemode.Config{}, slog.New(slog.DiscardHandler)), slog.New(slog.DiscardHandler))
	var ce *codemode.Error
	if _, err := off.Register(ctx, e.a, codemode.Registration{Name: "crm", URL: e.crm}); !errors.As(err, &ce) || ce.Code != "unavailable" {
		t.Errorf("no key: %v", err)
	}
}

func TestWrappers(t *testing.T) {
	e := setup(t, codemode.Config{})
	e.registerCRM(t, e.a, nil)
	files, err := e.reg.Wrappers(context.Background(), e.a)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range files {
		got[f.Path] = string(f.Content)
	}
	py, js := got[codemode.PythonGenDir+"/servers/crm.py"], got[codemode.NodeGenDir+"/servers/crm.js"]
	if !strings.Contains(py, "def find_customer(_args=None, /, **kwargs):") || !strings.Contains(js, `exports["find_customer"]`) {
		t.Fatalf("wrappers:\n%s\n%s", py, js)
	}
	if _, ok := got[codemode.PythonGenDir+"/servers/__init__.py"]; !ok {
		t.Error("no servers package")
	}
	if none, _ := e.reg.Wrappers(context.Background(), e.b); len(none) != 0 {
		t.Errorf("tenant b got %d wrapper files", len(none))
	}
	for _, c := range []struct{ in, out string }{{"get-customer", "get_customer"}, {"2fa", "_2fa"}, {"class", "class_"}, {"__init__", "tool___init__"}, {"a.b/c", "a_b_c"}} {
		if id := codemode.Identifier(c.in); id != c.out {
			t.Errorf("Identifier(%q) = %q, want %q", c.in, id, c.out)
		}
	}
}

// TestDiscoverySizes measures what progressive discovery saves: the size of
// the fixture's whole tool list (50+ tools) at each detail level, as JSON.
// Tokens are estimated at 4 bytes each. docs/ARCHITECTURE.md quotes the
// figures; the test checks each level is well below the next.
func TestDiscoverySizes(t *testing.T) {
	e := setup(t, codemode.Config{})
	srv := e.registerCRM(t, e.a, nil)
	ctx := context.Background()
	var sizes []int
	for _, detail := range []string{"name", "description", "full"} {
		all, err := e.reg.Search(ctx, e.a, "", detail, 100)
		if err != nil || len(all) != srv.Tools {
			t.Fatalf("%s: %d tools, %v", detail, len(all), err)
		}
		one, _ := e.reg.Search(ctx, e.a, "find customer email", detail, 1)
		b, _ := json.Marshal(all)
		o, _ := json.Marshal(one)
		sizes = append(sizes, len(b))
		t.Logf("detail=%-11s all %d tools: %6d bytes ≈ %5d tokens; one tool: %4d bytes ≈ %4d tokens", detail, len(all), len(b), len(b)/4, len(o), len(o)/4)
	}
	if !(sizes[0] < sizes[1] && sizes[1] < sizes[2]) {
		t.Errorf("detail levels do not grow: %v", sizes)
	}
}
