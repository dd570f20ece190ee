package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/agent"
	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
)

// liveClient speaks to a session's live sandbox as the ingress does: NATS
// requests to the runner holding it, events on the session's process
// subjects.
type liveClient struct {
	// t is the test whose goroutine calls the client: a subtest takes its
	// own with in.
	t *testing.T
	*liveEvents
}

// liveEvents is what a liveClient's subscription gathered, shared by the
// clients of a test and its subtests.
type liveEvents struct {
	nc   *nats.Conn
	subj string

	mu     sync.Mutex
	out    map[int]*strings.Builder
	exits  map[int]wire.ProcessExit
	update chan struct{}
}

func (h *harness) live(t *testing.T, sid string) *liveClient {
	t.Helper()
	sess, err := h.st.GetSession(context.Background(), h.tenant, sid)
	if err != nil || sess.Live == "" {
		t.Fatalf("session %s holds no live sandbox (%v)", sid, err)
	}
	c := &liveClient{t: t, liveEvents: &liveEvents{nc: h.nc, subj: queue.LiveSubject(sid, sess.Live),
		out: map[int]*strings.Builder{}, exits: map[int]wire.ProcessExit{}, update: make(chan struct{}, 1)}}
	sub, err := h.nc.Subscribe(queue.ProcessSubjectAll(sid), func(m *nats.Msg) {
		pid := queue.PidFromSubject(m.Subject)
		c.mu.Lock()
		defer c.mu.Unlock()
		switch m.Header.Get(queue.HeaderStream) {
		case queue.HeaderStreamExit:
			var e wire.ProcessExit
			if err := json.Unmarshal(m.Data, &e); err != nil || e.Pid != pid {
				t.Errorf("exit event %q on %s", m.Data, m.Subject)
			}
			c.exits[pid] = e
		default:
			if c.out[pid] == nil {
				c.out[pid] = &strings.Builder{}
			}
			c.out[pid].WriteString(m.Header.Get(queue.HeaderStream) + ":" + string(m.Data) + "|")
		}
		select {
		case c.update <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return c
}

// liveSession makes a stateful session whose first job made its live
// sandbox, and a client of it.
func (h *harness) liveSession(t *testing.T) (string, *liveClient) {
	t.Helper()
	sid := h.statefulSession(t)
	if j := h.in(t, sid, py("x = 1")); j.Status != jobs.StatusSucceeded {
		t.Fatalf("first job: %+v", j)
	}
	return sid, h.live(t, sid)
}

// in is the client for the (sub)test t: it fails t, on t's goroutine.
func (c *liveClient) in(t *testing.T) *liveClient { return &liveClient{t: t, liveEvents: c.liveEvents} }

func (c *liveClient) do(op wire.LiveOp) (wire.LiveReply, *wire.LiveError) {
	c.t.Helper()
	body, _ := json.Marshal(op)
	msg, err := c.nc.Request(c.subj, body, 30*time.Second)
	// The runner serves a new live sandbox's subject once the job that
	// made it is recorded (session.go), and the harness reads the record
	// from Postgres, which can be first; the ingress, which hears of the
	// job on NATS after the runner subscribed, wakes the session on no
	// responders (ingress/service/live.go).
	for deadline := time.Now().Add(5 * time.Second); errors.Is(err, nats.ErrNoResponders) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		msg, err = c.nc.Request(c.subj, body, 30*time.Second)
	}
	if err != nil {
		c.t.Fatalf("%s: %v", op.Op, err)
	}
	var r wire.LiveReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		c.t.Fatalf("%s: reply %q", op.Op, msg.Data)
	}
	return r, r.Error
}

func (c *liveClient) ok(op wire.LiveOp) wire.LiveReply {
	c.t.Helper()
	r, err := c.do(op)
	if err != nil {
		c.t.Fatalf("%s %s: %s: %s", op.Op, op.Path, err.Code, err.Message)
	}
	return r
}

// waitExit waits for the process's end and returns it with its output, as
// "stream:bytes|" records.
func (c *liveClient) waitExit(pid int) (wire.ProcessExit, string) {
	c.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		c.mu.Lock()
		e, ok := c.exits[pid]
		out := ""
		if c.out[pid] != nil {
			out = c.out[pid].String()
		}
		c.mu.Unlock()
		if ok {
			return e, out
		}
		select {
		case <-c.update:
		case <-deadline:
			c.t.Fatalf("process %d did not end; output so far %q", pid, out)
		}
	}
}

