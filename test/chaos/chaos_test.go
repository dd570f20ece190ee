package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/codemode/codemodetest"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// cluster is everything TestChaos started.
type cluster struct {
	dir      string
	pg       *postgres
	nats     *natsCluster
	s3       blob.Config
	objects  *objectStore
	ingress  [2]*proc
	urls     [2]string
	runners  [2]*proc
	health   [2]string // runners' health and metrics addresses
	runnerID [2]string
	tenantID string
	key      string
}

// TestChaos is `make chaos`: a cluster of separate processes under steady
// load while faults are injected one after another. It accounts for every
// job and fails on any job lost, duplicated (a second row, or its program
// run more often than gantry started it), failed or stuck after recovery.
func TestChaos(t *testing.T) {
	if os.Getenv("GANTRY_CHAOS") != "1" {
		t.Skip("the chaos test runs with `make chaos` (GANTRY_CHAOS=1)")
	}
	rate := 1.5
	if v, err := strconv.ParseFloat(os.Getenv("GANTRY_CHAOS_RATE"), 64); err == nil && v > 0 {
		rate = v
	}
	began := time.Now()
	c := startCluster(t)
	t.Logf("cluster up in %s", time.Since(began).Round(100*time.Millisecond))

	marker, marks := codemodetest.Marker()
	cl := newClient(c.urls, c.key)
	mcpBody, _ := json.Marshal(map[string]any{"name": "marker", "description": "counts calls per key",
		"url": codemodetest.ServeHTTP(t, marker), "headers": map[string]string{"Authorization": "Bearer " + codemodetest.Token}})
	if status, b, err := cl.retry(context.Background(), 0, time.Minute, "POST", "/v1/mcp-servers", mcpBody); err != nil || status != 201 {
		t.Fatalf("register the marker: %d %s %v", status, b, err)
	}

	costs := measureCosts(t, c, cl)
	liveAcrossRunners(t, cl, 2, 16)
	// The jobs running on the runner that is killed: gantry runs them
	// again (by design), so their programs may have run twice.
	var orphans map[string]bool

	l := newLoad(cl)
	go l.run(rate)
	go l.session("session-a")
	go l.session("session-b")
	faults := []fault{
		{name: "runners' rolling restart (SIGTERM, start)", inject: rollingRestart(t, c, cl, 20), after: 10 * time.Second},
		{name: "runner kill -9 mid-job", inject: func(f *fault) {
			waitFor(t, 15*time.Second, func() bool {
				v, _ := metric("http://"+c.health[0]+"/metrics", "gantry_runner_busy_slots")
				return v > 0
			})
			f.at = time.Now()
			c.runners[0].kill9()
			orphans = runningJobs(c.runners[0].output())
			eventually.Pause(t.Context(), 3*time.Second)
			// Its containers outlive it (their agents stop when its
			// connections close); its next life removes them.
			f.detail = fmt.Sprintf("%d jobs running on it, %d containers left behind", len(orphans), countContainers(t, "dev.gantry.runner="+c.runnerID[0]))
			c.runners[0].start(t)
			f.back = time.Now()
		}, after: 20 * time.Second},
		{name: "NATS stream leader kill -9, restart", inject: func(f *fault) {
			i := c.streamLeader(t)
			f.detail = "leader " + c.nats.names[i]
			f.at = time.Now()
			c.nats.nodes[i].kill9()
			eventually.Pause(t.Context(), 5*time.Second)
			c.nats.nodes[i].start(t)
			f.back = time.Now()
		}, after: 20 * time.Second},
		{name: "Postgres stopped 20 s", inject: func(f *fault) {
			f.at = time.Now()
			if err := c.pg.ctl("stop", "-m", "fast"); err != nil {
				t.Error(err)
			}
			eventually.Pause(t.Context(), 20*time.Second)
			if err := c.pg.ctl("start"); err != nil {
				t.Fatal(err)
			}
			f.back = time.Now()
		}, after: 20 * time.Second},
		{name: "S3 stopped 20 s", inject: s3Outage(t, c, 20*time.Second), after: 20 * time.Second},
		{name: "S3 stopped 60 s", inject: s3Outage(t, c, 60*time.Second), after: 20 * time.Second},
		{name: "S3 disk full 20 s", inject: func(f *fault) {
			f.at = time.Now()
			n := c.objects.fill(t)
			f.detail = fmt.Sprintf("%d MiB written to fill it", n>>20)
			eventually.Pause(t.Context(), 20*time.Second)
			c.objects.unfill(t)
			f.back = time.Now()
		}, after: 20 * time.Second},
		{name: "ingress kill -9 mid-request", inject: func(f *fault) {
			waitFor(t, 15*time.Second, func() bool { return cl.inflight[0].Load() > 0 })
			f.detail = fmt.Sprintf("%d requests in flight", cl.inflight[0].Load())
			f.at = time.Now()
			c.ingress[0].kill9()
			eventually.Pause(t.Context(), 3*time.Second)
			c.ingress[0].start(t)
			f.back = time.Now()
		}, after: 15 * time.Second},
	}
	steady := fault{name: "steady load, no fault", at: time.Now()}
	eventually.Pause(t.Context(), 8*time.Second) // steady state before the first fault
	for i := range faults {
		f := &faults[i]
		f.start = time.Now()
		eventually.Pause(t.Context(), 3*time.Second)
		f.inject(f)
		t.Logf("%s (%s) at +%s, undone after %s", f.name, f.detail, f.at.Sub(began).Round(100*time.Millisecond), f.back.Sub(f.at).Round(100*time.Millisecond))
		eventually.Pause(t.Context(), f.after)
	}
	close(l.stop)
	l.wg.Wait()
	l.settle(90 * time.Second)

	recs := l.records()
	ats := make([]time.Time, len(faults))
	for i, f := range faults {
		ats[i] = f.at
	}
	for _, r := range recs {
		r.phase = phaseOf(r, ats)
	}
	dupRows := duplicateRows(t, c)
	steady.tally(recs, 0, marks, dupRows, orphans)
	steady.recovery = 0
	for i := range faults {
		faults[i].tally(recs, i+1, marks, dupRows, orphans)
	}
	faults = append([]fault{steady}, faults...)
	report(t, costs, faults, recs)
	checkSessions(t, cl, l)

	for i, f := range faults {
		if f.lost+f.dupRows+f.dupExec+f.stuck+f.failed > 0 {
			t.Errorf("phase %d (%s): %d lost, %d duplicated rows, %d duplicated executions, %d failed, %d stuck", i, f.name,
				f.lost, f.dupRows, f.dupExec, f.failed, f.stuck)
			for _, line := range f.examples {
				t.Log("  " + line)
			}
		}
		if f.refused > 0 {
			t.Errorf("phase %d (%s): %d submissions refused with a 4xx", i, f.name, f.refused)
		}
	}
	t.Logf("chaos run took %s", time.Since(began).Round(time.Second))
}

