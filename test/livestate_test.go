package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/gantryhq/gantry/internal/mounts"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// liveSession makes a stateful session over the API.
func (d *dev) liveSession(t *testing.T, body string) jobs.Session {
	t.Helper()
	r := d.call(t, "POST", "/v1/sessions", body)
	var sess jobs.Session
	if err := json.Unmarshal(r.body, &sess); err != nil || r.status != 201 {
		t.Fatalf("create a session %s: %d %s", body, r.status, r.body)
	}
	return sess
}

// cell runs Python in the session and waits for it.
func (d *dev) cell(t *testing.T, sid, code string) jobs.Job {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"language": "python", "code": code, "session_id": sid})
	return d.job(t, "POST", "/v1/execute", string(b))
}

// wantOut checks a cell's output and what it found of the live state.
func wantOut(t *testing.T, what string, j jobs.Job, stdout string, state jobs.LiveState) {
	t.Helper()
	if j.Status != jobs.StatusSucceeded || j.Stdout != stdout || j.LiveState != state {
		t.Fatalf("%s: %s %q, live %s (%s), stderr %q; want %q, %s", what, j.Status, j.Stdout, j.LiveState, j.LiveStateReason, j.Stderr, stdout, state)
	}
}

// TestLiveState is issue 34 over gantry's own API and MCP, against the
// built binary whose runner runs stateful sessions under gVisor: pause and
// resume with memory, processes, /tmp and files; snapshots and sessions
// made from them; forks, apart from each other; another tenant gets 404
// for each. It logs the figures of each operation on this machine.
func TestLiveState(t *testing.T) {
	needsGVisor(t)
	d := startDev(t, "GANTRY_RUNNER_SLOTS=4")
	sess := d.liveSession(t, `{"stateful": true, "durable": true, "ttl_seconds": 600}`)
	if !sess.Durable {
		t.Fatalf("a session made with durable: %+v", sess)
	}
	wantOut(t, "first cell", d.cell(t, sess.ID, `import subprocess, pandas as pd
frame = pd.DataFrame({"n": range(1000)})
x = 41
open("/tmp/t.txt", "w").write("tmp")
open("/workspace/w.txt", "w").write("ws")
sleeper = subprocess.Popen(["sleep", "600"])
print("ready")`), "ready\n", jobs.LiveNew)

	figures := map[string]time.Duration{}
	timed := func(name string, f func()) {
		start := time.Now()
		f()
		figures[name] = time.Since(start)
	}

	t.Run("not durable", func(t *testing.T) {
		// A stateful session is not durable unless it asks (the operator's
		// default here): it cannot be paused, snapshotted or forked, and
		// says so; it goes on as it was.
		plain := d.liveSession(t, `{"stateful": true}`)
		if plain.Durable {
			t.Fatalf("a stateful session made without durable: %+v", plain)
		}
		wantOut(t, "its cell", d.cell(t, plain.ID, "z = 5\nprint(z)"), "5\n", jobs.LiveNew)
		for _, op := range []string{"pause", "snapshots", "fork"} {
			r := d.call(t, "POST", "/v1/sessions/"+plain.ID+"/"+op, `{}`)
			if r.status != 409 || !strings.Contains(string(r.body), `\"durable\": true`) {
				t.Errorf("%s of a session that is not durable: %d %s", op, r.status, r.body)
			}
		}
		wantOut(t, "after", d.cell(t, plain.ID, "print(z)"), "5\n", jobs.LiveKept)
		for body, field := range map[string]string{
			`{"durable": true}`: "durable",
			`{"stateful": true, "on_timeout": "pause", "durable": false}`: "durable",
		} {
			if r := d.call(t, "POST", "/v1/sessions", body); r.status != 400 || !strings.Contains(string(r.body), field) {
				t.Errorf("create %s: %d %s", body, r.status, r.body)
			}
		}
	})

	t.Run("pause, resume", func(t *testing.T) {
		var paused jobs.Session
		timed("pause", func() {
			r := d.call(t, "POST", "/v1/sessions/"+sess.ID+"/pause", "")
			if err := json.Unmarshal(r.body, &paused); err != nil || r.status != 200 {
				t.Fatalf("pause: %d %s", r.status, r.body)
			}
		})
		if paused.State != jobs.SessionPaused {
			t.Fatalf("after pause: %+v", paused)
		}
		var got jobs.Session
		if r := d.call(t, "GET", "/v1/sessions/"+sess.ID, ""); json.Unmarshal(r.body, &got) != nil || got.State != jobs.SessionPaused {
			t.Fatalf("GET a paused session: %s", r.body)
		}
		var j jobs.Job
		timed("resume (its next cell's answer)", func() {
			j = d.cell(t, sess.ID, `x += 1
print(x, len(frame), open("/tmp/t.txt").read(), open("/workspace/w.txt").read(), sleeper.poll() is None)`)
		})
		wantOut(t, "the cell after the pause", j, "42 1000 tmp ws True\n", jobs.LiveRestored)
		if !strings.Contains(j.LiveStateReason, "resumed from its pause") {
			t.Errorf("live_state_reason %q", j.LiveStateReason)
		}
		// POST resume brings it back before any call.
		d.call(t, "POST", "/v1/sessions/"+sess.ID+"/pause", "")
		timed("resume (POST resume)", func() {
			if r := d.call(t, "POST", "/v1/sessions/"+sess.ID+"/resume", ""); r.status != 200 || json.Unmarshal(r.body, &got) != nil || got.State != jobs.SessionRunning {
				t.Fatalf("resume: %d %s", r.status, r.body)
			}
		})
		wantOut(t, "the cell after resume", d.cell(t, sess.ID, "print(x)"), "42\n", jobs.LiveKept)
	})

	var snap jobs.Snapshot
	t.Run("snapshot, a session from it", func(t *testing.T) {
		timed("snapshot", func() {
			r := d.call(t, "POST", "/v1/sessions/"+sess.ID+"/snapshots", `{"name": "at 42"}`)
			if err := json.Unmarshal(r.body, &snap); err != nil || r.status != 201 || !jobs.ValidID("snp", snap.ID) || snap.Name != "at 42" || snap.Bytes == 0 {
				t.Fatalf("snapshot: %d %s", r.status, r.body)
			}
		})
		wantOut(t, "the session goes on", d.cell(t, sess.ID, "x = 100\nprint(x)"), "100\n", jobs.LiveKept)
		from := d.liveSession(t, `{"snapshot": "`+snap.ID+`"}`)
		var j jobs.Job
		timed("a session from a snapshot (its first cell's answer)", func() {
			j = d.cell(t, from.ID, `print(x, open("/workspace/w.txt").read(), sleeper.poll() is None)`)
		})
		wantOut(t, "a session from the snapshot", j, "42 ws True\n", jobs.LiveRestored)
		var list struct{ Snapshots []jobs.Snapshot }
		if r := d.call(t, "GET", "/v1/snapshots", ""); json.Unmarshal(r.body, &list) != nil || len(list.Snapshots) != 1 || list.Snapshots[0].ID != snap.ID {
			t.Errorf("list: %s", r.body)
		}
	})

	t.Run("fork", func(t *testing.T) {
		var fork jobs.Fork
		timed("fork N=2", func() {
			r := d.call(t, "POST", "/v1/sessions/"+sess.ID+"/fork", `{"count": 2}`)
			if err := json.Unmarshal(r.body, &fork); err != nil || r.status != 201 || len(fork.Sessions) != 2 {
				t.Fatalf("fork: %d %s", r.status, r.body)
			}
		})
		a, b := fork.Sessions[0].ID, fork.Sessions[1].ID
		wantOut(t, "fork a", d.cell(t, a, "x += 1\nopen('/workspace/a.txt', 'w').write('a')\nprint(x)"), "101\n", jobs.LiveRestored)
		wantOut(t, "fork b", d.cell(t, b, "x += 2\nopen('/tmp/b.txt', 'w').write('b')\nprint(x)"), "102\n", jobs.LiveRestored)
		probe := "import os\nprint(x, os.path.exists('/workspace/a.txt'), os.path.exists('/tmp/b.txt'), sleeper.poll() is None)"
		wantOut(t, "the parent", d.cell(t, sess.ID, probe), "100 False False True\n", jobs.LiveKept)
		wantOut(t, "fork a after", d.cell(t, a, probe), "101 True False True\n", jobs.LiveKept)
		wantOut(t, "fork b after", d.cell(t, b, probe), "102 False True True\n", jobs.LiveKept)
		for _, n := range []int{1, 4} {
			timed(fmt.Sprintf("fork N=%d", n), func() {
				r := d.call(t, "POST", "/v1/sessions/"+sess.ID+"/fork", fmt.Sprintf(`{"count": %d, "ttl_seconds": 60}`, n))
				if err := json.Unmarshal(r.body, &fork); err != nil || r.status != 201 || len(fork.Sessions) != n {
					t.Fatalf("fork %d: %d %s", n, r.status, r.body)
				}
			})
			for _, s := range fork.Sessions {
				d.call(t, "DELETE", "/v1/sessions/"+s.ID, "")
			}
		}
	})

	t.Run("another tenant gets 404", func(t *testing.T) {
		d.cli(t, "tenants", "create", "live-other")
		other := &dev{proc: d.proc, url: d.url, key: regexp.MustCompile(`gk_\S+`).FindString(d.cli(t, "keys", "create", "live-other"))}
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/v1/sessions/" + sess.ID + "/pause", ""},
			{"POST", "/v1/sessions/" + sess.ID + "/resume", ""},
			{"POST", "/v1/sessions/" + sess.ID + "/snapshots", "{}"},
			{"POST", "/v1/sessions/" + sess.ID + "/fork", `{"count": 1}`},
			{"POST", "/v1/sessions", `{"snapshot": "` + snap.ID + `"}`},
			{"GET", "/v1/snapshots/" + snap.ID, ""},
			{"DELETE", "/v1/snapshots/" + snap.ID, ""},
		} {
			if r := other.call(t, c.method, c.path, c.body); r.status != 404 {
				t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.body)
			}
		}
		if r := other.call(t, "GET", "/v1/snapshots", ""); r.status != 200 || strings.Contains(string(r.body), snap.ID) {
			t.Errorf("their list: %d %s", r.status, r.body)
		}
	})

	t.Run("over MCP", func(t *testing.T) {
		c, err := client.NewStreamableHttpClient(d.url+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + d.key}))
		if err != nil {
			t.Fatal(err)
		}
		initialize(t, c)
		out, _ := mcpCall(t, c, "create_session", map[string]any{"stateful": true, "durable": true})
		sid, _ := out["session_id"].(string)
		mcpCall(t, c, "execute_code", map[string]any{"language": "python", "code": "y = 7", "session_id": sid})
		if out, text := mcpCall(t, c, "pause_session", map[string]any{"session_id": sid}); out["state"] != "paused" {
			t.Fatalf("pause_session: %v %q", out, text)
		}
		out, text := mcpCall(t, c, "snapshot_session", map[string]any{"session_id": sid, "name": "y"})
		snp, _ := out["snapshot_id"].(string)
		if !jobs.ValidID("snp", snp) {
			t.Fatalf("snapshot_session: %v %q", out, text)
		}
		out, text = mcpCall(t, c, "fork_session", map[string]any{"session_id": sid, "count": 2})
		ids, _ := out["session_ids"].([]any)
		if len(ids) != 2 {
			t.Fatalf("fork_session: %v %q", out, text)
		}
		from, _ := mcpCall(t, c, "create_session", map[string]any{"snapshot": snp})
		for _, id := range append(ids, sid, from["session_id"]) {
			out, text := mcpCall(t, c, "execute_code", map[string]any{"language": "python", "code": "print(y * 6)", "session_id": id})
			if out["stdout"] != "42\n" {
				t.Errorf("y in %v: %v %q", id, out, text)
			}
		}
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "fork_session", map[string]any{"session_id": "ses_nope"}
		if res, err := c.CallTool(context.Background(), req); err != nil || !res.IsError {
			t.Errorf("fork_session of no session: %+v %v", res, err)
		}
	})

	var names []string
	for name := range figures {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Logf("%-52s %6d ms", name, figures[name].Milliseconds())
	}
}

