package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/codemode/codemodetest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/pii"
	"github.com/gantryhq/gantry/secret"
)

// withCodeMode gives the runner a code-mode registry and registers, for the
// harness's tenant, the CRM fixture over streamable HTTP (crm, with
// list_* denied when deny is set) and the billing fixture over stdio, in a
// container of its own (the Python fixture, an operator's command of the
// sandbox image).
func withCodeMode(t *testing.T, deny ...string) func(*harness, *Config) {
	return func(h *harness, c *Config) {
		box, _ := secret.New(bytes.Repeat([]byte{9}, secret.KeySize))
		log := slog.New(slog.DiscardHandler)
		up := codemode.NewUpstreams(codemode.Config{AllowPrivate: true, Commands: [][]string{codemodetest.StdioCommand()},
			Env: []string{"CRM_TOKEN"}, Launcher: NewMCPLauncher(h.sb, MCPConfig{})}, log)
		t.Cleanup(func() {
			up.Stop()
			// Stopping removed every server's container.
			if n := countContainers(t, h.sb, LabelMCP); n != 0 {
				t.Errorf("%d MCP server containers left after Stop", n)
			}
		})
		reg := codemode.NewRegistry(h.st, box, up, log)
		ctx := context.Background()
		if _, err := reg.Register(ctx, h.tenant, codemode.Registration{Name: "crm", Description: "Customers and orders",
			URL: codemodetest.ServeHTTP(t, codemodetest.CRM(codemodetest.CredentialOK)), DenyTools: deny,
			Headers: map[string]string{"Authorization": "Bearer " + codemodetest.Token}}); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Register(ctx, h.tenant, codemode.Registration{Name: "billing", Description: "Invoices",
			Command: codemodetest.StdioCommand(), Env: map[string]string{"CRM_TOKEN": codemodetest.Token}}); err != nil {
			t.Fatal(err)
		}
		c.CodeMode = reg
		c.Privacy = pii.New(h.st, box, time.Hour)
	}
}

// countContainers counts the runner's containers (any state) that carry
// label.
func countContainers(t *testing.T, sb *Sandbox, label string) int {
	t.Helper()
	res, err := sb.docker.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", LabelRunner+"="+sb.cfg.RunnerID).Add("label", label)})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Items)
}

// TestStdioServerInItsOwnContainer: a tenant's stdio MCP server runs in a
// hardened container of its own, not in the runner's process: uid 1000
// with no capabilities, no_new_privs, a seccomp filter, no network, no
// Docker socket, a read-only root, and only gantry's PATH and HOME and the
// tenant's allowed names in its environment.
func TestStdioServerInItsOwnContainer(t *testing.T) {
	h := newHarness(t, 1, withCodeMode(t))
	j := h.run(t, jobs.Request{Language: "python", Code: `
import json
from servers.billing import facts, whoami
print(json.dumps({"facts": facts(), "whoami": whoami()}))
`})
	if j.Status != jobs.StatusSucceeded {
		t.Fatalf("%s: %s %s", j.Status, j.Stdout, j.Stderr)
	}
	var got struct {
		Facts struct {
			UID          int      `json:"uid"`
			CapEff       string   `json:"cap_eff"`
			CapBnd       string   `json:"cap_bnd"`
			NoNewPrivs   string   `json:"no_new_privs"`
			Seccomp      string   `json:"seccomp"`
			Net          []string `json:"net"`
			DockerSock   bool     `json:"docker_sock"`
			Env          []string `json:"env"`
			RootWritable bool     `json:"root_writable"`
		} `json:"facts"`
		Whoami struct {
			Authorized bool `json:"authorized"`
		} `json:"whoami"`
	}
	if err := json.Unmarshal([]byte(j.Stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, j.Stdout)
	}
	f := got.Facts
	if f.UID != 1000 || f.CapEff != "0000000000000000" || f.CapBnd != "0000000000000000" || f.NoNewPrivs != "1" ||
		(testRuntime() != "runsc" && f.Seccomp != "2") || !slices.Equal(f.Net, []string{"lo"}) || f.DockerSock || f.RootWritable {
		t.Errorf("the stdio server's sandbox: %+v", f)
	}
	// The image's own ENV (the operator's), Docker's HOSTNAME (the
	// container's id), gantry's PATH and HOME, the tenant's allowed name;
	// nothing of the runner's environment.
	want := []string{"CRM_TOKEN", "HOME", "HOSTNAME", "PATH"}
	img, err := h.sb.docker.ImageInspect(context.Background(), testImage())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range img.Config.Env {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(want, k) {
			want = append(want, k)
		}
	}
	slices.Sort(want)
	if !slices.Equal(f.Env, want) || !got.Whoami.Authorized {
		t.Errorf("the stdio server's environment: %v (want %v), credential through: %v", f.Env, want, got.Whoami.Authorized)
	}
	if n := countContainers(t, h.sb, LabelMCP); n != 1 {
		t.Errorf("%d MCP server containers, want the one kept for the next call", n)
	}
}

