package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
)

// A stream of a live process (E2B's process.Process/Start and Connect, and
// a JavaScript context's cell) reads the session's process events, which
// the ingress holds for a reader that may be slower than the process: a
// client that does not read would otherwise make the ingress hold all the
// process writes. One NATS subscription per session (a feed) serves all
// of the session's streams on this ingress; a message is held once,
// however many streams hold it.
//
// What is held is bounded three ways, in what it costs the ingress (each
// message's own overhead, not only its bytes: heldCost): per stream, per
// tenant, and per ingress (all tenants). Past a bound, the reader furthest
// behind is cut off: its events are let go at once, and its stream is told
// why when it next reads (a writer blocked on a client that reads nothing
// can give up: CutOff). The process runs on, and can be followed again.
//
// A stream also ends when the sandbox holding its process is lost: the
// session closed (its closed announcement), or its container or runner
// gone (no answer on the live subject: see Next's probe).

// ProcessEvent is a piece of a live process's output, or its end, or the
// end of the stream.
type ProcessEvent struct {
	Pid int
	// Stream is StreamStdout or StreamStderr with Data, or StreamExit
	// with Exit.
	Stream ProcessStream
	Data   []byte
	Exit   *ProcessExit
	// Err, when set, ends the stream (no other field is set, and Next
	// returns it again): an *Error with CodeRateLimited when its reader
	// fell behind past a bound and was cut off, CodeUnavailable when the
	// sandbox is gone.
	Err error
}

// ProcessStream says what a ProcessEvent carries.
type ProcessStream string

// The streams of a live process.
const (
	StreamStdout ProcessStream = "stdout"
	StreamStderr ProcessStream = "stderr"
	// StreamExit is the process's end: the last of its events.
	StreamExit ProcessStream = "exit"
)

// StreamLimits bound the process events an ingress holds for readers that
// have not taken them, in bytes of what they cost (heldCost).
type StreamLimits struct {
	// PerStream bounds what one stream holds (default 8 MiB).
	PerStream int64
	// PerTenant bounds what all of a tenant's streams on this ingress hold
	// (default 64 MiB).
	PerTenant int64
	// PerIngress bounds what every stream on this ingress holds (default
	// 256 MiB).
	PerIngress int64
}

// WithDefaults fills in zero fields; no bound is larger than the one
// above it.
func (l StreamLimits) WithDefaults() StreamLimits {
	if l.PerIngress <= 0 {
		l.PerIngress = 256 << 20
	}
	if l.PerTenant <= 0 {
		l.PerTenant = 64 << 20
	}
	if l.PerStream <= 0 {
		l.PerStream = 8 << 20
	}
	l.PerTenant = min(l.PerTenant, l.PerIngress)
	l.PerStream = min(l.PerStream, l.PerTenant)
	return l
}

// heldCost is what holding m costs, as measured (Go 1.26, nats.go): its
// bytes, the allocator's rounding of the payload up to its size class (up
// to an eighth more), and about 700 bytes of the message itself and its
// header map. Each stream that holds it adds slotCost.
func heldCost(m *nats.Msg) int64 {
	n := len(m.Data) + len(m.Data)/8 + len(m.Subject) + len(m.Reply) + msgOverhead
	for k, vs := range m.Header {
		n += len(k)
		for _, v := range vs {
			n += len(v)
		}
	}
	return int64(n)
}

const (
	msgOverhead = 768
	// slotCost is a held message's place in one stream's queue (a
	// pointer, grown in doubling slices).
	slotCost = 32
	// streamCost is what an open stream costs besides what it holds: its
	// handler's goroutine and its connection's buffers. Counted against
	// the tenant's and the ingress's bounds, it bounds how many streams
	// they may have open.
	streamCost = 16 << 10
)

