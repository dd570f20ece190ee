package test

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/codemode/codemodetest"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestPostgresOutage stops gantry's Postgres (its own throwaway cluster,
// `pg_ctl stop -m fast`) under load and starts it again: every accepted
// job — plain ones and a session's two — finishes exactly once (its
// program calls a counting MCP tool, the Marker fixture, outside the
// sandbox), none is stuck or lost, none spends an attempt, a submission
// during the outage is refused (503) and not accepted, and all is done
// within 10 s of Postgres's return.
// GANTRY_TEST_LONG_OUTAGE=1 adds a 120 s outage.
func TestPostgresOutage(t *testing.T) {
	outages := []time.Duration{10 * time.Second, 30 * time.Second}
	if os.Getenv("GANTRY_TEST_LONG_OUTAGE") == "1" {
		outages = append(outages, 120*time.Second)
	}
	pg := storetest.NewCluster(t)
	const slots = 6
	// No burst slots: the second wave stays queued while the first runs
	// (a job waiting 1 s would otherwise start in a slot of its own, and
	// one that started just before Postgres stopped makes its call during
	// the outage, retrying past its own 30 s timeout).
	d := startDev(t, "GANTRY_DATABASE_URL="+pg.URL, fmt.Sprintf("GANTRY_RUNNER_SLOTS=%d", slots), fmt.Sprintf("GANTRY_RUNNER_MAX_SLOTS=%d", slots))
	srv, marks := codemodetest.Marker()
	r := d.call(t, "POST", "/v1/mcp-servers", mustJSON(map[string]any{"name": "marker", "url": codemodetest.ServeHTTP(t, srv),
		"headers": map[string]string{"Authorization": "Bearer " + codemodetest.Token}}))
	if r.status != 201 {
		t.Fatalf("register the marker: %d %s", r.status, r.body)
	}
	for _, outage := range outages {
		t.Run(outage.String(), func(t *testing.T) { outageScenario(t, d, pg, marks, outage, slots) })
	}
}