// TestLiveStateSurvivesDevRestart is issue 34's "0 sessions lose variables
// across a graceful restart": gantry dev told to stop (SIGTERM) pauses the
// live sessions its runner holds; started again on the same data dir, each
// session's next cell finds its variables, restored.
func TestLiveStateSurvivesDevRestart(t *testing.T) {
	needsGVisor(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s3Addr := l.Addr().String()
	l.Close()
	dataDir := t.TempDir()
	// A dev killed while it stopped (past proc.stop's patience, on a
	// loaded machine) leaves its images' roots mounted in the data dir.
	t.Cleanup(func() { unmountUnder(t, dataDir) })
	same := []string{
		"GANTRY_DATA_DIR=" + dataDir, "GANTRY_DATABASE_URL=" + storetest.DatabaseURL(t),
		"GANTRY_DEV_S3_ADDR=" + s3Addr, "GANTRY_S3_ACCESS_KEY=", "GANTRY_S3_SECRET_KEY=", // dev's own
		"GANTRY_RUNNER_SLOTS=4", "GANTRY_DRAIN_TIMEOUT=10s",
	}
	d := startDev(t, same...)
	var ids []string
	for i := range 3 {
		s := d.liveSession(t, `{"stateful": true, "durable": true, "ttl_seconds": 600}`)
		ids = append(ids, s.ID)
		wantOut(t, "set", d.cell(t, s.ID, fmt.Sprintf("counter = %d\nimport subprocess\nkid = subprocess.Popen(['sleep', '600'])\nprint(counter)", i*10)),
			fmt.Sprintf("%d\n", i*10), jobs.LiveNew)
	}
	d.stop()
	if !strings.Contains(d.output(), "pausing the live sessions this runner holds before it stops") {
		t.Errorf("the stopping runner did not say it paused its sessions")
	}

	d = startDev(t, same...)
	for i, id := range ids {
		var s jobs.Session
		if r := d.call(t, "GET", "/v1/sessions/"+id, ""); json.Unmarshal(r.body, &s) != nil || s.State != jobs.SessionPaused {
			t.Errorf("session %d after the restart: %s", i, r.body)
		}
		wantOut(t, fmt.Sprintf("session %d", i), d.cell(t, id, "counter += 1\nprint(counter, kid.poll() is None)"),
			fmt.Sprintf("%d True\n", i*10+1), jobs.LiveRestored)
		d.call(t, "DELETE", "/v1/sessions/"+id, "")
	}
}

// unmountUnder unmounts (lazily) what is mounted below dir: the images'
// roots a runner under gVisor mounts, if one killed -9 left them.
func unmountUnder(t *testing.T, dir string) {
	for _, m := range mounts.UnmountBelow(dir) {
		t.Logf("left mounted: %s", m)
	}
}