// Bounds of a session's feed and of a stream's liveness checks.
const (
	// maxProcessWatchesPerSession bounds one session's open streams on an
	// ingress.
	maxProcessWatchesPerSession = 32
	// feedPendingMsgs and feedPendingBytes bound what the NATS client
	// holds for a feed before the feed takes it (nats.go's defaults are
	// 512Ki messages and 64 MiB): past them it drops messages, and the
	// feed's streams are cut off.
	feedPendingMsgs  = 4096
	feedPendingBytes = 8 << 20
	// probeEvery is how long a followed process's stream may hear nothing
	// from its sandbox before it asks the sandbox whether the process is
	// there (probeWait bounds the question).
	probeEvery = 3 * time.Second
	probeWait  = 5 * time.Second
)

// processStreams are this ingress's streams of live processes: the
// sessions' feeds, and what the streams hold against the bounds. Its
// mutex guards every feed's and stream's state.
type processStreams struct {
	limits StreamLimits
	held   prometheus.Gauge
	cuts   *prometheus.CounterVec

	mu      sync.Mutex
	feeds   map[string]*feed
	total   int64
	tenants map[string]*tenantStreams
}

// feed is a session's events, read once for its streams on this ingress.
type feed struct {
	session     string
	sub, closed *nats.Subscription
	streams     map[*ProcessEvents]struct{}
	dropped     int // messages NATS dropped, as last seen
}

// tenantStreams are one tenant's streams and what they hold.
type tenantStreams struct {
	bytes   int64
	streams map[*ProcessEvents]struct{}
}

// heldMsg is a message held for one or more streams: counted once.
type heldMsg struct {
	m    *nats.Msg
	cost int64
	refs int
}

func newProcessStreams(l StreamLimits, reg prometheus.Registerer) *processStreams {
	ps := &processStreams{limits: l.WithDefaults(), feeds: map[string]*feed{}, tenants: map[string]*tenantStreams{},
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gantry_live_stream_held_bytes",
			Help: "What the ingress holds for streams of live processes: the output they have not read yet, counted with each message's overhead, and each open stream's own cost.",
		}),
		cuts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_live_stream_cutoffs_total",
			Help: "Streams of live processes cut off because their reader fell behind, by the bound: stream, tenant, ingress (GANTRY_LIVE_BUFFER_*), or nats (the session's output came faster than the ingress took it).",
		}, []string{"bound"}),
	}
	reg.MustRegister(ps.held, ps.cuts)
	return ps
}

// ProcessEvents is a stream of a session's live processes' events: their
// output and ends. What the runner published before it was made is not in
// it. What its reader has not taken counts against the bounds; a reader
// that falls behind past one is cut off (Next then returns an event with
// Err). Close ends it.
type ProcessEvents struct {
	sb      *Sandboxes
	tenant  string
	session string
	ready   chan struct{} // a token: events are waiting, or the end
	// cutoff is closed when the stream ends early: cut off, or its
	// sandbox gone.
	cutoff     chan struct{}
	cutoffOnce sync.Once

	// Guarded by the processStreams' mutex:
	feed     *feed // nil once closed
	pending  []*heldMsg
	bytes    int64     // what the held messages cost (counted for each stream)
	end      error     // why the stream ended (nil: it runs)
	lastSign time.Time // when the sandbox was last heard from, or asked
	live     string    // the followed process's sandbox (Session.Live)
	pid      int       // the followed process (0: all of the session's)
	// endSeen: a probe found the followed process ended, and its end's
	// event has not come since (it may be on its way, behind its output).
	endSeen bool
}

// WatchProcesses opens a stream of the tenant's session's live processes'
// events. Open it before starting a process to miss none of its output;
// then Follow the process.
func (sb *Sandboxes) WatchProcesses(ctx context.Context, p Principal, sessionID string) (*ProcessEvents, error) {
	sess, err := sb.s.Session(ctx, p, sessionID)
	if err != nil {
		return nil, err
	}
	return sb.watch(p.TenantID, sess.ID)
}