// TestLiveOperations: processes started beside a stateful session's jobs
// stream their output and end, take stdin and signals, and are listed;
// files are read and changed as the sandbox sees them, /tmp included; a
// live operation is answered while a job runs.
func TestLiveOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 2)
	sid, c := h.liveSession(t)

	t.Run("a process's output, stdin and end", func(t *testing.T) {
		c := c.in(t)
		r := c.ok(wire.LiveOp{Op: wire.OpSpawn, Argv: []string{"/bin/bash", "-c", `echo hi; read line; echo "got $line"; echo oops >&2; exit 3`},
			Env: map[string]string{"E2B": "1"}, Cwd: "/workspace", Stdin: true, Tag: "t1"})
		if r.Pid <= 0 {
			t.Fatalf("spawn: %+v", r)
		}
		list := c.ok(wire.LiveOp{Op: wire.OpList})
		if len(list.Processes) != 1 || list.Processes[0].Pid != r.Pid || list.Processes[0].Tag != "t1" || list.Processes[0].Env["E2B"] != "1" {
			t.Errorf("list: %+v", list.Processes)
		}
		c.ok(wire.LiveOp{Op: wire.OpInput, Pid: r.Pid, Data: []byte("abc\n")})
		e, out := c.waitExit(r.Pid)
		if e.Code != 3 || out != "stdout:hi\n|stdout:got abc\n|stderr:oops\n|" && out != "stdout:hi\n|stderr:oops\n|stdout:got abc\n|" &&
			!strings.Contains(out, "got abc") {
			t.Errorf("exit %+v, output %q", e, out)
		}
		if st := c.ok(wire.LiveOp{Op: wire.OpStatus, Pid: r.Pid}); st.Exit == nil || st.Exit.Code != 3 {
			t.Errorf("status after the end: %+v", st)
		}
		if _, err := c.do(wire.LiveOp{Op: wire.OpInput, Pid: r.Pid, Data: []byte("x")}); err == nil || err.Code != wire.LiveErrNotFound {
			t.Errorf("input to an ended process: %v", err)
		}
	})

	t.Run("processes that end at once are seen whole", func(t *testing.T) {
		c := c.in(t)
		var pids []int
		for i := range 20 {
			r := c.ok(wire.LiveOp{Op: wire.OpSpawn, Argv: []string{"/bin/sh", "-c", "echo " + string(rune('a'+i)) + "; exit 7"}})
			pids = append(pids, r.Pid)
		}
		for i, pid := range pids {
			if e, out := c.waitExit(pid); e.Code != 7 || out != "stdout:"+string(rune('a'+i))+"\n|" {
				t.Errorf("process %d: exit %+v output %q", i, e, out)
			}
		}
	})

	t.Run("a signal ends a process and what it started", func(t *testing.T) {
		c := c.in(t)
		r := c.ok(wire.LiveOp{Op: wire.OpSpawn, Argv: []string{"/bin/bash", "-c", "sleep 300 & sleep 301"}})
		c.ok(wire.LiveOp{Op: wire.OpSignal, Pid: r.Pid, Signal: 9})
		if e, _ := c.waitExit(r.Pid); e.Code != -1 || e.Signal != 9 {
			t.Errorf("exit after SIGKILL: %+v", e)
		}
		if j := h.in(t, sid, bash("pgrep -f 'sleep 30[01]' || echo none")); j.Stdout != "none\n" {
			t.Errorf("the process group lives on: %q", j.Stdout)
		}
		// What a process leaves behind is reaped when it ends: no zombies.
		r = c.ok(wire.LiveOp{Op: wire.OpSpawn, Argv: []string{"/bin/sh", "-c", "sleep 0.2 & echo left"}})
		c.waitExit(r.Pid)
		time.Sleep(time.Second)
		if j := h.in(t, sid, py("import os\nsum(open('/proc/%s/stat' % p).read().split(')')[-1].split()[0] == 'Z' for p in os.listdir('/proc') if p.isdigit())")); j.Value == nil || j.Value.Text != "0" {
			t.Errorf("zombies: %+v %q", j.Value, j.Stderr)
		}
		if _, err := c.do(wire.LiveOp{Op: wire.OpSpawn, Argv: []string{"/no/such/program"}}); err == nil || !strings.Contains(err.Message, "No such file") {
			t.Errorf("spawning a missing program: %v", err)
		}
		if _, err := c.do(wire.LiveOp{Op: wire.OpSpawn, Argv: []string{"true"}, Cwd: "/nowhere"}); err == nil || !strings.Contains(err.Message, "/nowhere") {
			t.Errorf("spawning in a missing directory: %v", err)
		}
	})

	t.Run("a process outlives jobs and answers while one runs", func(t *testing.T) {
		c := c.in(t)
		r := c.ok(wire.LiveOp{Op: wire.OpSpawn, Argv: []string{"/bin/bash", "-c", "for i in 1 2 3; do echo $i; sleep 0.5; done"}, TimeoutMS: 60000})
		// Submitted here, waited for here: the job runs on the runner
		// meanwhile, and the test's goroutine is the only one to fail it.
		id := h.submitIn(t, sid, py("import time\ntime.sleep(2)\nx + 1"))
		h.waitFor(t, id, func(j jobs.Job) bool { return j.Status != jobs.StatusQueued })
		start := time.Now()
		c.ok(wire.LiveOp{Op: wire.OpList})
		if d := time.Since(start); d > time.Second {
			t.Errorf("a live operation took %s while a job ran", d)
		}
		e, out := c.waitExit(r.Pid)
		if e.Code != 0 || strings.ReplaceAll(out, "stdout:", "") != "1\n|2\n|3\n|" {
			t.Errorf("exit %+v output %q", e, out)
		}
		if j := h.waitFor(t, id, func(j jobs.Job) bool { return j.Status.Terminal() }); j.Status != jobs.StatusSucceeded || j.Value == nil || j.Value.Text != "2" || j.LiveState != jobs.LiveKept {
			t.Errorf("the job beside it: %+v", j)
		}
		// A timeout kills it.
		r = c.ok(wire.LiveOp{Op: wire.OpSpawn, Argv: []string{"sleep", "60"}, TimeoutMS: 300})
		if e, _ := c.waitExit(r.Pid); e.Signal != 9 {
			t.Errorf("after its timeout: %+v", e)
		}
	})

	t.Run("files as the sandbox sees them", func(t *testing.T) {
		c := c.in(t)
		w := c.ok(wire.LiveOp{Op: wire.OpWrite, Path: "/workspace/dir/a.txt", Data: []byte("hello"), Truncate: true})
		if w.Entry == nil || w.Entry.Type != "file" || w.Entry.Size != 5 || w.Entry.Path != "/workspace/dir/a.txt" {
			t.Errorf("write: %+v", w.Entry)
		}
		c.ok(wire.LiveOp{Op: wire.OpWrite, Path: "/workspace/dir/a.txt", Data: []byte(" world"), Offset: 5})
		if r := c.ok(wire.LiveOp{Op: wire.OpRead, Path: "/workspace/dir/a.txt"}); string(r.Data) != "hello world" || !r.EOF || r.Size != 11 {
			t.Errorf("read: %+v", r)
		}
		if r := c.ok(wire.LiveOp{Op: wire.OpRead, Path: "/workspace/dir/a.txt", Offset: 6, Length: 3}); string(r.Data) != "wor" || r.EOF {
			t.Errorf("read a part: %+v", r)
		}
		c.ok(wire.LiveOp{Op: wire.OpWrite, Path: "/tmp/t.txt", Data: []byte("in tmp"), Truncate: true})
		if j := h.in(t, sid, bash("cat /tmp/t.txt dir/a.txt; echo changed > dir/b.txt")); j.Stdout != "in tmphello world" {
			t.Errorf("a job sees the written files: %q %q", j.Stdout, j.Stderr)
		}
		if r := c.ok(wire.LiveOp{Op: wire.OpRead, Path: "/workspace/dir/b.txt"}); string(r.Data) != "changed\n" {
			t.Errorf("a job's file: %q", r.Data)
		}
		list := c.ok(wire.LiveOp{Op: wire.OpListDir, Path: "/workspace", Depth: 2})
		var names []string
		for _, e := range list.Entries {
			names = append(names, e.Path+":"+e.Type)
		}
		if got := strings.Join(names, ","); !strings.Contains(got, "/workspace/dir:dir,/workspace/dir/a.txt:file,/workspace/dir/b.txt:file") {
			t.Errorf("list: %s", got)
		}
		if st := c.ok(wire.LiveOp{Op: wire.OpStat, Path: "/workspace/dir"}); st.Entry.Type != "dir" || st.Entry.Owner == "" {
			t.Errorf("stat: %+v", st.Entry)
		}
		c.ok(wire.LiveOp{Op: wire.OpMkdir, Path: "/workspace/x/y"})
		if _, err := c.do(wire.LiveOp{Op: wire.OpMkdir, Path: "/workspace/x/y"}); err == nil || err.Code != wire.LiveErrExists {
			t.Errorf("mkdir again: %v", err)
		}
		if m := c.ok(wire.LiveOp{Op: wire.OpMove, Path: "/workspace/dir/a.txt", Dest: "/workspace/x/a.txt"}); m.Entry.Path != "/workspace/x/a.txt" {
			t.Errorf("move: %+v", m.Entry)
		}
		c.ok(wire.LiveOp{Op: wire.OpRemove, Path: "/workspace/x"})
		for _, p := range []string{"/workspace/x", "/workspace/dir/a.txt"} {
			if _, err := c.do(wire.LiveOp{Op: wire.OpStat, Path: p}); err == nil || err.Code != wire.LiveErrNotFound {
				t.Errorf("stat %s after it went: %v", p, err)
			}
		}
		if _, err := c.do(wire.LiveOp{Op: wire.OpWrite, Path: "/etc/x", Data: []byte("x"), Truncate: true}); err == nil || err.Code != wire.LiveErrPermission {
			t.Errorf("write to the read-only root: %v", err)
		}
		if _, err := c.do(wire.LiveOp{Op: wire.OpRead, Path: "/workspace"}); err == nil || err.Code != wire.LiveErrIsDir {
			t.Errorf("read a directory: %v", err)
		}
		// A link is followed in the sandbox's view, never the agent's
		// (whose state directory is in the container's own /tmp).
		h.in(t, sid, bash("ln -s /tmp/.gantry-agent agentlink; ln -s ../../../tmp/.gantry-agent up"))
		for _, p := range []string{"/workspace/agentlink", "/workspace/up"} {
			if r, err := c.do(wire.LiveOp{Op: wire.OpListDir, Path: p}); err == nil {
				t.Errorf("list through %s: %+v", p, r.Entries)
			}
		}
	})

	t.Run("FIFOs and far-off file times", func(t *testing.T) {
		c := c.in(t)
		// A FIFO is refused, never waited on; a time JSON cannot encode is
		// clamped rather than losing the answer.
		if j := h.in(t, sid, bash("mkfifo fifo; ln -s fifo fifolink; echo x > far; touch -d @300000000000 far")); j.Status != jobs.StatusSucceeded {
			t.Fatalf("setup: %s %q", j.Status, j.Stderr)
		}
		for _, op := range []wire.LiveOp{{Op: wire.OpRead, Path: "/workspace/fifo"}, {Op: wire.OpRead, Path: "/workspace/fifolink"},
			{Op: wire.OpWrite, Path: "/workspace/fifo", Data: []byte("x")}, {Op: wire.OpWrite, Path: "/workspace/fifolink", Data: []byte("x")}} {
			if _, err := c.do(op); err == nil || err.Code != wire.LiveErrInvalid {
				t.Errorf("%s %s: %v", op.Op, op.Path, err)
			}
		}
		if st := c.ok(wire.LiveOp{Op: wire.OpStat, Path: "/workspace/far"}); st.Entry.Modified.Year() != 9999 {
			t.Errorf("a time past year 9999: %v", st.Entry.Modified)
		}
		c.ok(wire.LiveOp{Op: wire.OpListDir, Path: "/workspace"})
	})

	t.Run("without a warm interpreter", func(t *testing.T) {
		// The session's interpreter then runs in a sandbox of bubblewrap's:
		// files are still the sandbox's view.
		if h.sb.Isolation() != wire.Namespaces {
			t.Skip("the container isolation has no warm interpreter to do without")
		}
		h2 := newHarness(t, 1, withoutWarm)
		sid2 := h2.statefulSession(t)
		if j := h2.in(t, sid2, bash("echo in-tmp > /tmp/x; echo ws > y")); j.Status != jobs.StatusSucceeded {
			t.Fatalf("first job: %+v", j)
		}
		c2 := h2.live(t, sid2)
		if r := c2.ok(wire.LiveOp{Op: wire.OpRead, Path: "/tmp/x"}); string(r.Data) != "in-tmp\n" {
			t.Errorf("the sandbox's /tmp: %q", r.Data)
		}
		if _, err := c2.do(wire.LiveOp{Op: wire.OpListDir, Path: "/tmp/.gantry-agent"}); err == nil {
			t.Error("the agent's state directory is reachable")
		}
		r := c2.ok(wire.LiveOp{Op: wire.OpSpawn, Argv: []string{"cat", "/workspace/y"}})
		if e, out := c2.waitExit(r.Pid); e.Code != 0 || out != "stdout:ws\n|" {
			t.Errorf("a process: %+v %q", e, out)
		}
	})

	t.Run("a session whose sandbox ended", func(t *testing.T) {
		c := c.in(t)
		h.in(t, sid, py("import os\nos._exit(0)"))
		if _, err := c.do(wire.LiveOp{Op: wire.OpList}); err == nil || err.Code != wire.LiveErrNoSandbox {
			t.Errorf("after the sandbox ended: %v", err)
		}
		j := h.in(t, sid, py("1"))
		if j.LiveState != jobs.LiveLost {
			t.Fatalf("next job: %+v", j)
		}
		c2 := h.live(t, sid)
		if r, err := c2.do(wire.LiveOp{Op: wire.OpList}); err != nil || len(r.Processes) != 0 {
			t.Errorf("the new sandbox's processes: %+v %v", r, err)
		}
	})
}

