package runner

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// A fake Docker engine behind the runner's narrow dockerAPI: each
// container's agent is a script the test writes, so start failures and
// containers dying at each step can be tested without an engine.

// script answers one run request on a fake container's agent; it returns
// false to break the stream (the container died).
type script func(a *fakeAgent, req wire.Request) bool

type fakeDocker struct {
	mu        sync.Mutex
	next      int
	createErr error
	// runs scripts the i-th container's runs (the last one repeats).
	runs       []script
	containers map[string]*fakeContainer
	// listAll makes ContainerList answer with stopped containers too (as
	// it does with All and a status filter).
	listAll bool
}

type fakeContainer struct {
	id      string
	agent   *fakeAgent
	removed bool
	state   container.State
	gone    bool // inspect answers not found
	script  script
	// startedAfterList: the list still saw it created, but it is running
	// by the time it is inspected (a slow start under gVisor).
	startedAfterList bool
}

type fakeAgent struct {
	w       io.Writer // stdout, multiplexed as Docker does
	r       *bufio.Reader
	conn    net.Conn
	cleaned int
}

func (a *fakeAgent) frame(kind wire.Kind, payload string) {
	b := []byte{byte(kind), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	_, _ = a.w.Write(append(b, payload...))
}

func (a *fakeAgent) json(kind wire.Kind, v any) {
	b, _ := json.Marshal(v)
	a.frame(kind, string(b))
}

func (a *fakeAgent) serve(s script) {
	defer a.conn.Close()
	a.json(wire.KindHello, wire.Hello{Protocol: wire.Protocol, Isolation: wire.Namespaces})
	for {
		var head [5]byte
		if _, err := io.ReadFull(a.r, head[:]); err != nil {
			return
		}
		payload := make([]byte, binary.BigEndian.Uint32(head[1:]))
		if _, err := io.ReadFull(a.r, payload); err != nil {
			return
		}
		var req wire.Request
		_ = json.Unmarshal(payload, &req)
		switch req.Op {
		case "run":
			if !s(a, req) {
				return
			}
		case "clean":
			a.cleaned++
			a.frame(wire.KindOK, "")
		case "skills", "restore", "warm":
			a.frame(wire.KindOK, "")
		case "tar":
			a.frame(wire.KindDataEnd, "")
		}
	}
}

func (d *fakeDocker) Ping(context.Context, client.PingOptions) (client.PingResult, error) {
	return client.PingResult{}, nil
}
func (d *fakeDocker) ImageInspect(context.Context, string, ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	return client.ImageInspectResult{}, nil
}
func (d *fakeDocker) ImagePull(context.Context, string, client.ImagePullOptions) (client.ImagePullResponse, error) {
	return nil, errors.New("no registry here")
}
func (d *fakeDocker) Close() error { return nil }

func (d *fakeDocker) CopyFromContainer(context.Context, string, client.CopyFromContainerOptions) (client.CopyFromContainerResult, error) {
	return client.CopyFromContainerResult{}, fmt.Errorf("no such file: %w", cerrdefs.ErrNotFound)
}

func (d *fakeDocker) ContainerCreate(context.Context, client.ContainerCreateOptions) (client.ContainerCreateResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.createErr != nil {
		return client.ContainerCreateResult{}, d.createErr
	}
	s := d.runs[min(d.next, len(d.runs)-1)]
	d.next++
	id := fmt.Sprintf("c%02d%s", d.next, strings.Repeat("0", 60))
	d.containers[id] = &fakeContainer{id: id, script: s, state: container.State{Running: true, Status: container.StateRunning}}
	return client.ContainerCreateResult{ID: id}, nil
}

func (d *fakeDocker) ContainerAttach(_ context.Context, id string, _ client.ContainerAttachOptions) (client.ContainerAttachResult, error) {
	runnerEnd, agentEnd := net.Pipe()
	d.mu.Lock()
	d.containers[id].agent = &fakeAgent{w: muxWriter{agentEnd}, r: bufio.NewReader(agentEnd), conn: agentEnd}
	d.mu.Unlock()
	return client.ContainerAttachResult{HijackedResponse: client.NewHijackedResponse(runnerEnd, "")}, nil
}

func (d *fakeDocker) ContainerStart(_ context.Context, id string, _ client.ContainerStartOptions) (client.ContainerStartResult, error) {
	d.mu.Lock()
	c := d.containers[id]
	d.mu.Unlock()
	go c.agent.serve(c.script)
	return client.ContainerStartResult{}, nil
}

func (d *fakeDocker) ContainerKill(_ context.Context, id string, _ client.ContainerKillOptions) (client.ContainerKillResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.containers[id]
	c.agent.conn.Close()
	c.state.Running = false
	return client.ContainerKillResult{}, nil
}

func (d *fakeDocker) ContainerRemove(_ context.Context, id string, _ client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.containers[id]; c != nil {
		c.agent.conn.Close()
		c.removed = true
	}
	return client.ContainerRemoveResult{}, nil
}

func (d *fakeDocker) ContainerInspect(_ context.Context, id string, _ client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.containers[id]
	if c == nil || c.gone {
		return client.ContainerInspectResult{}, fmt.Errorf("no such container: %w", cerrdefs.ErrNotFound)
	}
	st := c.state
	return client.ContainerInspectResult{Container: container.InspectResponse{ID: id, State: &st}}, nil
}

func (d *fakeDocker) ContainerList(context.Context, client.ContainerListOptions) (client.ContainerListResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var res client.ContainerListResult
	for id, c := range d.containers {
		if !c.removed && ((c.state.Running && !c.startedAfterList) != d.listAll) {
			res.Items = append(res.Items, container.Summary{ID: id})
		}
	}
	return res, nil
}

// dies makes the container die as the script breaks its stream.
func (d *fakeDocker) dies(a *fakeAgent, oom bool, gone bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.containers {
		if c.agent == a {
			c.state.Running, c.state.OOMKilled, c.state.ExitCode, c.gone = false, oom, 137, gone
		}
	}
}

func (d *fakeDocker) created() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.next
}

