package storetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a throwaway Postgres cluster of a test's own, on a free port
// of 127.0.0.1, for tests that stop and start Postgres under gantry. It is
// removed when the test ends.
type Cluster struct {
	// URL is the connection URL (database postgres, user postgres, no
	// password: the cluster trusts local connections).
	URL string

	bin  string
	dir  string // owned by the cluster's user: data/, the socket, the log
	port int
	cred *syscall.Credential // nil: run as the test's user
}

// NewCluster creates and starts a cluster with initdb and pg_ctl from
// GANTRY_TEST_PG_BIN or the newest /usr/lib/postgresql/*/bin. Run as root,
// it runs them as the postgres user (initdb refuses root).
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := os.Getenv("GANTRY_TEST_PG_BIN")
	if bin == "" {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) < pgVersion(dirs[j]) })
		if len(dirs) > 0 {
			bin = dirs[len(dirs)-1]
		}
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		Unavailable(t, "no initdb (install postgresql, or set GANTRY_TEST_PG_BIN to its bin directory): %v", err)
	}
	dir, err := os.MkdirTemp("", "gantry-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{bin: bin, dir: dir}
	t.Cleanup(func() {
		// Immediate: nothing in a test cluster is worth a checkpoint.
		_ = c.pgctl("stop", "-m", "immediate", "-w")
		_ = os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			Unavailable(t, "running as root and there is no postgres user to run initdb as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := c.command("initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// Start starts the cluster and waits until it accepts connections.
func (c *Cluster) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", c.port, c.dir)
	if err := c.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(c.dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		return fmt.Errorf("%w\n%s", err, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.URL)
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres on port %d does not answer: %w", c.port, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the cluster as an operator's fast shutdown does: open
// connections are terminated (SQLSTATE 57P01) and new ones refused.
func (c *Cluster) Stop() error { return c.pgctl("stop", "-m", "fast", "-w") }

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) pgctl(args ...string) error {
	out, err := c.command("pg_ctl", append([]string{"-D", c.data()}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

// pgVersion is the major version in a /usr/lib/postgresql/<v>/bin path.
func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}