// watch opens a stream of the tenant's session (subscribing to its feed
// first if this ingress has none).
func (sb *Sandboxes) watch(tenant, session string) (*ProcessEvents, error) {
	ps := sb.streams
	ps.mu.Lock()
	defer ps.mu.Unlock()
	f := ps.feeds[session]
	if f != nil && len(f.streams) >= maxProcessWatchesPerSession {
		return nil, &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: 1,
			Message: fmt.Sprintf("the sandbox already has %d streams of its processes open", maxProcessWatchesPerSession)}
	}
	cut, err := ps.admitStream(tenant)
	for _, v := range cut {
		v.cutNow() // takes no lock
	}
	if err != nil {
		return nil, err
	}
	if f == nil {
		// Subscribed under the lock: a stream that joins the feed meanwhile
		// must not return before the feed hears the session.
		f = &feed{session: session, streams: map[*ProcessEvents]struct{}{}}
		var err error
		if f.closed, err = sb.s.nc.Subscribe(queue.SessionClosedSubject(session), func(*nats.Msg) {
			ps.stopFeed(f, Unavailable("sandbox %s was closed (killed, or its timeout ran out): its processes ended with it", session))
		}); err != nil {
			return nil, Unavailable("cannot follow the sandbox's processes: %v", err)
		}
		if f.sub, err = sb.s.nc.Subscribe(queue.ProcessSubjectAll(session), func(m *nats.Msg) { ps.deliver(f, m) }); err != nil {
			_ = f.closed.Unsubscribe()
			return nil, Unavailable("cannot follow the sandbox's processes: %v", err)
		}
		_ = f.sub.SetPendingLimits(feedPendingMsgs, feedPendingBytes)
		ps.feeds[session] = f
	}
	pe := sb.newProcessEventsLocked(tenant, session)
	pe.feed = f
	f.streams[pe] = struct{}{}
	return pe, nil
}

// newProcessEventsLocked makes a stream counted for the tenant, on no
// feed yet. ps.mu is held.
func (sb *Sandboxes) newProcessEventsLocked(tenant, session string) *ProcessEvents {
	ps := sb.streams
	pe := &ProcessEvents{sb: sb, tenant: tenant, session: session,
		ready: make(chan struct{}, 1), cutoff: make(chan struct{}), lastSign: time.Now()}
	ts := ps.tenant(tenant)
	ts.streams[pe] = struct{}{}
	ts.bytes += streamCost
	ps.total += streamCost
	ps.held.Add(streamCost)
	return pe
}

// tenant is the tenant's streams, made if it has none. ps.mu is held.
func (ps *processStreams) tenant(id string) *tenantStreams {
	ts := ps.tenants[id]
	if ts == nil {
		ts = &tenantStreams{streams: map[*ProcessEvents]struct{}{}}
		ps.tenants[id] = ts
	}
	return ts
}

// admitStream makes room for another stream of the tenant, cutting off
// the readers furthest behind, or says why there is none (its streams
// hold nothing but themselves). ps.mu is held; the streams it cut off are
// to be told outside it.
func (ps *processStreams) admitStream(tenant string) ([]*ProcessEvents, error) {
	ts := ps.tenant(tenant)
	var cut []*ProcessEvents
	for ts.bytes+streamCost > ps.limits.PerTenant || ps.total+streamCost > ps.limits.PerIngress {
		bound, from := "tenant", ts
		if ts.bytes+streamCost <= ps.limits.PerTenant {
			bound, from = "ingress", ps.mostHeld()
		}
		v := from.largest(nil)
		if v == nil || v.bytes == 0 {
			if len(ts.streams) == 0 {
				delete(ps.tenants, tenant)
			}
			return cut, &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: 5,
				Message: fmt.Sprintf("too many streams of sandboxes' processes are open on this gantry ingress (each counts %d KiB against the %s's bound of %s): close some", streamCost>>10, bound, mib(ps.limitOf(bound)))}
		}
		ps.cutLocked(v, bound, "another stream was opened, and this one was the furthest behind")
		cut = append(cut, v)
	}
	return cut, nil
}

// mostHeld is the tenant whose streams hold most. ps.mu is held.
func (ps *processStreams) mostHeld() *tenantStreams {
	var most *tenantStreams
	for _, t := range ps.tenants {
		if most == nil || t.bytes > most.bytes {
			most = t
		}
	}
	return most
}

func (ps *processStreams) limitOf(bound string) int64 {
	if bound == "tenant" {
		return ps.limits.PerTenant
	}
	return ps.limits.PerIngress
}