func (d *fakeDocker) removedCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.containers {
		if c.removed {
			n++
		}
	}
	return n
}

// muxWriter frames what it is given as Docker's attach stream does for
// stdout (stdcopy's format).
type muxWriter struct{ w io.Writer }

func (m muxWriter) Write(p []byte) (int, error) {
	head := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(head[4:], uint32(len(p)))
	if _, err := m.w.Write(append(head, p...)); err != nil {
		return 0, err
	}
	return len(p), nil
}

type noSkills struct{}

func (noSkills) SkillsStamp(context.Context, string) (string, error) { return "s0", nil }
func (noSkills) CurrentSkills(context.Context, string) ([]store.SkillRecord, error) {
	return nil, nil
}

// fakeRunner is a runner over the fake engine, with just what an attempt
// needs (no queue, store or object store).
func fakeRunner(t *testing.T, d *fakeDocker) *Runner {
	t.Helper()
	if d.containers == nil {
		d.containers = map[string]*fakeContainer{}
	}
	sb := newSandbox(d, SandboxConfig{Image: "fake", RunnerID: "fake"})
	cfg := Config{ID: "fake", Slots: 2}.WithDefaults()
	r := &Runner{cfg: cfg, log: slog.New(slog.DiscardHandler), sandbox: sb, running: map[string]*execution{}, skills: newSkillCache(noSkills{})}
	r.fleet = newFleet(cfg.Fleet, sb, r.skills, r.log, newFleetMetrics(nil))
	t.Cleanup(r.fleet.stop)
	return r
}

func (r *Runner) attemptFor(tenant string, code string, timeout time.Duration) *attempt {
	spec, _ := jobs.DefaultPolicy().Normalize(jobs.Request{Language: "bash", Code: code, TimeoutMS: int(timeout.Milliseconds())})
	ex := &execution{jobID: jobs.NewID("job"), attempt: 1}
	return &attempt{r: r, log: r.log, ex: ex, claim: store.Claim{TenantID: tenant, Spec: spec}, jobCtx: context.Background()}
}

// exits is a script whose program starts, prints and exits with code.
func exits(code int, out string) script {
	return func(a *fakeAgent, req wire.Request) bool {
		a.frame(wire.KindStarted, "")
		a.frame(wire.KindStdout, out)
		a.json(wire.KindExit, wire.Exit{Started: true, Code: code})
		a.frame(wire.KindListing, "")
		return true
	}
}

