package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
)

// alsoRunner starts a second runner on h's engines (its own Docker labels
// and containers), stopped when the test ends.
func (h *harness) alsoRunner(t *testing.T, slots int, opts ...func(*harness, *Config)) (*Runner, *prometheus.Registry) {
	t.Helper()
	sb := testSandbox(t)
	cfg := Config{ID: sb.cfg.RunnerID, Slots: slots, Queue: queue.Config{AckWait: 5 * time.Second}, DrainTimeout: time.Second}
	for _, o := range opts {
		o(h, &cfg)
	}
	logTo := io.Discard
	if os.Getenv("GANTRY_TEST_LOG") != "" {
		logTo = os.Stderr
	}
	reg := prometheus.NewRegistry()
	r, err := New(cfg, slog.New(slog.NewTextHandler(logTo, nil)), h.nc, h.st, h.blobs, sb, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r, reg
}

// TestStatefulSessionAcrossRunners: with two runners taking messages from
// one queue, every job of a stateful session runs where its live sandbox
// is (the other runner hands the session over), so no cell loses the
// interpreter's state; and when the runner holding it stops, the next cell
// says so.
func TestStatefulSessionAcrossRunners(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 2)
	r2, reg := h.alsoRunner(t, 2)

	sid := h.statefulSession(t)
	const cells = 16
	for i := 1; i <= cells; i++ {
		j := h.in(t, sid, py("n = globals().get('n', 0) + 1\nprint(n)"))
		want := jobs.LiveKept
		if i == 1 {
			want = jobs.LiveNew
		}
		if j.Status != jobs.StatusSucceeded || j.Stdout != fmt.Sprintf("%d\n", i) || j.LiveState != want {
			t.Fatalf("cell %d: %s %q live %s (%s); want %d, %s", i, j.Status, j.Stdout, j.LiveState, j.LiveStateReason, i, want)
		}
	}
	taken := h.metric(t, "gantry_session_handovers_total", map[string]string{"outcome": "taken"}) +
		metricIn(t, reg, "gantry_session_handovers_total", map[string]string{"outcome": "taken"})
	t.Logf("%d cells, %v handed to the runner holding the sandbox", cells, taken)

	// The runner holding it stops: the next cell runs on the other one and
	// says why the state is gone.
	sess, err := h.st.GetSession(context.Background(), h.tenant, sid)
	if err != nil {
		t.Fatal(err)
	}
	holder, other := h.r, r2
	if !holder.fleet.holdsLive(sid, sess.Live) {
		holder, other = r2, h.r
	}
	if !holder.fleet.holdsLive(sid, sess.Live) {
		t.Fatalf("no runner holds the session's live sandbox %q", sess.Live)
	}
	holder.Stop()
	j := h.in(t, sid, py("print(globals().get('n'))"))
	// Its reason is the holder's record ("shut down") or, when the other
	// runner asked the stopped holder first, that no runner holds it
	// ("... stopped or was killed"): either says the holder went.
	if j.Status != jobs.StatusSucceeded || j.Stdout != "None\n" || j.LiveState != jobs.LiveLost ||
		!strings.Contains(j.LiveStateReason, "shut down") && !strings.Contains(j.LiveStateReason, "stopped") {
		t.Fatalf("after its holder stopped: %s %q live %s (%s)", j.Status, j.Stdout, j.LiveState, j.LiveStateReason)
	}
	// The job's result is recorded before its container is parked.
	if !eventually.Within(10*time.Second, func() bool { return other.fleet.holdsLive(sid, mustSession(t, h, sid).Live) }) {
		t.Fatal("the other runner does not hold the session's new live sandbox")
	}
}

func mustSession(t *testing.T, h *harness, sid string) jobs.Session {
	t.Helper()
	sess, err := h.st.GetSession(context.Background(), h.tenant, sid)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}