// Follow narrows the stream to one process of the session's live sandbox
// live (the Session.Live the process was started in or found in): other
// processes' events are let go, and Next checks that the sandbox still
// holds the process whenever it has heard nothing from it for a while.
func (pe *ProcessEvents) Follow(live string, pid int) {
	ps := pe.sb.streams
	ps.mu.Lock()
	defer ps.mu.Unlock()
	pe.live, pe.pid = live, pid
	kept := pe.pending[:0]
	for _, h := range pe.pending {
		if queue.PidFromSubject(h.m.Subject) == pid {
			kept = append(kept, h)
		} else {
			ps.unhold(pe, h)
		}
	}
	clear(pe.pending[len(kept):])
	pe.pending = kept
}

// CutOff is closed when the stream ends early (cut off, or its sandbox
// gone): a writer blocked on a client that does not read can give up.
func (pe *ProcessEvents) CutOff() <-chan struct{} { return pe.cutoff }

// deliver hands a message of the session to its streams, within the
// bounds (on the feed's subscription's goroutine).
func (ps *processStreams) deliver(f *feed, m *nats.Msg) {
	h := &heldMsg{m: m, cost: heldCost(m)}
	pid := queue.PidFromSubject(m.Subject)
	now := time.Now()
	var cut, told []*ProcessEvents
	ps.mu.Lock()
	for pe := range f.streams {
		if pe.end != nil {
			continue
		}
		pe.lastSign = now // any of the session's processes: its sandbox lives
		if pe.pid > 0 && pid != pe.pid {
			continue
		}
		pe.endSeen = false
		cut = append(cut, ps.admit(pe, h)...)
		if pe.end == nil {
			pe.pending = append(pe.pending, h)
			ps.hold(pe, h)
			told = append(told, pe)
		}
	}
	var dropped []*ProcessEvents
	if n, _ := m.Sub.Dropped(); n > f.dropped {
		f.dropped = n
		for pe := range f.streams {
			dropped = append(dropped, pe)
		}
	}
	ps.mu.Unlock()
	for _, pe := range dropped {
		if pe.stop(&Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited,
			Message: "the sandbox's processes wrote faster than this gantry ingress took their output, and some of it was dropped: connect to the process again"}) {
			ps.cuts.WithLabelValues("nats").Inc()
		}
	}
	for _, pe := range cut {
		pe.cutNow()
	}
	for _, pe := range told {
		pe.signal()
	}
}

// admit makes room for pe to hold h, cutting off the readers furthest
// behind (pe among them, perhaps), and returns those it cut off (to be
// told outside the lock). ps.mu is held.
func (ps *processStreams) admit(pe *ProcessEvents, h *heldMsg) []*ProcessEvents {
	var cut []*ProcessEvents
	if pe.bytes+h.cost > ps.limits.PerStream {
		ps.cutLocked(pe, "stream", fmt.Sprintf("more than %s of its output waited for this stream, the most one stream may hold", mib(ps.limits.PerStream)))
		return append(cut, pe)
	}
	ts := ps.tenants[pe.tenant]
	for ts.bytes+h.adds() > ps.limits.PerTenant {
		v := ts.largest(pe)
		ps.cutLocked(v, "tenant", fmt.Sprintf("the tenant's sandboxes had more than %s of process output waiting for readers on this gantry ingress, the most a tenant may hold, and this stream was the furthest behind", mib(ps.limits.PerTenant)))
		if cut = append(cut, v); v == pe {
			return cut
		}
	}
	for ps.total+h.adds() > ps.limits.PerIngress {
		v := ps.mostHeld().largest(pe)
		ps.cutLocked(v, "ingress", fmt.Sprintf("this gantry ingress held more than %s of process output waiting for readers, the most it holds for all tenants, and this stream was the furthest behind of the tenant holding most", mib(ps.limits.PerIngress)))
		if cut = append(cut, v); v == pe {
			return cut
		}
	}
	return cut
}

// adds is what holding h once more adds: its cost the first time, a slot
// after.
func (h *heldMsg) adds() int64 {
	if h.refs == 0 {
		return h.cost + slotCost
	}
	return slotCost
}