func TestAttemptOutcomes(t *testing.T) {
	ctx := context.Background()
	t.Run("a program that exits is its result; the container serves its tenant again", func(t *testing.T) {
		d := &fakeDocker{runs: []script{exits(3, "out")}}
		r := fakeRunner(t, d)
		res, _, err := r.attemptFor("t1", "x", time.Minute).run(ctx)
		if err != nil || res.Status != jobs.StatusFailed || *res.ExitCode != 3 || string(res.Stdout) != "out" {
			t.Fatalf("res %+v err %v", res, err)
		}
		waitFor(t, func() bool { return r.fleet.idleCountLocked() == 1 }, &r.fleet.mu)
		if _, _, err := r.attemptFor("t1", "x", time.Minute).run(ctx); err != nil || d.created() != 1 {
			t.Fatalf("second job of the tenant: %v, %d containers", err, d.created())
		}
		if _, _, err := r.attemptFor("t2", "x", time.Minute).run(ctx); err != nil || d.created() != 2 {
			t.Fatalf("another tenant's job: %v, %d containers (want a new one)", err, d.created())
		}
	})

	t.Run("Docker cannot create: the job goes back to the queue", func(t *testing.T) {
		d := &fakeDocker{runs: []script{exits(0, "")}, createErr: errors.New("Cannot connect to the Docker daemon")}
		r := fakeRunner(t, d)
		if _, _, err := r.attemptFor("t1", "x", time.Minute).run(ctx); err == nil || !strings.Contains(err.Error(), "Docker daemon") {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("a container that dies before the program starts is replaced", func(t *testing.T) {
		d := &fakeDocker{}
		d.runs = []script{
			func(a *fakeAgent, req wire.Request) bool { d.dies(a, false, false); return false },
			func(a *fakeAgent, req wire.Request) bool {
				a.json(wire.KindExit, wire.Exit{Message: "bwrap: setting up uid map: Permission denied"})
				a.frame(wire.KindListing, "")
				return true
			},
			exits(0, "ran"),
		}
		r := fakeRunner(t, d)
		res, _, err := r.attemptFor("t1", "x", time.Minute).run(ctx)
		if err != nil || res.Status != jobs.StatusSucceeded || string(res.Stdout) != "ran" || d.created() != 3 {
			t.Fatalf("res %+v err %v, %d containers", res, err, d.created())
		}
		waitFor(t, func() bool { return d.removedCount() == 2 }, nil)
	})

	t.Run("out of memory while the program runs: failed, once", func(t *testing.T) {
		d := &fakeDocker{}
		d.runs = []script{func(a *fakeAgent, req wire.Request) bool {
			a.frame(wire.KindStarted, "")
			d.dies(a, true, false)
			return false
		}}
		r := fakeRunner(t, d)
		res, _, err := r.attemptFor("t1", "x", time.Minute).run(ctx)
		if err != nil || res.Status != jobs.StatusFailed || res.Error == nil || res.Error.Code != jobs.ErrCodeOOMKilled || d.created() != 1 {
			t.Fatalf("res %+v err %v, %d containers", res, err, d.created())
		}
	})

	t.Run("a container lost to something else while the program runs: back to the queue", func(t *testing.T) {
		for _, gone := range []bool{false, true} {
			d := &fakeDocker{}
			d.runs = []script{func(a *fakeAgent, req wire.Request) bool {
				a.frame(wire.KindStarted, "")
				d.dies(a, false, gone)
				return false
			}}
			r := fakeRunner(t, d)
			_, _, err := r.attemptFor("t1", "x", time.Minute).run(ctx)
			if !errors.Is(err, errSandboxLost) || d.created() != 1 {
				t.Fatalf("gone=%v: err %v, %d containers", gone, err, d.created())
			}
		}
	})

	t.Run("a timeout retires the container", func(t *testing.T) {
		d := &fakeDocker{runs: []script{func(a *fakeAgent, req wire.Request) bool {
			a.frame(wire.KindStarted, "")
			a.frame(wire.KindStdout, "started\n")
			_, _ = io.Copy(io.Discard, a.r) // runs until the runner lets go
			return false
		}}}
		r := fakeRunner(t, d)
		res, _, err := r.attemptFor("t1", "x", 200*time.Millisecond).run(ctx)
		if err != nil || res.Status != jobs.StatusTimedOut || string(res.Stdout) != "started\n" {
			t.Fatalf("res %+v err %v", res, err)
		}
		waitFor(t, func() bool { return d.removedCount() == 1 }, nil)
		if got := testutil.ToFloat64(r.fleet.m.retired.WithLabelValues("timed out")); got != 1 {
			t.Errorf("retired for a timeout: %v", got)
		}
	})

	t.Run("a cancel retires the container", func(t *testing.T) {
		started := make(chan struct{})
		d := &fakeDocker{runs: []script{func(a *fakeAgent, req wire.Request) bool {
			a.frame(wire.KindStarted, "")
			close(started)
			_, _ = io.Copy(io.Discard, a.r)
			return false
		}}}
		r := fakeRunner(t, d)
		ctx, cancel := context.WithCancelCause(ctx)
		go func() { <-started; cancel(errCancelled) }()
		res, _, err := r.attemptFor("t1", "x", time.Minute).run(ctx)
		if err != nil || res.Status != jobs.StatusCancelled {
			t.Fatalf("res %+v err %v", res, err)
		}
		waitFor(t, func() bool { return d.removedCount() == 1 }, nil)
	})
}

// waitFor waits for cond, called under mu when mu is set.
func waitFor(t *testing.T, cond func() bool, mu *sync.Mutex) {
	t.Helper()
	eventually.True(t, 10*time.Second, "the condition", func() bool {
		if mu != nil {
			mu.Lock()
			defer mu.Unlock()
		}
		return cond()
	})
}

// TestFleetStates checks the fleet's book of its containers: each move is
// one its state allows, and a second release, or a park of a container no
// attempt owns, panics rather than hand a container to two owners. A
// lease ends once: ending it again, even after its container went to a
// new owner, does nothing.
func TestFleetStates(t *testing.T) {
	ctx := context.Background()
	d := &fakeDocker{runs: []script{exits(0, "")}}
	f := fakeRunner(t, d).fleet
	lim := jobs.DefaultPolicy().DefaultLimits
	l, _, err := f.acquire(ctx, "t1", 0, lim, "")
	if err != nil {
		t.Fatal(err)
	}
	c := l.Container
	state := func() ctrState { f.mu.Lock(); defer f.mu.Unlock(); return c.state }
	if s := state(); s != ctrBusy || f.busy != 1 {
		t.Fatalf("acquired: %s, %d busy", s, f.busy)
	}
	l.release(true, "")
	waitFor(t, func() bool { return c.state == ctrIdle }, &f.mu)
	l.release(true, "")
	l.park("ses_x", 1, time.Hour)
	if s := state(); s != ctrIdle {
		t.Fatalf("a lease ended again moved its container to %s", s)
	}
	mustPanic(t, "a second release", func() { f.release(c, true, "") })
	mustPanic(t, "a park of an idle container", func() { f.park("ses_x", c, 1, time.Hour) })

	again, source, err := f.acquire(ctx, "t1", 0, lim, "")
	if err != nil || again.Container != c || source != "tenant" {
		t.Fatalf("the tenant's next job got %v from %s (%v), want its idle container", again, source, err)
	}
	l.release(false, "the old lease")
	if s := state(); s != ctrBusy || f.busy != 1 {
		t.Fatalf("the old lease released its container's new owner's: %s, %d busy", s, f.busy)
	}
	again.release(false, "test")
	if s := state(); s != ctrRetired || f.busy != 0 {
		t.Fatalf("released for good: %s, %d busy", s, f.busy)
	}
	mustPanic(t, "a release after retirement", func() { f.release(c, false, "test") })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

func TestReapRemovesOldStoppedContainers(t *testing.T) {
	d := &fakeDocker{containers: map[string]*fakeContainer{}}
	stopped := func(id string, ago time.Duration, running bool) {
		d.containers[id] = &fakeContainer{id: id, agent: &fakeAgent{conn: nopConn{}}, state: container.State{
			Running: running, Status: map[bool]container.ContainerState{true: container.StateRunning, false: container.StateExited}[running],
			FinishedAt: time.Now().Add(-ago).Format(time.RFC3339Nano)}}
	}
	stopped("old", 2*reapAge, false)
	stopped("young", reapAge/2, false)
	stopped("live", 2*reapAge, true)
	d.containers["starting"] = &fakeContainer{id: "starting", agent: &fakeAgent{conn: nopConn{}}, startedAfterList: true,
		state: container.State{Running: true, Status: container.StateRunning, FinishedAt: "0001-01-01T00:00:00Z"}}
	d.listAll = true
	n, err := newSandbox(d, SandboxConfig{Image: "fake", RunnerID: "me"}).Reap(context.Background())
	if err != nil || n != 1 || !d.containers["old"].removed || d.containers["young"].removed || d.containers["live"].removed || d.containers["starting"].removed {
		t.Fatalf("reaped %d (%v): old %v young %v live %v starting %v", n, err, d.containers["old"].removed, d.containers["young"].removed,
			d.containers["live"].removed, d.containers["starting"].removed)
	}
}

// nopConn is a closed connection of a container that never ran an agent.
type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }
