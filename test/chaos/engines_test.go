// Package chaos is gantry's fault-injection test (`make chaos`): a small
// cluster of separate processes on this machine (a 3-node NATS cluster, a
// throwaway Postgres cluster, versitygw, two ingresses and two runners)
// under a steady load of jobs and sessions, while it injects faults one
// after another and accounts for every job. See TestChaos.
package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/blob/blobtest"
	"github.com/gantryhq/gantry/devstack"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/internal/mounts"
)

// proc is one process of the cluster, restartable with the same command.
type proc struct {
	name string
	args []string
	env  []string
	log  string // its output file

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func newProc(t *testing.T, dir, name string, env []string, args ...string) *proc {
	return &proc{name: name, args: args, env: env, log: filepath.Join(dir, name+".log")}
}

// start starts the process (again, after a kill).
func (p *proc) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n=== %s start %s\n", time.Now().Format(time.RFC3339Nano), p.name)
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, and killed if this test process dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
}

// kill9 kills the process as a crash would, and waits for it.
func (p *proc) kill9() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop asks the process to stop and waits for it (killing it after 30 s).
func (p *proc) stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// freePort returns a port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitHTTP waits until url answers 200.
func waitHTTP(t *testing.T, url string, within time.Duration, p *proc) {
	t.Helper()
	if !eventually.Within(within, func() bool {
		r, err := http.Get(url)
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	}) {
		t.Fatalf("%s did not answer 200 within %s:\n%s", url, within, tail(p.output(), 4000))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// postgres is a throwaway Postgres cluster: initdb into a temporary
// directory, started on a free port, removed at the end.
type postgres struct {
	bin, dir string
	port     int
	asUser   string // run the server as this user ("" : as this process)
	url      string // gantry's database
	superURL string // the same, as the superuser
}

const pgBin = "/usr/lib/postgresql/15/bin"

func startPostgres(t *testing.T) *postgres {
	t.Helper()
	bin := os.Getenv("GANTRY_CHAOS_PG_BIN")
	if bin == "" {
		bin = pgBin
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		t.Fatalf("Postgres binaries not found in %s (GANTRY_CHAOS_PG_BIN): %v", bin, err)
	}
	dir, err := os.MkdirTemp("", "gantry-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	pg := &postgres{bin: bin, dir: dir, port: freePort(t)}
	// initdb refuses to run as root: then the cluster belongs to postgres.
	if os.Geteuid() == 0 {
		pg.asUser = "postgres"
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a postgres user for initdb: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = pg.ctl("stop", "-m", "immediate")
		_ = os.RemoveAll(dir)
	})
	data := filepath.Join(dir, "data")
	if out, err := pg.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	if err := pg.ctl("start"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, step := range []struct{ db, sql string }{
		{"postgres", `CREATE ROLE gantry LOGIN PASSWORD 'gantry'`},
		{"postgres", `CREATE DATABASE gantry OWNER gantry`},
		// What each statement costs, to measure per-job costs exactly.
		{"gantry", `CREATE EXTENSION pg_stat_statements`},
	} {
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", pg.port, step.db))
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, step.sql)
		conn.Close(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step.sql, err)
		}
	}
	pg.url = fmt.Sprintf("postgres://gantry:gantry@127.0.0.1:%d/gantry?sslmode=disable", pg.port)
	pg.superURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/gantry?sslmode=disable", pg.port)
	return pg
}

// run runs one of the Postgres programs, as the cluster's owner.
func (pg *postgres) run(prog string, args ...string) ([]byte, error) {
	path := filepath.Join(pg.bin, prog)
	var cmd *exec.Cmd
	if pg.asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", pg.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = pg.dir
	return cmd.CombinedOutput()
}

// ctl runs pg_ctl start or stop (waiting for it).
func (pg *postgres) ctl(action string, extra ...string) error {
	args := []string{action, "-D", filepath.Join(pg.dir, "data"), "-w", "-t", "60", "-l", filepath.Join(pg.dir, "server.log")}
	if action == "start" {
		args = append(args, "-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200 "+
			"-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all", pg.port, pg.dir))
	}
	out, err := pg.run("pg_ctl", append(args, extra...)...)
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %v\n%s", action, err, out)
	}
	return nil
}

// natsCluster is three nats-server processes, built from the nats-server
// module, routed to each other, with JetStream. As an operator's would,
// they admit only gantry's user, clients and routes alike.
type natsCluster struct {
	nodes   []*proc
	names   []string
	clients []string // with the user
	monitor []int
}

const natsUser, natsPassword = "gantry", "chaos-nats-0f1e2d3c"

