package test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

func (d *dev) blobs(t *testing.T) *blob.Store {
	var key, secret string
	for _, e := range d.env {
		if v, ok := strings.CutPrefix(e, "GANTRY_S3_ACCESS_KEY="); ok {
			key = v
		}
		if v, ok := strings.CutPrefix(e, "GANTRY_S3_SECRET_KEY="); ok {
			secret = v
		}
	}
	b, err := blob.New(blob.Config{Endpoint: d.s3URL, AccessKey: key, SecretKey: secret, Bucket: "gantry"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (d *dev) dbURL() string {
	for _, e := range d.env {
		if v, ok := strings.CutPrefix(e, "GANTRY_DATABASE_URL="); ok {
			return v
		}
	}
	return ""
}

func (d *dev) sessionRows(t *testing.T, id string) int {
	conn, err := pgx.Connect(context.Background(), d.dbURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM sessions WHERE id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (d *dev) runner(t *testing.T, id string) *proc {
	t.Helper()
	p := start(t, append(d.env, "GANTRY_RUNNER_ID="+id, "GANTRY_RUNNER_SLOTS=2", "GANTRY_DRAIN_TIMEOUT=1s"), "runner")
	p.waitOutput(t, regexp.MustCompile(`runner started`), 30*time.Second)
	return p
}

func mcpCall(t *testing.T, c *client.Client, name string, args map[string]any) (map[string]any, string) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("%s %v: %s", name, args, text.String())
	}
	data, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return out, text.String()
}

// TestSessionAgentLoop is the "done" scenario: an agent edits, runs
// and reads in one session over MCP while the runner is killed and
// replaced in the middle, and every step sees the files it expects.
func TestSessionAgentLoop(t *testing.T) {
	d := startDev(t, "GANTRY_DEV_RUNNER=false", "GANTRY_ACK_WAIT=2s")
	suffix := uniqueSuffix()
	a := d.runner(t, "loop-a-"+suffix)

	c, err := client.NewStreamableHttpClient(d.url+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + d.key}))
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	out, _ := mcpCall(t, c, "create_session", map[string]any{"ttl_seconds": 600})
	sid := out["session_id"].(string)

	// 1. write a module
	mcpCall(t, c, "write_file", map[string]any{"session_id": sid, "path": "stats.py", "content": `def mean(xs):
    """Return the arithmetic mean of xs."""
    return sum(xs) / len(xs)

if __name__ == "__main__":
    print(mean([1, 2, 3, 4]))
`})
	// 2. run it, keeping the result in the workspace
	if out, text := mcpCall(t, c, "execute_bash", map[string]any{"session_id": sid, "command": "python3 stats.py | tee result.txt"}); out["status"] != "succeeded" || out["stdout"] != "2.5\n" {
		t.Fatalf("step 2: %s", text)
	}

	// The runner that held the session dies; another takes over.
	a.kill()
	d.runner(t, "loop-b-"+suffix)

	// 3. read the result the first runner left
	if out, _ := mcpCall(t, c, "read_file", map[string]any{"session_id": sid, "path": "result.txt"}); out["content"] != "2.5\n" {
		t.Fatalf("step 3: %v", out)
	}
	// 4. read the docstring without running the module
	if out, _ := mcpCall(t, c, "read_docstring", map[string]any{"session_id": sid, "path": "stats.py", "function": "mean"}); out["signature"] != "def mean(xs)" || out["docstring"] != "Return the arithmetic mean of xs." {
		t.Fatalf("step 4: %v", out)
	}
	// 5. fix the module and rerun it on the new runner
	mcpCall(t, c, "write_file", map[string]any{"session_id": sid, "path": "stats.py", "content": "from statistics import median\nprint(median([1, 2, 3, 4, 100]))\n"})
	if out, text := mcpCall(t, c, "execute_code", map[string]any{"session_id": sid, "language": "python",
		"code": "import subprocess\nprint(open('result.txt').read().strip(), subprocess.check_output(['python3', 'stats.py'], text=True).strip())"}); out["stdout"] != "2.5 3\n" {
		t.Fatalf("step 5: %s", text)
	}
	if _, text := mcpCall(t, c, "list_files", map[string]any{"session_id": sid}); !strings.Contains(text, "result.txt") || !strings.Contains(text, "stats.py") {
		t.Errorf("list_files: %s", text)
	}

	// 20 jobs submitted at once run in submission order, across runners.
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = d.submit(t, map[string]any{"language": "bash", "session_id": sid, "code": fmt.Sprintf("echo %d >> order.txt; tr '\\n' ' ' < order.txt", i)}).ID
	}
	var want strings.Builder
	for i, id := range ids {
		fmt.Fprintf(&want, "%d ", i)
		if j := d.await(t, id, 2*time.Minute, terminal); j.Stdout != want.String() {
			t.Fatalf("job %d of 20 saw %q, want %q", i, j.Stdout, want.String())
		}
	}

	mcpCall(t, c, "close_session", map[string]any{"session_id": sid})
	waitReclaimed(t, d, sid)
}

