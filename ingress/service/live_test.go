package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/queue/queuetest"
)

// budgeted is a Sandboxes with only its process streams (no NATS, no
// store): streams made by stream are fed by the feed function it returns,
// as their session's NATS subscription would.
func budgeted(l StreamLimits) *Sandboxes {
	return &Sandboxes{s: &Service{}, streams: newProcessStreams(l, prometheus.NewRegistry())}
}

// stream opens a stream of the session (of the tenant) and returns it
// with what feeds the session's streams.
func stream(sb *Sandboxes, tenant, session string) (*ProcessEvents, func(*nats.Msg)) {
	ps := sb.streams
	ps.mu.Lock()
	defer ps.mu.Unlock()
	f := ps.feeds[session]
	if f == nil {
		f = &feed{session: session, streams: map[*ProcessEvents]struct{}{}}
		ps.feeds[session] = f
	}
	pe := sb.newProcessEventsLocked(tenant, session)
	pe.feed = f
	f.streams[pe] = struct{}{}
	return pe, func(m *nats.Msg) { ps.deliver(f, m) }
}

func output(session string, pid int, data []byte) *nats.Msg {
	m := &nats.Msg{Subject: queue.ProcessSubject(session, pid), Header: nats.Header{}, Data: data}
	m.Header.Set(queue.HeaderStream, queue.HeaderStreamStdout)
	return m
}

// endedWith is the error that ended the stream, nil if it runs (it takes
// nothing from the stream).
func endedWith(t *testing.T, pe *ProcessEvents) error {
	t.Helper()
	pe.sb.streams.mu.Lock()
	defer pe.sb.streams.mu.Unlock()
	return pe.end
}

// held is what the streams hold of the processes' output (without their
// own cost).
func held(sb *Sandboxes) int64 {
	sb.streams.mu.Lock()
	defer sb.streams.mu.Unlock()
	n := 0
	for _, ts := range sb.streams.tenants {
		n += len(ts.streams)
	}
	return sb.streams.total - int64(n)*streamCost
}

// A stream's bound counts what each message costs the ingress, not only
// its bytes: a reader that takes nothing of a process writing a byte at a
// time is cut off long before it holds its bound in bytes.
func TestStreamBoundCountsOverhead(t *testing.T) {
	sb := budgeted(StreamLimits{PerStream: 64 << 10, PerTenant: 1 << 20, PerIngress: 2 << 20})
	pe, feed := stream(sb, "ten_a", "ses_a")
	defer pe.Close()
	n := 0
	for ; n < 64<<10 && endedWith(t, pe) == nil; n++ {
		feed(output("ses_a", 7, []byte("y")))
	}
	if n > (64<<10)/msgOverhead+1 {
		t.Fatalf("%d one-byte messages were held before the stream was cut off (bound 64 KiB)", n)
	}
	var e *Error
	if err := endedWith(t, pe); !errors.As(err, &e) || e.Code != CodeRateLimited {
		t.Fatalf("the stream ended with %v", err)
	}
	if h := held(sb); h != 0 {
		t.Errorf("a cut-off stream still holds %d bytes", h)
	}
	if got := testutil.ToFloat64(sb.streams.cuts.WithLabelValues("stream")); got != 1 {
		t.Errorf("cutoffs by the stream's bound: %g", got)
	}
}

// A tenant's streams together hold at most its bound: past it, the one
// furthest behind is cut off, and a reader that keeps up is not.
func TestStreamBoundPerTenant(t *testing.T) {
	sb := budgeted(StreamLimits{PerStream: 1 << 20, PerTenant: 256 << 10, PerIngress: 8 << 20})
	slow1, feed1 := stream(sb, "ten_a", "ses_a")
	slow2, feed2 := stream(sb, "ten_a", "ses_b")
	fast, feed3 := stream(sb, "ten_a", "ses_c")
	for _, pe := range []*ProcessEvents{slow1, slow2, fast} {
		defer pe.Close()
	}
	chunk := make([]byte, 4<<10)
	ctx := context.Background()
	for range 1000 {
		feed1(output("ses_a", 7, chunk))
		feed1(output("ses_a", 7, chunk)) // twice as fast
		feed2(output("ses_b", 7, chunk))
		feed3(output("ses_c", 7, chunk))
		if ev, _ := fast.Next(ctx); ev.Err != nil {
			t.Fatalf("a reader that keeps up was cut off: %v", ev.Err)
		}
		if h := sb.streams.total; h > 256<<10 {
			t.Fatalf("the tenant's streams hold %d bytes, past its bound", h)
		}
	}
	if endedWith(t, slow1) == nil || endedWith(t, slow2) == nil {
		t.Error("the readers that fell behind were not cut off")
	}
}