// TestLiveProcessOutputRate: a live process that writes as fast as it can
// is held to agent.ProcessOutputRate on its way to NATS, by backpressure:
// its writes block, and every byte of its output arrives all the same.
// Its end says how long it was held back.
func TestLiveProcessOutputRate(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 1)
	_, c := h.liveSession(t)
	const size = agent.OutputBurst + 2*agent.ProcessOutputRate // about 2 s past the burst
	start := time.Now()
	r := c.ok(wire.LiveOp{Op: wire.OpSpawn, Argv: []string{"/bin/sh", "-c", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", size)}})
	e, out := c.waitExit(r.Pid)
	took := time.Since(start)
	if got := strings.Count(out, "a"); e.Code != 0 || got != size {
		t.Fatalf("exit %+v, %d bytes of output, want %d", e, got, size)
	}
	if limit := float64(agent.ProcessOutputRate); took.Seconds() < (size-agent.OutputBurst-512<<10)/limit || e.ThrottledMS < 1000 {
		t.Errorf("%d bytes in %v (throttled %d ms): want at most %.0f bytes/s", size, took, e.ThrottledMS, limit)
	}
	if n := h.metric(t, "gantry_live_process_output_throttled_seconds_total", nil); n < 1 {
		t.Errorf("throttled seconds counted: %v", n)
	}
	t.Logf("%d bytes in %v, throttled %d ms", size, took, e.ThrottledMS)
}