func outageScenario(t *testing.T, d *dev, pg *storetest.Cluster, marks *codemodetest.Marks, outage time.Duration, slots int) {
	// The program marks once (retrying only while gantry answers that it
	// cannot make the call: then the call never reached the marker), then
	// sleeps 3 s.
	program := func(key string) string {
		return fmt.Sprintf(`import time, gantry
while True:
    try:
        gantry.call('marker', 'mark', {'key': %q})
        break
    except gantry.ToolError as e:
        if e.code != 'unavailable':
            raise
        time.sleep(1)
time.sleep(3)
print('done')
`, key)
	}
	submitIn := func(key, sessionID string) resp {
		req := map[string]any{"language": "python", "code": program(key), "idempotency_key": key,
			"limits": map[string]any{"tool_calls": 1000}}
		if sessionID != "" {
			req["session_id"] = sessionID
		}
		return d.call(t, "POST", "/v1/jobs", mustJSON(req))
	}
	submit := func(key string) resp { return submitIn(key, "") }
	began := time.Now().Add(-time.Second) // clocks: the same machine
	prefix := fmt.Sprintf("outage-%s-", outage)
	r := d.call(t, "POST", "/v1/sessions", `{"language":"python"}`)
	var sess jobs.Session
	if err := json.Unmarshal(r.body, &sess); r.status != 201 || err != nil {
		t.Fatalf("create session: %d %s", r.status, r.body)
	}
	// A wave running when Postgres stops (a session's job among them),
	// the next one queued (the session's second job among them).
	accepted := map[string]string{} // job id -> key
	var keys []string
	for i := range 2*slots - 1 {
		key, sid := fmt.Sprintf("%s%02d", prefix, i), ""
		if i < 2 {
			key, sid = fmt.Sprintf("%ssession-%d", prefix, i), sess.ID
		}
		r := submitIn(key, sid)
		var j jobs.Job
		if err := json.Unmarshal(r.body, &j); r.status != 202 || err != nil {
			t.Fatalf("submit %s: %d %s", key, r.status, r.body)
		}
		accepted[j.ID], keys = key, append(keys, key)
	}
	// Stop Postgres while a full wave runs and has made its call.
	marked := 0
	if !eventually.Within(2*time.Minute, func() bool {
		marked = 0
		for _, k := range keys {
			marked += marks.Count(k)
		}
		return marked >= slots
	}) {
		t.Fatalf("only %d of %d jobs ran", marked, slots)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var running []string
	for _, k := range keys {
		if marks.Count(k) > 0 {
			running = append(running, strings.TrimPrefix(k, prefix))
		}
	}
	t.Logf("Postgres stopped while these ran: %v", running)

	// A submission now is refused, so it was not accepted.
	lateKey := prefix + "late"
	if r := submit(lateKey); r.status != 503 || r.header.Get("Retry-After") == "" {
		t.Errorf("submission during the outage: %d %s (Retry-After %q), want 503", r.status, r.body, r.header.Get("Retry-After"))
	}
	time.Sleep(time.Until(stopped.Add(outage))) // the outage itself
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("Postgres back after %s", back.Sub(stopped).Round(100*time.Millisecond))

	// The refused submission, retried with its key, is accepted once.
	var late jobs.Job
	var lr resp
	if !eventually.Within(10*time.Second, func() bool {
		lr = submit(lateKey)
		return lr.status != 503
	}) || lr.status != 202 {
		t.Fatalf("late submission after the outage: %d %s", lr.status, lr.body)
	}
	_ = json.Unmarshal(lr.body, &late)
	accepted[late.ID] = lateKey

	// Watch every job end, noting when (sampled every 100 ms).
	ended := map[string]time.Duration{}
	final := map[string]jobs.Job{}
	sample := time.NewTicker(100 * time.Millisecond)
	defer sample.Stop()
	for ; len(final) < len(accepted); <-sample.C {
		if time.Since(back) > 60*time.Second {
			var stuck []string
			for id := range accepted {
				if _, ok := final[id]; !ok {
					stuck = append(stuck, id)
				}
			}
			t.Fatalf("stuck a minute after Postgres came back: %v", stuck)
		}
		for id := range accepted {
			if _, ok := final[id]; ok {
				continue
			}
			r := d.call(t, "GET", "/v1/jobs/"+id, "")
			var j jobs.Job
			if r.status == 200 && json.Unmarshal(r.body, &j) == nil && j.Status.Terminal() {
				final[id], ended[id] = j, time.Since(back)
			}
		}
	}

	// Exactly once each, no attempt spent, nothing extra.
	var recorded []time.Duration
	for id, key := range accepted {
		j := final[id]
		if j.Status != jobs.StatusSucceeded || j.Stdout != "done\n" || j.Attempt != 1 {
			t.Errorf("job %s (%s): %s attempt %d stdout %q error %+v", id, key, j.Status, j.Attempt, j.Stdout, j.Error)
		}
		if c := marks.Count(key); c != 1 {
			t.Errorf("job %s (%s) ran %d times", id, key, c)
		}
		recorded = append(recorded, ended[id])
	}
	// The history holds these jobs and no other since the scenario began
	// (a refused submission left nothing behind).
	r = d.call(t, "GET", "/v1/jobs?limit=100", "")
	var list struct{ Jobs []jobs.Job }
	_ = json.Unmarshal(r.body, &list)
	mine := 0
	for _, j := range list.Jobs {
		if _, ok := accepted[j.ID]; ok {
			mine++
		} else if !j.CreatedAt.Before(began) {
			t.Errorf("a job that was never accepted: %s %s", j.ID, j.Status)
		}
	}
	if mine != len(accepted) {
		t.Errorf("%d of the %d accepted jobs are listed", mine, len(accepted))
	}
	sort.Slice(recorded, func(i, j int) bool { return recorded[i] < recorded[j] })
	last := recorded[len(recorded)-1]
	t.Logf("outage %s: %d accepted = %d finished once (0 stuck, 0 lost, 0 attempts spent); after Postgres returned: first result recorded in %s, the held wave in %s, all done in %s",
		outage, len(accepted), len(final), recorded[0].Round(10*time.Millisecond), recorded[slots-1].Round(10*time.Millisecond), last.Round(10*time.Millisecond))
	if last > 10*time.Second {
		t.Errorf("the last job finished %s after Postgres returned, want within 10s", last)
	}
}