// s3Outage stops the cluster's S3 server for d.
func s3Outage(t *testing.T, c *cluster, d time.Duration) func(*fault) {
	return func(f *fault) {
		f.at = time.Now()
		c.objects.stop()
		eventually.Pause(t.Context(), d)
		c.objects.start(t)
		f.back = time.Now()
	}
}

// runningJobs reads a runner's log (its life up to a kill -9) for the jobs
// it had started and not finished.
func runningJobs(log string) map[string]bool {
	if i := strings.LastIndex(log, "\n=== "); i >= 0 {
		log = log[i:]
	}
	running := map[string]bool{}
	for _, line := range strings.Split(log, "\n") {
		m := jobLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if strings.HasSuffix(m[1], "started") {
			running[m[2]] = true
		} else {
			delete(running, m[2])
		}
	}
	return running
}

var jobLine = regexp.MustCompile(`msg="(?:session )?job (started|finished)".* job_id=(\S+)`)

// phaseOf is the phase a job belongs to: the first fault that hit it while
// it was live (between its submission and its end, or the end of the run
// for a job that never ended); else the last fault before it was
// submitted; 0 if none.
func phaseOf(r *record, ats []time.Time) int {
	end := time.Now()
	switch {
	case r.id == "":
		end = r.submitted
	case r.terminal && r.final.FinishedAt != nil:
		end = *r.final.FinishedAt
	}
	for i, at := range ats {
		if !at.Before(r.submitted) && at.Before(end) {
			return i + 1
		}
	}
	p := 0
	for i, at := range ats {
		if at.Before(r.submitted) {
			p = i + 1
		}
	}
	return p
}

