package service

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/queue/queuetest"
)

// The service's live operations reach the runner in the agent's protocol
// and come back in the service's types: what each method sends, and what
// it makes of each answer, errors among them.
func TestLiveSpeaksTheAgentsProtocol(t *testing.T) {
	nc := queuetest.Connect(t, queuetest.Server(t))
	sb := &Sandboxes{s: &Service{nc: nc}, streams: newProcessStreams(StreamLimits{}, prometheus.NewRegistry())}
	sess := jobs.Session{ID: "ses_wire", Live: "ctr/1"}
	live := &Live{sb: sb, p: Principal{TenantID: "ten_a"}, sess: sess}

	// The runner answers each operation with the next of answers (a
	// wire.LiveReply, or raw bytes), and hands the operation to sent.
	answers := make(chan any, 1)
	sent := make(chan wire.LiveOp, 1)
	sub, err := nc.Subscribe(queue.LiveSubject(sess.ID, sess.Live), func(m *nats.Msg) {
		var op wire.LiveOp
		_ = json.Unmarshal(m.Data, &op)
		a := <-answers
		data, raw := a.([]byte)
		if !raw {
			data, _ = json.Marshal(a)
		}
		_ = m.Respond(data)
		sent <- op
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	ctx := context.Background()
	answer := func(a any) { answers <- a }

	t.Run("spawn", func(t *testing.T) {
		answer(wire.LiveReply{Pid: 42})
		pid, err := live.Spawn(ctx, ProcessSpec{Argv: []string{"sleep", "9"}, Env: map[string]string{"A": "1"}, Cwd: "/tmp",
			Stdin: true, Timeout: 3 * time.Second, Tag: "t"})
		if err != nil || pid != 42 {
			t.Fatalf("Spawn: %d %v", pid, err)
		}
		want := wire.LiveOp{Op: wire.OpSpawn, Argv: []string{"sleep", "9"}, Env: map[string]string{"A": "1"}, Cwd: "/tmp",
			Stdin: true, TimeoutMS: 3000, Tag: "t"}
		if op := <-sent; !reflect.DeepEqual(op, want) {
			t.Errorf("sent %+v, want %+v", op, want)
		}
	})
	t.Run("writes", func(t *testing.T) {
		answer(wire.LiveReply{})
		if err := live.Create(ctx, "/tmp/f", []byte("ab")); err != nil {
			t.Fatal(err)
		}
		if op := <-sent; op.Op != wire.OpWrite || op.Path != "/tmp/f" || !op.Truncate || op.Offset != 0 || string(op.Data) != "ab" {
			t.Errorf("Create sent %+v", op)
		}
		answer(wire.LiveReply{})
		if err := live.WriteAt(ctx, "/tmp/f", 2, []byte("cd")); err != nil {
			t.Fatal(err)
		}
		if op := <-sent; op.Op != wire.OpWrite || op.Truncate || op.Offset != 2 || string(op.Data) != "cd" {
			t.Errorf("WriteAt sent %+v", op)
		}
	})
	t.Run("entries", func(t *testing.T) {
		mod := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		answer(wire.LiveReply{Entries: []wire.FileEntry{
			{Name: "d", Path: "/tmp/d", Type: "dir", Mode: 0o755, Owner: "sandbox", Group: "sandbox", Modified: mod},
			{Name: "l", Path: "/tmp/l", Type: "symlink", Target: "/etc"},
			{Name: "p", Path: "/tmp/p", Type: "fifo"},
		}})
		got, err := live.ListDir(ctx, "/tmp", 2)
		if err != nil {
			t.Fatal(err)
		}
		if op := <-sent; op.Op != wire.OpListDir || op.Path != "/tmp" || op.Depth != 2 {
			t.Errorf("sent %+v", op)
		}
		want := []FileEntry{
			{Name: "d", Path: "/tmp/d", Type: FileDir, Mode: 0o755, Owner: "sandbox", Group: "sandbox", Modified: mod},
			{Name: "l", Path: "/tmp/l", Type: FileSymlink, Target: "/etc"},
			{Name: "p", Path: "/tmp/p", Type: FileOther},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ListDir = %+v, want %+v", got, want)
		}
		answer(wire.LiveReply{})
		if _, err := live.Stat(ctx, "/tmp/d"); !isLive(err, LiveFailed) {
			t.Errorf("Stat answered without an entry: %v", err)
		}
		<-sent
	})
	t.Run("status", func(t *testing.T) {
		answer(wire.LiveReply{Pid: 7, Exit: &wire.ProcessExit{Pid: 7, Code: -1, Signal: 9}})
		exit, err := live.Status(ctx, 7)
		if err != nil || exit == nil || *exit != (ProcessExit{Pid: 7, Code: -1, Signal: 9}) {
			t.Fatalf("Status of an ended process: %+v %v", exit, err)
		}
		<-sent
		answer(wire.LiveReply{Pid: 7, Processes: []wire.Process{{Pid: 7, Argv: []string{"sh"}}}})
		if exit, err := live.Status(ctx, 7); err != nil || exit != nil {
			t.Fatalf("Status of a running process: %+v %v", exit, err)
		}
		<-sent
	})
	t.Run("errors", func(t *testing.T) {
		// (The agent's no_sandbox makes a Live wake its session: the
		// streams' probe shows it, in live_test.go.)
		for code, want := range map[wire.LiveErrCode]LiveErrorCode{
			wire.LiveErrNotFound: LiveNotFound, wire.LiveErrExists: LiveExists, wire.LiveErrInvalid: LiveInvalid,
			wire.LiveErrPermission: LivePermission, wire.LiveErrNotDir: LiveNotDir, wire.LiveErrIsDir: LiveIsDir,
			wire.LiveErrNoSpace: LiveNoSpace, wire.LiveErrBusy: LiveBusy, wire.LiveErrFailed: LiveFailed,
			"something new": LiveFailed,
		} {
			answer(wire.LiveReply{Error: &wire.LiveError{Code: code, Message: "why " + string(code)}})
			err := live.Remove(ctx, "/tmp/x")
			<-sent
			var le *LiveError
			if !errors.As(err, &le) || le.Code != want || le.Message != "why "+string(code) {
				t.Errorf("the agent's %q: %#v, want %q", code, err, want)
			}
		}
		answer([]byte("not json"))
		err := live.Remove(ctx, "/tmp/x")
		<-sent
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeUnavailable {
			t.Errorf("a malformed answer: %#v", err)
		}
	})
}

func isLive(err error, code LiveErrorCode) bool {
	var le *LiveError
	return errors.As(err, &le) && le.Code == code
}