func TestCodeMode(t *testing.T) {
	h := newHarness(t, 2, withCodeMode(t, "create_*"))

	t.Run("python joins two servers", func(t *testing.T) {
		j := h.run(t, jobs.Request{Language: "python", Code: `
import gantry
from servers.crm import find_customer, list_orders
from servers.billing import invoice_total
hits = gantry.search_tools("orders of a customer", detail="name")
assert hits[0]["name"] == "list_orders", hits
c = find_customer(email="ada@example.com")
late = [o for o in list_orders(customer_id=c["id"])["orders"] if o["status"] == "late"]
owed = invoice_total(customer_id=c["id"])["open_eur"]
print(f"{c['name']}: {len(late)} late orders worth {sum(o['total'] for o in late):.2f} EUR, {owed:.2f} EUR open")
`})
		want := "Ada Lovelace: 2 late orders worth 162.75 EUR, 100.50 EUR open\n"
		if j.Status != jobs.StatusSucceeded || j.Stdout != want {
			t.Fatalf("%s: stdout %q stderr %q", j.Status, j.Stdout, j.Stderr)
		}
		if len(j.ToolCalls) != 3 || j.ToolCalls[0].Tool != "find_customer" || j.ToolCalls[2].Server != "billing" {
			t.Fatalf("recorded calls: %+v", j.ToolCalls)
		}
		for _, c := range j.ToolCalls {
			if c.Status != "ok" || c.BytesOut == 0 || c.BytesIn == 0 {
				t.Errorf("call record %+v", c)
			}
		}
	})

	t.Run("node joins two servers", func(t *testing.T) {
		j := h.run(t, jobs.Request{Language: "node", Code: `
const gantry = require('gantry');
const { find_customer, list_orders } = require('servers/crm');
const { invoice_total } = require('servers/billing');
(async () => {
  const hits = await gantry.searchTools('orders of a customer', { detail: 'name' });
  if (hits[0].name !== 'list_orders') throw new Error('search: ' + JSON.stringify(hits));
  const c = await find_customer({ email: 'grace@example.com' });
  const [{ orders }, bill] = await Promise.all([list_orders({ customer_id: c.id }), invoice_total({ customer_id: c.id })]);
  const late = orders.filter(o => o.status === 'late');
  console.log(c.name + ': ' + late.length + ' late orders worth ' + late.reduce((s, o) => s + o.total, 0).toFixed(2) + ' EUR, ' + bill.open_eur.toFixed(2) + ' EUR open');
})().catch(e => { console.error(e); process.exit(1); });
`})
		want := "Grace Hopper: 1 late orders worth 300.00 EUR, 201.00 EUR open\n"
		if j.Status != jobs.StatusSucceeded || j.Stdout != want {
			t.Fatalf("%s: stdout %q stderr %q", j.Status, j.Stdout, j.Stderr)
		}
		if len(j.ToolCalls) != 3 {
			t.Fatalf("recorded calls: %+v", j.ToolCalls)
		}
	})

	t.Run("typescript joins two servers", func(t *testing.T) {
		j := h.run(t, jobs.Request{Language: "typescript", Code: `
const { find_customer, list_orders } = require('servers/crm');
const { invoice_total } = require('servers/billing');
interface Order { status: string; total: number }
(async (): Promise<void> => {
  const c = await find_customer({ email: 'grace@example.com' });
  const orders: Order[] = (await list_orders({ customer_id: c.id })).orders;
  const bill = await invoice_total({ customer_id: c.id });
  const late = orders.filter((o: Order) => o.status === 'late');
  console.log(c.name + ': ' + late.length + ' late, ' + bill.open_eur.toFixed(2) + ' EUR open');
})().catch((e: Error) => { console.error(e); process.exit(1); });
`})
		if want := "Grace Hopper: 1 late, 201.00 EUR open\n"; j.Status != jobs.StatusSucceeded || j.Stdout != want {
			t.Fatalf("%s: stdout %q stderr %q", j.Status, j.Stdout, j.Stderr)
		}
	})

	t.Run("errors, denial and budget", func(t *testing.T) {
		j := h.run(t, jobs.Request{Language: "python", Limits: &jobs.Limits{ToolCalls: 4}, Code: `
import gantry
def attempt(*a):
    try:
        gantry.call(*a)
        print("ok")
    except gantry.ToolError as e:
        print(type(e).__name__, e.code, "|", e.message)
attempt("crm", "fail")
attempt("crm", "create_invoice", {"id": "1"})
attempt("erp", "anything")
attempt("crm", "whoami")
attempt("crm", "whoami")
try:
    from servers.crm import create_invoice
except ImportError:
    print("no wrapper for a denied tool")
`})
		lines := strings.Split(strings.TrimSpace(j.Stdout), "\n")
		want := []string{
			"ToolError error | quota exhausted for account 42",
			"ToolDenied denied |",
			"UnknownTool unknown_server |",
			"ok",
			"BudgetExceeded budget_exceeded |",
			"no wrapper for a denied tool",
		}
		if j.Status != jobs.StatusSucceeded || len(lines) != len(want) {
			t.Fatalf("%s: stdout %q stderr %q", j.Status, j.Stdout, j.Stderr)
		}
		for i, w := range want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
			}
		}
	})

	t.Run("the credential never reaches the sandbox", func(t *testing.T) {
		// The program holds the token only in two halves (the whole one is
		// in no file and no command line), so finding it anywhere means it
		// leaked.
		half := len(codemodetest.Token) / 2
		j := h.run(t, jobs.Request{Language: "bash", TimeoutMS: 120_000, Code: `
python3 -c 'import gantry; print("authorized", gantry.call("crm", "whoami")["authorized"])'
T="` + codemodetest.Token[:half] + `"; T="$T` + codemodetest.Token[half:] + `"
{ env; for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; tr '\0' '\n' < $p/environ 2>/dev/null; done; } | grep -c -F -f <(printf '%s\n' "$T")
grep -rIl --exclude-dir=proc --exclude-dir=sys -F -f <(printf '%s\n' "$T") / 2>/dev/null | sed 's/^/FOUND IN /'
echo searched
`})
		if j.Status != jobs.StatusSucceeded || !strings.Contains(j.Stdout, "authorized True\n0\nsearched") {
			t.Fatalf("%s: stdout %q stderr %q", j.Status, j.Stdout, j.Stderr)
		}
	})

	t.Run("flooding the bridge", func(t *testing.T) {
		j := h.run(t, jobs.Request{Language: "python", Limits: &jobs.Limits{ToolCalls: 20}, Code: `
import gantry, os, socket, threading, collections
codes = collections.Counter()
lock = threading.Lock()
def hammer():
    for _ in range(25):
        try:
            gantry.call("crm", "whoami")
            c = "ok"
        except gantry.ToolError as e:
            c = e.code
        with lock:
            codes[c] += 1
ts = [threading.Thread(target=hammer) for _ in range(16)]
[t.start() for t in ts]
# Junk on the socket, and a request past the size cap.
s = socket.socket(socket.AF_UNIX); s.connect(os.environ["GANTRY_BRIDGE"]); s.sendall(b"not json\n"); print(s.recv(1000).decode().strip())
s = socket.socket(socket.AF_UNIX); s.connect(os.environ["GANTRY_BRIDGE"])
try:
    s.sendall(b"x" * (2 << 20))
except OSError:
    pass
print(s.recv(1000).decode().strip()[:60])
[t.join() for t in ts]
print(sorted(codes.items()))
`})
		if j.Status != jobs.StatusSucceeded {
			t.Fatalf("%s: stdout %q stderr %q", j.Status, j.Stdout, j.Stderr)
		}
		if !strings.Contains(j.Stdout, `"bad_request"`) || !strings.Contains(j.Stdout, `"too_large"`) ||
			!strings.Contains(j.Stdout, "('ok', 20)") {
			t.Fatalf("stdout %q", j.Stdout)
		}
		if len(j.ToolCalls) != 400 {
			t.Errorf("recorded %d calls, want 400", len(j.ToolCalls))
		}
	})

	t.Run("privacy tokens round-trip", func(t *testing.T) {
		ctx := context.Background()
		if err := h.st.SetTenantPII(ctx, h.tenant, true); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = h.st.SetTenantPII(ctx, h.tenant, false) }()
		// The model sees tokens for the customer's e-mail and phone...
		j := h.run(t, jobs.Request{Language: "python", Code: `
from servers.crm import find_customer
c = find_customer(email="grace@example.com")
print(c["name"], c["email"], c["phone"])
print("again", c["email"])
`})
		if j.Status != jobs.StatusSucceeded || strings.Contains(j.Stdout, "grace@example.com") || strings.Contains(j.Stdout, "555-0143") {
			t.Fatalf("%s: stdout %q stderr %q", j.Status, j.Stdout, j.Stderr)
		}
		var email, phone string
		if _, err := fmt.Sscanf(j.Stdout, "Grace Hopper %s %s\nagain", &email, &phone); err != nil || !strings.HasPrefix(email, "[EMAIL_") || !strings.HasPrefix(phone, "[PHONE_") {
			t.Fatalf("stdout %q: %v", j.Stdout, err)
		}
		if !strings.Contains(j.Stdout, "again "+email+"\n") {
			t.Errorf("the same e-mail got another token: %q", j.Stdout)
		}
		// ...and passes them back: in code and in tool-call arguments they
		// are the real values again.
		j = h.run(t, jobs.Request{Language: "python", Code: `
from servers.crm import find_customer, list_orders
print("` + email + `" == "grace@example.com")
c = find_customer(email="` + email + `")
print(c["name"], len(list_orders(customer_id=c["id"])["orders"]), "orders")
`})
		if j.Status != jobs.StatusSucceeded || j.Stdout != "True\nGrace Hopper 1 orders\n" {
			t.Fatalf("%s: stdout %q stderr %q", j.Status, j.Stdout, j.Stderr)
		}
		// An upstream error that quotes personal data is tokenized in the
		// job's history too.
		j = h.run(t, jobs.Request{Language: "python", Code: `
import gantry
try:
    gantry.call("crm", "find_customer", {"email": "nobody@example.org"})
except gantry.ToolError as e:
    print(e.message)
`})
		if strings.Contains(j.Stdout+mustJSON(j.ToolCalls), "nobody@example.org") || !strings.Contains(j.Stdout, "[EMAIL_") {
			t.Fatalf("stdout %q calls %+v", j.Stdout, j.ToolCalls)
		}
	})

	t.Run("in a session", func(t *testing.T) {
		sid := h.session(t)
		code := `from servers.crm import find_customer
import os
n = int(open("n.txt").read()) + 1 if os.path.exists("n.txt") else 1
open("n.txt", "w").write(str(n))
print(n, find_customer(email="alan@example.com")["name"])`
		for i := 1; i <= 2; i++ {
			j := h.waitFor(t, h.submitIn(t, sid, jobs.Request{Language: "python", Code: code}), func(j jobs.Job) bool { return j.Status.Terminal() })
			if want := fmt.Sprintf("%d Alan Turing\n", i); j.Stdout != want || len(j.ToolCalls) != 1 {
				t.Fatalf("session job %d: %s stdout %q stderr %q calls %+v", i, j.Status, j.Stdout, j.Stderr, j.ToolCalls)
			}
		}
	})

	t.Run("without code mode the library says so", func(t *testing.T) {
		j := h.run(t, jobs.Request{Language: "bash", Code: `env -u GANTRY_BRIDGE python3 -c '
import gantry
try:
    gantry.call("crm", "whoami", {})
except gantry.ToolError as e:
    print(e.code)
'`})
		if j.Status != jobs.StatusSucceeded || strings.TrimSpace(j.Stdout) != "unavailable" {
			t.Fatalf("%s: stdout %q stderr %q", j.Status, j.Stdout, j.Stderr)
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