// largest is the stream holding most; pe when none holds more.
func (ts *tenantStreams) largest(pe *ProcessEvents) *ProcessEvents {
	out := pe
	for s := range ts.streams {
		if out == nil || s.bytes > out.bytes {
			out = s
		}
	}
	return out
}

func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

// cutLocked ends pe's stream for falling behind: what it held is let go
// at once. ps.mu is held; cutNow tells it, outside the lock.
func (ps *processStreams) cutLocked(pe *ProcessEvents, bound, why string) {
	if pe.end == nil {
		ps.cuts.WithLabelValues(bound).Inc()
		pe.end = &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited,
			Message: "this stream of the process's output was not read fast enough and was cut off: " + why + "; the process runs on: connect to it again and read its output as it comes"}
	}
	// A stream that ended otherwise (its sandbox gone) lets go of what it
	// still held too.
	ps.dropLocked(pe)
}

// dropLocked lets go of what pe holds. ps.mu is held.
func (ps *processStreams) dropLocked(pe *ProcessEvents) {
	for _, h := range pe.pending {
		ps.unhold(pe, h)
	}
	clear(pe.pending)
	pe.pending = nil
}

func (ps *processStreams) hold(pe *ProcessEvents, h *heldMsg) {
	add := h.adds()
	h.refs++
	pe.bytes += h.cost
	ps.tenants[pe.tenant].bytes += add
	ps.total += add
	ps.held.Add(float64(add))
}

func (ps *processStreams) unhold(pe *ProcessEvents, h *heldMsg) {
	h.refs--
	sub := int64(slotCost)
	if h.refs == 0 {
		sub += h.cost
	}
	pe.bytes -= h.cost
	ps.tenants[pe.tenant].bytes -= sub
	ps.total -= sub
	ps.held.Sub(float64(sub))
}

// cutNow tells a stream ended under the lock that it ended.
func (pe *ProcessEvents) cutNow() {
	pe.cutoffOnce.Do(func() { close(pe.cutoff) })
	pe.signal()
}

// stop ends the stream with err after what it holds, and says whether it
// was running (the sandbox gone, or NATS having dropped events).
func (pe *ProcessEvents) stop(err error) bool {
	ps := pe.sb.streams
	ps.mu.Lock()
	first := pe.end == nil
	if first {
		pe.end = err
	}
	ps.mu.Unlock()
	if first {
		pe.cutNow()
	}
	return first
}

// stopFeed ends every stream of the feed with err.
func (ps *processStreams) stopFeed(f *feed, err error) {
	ps.mu.Lock()
	streams := make([]*ProcessEvents, 0, len(f.streams))
	for pe := range f.streams {
		streams = append(streams, pe)
	}
	ps.mu.Unlock()
	for _, pe := range streams {
		pe.stop(err)
	}
}

func (pe *ProcessEvents) signal() {
	select {
	case pe.ready <- struct{}{}:
	default:
	}
}

// pop takes the oldest held message; when none is held, the end.
func (pe *ProcessEvents) pop() (*nats.Msg, error) {
	ps := pe.sb.streams
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(pe.pending) == 0 {
		return nil, pe.end
	}
	h := pe.pending[0]
	pe.pending[0] = nil
	pe.pending = pe.pending[1:]
	ps.unhold(pe, h)
	return h.m, nil
}

// Next returns the next event, or false when ctx ends first. Malformed
// events are skipped. An event with Err ends the stream. A stream that
// follows a process (Follow) and has heard nothing from its sandbox for
// probeEvery asks the sandbox for the process: no answer on the live
// subject (its runner or its container gone) or no sandbox there ends the
// stream (CodeUnavailable); a process found ended twice in a row, with
// nothing heard between, gives its end (its event was lost).
func (pe *ProcessEvents) Next(ctx context.Context) (ProcessEvent, bool) {
	for {
		m, end := pe.pop()
		if end != nil {
			return ProcessEvent{Err: end}, true
		}
		if m == nil {
			if ev, ok, done := pe.wait(ctx); done || ok {
				return ev, ok
			}
			continue
		}
		ev := ProcessEvent{Pid: queue.PidFromSubject(m.Subject)}
		switch m.Header.Get(queue.HeaderStream) {
		case queue.HeaderStreamStdout:
			ev.Stream, ev.Data = StreamStdout, m.Data
		case queue.HeaderStreamStderr:
			ev.Stream, ev.Data = StreamStderr, m.Data
		case queue.HeaderStreamExit:
			exit, err := processExitOf(m.Data)
			if err != nil {
				continue
			}
			ev.Stream, ev.Exit = StreamExit, exit
		default:
			continue
		}
		if ev.Pid > 0 {
			return ev, true
		}
	}
}

