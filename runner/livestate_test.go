package runner

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
)

// withGVisor runs stateful sessions under gVisor, run by the runner, in
// the test's own state directory; it skips the test where runsc cannot
// checkpoint (unless GANTRY_TEST_REQUIRE).
func withGVisor(t *testing.T) func(*harness, *Config) {
	t.Helper()
	runsc, err := exec.LookPath("runsc")
	if err != nil || os.Geteuid() != 0 {
		if os.Getenv("GANTRY_TEST_REQUIRE") != "" {
			t.Fatalf("runsc and root are needed: %v", err)
		}
		t.Skip("needs runsc (make runsc) and root")
	}
	dir := t.TempDir()
	return func(h *harness, c *Config) {
		c.Live = LiveConfig{GVisor: GVisorConfig{Runsc: runsc, StateDir: dir, DebugLog: os.Getenv("GANTRY_TEST_RUNSC_DEBUG")}, CheckpointEvery: -1}
	}
}

// control sends a control request for the session, as the ingress does.
func (h *harness) control(t *testing.T, sid string, req queue.ControlRequest) queue.ControlReply {
	t.Helper()
	sess, err := h.st.GetSession(context.Background(), h.tenant, sid)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Live == "" {
		t.Fatalf("session %s holds no live sandbox", sid)
	}
	req.TenantID = h.tenant
	body, _ := json.Marshal(req)
	m, err := h.nc.Request(queue.ControlSubject(sid, sess.Live), body, 2*time.Minute)
	if err != nil {
		t.Fatalf("control %s: %v", req.Op, err)
	}
	var reply queue.ControlReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		t.Fatal(err)
	}
	if reply.Error != nil {
		t.Fatalf("control %s: %s: %s", req.Op, reply.Error.Code, reply.Error.Message)
	}
	return reply
}

func wantCell(t *testing.T, j jobs.Job, stdout string, state jobs.LiveState, reason string) {
	t.Helper()
	if j.Status != jobs.StatusSucceeded || j.Stdout != stdout || j.LiveState != state || !strings.Contains(j.LiveStateReason, reason) {
		t.Fatalf("%s %q live %s (%s), stderr %q; want %q %s (%s)", j.Status, j.Stdout, j.LiveState, j.LiveStateReason, j.Stderr, stdout, state, reason)
	}
}

// TestLiveStateUnderGVisor: a stateful session's live state is paused
// (its container freed) and resumed on another runner with its memory, a
// background process, /tmp and the workspace; forked into sessions that
// each go on from it apart; snapshotted, and a new session made from the
// snapshot.
func TestLiveStateUnderGVisor(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, runsc, Postgres, NATS and S3")
	}
	h := newHarness(t, 2, withGVisor(t))
	if h.r.gv == nil {
		t.Fatal("the runner did not take gVisor up")
	}
	ctx := context.Background()
	sid := h.durableSession(t)
	wantCell(t, h.in(t, sid, py(`import subprocess
x = 41
open("/tmp/t.txt", "w").write("tmp")
open("/workspace/w.txt", "w").write("ws")
sleeper = subprocess.Popen(["sleep", "600"])
print("ready")`)), "ready\n", jobs.LiveNew, "")

	// Pause: the container goes; the session is paused, its files
	// readable.
	h.control(t, sid, queue.ControlRequest{Op: queue.ControlPause})
	sess, err := h.st.GetSession(ctx, h.tenant, sid)
	if err != nil || sess.State != jobs.SessionPaused || sess.Live != "" {
		t.Fatalf("after pause: %+v %v", sess, err)
	}

	// Resumed by its next job, on another runner.
	h2, _ := h.alsoRunnerWith(t, 2, withGVisor(t))
	h.stop()
	wantCell(t, h.in(t, sid, py(`x += 1
print(x, open("/tmp/t.txt").read(), open("/workspace/w.txt").read(), sleeper.poll() is None)`)),
		"42 tmp ws True\n", jobs.LiveRestored, "resumed from its pause")
	if sess, _ := h.st.GetSession(ctx, h.tenant, sid); sess.State != jobs.SessionRunning || !h2.fleet.holdsLive(sid, sess.Live) {
		t.Fatalf("after the resume: %+v", sess)
	}

	// Fork: two sessions, each from that state, apart.
	ids := []string{jobs.NewID("ses"), jobs.NewID("ses")}
	reply := h.controlVia(t, h2, sid, queue.ControlRequest{Op: queue.ControlFork, ChildIDs: ids})
	if len(reply.Sessions) != 2 || reply.Sessions[0].ID != ids[0] {
		t.Fatalf("fork: %+v", reply)
	}
	for i, id := range ids {
		wantCell(t, h.in(t, id, py("x += 10 * "+string(rune('1'+i))+"\nprint(x, sleeper.poll() is None)")),
			[]string{"52 True\n", "62 True\n"}[i], jobs.LiveRestored, "forked from "+sid)
	}
	wantCell(t, h.in(t, sid, py("print(x)")), "42\n", jobs.LiveKept, "")
	wantCell(t, h.in(t, ids[0], py("print(x)")), "52\n", jobs.LiveKept, "")
	// The fork was answered before its checkpoint was stored (its
	// children lived here); the checkpoint becomes theirs once it is.
	for _, id := range ids {
		eventually.True(t, time.Minute, "fork "+id+"'s checkpoint", func() bool {
			state, ok, err := h.st.AcquireSession(ctx, id, "test", time.Minute)
			if err != nil || !ok {
				return false // the runner holds it a moment longer
			}
			if _, _, err := h.st.ReleaseSession(ctx, id, "test", false); err != nil {
				t.Fatal(err)
			}
			return state.Checkpoint.ID != ""
		})
	}

	// Snapshot, and a session made from it.
	snp := jobs.NewID("snp")
	reply = h.controlVia(t, h2, sid, queue.ControlRequest{Op: queue.ControlSnapshot, SnapshotID: snp, Name: "at 42"})
	if reply.Snapshot == nil || reply.Snapshot.ID != snp || reply.Snapshot.Bytes == 0 {
		t.Fatalf("snapshot: %+v", reply)
	}
	_, ref, err := h.st.GetSnapshot(ctx, h.tenant, snp)
	if err != nil {
		t.Fatal(err)
	}
	fromID := jobs.NewID("ses")
	key := blob.NewSessionKey(h.tenant, fromID, 1)
	size, err := h.blobs.Copy(ctx, ref.WorkspaceKey, key)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := jobs.SessionRequest{Stateful: true, Durable: new(true)}.Normalize()
	req.ID, req.Checkpoint, req.Workspace = fromID, ref.Checkpoint.ID, &jobs.WorkspaceCopy{Key: key, Bytes: size}
	if _, err := h.st.CreateSession(ctx, h.tenant, req); err != nil {
		t.Fatal(err)
	}
	wantCell(t, h.in(t, fromID, py("print(x, open('/workspace/w.txt').read())")), "42 ws\n", jobs.LiveRestored, "restored from checkpoint")
}

// alsoRunnerWith is alsoRunner with options.
func (h *harness) alsoRunnerWith(t *testing.T, slots int, opts ...func(*harness, *Config)) (*Runner, error) {
	t.Helper()
	r, _ := h.alsoRunner(t, slots, opts...)
	return r, nil
}

// controlVia is control (the runner answering is whichever holds it).
func (h *harness) controlVia(t *testing.T, _ *Runner, sid string, req queue.ControlRequest) queue.ControlReply {
	t.Helper()
	return h.control(t, sid, req)
}