func startNATS(t *testing.T, dir, bin string) *natsCluster {
	t.Helper()
	const n = 3
	c := &natsCluster{}
	var routes []string
	routePorts := make([]int, n)
	for i := range n {
		routePorts[i] = freePort(t)
		routes = append(routes, fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", natsUser, natsPassword, routePorts[i]))
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		port, mon := freePort(t), freePort(t)
		var others []string
		for j, r := range routes {
			if j != i {
				others = append(others, r)
			}
		}
		store := filepath.Join(dir, "nats-"+name)
		p := newProc(t, dir, "nats-"+name, nil, bin, "--name", name, "--addr", "127.0.0.1", "--port", strconv.Itoa(port),
			"--user", natsUser, "--pass", natsPassword,
			"--http_port", strconv.Itoa(mon), "--jetstream", "--store_dir", store, "--cluster_name", "chaos",
			"--cluster", routes[i], "--routes", strings.Join(others, ","))
		c.nodes = append(c.nodes, p)
		c.names = append(c.names, name)
		c.clients = append(c.clients, fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", natsUser, natsPassword, port))
		c.monitor = append(c.monitor, mon)
	}
	for _, p := range c.nodes {
		p.start(t)
		t.Cleanup(p.stop)
	}
	// A node is healthy once the cluster has formed around it.
	for i, p := range c.nodes {
		waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", c.monitor[i]), time.Minute, p)
	}
	// gantry's processes are given the user in their URLs; a client
	// without it is refused.
	anon := strings.ReplaceAll(c.url(), natsUser+":"+natsPassword+"@", "")
	if nc, err := nats.Connect(anon, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("the NATS cluster admitted a client without credentials")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("a client without credentials: %v, want an authorization violation", err)
	}
	return c
}

func (c *natsCluster) url() string { return strings.Join(c.clients, ",") }

// varz sums a counter of /varz over the nodes that answer.
func (c *natsCluster) varz(field string) int64 {
	var sum int64
	for _, mon := range c.monitor {
		r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/varz", mon))
		if err != nil {
			continue
		}
		var v map[string]any
		_ = json.NewDecoder(r.Body).Decode(&v)
		r.Body.Close()
		if f, ok := v[field].(float64); ok {
			sum += int64(f)
		}
	}
	return sum
}

// countContainers counts the containers carrying label=value.
func countContainers(t *testing.T, label string) int {
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+label).Output()
	if err != nil {
		t.Errorf("docker ps: %v", err)
	}
	return len(strings.Fields(string(out)))
}

// dockerRemove removes every container carrying label=value and returns
// how many there were.
func dockerRemove(t *testing.T, label string) int {
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+label).Output()
	if err != nil {
		t.Errorf("docker ps: %v", err)
		return 0
	}
	ids := strings.Fields(string(out))
	if len(ids) > 0 {
		if out, err := exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).CombinedOutput(); err != nil {
			t.Errorf("docker rm: %v %s", err, out)
		}
	}
	return len(ids)
}

// metric reads one Prometheus sample (exact series text) from a /metrics URL.
func metric(url, series string) (float64, bool) {
	r, err := http.Get(url)
	if err != nil {
		return 0, false
	}
	defer r.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(r.Body)
	for _, line := range strings.Split(buf.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// objectStore is the cluster's S3 server (versitygw), stoppable and
// startable at the same address with its data, its data on a tmpfs of its
// own so that its disk can be filled.
type objectStore struct {
	bin, dir, addr, key, secret string
	cur                         *devstack.S3
}

// objectStoreMB is the size of the S3 server's disk: room for a chaos
// run's artifacts and snapshots many times over, and for the checkpoints
// of the 20 live sessions its rolling restart pauses at once (S2
// checkpoints are larger than zstd ones were: 256 MB filled up).
const objectStoreMB = 1024

func startObjectStore(t *testing.T, dir string) *objectStore {
	t.Helper()
	o := &objectStore{bin: blobtest.Bin(t), dir: filepath.Join(dir, "s3")}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm,mode=0700", objectStoreMB), "tmpfs", o.dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs for S3's data (the chaos test runs as root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		o.stop()
		if out, err := exec.Command("umount", o.dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", o.dir, err, out)
		}
	})
	s3, err := devstack.StartS3(context.Background(), o.bin, o.dir, fmt.Sprintf("127.0.0.1:%d", freePort(t)), "", "")
	if err != nil {
		t.Fatal(err)
	}
	o.cur, o.key, o.secret = s3, s3.AccessKey, s3.SecretKey
	o.addr = strings.TrimPrefix(s3.Endpoint, "http://")
	return o
}

func (o *objectStore) stop() {
	if o.cur != nil {
		o.cur.Stop()
		o.cur = nil
	}
}

func (o *objectStore) start(t *testing.T) {
	t.Helper()
	s3, err := devstack.StartS3(context.Background(), o.bin, o.dir, o.addr, o.key, o.secret)
	if err != nil {
		t.Fatalf("start S3 again: %v", err)
	}
	o.cur = s3
}

func (o *objectStore) fillPath() string { return filepath.Join(o.dir, "fill") }

// fill writes a file until S3's disk is full; it returns how many bytes.
func (o *objectStore) fill(t *testing.T) int64 {
	t.Helper()
	f, err := os.Create(o.fillPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	var n int64
	for {
		w, err := f.Write(chunk)
		n += int64(w)
		if err != nil {
			return n // ENOSPC: full
		}
	}
}

func (o *objectStore) unfill(t *testing.T) {
	t.Helper()
	if err := os.Remove(o.fillPath()); err != nil {
		t.Error(err)
	}
}

// unmountUnder unmounts (lazily) what is mounted below dir: the images'
// roots a runner under gVisor mounts, if one killed -9 left them.
func unmountUnder(t *testing.T, dir string) {
	for _, m := range mounts.UnmountBelow(dir) {
		t.Logf("left mounted: %s", m)
	}
}
