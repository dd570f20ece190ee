package test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/blob/blobtest"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/migrations"
	"github.com/gantryhq/gantry/queue/queuetest"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestClusterStart is an operator's first start of a small cluster on
// fresh engines, every process started at once and before the engines are
// up: an empty database that cannot be reached yet, a 3-node NATS cluster
// none of whose nodes is up, then one node (so no leader),
// GANTRY_NATS_REPLICAS=3, an S3 server without the bucket, two ingresses
// and a runner. Nobody creates anything by hand; each process says what it
// waits for, everything comes up, and a job submitted on one ingress is
// answered on the other.
func TestClusterStart(t *testing.T) {
	gantryBin(t) // skips in -short mode before any engine starts
	dbURL := storetest.DatabaseURL(t)
	nats := queuetest.NewCluster(t, 3)
	// Postgres is reached through a port nothing listens on yet (none of
	// the NATS nodes' either: a port picked after theirs were released
	// could have been one of them).
	pgAddr, lateURL := lateAddress(t, dbURL, nats.Ports())
	s3 := blobtest.Server(t)
	env := []string{
		"GANTRY_DATABASE_URL=" + lateURL,
		"GANTRY_NATS_URL=" + nats.URL(),
		"GANTRY_NATS_REPLICAS=3",
		"GANTRY_S3_ENDPOINT=" + s3.Endpoint,
		"GANTRY_S3_ACCESS_KEY=" + s3.AccessKey,
		"GANTRY_S3_SECRET_KEY=" + s3.SecretKey,
		"GANTRY_S3_BUCKET=fresh-cluster",
		"GANTRY_ADDR=127.0.0.1:0",
		"GANTRY_RUNNER_ADDR=127.0.0.1:0",
		"GANTRY_DRAIN_TIMEOUT=1s",
	}
	ingressA := start(t, env, "ingress")
	ingressB := start(t, env, "ingress")
	runner := start(t, append(env, "GANTRY_RUNNER_ID=e2e-cluster-"+uniqueSuffix(), "GANTRY_RUNNER_SLOTS=1"), "runner")

	// The runner is alive while it waits, but not ready.
	healthAddr := runner.waitOutput(t, regexp.MustCompile(`runner health and metrics listening".* addr=(\S+)`), 30*time.Second)[1]
	if r := get(t, "http://"+healthAddr+"/healthz"); r.status != 200 {
		t.Errorf("runner /healthz while starting: %d %s", r.status, r.body)
	}
	if r := get(t, "http://"+healthAddr+"/readyz"); r.status != 503 || !strings.Contains(string(r.body), `"starting"`) {
		t.Errorf("runner /readyz while starting: %d %s", r.status, r.body)
	}

	// Each engine comes up only once the processes said they wait for it.
	ingressA.waitOutput(t, regexp.MustCompile(`waiting for postgres`), time.Minute)
	forward(t, pgAddr, dbAddr(t, dbURL))
	ingressA.waitOutput(t, regexp.MustCompile(`waiting for nats at nats://127.0.0.1`), time.Minute)
	nats.Start(0)
	// Both ingresses try to create the R3 stream before the cluster can
	// have a leader, and say that they wait.
	waiting := regexp.MustCompile(`waiting for the JetStream cluster`)
	ingressA.waitOutput(t, waiting, time.Minute)
	ingressB.waitOutput(t, waiting, time.Minute)
	nats.StartAll()

	listening := regexp.MustCompile(`ingress listening".* addr=(\S+)`)
	a := &dev{url: "http://" + ingressA.waitOutput(t, listening, 2*time.Minute)[1]}
	b := &dev{url: "http://" + ingressB.waitOutput(t, listening, 2*time.Minute)[1]}
	for _, in := range []*dev{a, b} {
		if r := get(t, in.url+"/readyz"); r.status != 200 {
			t.Fatalf("ingress %s /readyz: %d %s", in.url, r.status, r.body)
		}
	}

	// Migrations ran once, under the lock; each built-in skill is stored once.
	files, _ := migrations.FS.ReadDir(".")
	applied := strings.Count(ingressA.output()+ingressB.output(), `msg="applied migration"`)
	if applied != len(files) {
		t.Errorf("the two ingresses applied %d migrations in all, want each of the %d once", applied, len(files))
	}
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var dupSkills int
	if err := conn.QueryRow(context.Background(),
		`SELECT count(*) FROM (SELECT name FROM skills WHERE tenant_id IS NULL GROUP BY name HAVING count(*) > 1) d`).Scan(&dupSkills); err != nil {
		t.Fatal(err)
	}
	if dupSkills != 0 {
		t.Errorf("%d built-in skills were stored more than once", dupSkills)
	}

	st, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, key := storetest.Tenant(t, st, "cluster")
	a.key, b.key = key, key

	runner.waitOutput(t, regexp.MustCompile(`runner started`), time.Minute)
	j := a.submit(t, map[string]any{"language": "python", "code": `
import os
os.makedirs("out", exist_ok=True)
open("out/r.txt", "w").write("replicated")
print("from the cluster")`})
	j = b.await(t, j.ID, 2*time.Minute, terminal)
	if j.Status != jobs.StatusSucceeded || j.Stdout != "from the cluster\n" || len(j.Artifacts) != 1 {
		t.Fatalf("job submitted on A, read on B: %+v", j)
	}
	if got := b.download(t, j.Artifacts[0]); string(got) != "replicated" {
		t.Errorf("artifact through B = %q", got)
	}

	// The runner is ready now, and its metrics count the job.
	r := get(t, "http://"+healthAddr+"/readyz")
	var ready struct {
		Ready  bool
		Checks map[string]string
	}
	_ = json.Unmarshal(r.body, &ready)
	if r.status != 200 || !ready.Ready || len(ready.Checks) != 4 {
		t.Errorf("runner /readyz: %d %s", r.status, r.body)
	}
	for _, c := range []string{"docker", "postgres", "nats", "s3"} {
		if ready.Checks[c] != "ok" {
			t.Errorf("runner /readyz check %s = %q", c, ready.Checks[c])
		}
	}
	// What a container health check runs.
	if out, err := exec.Command(gantryBin(t), "probe", "http://"+healthAddr+"/readyz").CombinedOutput(); err != nil {
		t.Errorf("gantry probe of a ready runner: %v %s", err, out)
	}
	metrics := string(get(t, "http://"+healthAddr+"/metrics").body)
	for _, want := range []string{
		`gantry_jobs_finished_total{language="python",status="succeeded"} 1`,
		"gantry_runner_slots 1",
		"gantry_runner_busy_slots 0",
		"gantry_pool_size",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("runner /metrics has no %q", want)
		}
	}

	// Two of three NATS nodes gone: the stream has no leader, and the
	// runner says it is not ready, naming NATS.
	nats.Stop(1)
	nats.Stop(2)
	if !eventually.Within(time.Minute, func() bool {
		r = get(t, "http://"+healthAddr+"/readyz")
		_ = json.Unmarshal(r.body, &ready)
		return r.status == 503 && strings.HasPrefix(ready.Checks["nats"], "error") && ready.Checks["postgres"] == "ok"
	}) {
		t.Fatalf("runner /readyz without a NATS quorum: %d %s", r.status, r.body)
	}
	out, err := exec.Command(gantryBin(t), "probe", "http://"+healthAddr+"/readyz").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "503") {
		t.Errorf("gantry probe of a runner without NATS: %v %s", err, out)
	}
}

// lateAddress reserves a local port for a Postgres that comes up later and
// returns it with dbURL pointed at it.
func lateAddress(t *testing.T, dbURL string, avoid []int) (string, string) {
	t.Helper()
	var addr string
	for addr == "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(avoid, l.Addr().(*net.TCPAddr).Port) {
			addr = l.Addr().String()
		}
		l.Close()
	}
	u, _ := url.Parse(dbURL)
	u.Host = addr
	return addr, u.String()
}

func dbAddr(t *testing.T, dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// forward relays connections to addr on to target until the test ends.
func forward(t *testing.T, addr, target string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

// get fetches url without credentials.
func get(t *testing.T, url string) resp {
	t.Helper()
	d := &dev{url: ""}
	return d.call(t, "GET", url, "")
}