// waitReclaimed waits until nothing of the session is left: no container
// made for it (where containers are reused the session took one of its
// tenant's, unlabelled, which goes back emptied: see
// TestSessionExpiryReclaimsEverything), no object, no row.
func waitReclaimed(t *testing.T, d *dev, sid string) {
	t.Helper()
	var ctrs []string
	var rows, prefixObjs int
	if !eventually.Within(30*time.Second, func() bool {
		ctrs = dockerContainers(t, "dev.gantry.session="+sid)
		rows = d.sessionRows(t, sid)
		prefixObjs = countSessionObjects(t, d, sid)
		return len(ctrs) == 0 && prefixObjs == 0 && rows == 0
	}) {
		t.Fatalf("session %s not reclaimed: %d containers, %d objects, %d rows", sid, len(ctrs), prefixObjs, rows)
	}
}

func countSessionObjects(t *testing.T, d *dev, sid string) int {
	conn, err := pgx.Connect(context.Background(), d.dbURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var tenant string
	_ = conn.QueryRow(context.Background(), `SELECT id FROM tenants WHERE name = 'default'`).Scan(&tenant)
	n, err := d.blobs(t).Count(context.Background(), blob.SessionPrefix(tenant, sid))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSessionExpiryReclaimsEverything(t *testing.T) {
	d := startDev(t, "GANTRY_SWEEP_INTERVAL=300ms")
	r := d.call(t, "POST", "/v1/sessions", `{"language":"bash","ttl_seconds":10}`)
	var s jobs.Session
	_ = json.Unmarshal(r.body, &s)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	j := d.job(t, "POST", "/v1/execute", `{"language":"bash","code":"echo kept > f.txt","session_id":"`+s.ID+`"}`)
	if j.Status != jobs.StatusSucceeded {
		t.Fatalf("job: %+v", j)
	}
	if n := countSessionObjects(t, d, s.ID); n != 1 {
		t.Fatalf("%d snapshot objects", n)
	}
	// The runner keeps the session's workspace warm in one container...
	if ctrs := containersWhere(t, d.runnerID, "test", "-e", "/workspace/f.txt"); len(ctrs) != 1 {
		t.Fatalf("%d containers hold the session's workspace", len(ctrs))
	}
	// ...until the session expires, idle, after its TTL: then its
	// container goes back to the tenant emptied, or is removed.
	waitReclaimed(t, d, s.ID)
	eventually.True(t, 30*time.Second, "the session's workspace emptied", func() bool {
		return len(containersWhere(t, d.runnerID, "test", "-e", "/workspace/f.txt")) == 0
	})
	if r := d.call(t, "GET", "/v1/sessions/"+s.ID, ""); r.status != 404 {
		t.Errorf("expired session: %d", r.status)
	}
}