// Past the ingress's bound, the tenant holding most loses its stream
// furthest behind: another tenant's stream is spared.
func TestStreamBoundPerIngress(t *testing.T) {
	sb := budgeted(StreamLimits{PerStream: 1 << 20, PerTenant: 1 << 20, PerIngress: 1 << 20})
	other, feedOther := stream(sb, "ten_b", "ses_b")
	defer other.Close()
	chunk := make([]byte, 4<<10)
	for range 16 {
		feedOther(output("ses_b", 7, chunk)) // held, a little
	}
	var greedy []*ProcessEvents
	var feeds []func(*nats.Msg)
	for i := range 4 {
		session := fmt.Sprintf("ses_a%d", i)
		pe, feed := stream(sb, "ten_a", session)
		defer pe.Close()
		greedy, feeds = append(greedy, pe), append(feeds, func(m *nats.Msg) { m.Subject = queue.ProcessSubject(session, 7); feed(m) })
	}
	for range 200 {
		for _, feed := range feeds {
			feed(output("ses_a", 7, chunk))
		}
		if h := sb.streams.total; h > 1<<20 {
			t.Fatalf("the ingress holds %d bytes, past its bound", h)
		}
	}
	if err := endedWith(t, other); err != nil {
		t.Fatalf("another tenant's stream was cut off: %v", err)
	}
	cut := 0
	for _, pe := range greedy {
		if endedWith(t, pe) != nil {
			cut++
		}
	}
	if cut == 0 || testutil.ToFloat64(sb.streams.cuts.WithLabelValues("ingress")) == 0 {
		t.Errorf("no stream of the greedy tenant was cut off at the ingress's bound")
	}
}

// Follow drops other processes' events, held or to come.
func TestFollowDropsOtherProcesses(t *testing.T) {
	sb := budgeted(StreamLimits{})
	pe, feed := stream(sb, "ten_a", "ses_a")
	defer pe.Close()
	feed(output("ses_a", 8, []byte("other")))
	feed(output("ses_a", 7, []byte("mine")))
	pe.Follow("ctr/1", 7)
	feed(output("ses_a", 8, []byte("other again")))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	ev, ok := pe.Next(ctx)
	if !ok || ev.Pid != 7 || string(ev.Data) != "mine" {
		t.Fatalf("first event: %+v %v", ev, ok)
	}
	if h := held(sb); h != 0 {
		t.Errorf("%d bytes still held", h)
	}
}

