package codemode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/codemode/codemodetest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue/queuetest"
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
	t.Cleanup(up.Stop)
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t, codemode.Config{Commands: [][]string{{self}}, Env: []string{"CRM_TOKEN", codemodetest.StdioEnv},
		Launcher: &codemodetest.HostLauncher{}})
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// TestStdioRunsNothingOfTheTenants: a tenant chooses neither a stdio
// server's program nor what it loads. Its command must be one of the
// operator's exactly, arguments included, and its environment names pass
// the operator's allow-list, never one that makes a program load or run
// other code (the loader's, interpreters' options and startup files, a
// shell's, PATH) or send its traffic elsewhere, whatever the allow-list
// says. A record that holds such a name anyway (stored before this check,
// or the operator's list shrank) is refused at launch, before anything
// starts.
func TestStdioRunsNothingOfTheTenants(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	launcher := &codemodetest.HostLauncher{}
	allowed := [][]string{{self}, {"node", "/opt/mcp/server.js"}}
	// An operator who allows too much: every pattern that could open a
	// dangerous name.
	e := setup(t, codemode.Config{Commands: allowed, Launcher: launcher,
		Env: []string{"CRM_TOKEN", codemodetest.StdioEnv, "NODE_*", "LD_*", "PYTHON*", "PATH", "BASH_ENV", "*_PROXY", "SSL_CERT_FILE"}})
	ctx := context.Background()
	pwned := t.TempDir() + "/pwned"
	attacks := []struct {
		name    string
		command []string
		env     map[string]string
		field   string
	}{
		{"NODE_OPTIONS", []string{"node", "/opt/mcp/server.js"}, map[string]string{"NODE_OPTIONS": "--import=data:text/javascript,require('fs').writeFileSync('" + pwned + "','x')"}, "env"},
		{"node_options (case)", []string{"node", "/opt/mcp/server.js"}, map[string]string{"node_options": "--require=/tmp/x.js"}, "env"},
		{"LD_PRELOAD", []string{self}, map[string]string{"LD_PRELOAD": "/tmp/evil.so"}, "env"},
		{"LD_LIBRARY_PATH", []string{self}, map[string]string{"LD_LIBRARY_PATH": "/tmp"}, "env"},
		{"PYTHONSTARTUP", []string{self}, map[string]string{"PYTHONSTARTUP": "/tmp/evil.py"}, "env"},
		{"PYTHONPATH", []string{self}, map[string]string{"PYTHONPATH": "/tmp"}, "env"},
		{"PATH", []string{self}, map[string]string{"PATH": "/tmp:/usr/bin"}, "env"},
		{"BASH_ENV", []string{self}, map[string]string{"BASH_ENV": "/tmp/evil.sh"}, "env"},
		{"BASH_FUNC", []string{self}, map[string]string{"BASH_FUNC_ls": "() { touch " + pwned + "; }"}, "env"},
		{"HTTPS_PROXY", []string{self}, map[string]string{"HTTPS_PROXY": "http://evil:3128"}, "env"},
		{"SSL_CERT_FILE", []string{self}, map[string]string{"SSL_CERT_FILE": "/tmp/ca.pem"}, "env"},
		{"GLIBC_TUNABLES", []string{self}, map[string]string{"GLIBC_TUNABLES": "glibc.malloc.x=1"}, "env"},
		{"not allowed", []string{self}, map[string]string{"SOME_TOKEN": "x"}, "env"},
		{"arguments added", []string{"node", "/opt/mcp/server.js", "--inspect=0.0.0.0:9229"}, nil, "command"},
		{"other arguments", []string{"node", "-e", "require('fs').writeFileSync('" + pwned + "','x')"}, nil, "command"},
		{"command[0] only", []string{"node"}, nil, "command"},
	}
	for _, a := range attacks {
		_, err := e.reg.Register(ctx, e.a, codemode.Registration{Name: "p", Command: a.command, Env: a.env})
		var fe *jobs.FieldError
		if !errors.As(err, &fe) || fe.Field != a.field {
			t.Errorf("%s: got %v, want an error on %s", a.name, err, a.field)
		}
	}
	if n := len(launcher.Launches()); n != 0 {
		t.Fatalf("%d processes were started for refused registrations", n)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("an attack ran")
	}
	// The operator's list as the config parser refuses it.
	for _, bad := range [][]string{{"*"}, {"**"}, {"A/B"}, {"X?"}} {
		if err := codemode.CheckEnvPatterns(bad); err == nil {
			t.Errorf("GANTRY_MCP_ENV=%v accepted", bad)
		}
	}

	// What a stdio server starts with: gantry's PATH and HOME, then the
	// tenant's allowed names, nothing of this process's environment.
	t.Setenv("GANTRY_SECRET_KEY", "must-not-leak")
	if _, err := e.reg.Register(ctx, e.a, codemode.Registration{Name: "billing", Command: []string{self},
		Env: map[string]string{codemodetest.StdioEnv: "billing"}}); err != nil {
		t.Fatal(err)
	}
	got := launcher.Launches()
	if len(got) != 1 {
		t.Fatalf("launches: %+v", got)
	}
	want := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp", codemodetest.StdioEnv + "=billing"}
	if l := got[0]; !slices.Equal(l.Env, want) || !slices.Equal(l.Argv, []string{self}) || l.TenantID != e.a || l.Server != "billing" {
		t.Fatalf("launch: %+v", l)
	}

	// A record holding a forbidden name (sealed before the check existed)
	// is refused when a job calls it, and nothing starts.
	strict := setup(t, codemode.Config{Commands: allowed, Launcher: launcher, Env: []string{codemodetest.StdioEnv, "NODE_*"}})
	if _, err := strict.reg.Register(ctx, strict.a, codemode.Registration{Name: "billing", Command: []string{self},
		Env: map[string]string{codemodetest.StdioEnv: "billing"}}); err != nil {
		t.Fatal(err)
	}
	before := len(launcher.Launches())
	// Sealed as the registry seals (bound to the tenant and server name)
	// and stored over the registered one, as an older gantry could have.
	box, _ := secret.New(bytes.Repeat([]byte{1}, secret.KeySize))
	rec, err := strict.st.GetMCPServer(ctx, strict.a, "billing")
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(map[string]any{"env": map[string]string{codemodetest.StdioEnv: "billing", "NODE_OPTIONS": "--require=/tmp/x.js"}})
	if rec.SecretSealed, err = box.Seal(plain, "mcp-server:"+strict.a+":billing"); err != nil {
		t.Fatal(err)
	}
	if _, err := strict.st.UpdateMCPServer(ctx, rec, nil, func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	r := ask(t, strict.reg.NewBridge(strict.a, 5), map[string]any{"op": "call", "server": "billing", "tool": "invoice_total", "args": map[string]any{"customer_id": 1}})
	if r.OK || r.Error.Code != "upstream_error" || !strings.Contains(r.Error.Message, "NODE_OPTIONS") {
		t.Fatalf("a smuggled NODE_OPTIONS: %+v %s", r.Error, r.Result)
	}
	if n := len(launcher.Launches()); n != before {
		t.Fatalf("a process was started with a smuggled NODE_OPTIONS")
	}
}

// TestStdioToolsFromARunner: a process without a Launcher (an ingress)
// never starts a stdio server: it asks a runner over NATS, which starts it
// with its own launcher and answers with the tool list. With no runner up
// the registration is refused as unavailable, and nothing is stored.
func TestStdioToolsFromARunner(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ns := queuetest.Server(t)
	ingressNC, runnerNC := queuetest.Connect(t, ns), queuetest.Connect(t, ns)
	cfg := codemode.Config{Commands: [][]string{{self}}, Env: []string{"CRM_TOKEN", codemodetest.StdioEnv}}
	ingressCfg := cfg
	ingressCfg.Remote = codemode.NewRemoteTools(ingressNC)
	e := setup(t, ingressCfg)
	ctx := context.Background()
	crm := codemode.Registration{Name: "crm", Command: []string{self},
		Env: map[string]string{codemodetest.StdioEnv: "crm", "CRM_TOKEN": codemodetest.Token}}

	_, err = e.reg.Register(ctx, e.a, crm)
	var cmErr *codemode.Error
	if !errors.As(err, &cmErr) || cmErr.Code != codemode.CodeUnavailable {
		t.Fatalf("no runner: %v", err)
	}
	if _, err := e.reg.Get(ctx, e.a, "crm"); !errors.Is(err, codemode.ErrNotFound) {
		t.Fatalf("a refused registration was stored: %v", err)
	}

	// A runner: the same store and key, a launcher of its own.
	launcher := &codemodetest.HostLauncher{}
	runnerCfg := cfg
	runnerCfg.Launcher = launcher
	runnerCfg.AllowPrivate = true
	up := codemode.NewUpstreams(runnerCfg, slog.New(slog.DiscardHandler))
	t.Cleanup(up.Stop)
	box, _ := secret.New(bytes.Repeat([]byte{1}, secret.KeySize))
	runnerReg := codemode.NewRegistry(e.st, box, up, slog.New(slog.DiscardHandler))
	stop, err := codemode.ServeTools(ctx, runnerNC, runnerReg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	srv, err := e.reg.Register(ctx, e.a, crm)
	if err != nil || srv.Tools < 50 {
		t.Fatalf("register through a runner: %+v %v", srv, err)
	}
	if n := len(launcher.Launches()); n != 1 {
		t.Fatalf("the runner started %d processes", n)
	}
	if _, err := e.reg.Refresh(ctx, e.a, "crm"); err != nil {
		t.Fatalf("refresh through a runner: %v", err)
	}
	// The upstream's own failure comes back as the upstream's error.
	bad := crm
	bad.Name, bad.Env = "crm2", map[string]string{codemodetest.StdioEnv: "crm", "CRM_TOKEN": "wrong"}
	_, err = e.reg.Register(ctx, e.a, bad)
	var upErr *codemode.UpstreamError
	if !errors.As(err, &upErr) || !strings.Contains(err.Error(), "CRM_TOKEN is missing or wrong") {
		t.Fatalf("failing upstream: %v", err)
	}
	// A call from a job goes through the runner's own registry.
	r := ask(t, runnerReg.NewBridge(e.a, 5), map[string]any{"op": "call", "server": "crm", "tool": "whoami"})
	if !r.OK || !strings.Contains(string(r.Result), `"authorized":true`) {
		t.Fatalf("call: %+v %s", r.Error, r.Result)
	}
}
