package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

// TestStatefulSession is issue 21's "done" for stateful sessions, as a
// client sees it over HTTP and MCP: globals and background processes
// persist between jobs, another tenant gets 404, a killed runner loses
// only the live state (files intact, reported), and a deleted session's
// processes are dead.
func TestStatefulSession(t *testing.T) {
	// Live state in memory, as where runsc cannot checkpoint (the gVisor
	// path, whose live state outlives its runner, is TestLiveState's).
	d := startDev(t, "GANTRY_DEV_RUNNER=false", "GANTRY_ACK_WAIT=2s", "GANTRY_LIVE_STATE=memory")
	suffix := uniqueSuffix()
	a := d.runner(t, "stateful-a-"+suffix)

	r := d.call(t, "POST", "/v1/sessions", `{"language":"python","stateful":true,"ttl_seconds":600}`)
	var sess jobs.Session
	if err := json.Unmarshal(r.body, &sess); err != nil || r.status != 201 || !sess.Stateful {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	exec := func(t *testing.T, d *dev, lang, code string) jobs.Job {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"language": lang, "code": code, "session_id": sess.ID})
		return d.job(t, "POST", "/v1/execute", string(body))
	}
	value := func(j jobs.Job) string {
		if j.Value == nil {
			return "<none>"
		}
		return j.Value.Text
	}

	j := exec(t, d, "python", "import pandas as pd\nrows = pd.DataFrame({'n': [1, 2, 3]})\nopen('kept.txt', 'w').write('files survive')\ncalls = 1")
	if j.Status != jobs.StatusSucceeded || j.LiveState != jobs.LiveNew || j.Value != nil {
		t.Fatalf("job 1: %s %s %q", j.Status, j.LiveState, j.Stderr)
	}
	j = exec(t, d, "python", "calls += 1\nrows.n.sum() * calls")
	if j.LiveState != jobs.LiveKept || value(j) != "12" {
		t.Fatalf("job 2: %s %s value %s %q", j.Status, j.LiveState, value(j), j.Stderr)
	}
	if j = exec(t, d, "python", "rows"); j.Value == nil || !strings.Contains(j.Value.HTML, "<table") {
		t.Errorf("a DataFrame's value: %+v", j.Value)
	}
	j = exec(t, d, "bash", "sleep 600 >/dev/null 2>&1 &\necho $! > /tmp/sleeper.pid")
	if j.Status != jobs.StatusSucceeded || j.LiveState != jobs.LiveKept {
		t.Fatalf("background job: %s %s %q", j.Status, j.LiveState, j.Stderr)
	}
	if j = exec(t, d, "bash", "kill -0 $(cat /tmp/sleeper.pid) && echo alive"); j.Stdout != "alive\n" {
		t.Fatalf("the background process did not outlive its job: %q %q", j.Stdout, j.Stderr)
	}

	t.Run("another tenant gets 404", func(t *testing.T) {
		d.cli(t, "tenants", "create", "stateful-other")
		other := &dev{proc: d.proc, url: d.url, key: d.cli(t, "keys", "create", "stateful-other")}
		if r := other.call(t, "GET", "/v1/sessions/"+sess.ID, ""); r.status != 404 {
			t.Errorf("GET the session: %d", r.status)
		}
		if r := other.call(t, "POST", "/v1/execute", `{"language":"python","code":"calls","session_id":"`+sess.ID+`"}`); r.status != 404 {
			t.Errorf("run in the session: %d %s", r.status, r.body)
		}
		if r := other.call(t, "GET", "/v1/jobs/"+j.ID, ""); r.status != 404 {
			t.Errorf("read the session's job: %d", r.status)
		}
		if r := other.call(t, "DELETE", "/v1/sessions/"+sess.ID, ""); r.status != 404 {
			t.Errorf("close the session: %d", r.status)
		}
	})

	// The runner holding the session dies; another takes over: the live
	// state is lost, said so, and the files are all there.
	a.kill()
	runnerB := "stateful-b-" + suffix
	d.runner(t, runnerB)
	j = exec(t, d, "python", "print(open('kept.txt').read(), 'calls' in globals())")
	if j.Status != jobs.StatusSucceeded || j.Stdout != "files survive False\n" || j.LiveState != jobs.LiveLost || j.LiveStateReason == "" {
		t.Fatalf("after the runner died: %s %q %s %q %q", j.Status, j.Stdout, j.LiveState, j.LiveStateReason, j.Stderr)
	}
	if j = exec(t, d, "bash", "test -e /tmp/sleeper.pid || echo gone"); j.Stdout != "gone\n" || j.LiveState != jobs.LiveKept {
		t.Errorf("/tmp after the runner died: %q %s", j.Stdout, j.LiveState)
	}
	if j = exec(t, d, "bash", "sleep 600 >/dev/null 2>&1 & echo started"); j.Stdout != "started\n" {
		t.Fatalf("background job: %q %q", j.Stdout, j.Stderr)
	}
	// The job's answer may come before its background child has become
	// sleep (bash forks, then the child execs).
	eventually.NoError(t, 10*time.Second, "one container running the session's background process", func() error {
		if ctrs := containersRunning(t, runnerB, "sleep 600"); len(ctrs) != 1 {
			return fmt.Errorf("%d containers run it", len(ctrs))
		}
		return nil
	})

	// Closing the session kills everything in it.
	if r := d.call(t, "DELETE", "/v1/sessions/"+sess.ID, ""); r.status != 204 && r.status != 200 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	waitReclaimed(t, d, sess.ID)
	eventually.True(t, 30*time.Second, "the session's background process killed", func() bool {
		return len(containersRunning(t, runnerB, "sleep 600")) == 0
	})
}

// TestStatefulSessionOverMCP: create_session with stateful, then
// execute_code calls that build on each other, each returning its value.
func TestStatefulSessionOverMCP(t *testing.T) {
	d := startDev(t)
	c, err := client.NewStreamableHttpClient(d.url+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + d.key}))
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	out, text := mcpCall(t, c, "create_session", map[string]any{"stateful": true})
	sid, _ := out["session_id"].(string)
	if out["stateful"] != true || !strings.HasPrefix(text, "stateful session ") {
		t.Fatalf("create_session: %v %q", out, text)
	}
	for i, step := range []struct{ code, value string }{
		{"import numpy as np\nxs = np.arange(10)", ""},
		{"xs.sum()", "45"},
		{"total = int(xs.sum())\ntotal * 2", "90"},
	} {
		out, text := mcpCall(t, c, "execute_code", map[string]any{"language": "python", "code": step.code, "session_id": sid})
		got := ""
		if v, ok := out["value"].(map[string]any); ok {
			got, _ = v["text/plain"].(string)
		}
		if out["status"] != "succeeded" || got != step.value {
			t.Fatalf("step %d: %v %q", i, out, text)
		}
		if step.value != "" && !strings.Contains(text, "--- value ---\n"+step.value) {
			t.Errorf("step %d: the text carries no value: %q", i, text)
		}
		if want := map[bool]string{true: "new", false: "kept"}[i == 0]; out["live_state"] != want {
			t.Errorf("step %d: live_state %v, want %s", i, out["live_state"], want)
		}
	}
}