// A followed process's stream ends (unavailable) when its sandbox is gone:
// the runner holding it no longer answers on the live subject (killed, or
// its container gone), or the session is closed. A process the sandbox
// says has ended gives its end, even if the end's event was lost.
func TestProcessEventsEndWhenSandboxIsGone(t *testing.T) {
	nc := queuetest.Connect(t, queuetest.Server(t))
	sb := &Sandboxes{s: &Service{nc: nc}, streams: newProcessStreams(StreamLimits{}, prometheus.NewRegistry())}
	runner := func(t *testing.T, session, live string, exit *wire.ProcessExit) *nats.Subscription {
		t.Helper()
		sub, err := nc.Subscribe(queue.LiveSubject(session, live), func(m *nats.Msg) {
			var op wire.LiveOp
			_ = json.Unmarshal(m.Data, &op)
			reply := wire.LiveReply{Error: &wire.LiveError{Code: wire.LiveErrNotFound, Message: "no such process"}}
			if op.Op == wire.OpStatus && op.Pid == 7 {
				reply = wire.LiveReply{Exit: exit}
			}
			data, _ := json.Marshal(reply)
			_ = m.Respond(data)
		})
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	follow := func(t *testing.T, session string) *ProcessEvents {
		t.Helper()
		pe, err := sb.watch("ten_a", session)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pe.Close)
		pe.Follow("ctr/1", 7)
		return pe
	}
	next := func(t *testing.T, pe *ProcessEvents) ProcessEvent {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ev, ok := pe.Next(ctx)
		if !ok {
			t.Fatal("the stream did not end within a minute")
		}
		return ev
	}
	unavailable := func(t *testing.T, ev ProcessEvent) {
		t.Helper()
		var e *Error
		if !errors.As(ev.Err, &e) || e.Code != CodeUnavailable {
			t.Fatalf("the stream's end: %+v", ev)
		}
	}

	t.Run("its runner goes", func(t *testing.T) {
		sub := runner(t, "ses_runner", "ctr/1", nil)
		pe := follow(t, "ses_runner")
		// Asked while the runner answers: the process runs, nothing ends.
		ctx, cancel := context.WithTimeout(context.Background(), 2*probeEvery)
		ev, ok := pe.Next(ctx)
		cancel()
		if ok {
			t.Fatalf("an event while the sandbox runs: %+v", ev)
		}
		_ = sub.Unsubscribe()
		unavailable(t, next(t, pe))
	})
	t.Run("its session is closed", func(t *testing.T) {
		runner(t, "ses_closed", "ctr/1", nil)
		pe := follow(t, "ses_closed")
		if err := nc.Publish(queue.SessionClosedSubject("ses_closed"), nil); err != nil {
			t.Fatal(err)
		}
		unavailable(t, next(t, pe))
	})
	t.Run("the sandbox's word overtakes its output", func(t *testing.T) {
		// The sandbox says the process ended before its last output and
		// its end arrive: they are not lost for it.
		asked := make(chan struct{}, 1)
		sub, err := nc.Subscribe(queue.LiveSubject("ses_late", "ctr/1"), func(m *nats.Msg) {
			data, _ := json.Marshal(wire.LiveReply{Exit: &wire.ProcessExit{Pid: 7, Code: 0}})
			_ = m.Respond(data)
			select {
			case asked <- struct{}{}:
			default:
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		pe := follow(t, "ses_late")
		go func() {
			<-asked
			_ = nc.PublishMsg(output("ses_late", 7, []byte("last words")))
			exit := &nats.Msg{Subject: queue.ProcessSubject("ses_late", 7), Header: nats.Header{}, Data: []byte(`{"pid": 7, "code": 4}`)}
			exit.Header.Set(queue.HeaderStream, queue.HeaderStreamExit)
			_ = nc.PublishMsg(exit)
		}()
		if ev := next(t, pe); string(ev.Data) != "last words" {
			t.Fatalf("first: %+v", ev)
		}
		if ev := next(t, pe); ev.Exit == nil || ev.Exit.Code != 4 {
			t.Fatalf("then: %+v", ev)
		}
	})
	t.Run("its end was lost", func(t *testing.T) {
		runner(t, "ses_ended", "ctr/1", &wire.ProcessExit{Pid: 7, Code: 3})
		pe := follow(t, "ses_ended")
		if ev := next(t, pe); ev.Exit == nil || ev.Exit.Code != 3 || ev.Pid != 7 {
			t.Fatalf("the end of a process its sandbox says ended: %+v", ev)
		}
	})
}

// A message held for several streams of a session is counted once (and a
// place in each stream's queue); it is let go with the last of them.
func TestSharedMessagesCountOnce(t *testing.T) {
	sb := budgeted(StreamLimits{})
	a, feed := stream(sb, "ten_a", "ses_a")
	b, _ := stream(sb, "ten_a", "ses_a")
	defer a.Close()
	defer b.Close()
	m := output("ses_a", 7, make([]byte, 1000))
	feed(m)
	if got, want := held(sb), heldCost(m)+2*slotCost; got != want {
		t.Fatalf("held %d, want %d", got, want)
	}
	ctx := context.Background()
	a.Next(ctx)
	if got, want := held(sb), heldCost(m)+slotCost; got != want {
		t.Fatalf("after one stream read it: held %d, want %d", got, want)
	}
	b.Next(ctx)
	if got := held(sb); got != 0 {
		t.Fatalf("after both read it: held %d", got)
	}
}

// An open stream counts against the bounds by itself: a tenant cannot
// open streams without end. Past its bound, a new stream cuts off a
// reader that is behind, else it is refused.
func TestStreamsCountThemselves(t *testing.T) {
	nc := queuetest.Connect(t, queuetest.Server(t))
	sb := &Sandboxes{s: &Service{nc: nc}, streams: newProcessStreams(StreamLimits{PerTenant: 4 * streamCost, PerIngress: 1 << 20}, prometheus.NewRegistry())}
	var open []*ProcessEvents
	for i := range 4 {
		pe, err := sb.watch("ten_a", fmt.Sprintf("ses_%d", i))
		if err != nil {
			t.Fatal(err)
		}
		defer pe.Close()
		open = append(open, pe)
	}
	var e *Error
	if _, err := sb.watch("ten_a", "ses_x"); !errors.As(err, &e) || e.Code != CodeRateLimited {
		t.Fatalf("a stream past the tenant's bound: %v", err)
	}
	if pe, err := sb.watch("ten_b", "ses_y"); err != nil {
		t.Fatalf("another tenant's stream: %v", err)
	} else {
		pe.Close()
	}
	open[3].Close()
	pe, err := sb.watch("ten_a", "ses_x")
	if err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	pe.Close()
	if h := held(sb); h != 0 {
		t.Errorf("held %d", h)
	}
}

// A session's streams on an ingress share one subscription, and are
// bounded in number.
func TestStreamsPerSession(t *testing.T) {
	nc := queuetest.Connect(t, queuetest.Server(t))
	sb := &Sandboxes{s: &Service{nc: nc}, streams: newProcessStreams(StreamLimits{}, prometheus.NewRegistry())}
	var open []*ProcessEvents
	for range maxProcessWatchesPerSession {
		pe, err := sb.watch("ten_a", "ses_a")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, pe)
	}
	if _, err := sb.watch("ten_a", "ses_a"); err == nil {
		t.Fatal("a stream past the session's bound was opened")
	}
	if _, err := sb.watch("ten_a", "ses_b"); err != nil {
		t.Fatalf("another session's: %v", err)
	}
	if n := len(sb.streams.feeds); n != 2 {
		t.Fatalf("%d feeds for two sessions", n)
	}
	// All of them hear the session, once.
	if err := nc.PublishMsg(output("ses_a", 7, []byte("hi"))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, pe := range open {
		if ev, ok := pe.Next(ctx); !ok || string(ev.Data) != "hi" {
			t.Fatalf("a stream of the session: %+v %v", ev, ok)
		}
	}
	open[0].Close()
	open[0].Close() // idempotent
	if _, err := sb.watch("ten_a", "ses_a"); err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	for _, pe := range open[1:] {
		pe.Close()
	}
}

// A stream opened at the tenant's bound cuts off the one furthest behind
// if it holds output; when they hold none, it is refused.
func TestNewStreamCutsTheFurthestBehind(t *testing.T) {
	sb := budgeted(StreamLimits{PerTenant: 3*streamCost + 2<<10, PerIngress: 1 << 20})
	behind, feed := stream(sb, "ten_a", "ses_a")
	other, _ := stream(sb, "ten_a", "ses_b")
	defer behind.Close()
	defer other.Close()
	feed(output("ses_a", 7, make([]byte, 4<<10)))
	admit := func() error {
		ps := sb.streams
		ps.mu.Lock()
		defer ps.mu.Unlock()
		_, err := ps.admitStream("ten_a")
		if err == nil {
			sb.newProcessEventsLocked("ten_a", "ses_c")
		}
		return err
	}
	if err := admit(); err != nil {
		t.Fatalf("a third stream: %v", err)
	}
	if endedWith(t, behind) == nil || endedWith(t, other) != nil {
		t.Fatalf("the stream behind was not the one cut off: %v, %v", endedWith(t, behind), endedWith(t, other))
	}
	if err := admit(); err == nil {
		t.Fatal("a fourth stream, past the bound with nothing to cut off, was admitted")
	}
}