// wait waits for events, ctx's end (done), or the time to probe the
// followed process's sandbox (ok: the process's end, found so).
func (pe *ProcessEvents) wait(ctx context.Context) (ev ProcessEvent, ok, done bool) {
	var probe <-chan time.Time
	if pid, quiet := pe.quiet(); pid > 0 {
		t := time.NewTimer(max(probeEvery-quiet, 0))
		defer t.Stop()
		probe = t.C
	}
	select {
	case <-ctx.Done():
		return ProcessEvent{}, false, true
	case <-pe.ready:
		return ProcessEvent{}, false, false
	case <-probe:
		ev, ok := pe.probe(ctx)
		return ev, ok, false
	}
}

// quiet is the followed process and how long its sandbox has been silent.
func (pe *ProcessEvents) quiet() (pid int, quiet time.Duration) {
	ps := pe.sb.streams
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return pe.pid, time.Since(pe.lastSign)
}

// probe asks the followed process's sandbox for the process, ending the
// stream if the sandbox is gone. ok: the process's end, found so.
func (pe *ProcessEvents) probe(ctx context.Context) (ProcessEvent, bool) {
	ps := pe.sb.streams
	ps.mu.Lock()
	live, pid := pe.live, pe.pid
	pe.lastSign = time.Now() // asked: not again for probeEvery, whatever the answer
	ps.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	var exit *ProcessExit
	var err error
	if live != "" {
		exit, err = pe.sb.status(ctx, jobs.Session{ID: pe.session, Live: live}, pid)
	}
	var le *LiveError
	switch {
	case live == "" || sandboxGone(err):
		pe.stop(Unavailable("sandbox %s was lost with its container or its runner (stopped, killed, or the container removed): process %d ended with it", pe.session, pid))
	case errors.As(err, &le) && le.Code == LiveNotFound:
		pe.stop(Unavailable("process %d is no longer in sandbox %s, and its end was not seen", pid, pe.session))
	case err == nil && exit != nil:
		// Its output and end may still be on their way (the answer can
		// overtake them): only a second probe, after as long again with
		// nothing heard, takes the end from the sandbox's word.
		ps.mu.Lock()
		seen := pe.endSeen
		pe.endSeen = true
		ps.mu.Unlock()
		if seen {
			return ProcessEvent{Pid: pid, Stream: StreamExit, Exit: exit}, true
		}
	}
	// It runs, or no word either way (slow, or ctx ended): asked again
	// after probeEvery.
	return ProcessEvent{}, false
}

// Close ends the stream and lets go of what it holds; the session's feed
// ends with its last stream.
func (pe *ProcessEvents) Close() {
	ps := pe.sb.streams
	ps.mu.Lock()
	ps.dropLocked(pe)
	if pe.end == nil {
		pe.end = context.Canceled
	}
	if ts := ps.tenants[pe.tenant]; ts != nil {
		if _, open := ts.streams[pe]; open {
			delete(ts.streams, pe)
			ts.bytes -= streamCost
			ps.total -= streamCost
			ps.held.Sub(streamCost)
		}
		if len(ts.streams) == 0 {
			delete(ps.tenants, pe.tenant)
		}
	}
	var gone *feed
	if f := pe.feed; f != nil {
		delete(f.streams, pe)
		if len(f.streams) == 0 && ps.feeds[f.session] == f {
			delete(ps.feeds, f.session)
			gone = f
		}
		pe.feed = nil
	}
	ps.mu.Unlock()
	if gone != nil {
		_ = gone.sub.Unsubscribe()
		_ = gone.closed.Unsubscribe()
	}
}
