package runner

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
)

// testGVisor is a gvisor host for the test, skipped where runsc 2024 or
// root is missing (unless GANTRY_TEST_REQUIRE says it must run).
func testGVisor(t *testing.T) *gvisor {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Docker and runsc")
	}
	runsc, err := exec.LookPath("runsc")
	if err != nil {
		t.Skip("no runsc (make runsc)")
	}
	g, err := newGVisor(GVisorConfig{Runsc: runsc, StateDir: t.TempDir(), DebugLog: os.Getenv("GANTRY_TEST_RUNSC_DEBUG")}, testSandbox(t))
	if err != nil {
		if os.Getenv("GANTRY_TEST_REQUIRE") != "" {
			t.Fatalf("gVisor cannot checkpoint here: %v", err)
		}
		t.Skipf("gVisor cannot checkpoint here: %v", err)
	}
	t.Cleanup(func() {
		_, _ = g.RemoveLeftovers(context.Background())
		g.Close()
	})
	return g
}

// cell runs Python code as a stateful session's cell in c.
func cell(t *testing.T, c *Container, code string) (string, wire.Exit) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.conn.Run(ctx, wire.Request{Argv: []string{"python3", wire.ProgramDir + "/main.py"},
		Files:    []wire.File{{Path: wire.ProgramDir + "/main.py", Data: []byte(code)}},
		Stateful: true}, wire.RunIO{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("cell %q: %v (%s)", code, err, errb.String())
	}
	if errb.Len() > 0 {
		t.Logf("cell %q: stderr %q", code, errb.String())
	}
	return out.String(), res.Exit
}

// TestGVisorCheckpointRestore: a session's container under gVisor is
// checkpointed while it goes on, and a copy restored from the checkpoint
// has the interpreter's memory, its background process, /tmp and the
// workspace as they were then; the original and the copy go on apart.
func TestGVisorCheckpointRestore(t *testing.T) {
	g := testGVisor(t)
	ctx := context.Background()
	spec := ContainerSpec{Limits: jobs.DefaultPolicy().DefaultLimits.Container()}
	c, err := g.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Remove(context.Background()) })
	if out, _ := cell(t, c, `import subprocess, random
x = 41
open("/tmp/t.txt", "w").write("tmp")
open("/workspace/w.txt", "w").write("ws")
p = subprocess.Popen(["sleep", "600"])
print("ready")`); out != "ready\n" {
		t.Fatalf("first cell: %q", out)
	}
	dir := t.TempDir()
	start := time.Now()
	if err := g.Checkpoint(ctx, c, dir, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("checkpoint (leave running): %s", time.Since(start).Round(time.Millisecond))
	if out, _ := cell(t, c, "x += 1\nprint(x)"); out != "42\n" {
		t.Fatalf("the original after its checkpoint: %q", out)
	}
	start = time.Now()
	c2, err := g.start(ctx, spec, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c2.Remove(context.Background()) })
	t.Logf("restore: %s", time.Since(start).Round(time.Millisecond))
	out, exit := cell(t, c2, `print(x, open("/tmp/t.txt").read(), open("/workspace/w.txt").read(), p.poll() is None)`)
	if out != "41 tmp ws True\n" || exit.Code != 0 {
		t.Fatalf("the restored copy: %q %+v", out, exit)
	}
	t.Logf("restore to the first answer: %s", time.Since(start).Round(time.Millisecond))
	if out, _ := cell(t, c2, "x = 'copy'\nprint(x)"); out != "copy\n" {
		t.Fatalf("the copy: %q", out)
	}
	if out, _ := cell(t, c, "print(x)"); out != "42\n" {
		t.Fatalf("the original after the copy changed: %q", out)
	}
	if !strings.HasPrefix(c2.id, "gv-") {
		t.Errorf("container id %q", c2.id)
	}
}

// TestGVisorUnmountsLeftoverRoots: an image's root an earlier life left
// mounted (a runner killed outright) is unmounted when the runner starts
// again, unless this life uses it.
func TestGVisorUnmountsLeftoverRoots(t *testing.T) {
	g := testGVisor(t)
	left := filepath.Join(g.cfg.StateDir, "roots", "leftover")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", left, "tmpfs", syscall.MS_RDONLY, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(left, syscall.MNT_DETACH) })
	if _, err := g.root(context.Background(), g.sb.cfg.Image); err != nil {
		t.Fatal(err)
	}
	if _, err := g.RemoveLeftovers(context.Background()); err != nil {
		t.Fatal(err)
	}
	if mounted(left) {
		t.Error("an earlier life's root is still mounted")
	}
	if r := g.roots[g.sb.cfg.Image]; r == nil || !mounted(r.dir) {
		t.Error("this life's root was unmounted")
	}
}