func waitFor(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	if !eventually.Within(within, cond) {
		t.Logf("condition not met within %s; injecting anyway", within)
	}
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	gantry := os.Getenv("GANTRY_BIN")
	natsBin := os.Getenv("GANTRY_CHAOS_NATS_BIN")
	image := os.Getenv("GANTRY_IMAGE")
	if gantry == "" || natsBin == "" || image == "" {
		t.Fatal("GANTRY_BIN, GANTRY_CHAOS_NATS_BIN and GANTRY_IMAGE are required (make chaos sets them)")
	}
	// Process logs and data: a temporary directory, or GANTRY_CHAOS_LOGS
	// (kept, to read after a failed run).
	dir := os.Getenv("GANTRY_CHAOS_LOGS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("process logs in %s", dir)
	}
	c := &cluster{dir: dir}
	c.pg = startPostgres(t)
	c.nats = startNATS(t, dir, natsBin)
	c.objects = startObjectStore(t, dir)
	s3 := c.objects.cur
	c.s3 = blob.Config{Endpoint: s3.Endpoint, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey, Bucket: "chaos"}
	secretKey := strings.Repeat("5a", 32)
	env := []string{
		"GANTRY_DATABASE_URL=" + c.pg.url,
		"GANTRY_NATS_URL=" + c.nats.url(),
		"GANTRY_NATS_REPLICAS=3",
		"GANTRY_S3_ENDPOINT=" + s3.Endpoint,
		"GANTRY_S3_ACCESS_KEY=" + s3.AccessKey,
		"GANTRY_S3_SECRET_KEY=" + s3.SecretKey,
		"GANTRY_S3_BUCKET=chaos",
		"GANTRY_SECRET_KEY=" + secretKey,
		"GANTRY_MCP_ALLOW_PRIVATE=true",
		"GANTRY_ACK_WAIT=5s",
		"GANTRY_LOG_FORMAT=text",
	}
	for i := range 2 {
		port := freePort(t)
		c.urls[i] = fmt.Sprintf("http://127.0.0.1:%d", port)
		c.ingress[i] = newProc(t, dir, fmt.Sprintf("ingress-%d", i+1), append(env, fmt.Sprintf("GANTRY_ADDR=127.0.0.1:%d", port)), gantry, "ingress")
		c.ingress[i].start(t)
		t.Cleanup(c.ingress[i].stop)
	}
	suffix := strings.ToLower(jobs.NewID("r")[20:])
	for i := range 2 {
		c.runnerID[i] = fmt.Sprintf("chaos-%s-%d", suffix, i+1)
		c.health[i] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		c.runners[i] = newProc(t, dir, fmt.Sprintf("runner-%d", i+1), append(env,
			"GANTRY_RUNNER_ID="+c.runnerID[i], "GANTRY_RUNNER_ADDR="+c.health[i], "GANTRY_RUNNER_SLOTS=3",
			// Stateful sessions under gVisor where runsc can checkpoint
			// (they run as root here), each runner's state in its own
			// directory below this one (GANTRY_LIVE_DIR/<runner id>).
			"GANTRY_LIVE_DIR="+filepath.Join(dir, "live"),
			// A rolling restart drains as a deploy would: running jobs
			// finish (a job past the drain timeout is handed back and
			// runs again, which the report would count as executed twice).
			"GANTRY_IMAGE="+image, "GANTRY_DRAIN_TIMEOUT=30s"), gantry, "runner")
		c.runners[i].start(t)
	}
	// What a runner killed -9 and not started again would leave mounted
	// (its images' roots) goes before dir.
	t.Cleanup(func() { unmountUnder(t, filepath.Join(dir, "live")) })
	// Runners stop first; then every container they made goes, stopped
	// ones left by a kill -9 included.
	t.Cleanup(func() {
		for _, r := range c.runners {
			r.stop()
		}
		removed := 0
		for _, id := range c.runnerID {
			removed += dockerRemove(t, "dev.gantry.runner="+id)
		}
		t.Logf("removed %d containers the runners left", removed)
	})
	for i := range 2 {
		waitHTTP(t, c.urls[i]+"/readyz", 3*time.Minute, c.ingress[i])
	}
	for i := range 2 {
		waitHTTP(t, "http://"+c.health[i]+"/readyz", 3*time.Minute, c.runners[i])
	}
	st, err := store.Open(context.Background(), c.pg.url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c.tenantID, c.key = storetest.Tenant(t, st, "chaos")
	return c
}

// streamLeader is the index of the NATS node leading the job stream.
func (c *cluster) streamLeader(t *testing.T) int {
	t.Helper()
	nc, err := nats.Connect(c.nats.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, queue.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	leader := s.CachedInfo().Cluster.Leader
	for i, n := range c.nats.names {
		if n == leader {
			return i
		}
	}
	t.Fatalf("stream leader %q is none of %v", leader, c.nats.names)
	return 0
}

// duplicateRows counts, per key, the jobs rows beyond the first: a job the
// client submitted once (retries included) must be one row.
func duplicateRows(t *testing.T, c *cluster) map[string]int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), c.pg.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(),
		`SELECT metadata->>'chaos', count(*) FROM jobs WHERE metadata ? 'chaos' GROUP BY 1 HAVING count(*) > 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		out[k] = n - 1
	}
	return out
}

// checkSessions: each session's log holds the number of every job of the
// session that was accepted, once each, in submission order.
func checkSessions(t *testing.T, cl *client, l *load) {
	t.Helper()
	for id, recs := range l.sessionIDs() {
		var want strings.Builder
		for i, r := range recs {
			if r.id != "" && r.terminal && r.final.Status == jobs.StatusSucceeded {
				fmt.Fprintf(&want, "%d\n", i+1)
			}
		}
		status, b, err := cl.retry(context.Background(), 0, time.Minute, "GET", "/v1/sessions/"+id+"/files/log.txt", nil)
		if err != nil || status != 200 {
			t.Errorf("session %s log: %d %s %v", id, status, b, err)
			continue
		}
		if string(b) != want.String() {
			t.Errorf("session %s log.txt:\n%q\nwant the accepted jobs, once each, in order:\n%q", id, b, want.String())
		} else {
			t.Logf("session %s: %d jobs, its workspace holds each once, in order", id, len(recs))
		}
	}
}

// s3Objects counts the objects in the bucket.
func (c *cluster) s3Objects(t *testing.T) int {
	t.Helper()
	b, err := blob.New(c.s3)
	if err != nil {
		t.Fatal(err)
	}
	n, err := b.Count(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return n
}
