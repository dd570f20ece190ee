package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
)

// Live operations act on a stateful session's live sandbox beside its
// jobs (wire.LiveOp: start processes that outlive jobs and follow their
// output, write to their stdin, signal and list them; read and change
// files as the sandbox sees them). They are not jobs: they are not in the
// history and do not extend the session; the sandbox's limits hold them.
// The runner holding the sandbox's container answers them (see
// queue.LiveSubject). A session whose live state is not held anywhere (never
// made, or lost with its container) is given a new live sandbox first by a
// job of its own, as its next job would.

// liveWait bounds one live operation's round trip.
const liveWait = 50 * time.Second

// Sandboxes is the service's stateful sessions' live sandboxes: their live
// operations and process streams, and the session tokens that let a
// caller use one session's sandbox and nothing else (sessiontoken.go).
// The E2B adapter is its user; Service.Sandboxes returns it.
type Sandboxes struct {
	s *Service
	// watches counts each session's open streams of its live processes.
	watches watches
}

// Sandboxes is the service's live sandboxes.
func (s *Service) Sandboxes() *Sandboxes { return s.sandboxes }

// LiveOp carries out a live operation on the tenant's stateful session.
// A failure of the operation itself is an *wire.LiveError (its Code says
// what kind); the session not found, not stateful, or its sandbox not
// reachable are *Error.
func (sb *Sandboxes) LiveOp(ctx context.Context, p Principal, sessionID string, op wire.LiveOp) (wire.LiveReply, error) {
	l, err := sb.OpenLive(ctx, p, sessionID)
	if err != nil {
		return wire.LiveReply{}, err
	}
	return l.Op(ctx, op)
}

// Live is a tenant's stateful session looked up once for a series of live
// operations (a file's chunks): each then costs no database query.
type Live struct {
	sb   *Sandboxes
	p    Principal
	sess jobs.Session
}

// OpenLive looks up the tenant's stateful session for live operations.
func (sb *Sandboxes) OpenLive(ctx context.Context, p Principal, sessionID string) (*Live, error) {
	sess, err := sb.s.Session(ctx, p, sessionID)
	if err != nil {
		return nil, err
	}
	if !sess.Stateful {
		return nil, BadRequest("session_id", "session %s is not stateful: only a stateful session keeps a live sandbox", sess.ID)
	}
	return &Live{sb: sb, p: p, sess: sess}, nil
}

// Op carries out a live operation, as LiveOp does.
func (l *Live) Op(ctx context.Context, op wire.LiveOp) (wire.LiveReply, error) {
	sb, p, sess := l.sb, l.p, l.sess
	defer func() { l.sess = sess }() // as a wake left it
	var err error
	op.ID = 0
	if op.Op == wire.OpSpawn {
		senv, err := sb.s.sessionEnv(p.TenantID, sess)
		if err != nil {
			return wire.LiveReply{}, err
		}
		op.SessionEnv = senv // applied, never listed
	}
	body, err := json.Marshal(op)
	if err != nil {
		return wire.LiveReply{}, err
	}
	for woke := false; ; woke = true {
		if sess.Live == "" {
			if woke {
				return wire.LiveReply{}, Unavailable("the session's live sandbox could not be started; see its last job")
			}
			if sess, err = sb.wakeLive(ctx, p, sess); err != nil {
				return wire.LiveReply{}, err
			}
			continue
		}
		reply, err := sb.liveRequest(ctx, sess, body)
		var le *wire.LiveError
		gone := errors.Is(err, nats.ErrNoResponders) || errors.As(err, &le) && le.Code == wire.LiveErrNoSandbox
		if !gone || woke || op.Op == wire.OpKeep {
			return reply, err
		}
		// The runner that held it is gone, or the sandbox ended: a job
		// makes the session a new one.
		if sess, err = sb.wakeLive(ctx, p, sess); err != nil {
			return wire.LiveReply{}, err
		}
	}
}

// liveRequest sends the operation to the runner holding the session's
// live sandbox. An error of the operation is returned as *wire.LiveError.
func (sb *Sandboxes) liveRequest(ctx context.Context, sess jobs.Session, body []byte) (wire.LiveReply, error) {
	ctx, cancel := context.WithTimeout(ctx, liveWait)
	defer cancel()
	msg, err := sb.s.nc.RequestWithContext(ctx, queue.LiveSubject(sess.ID, sess.Live), body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return wire.LiveReply{}, err
	case errors.Is(err, nats.ErrMaxPayload):
		return wire.LiveReply{}, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge,
			Message: fmt.Sprintf("the operation is over the %d bytes a message between gantry's parts may hold", sb.s.nc.MaxPayload())}
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return wire.LiveReply{}, &Error{Status: http.StatusGatewayTimeout, Code: CodeUnavailable,
			Message: "the session's live sandbox did not answer within " + liveWait.String()}
	case err != nil:
		if ctx.Err() != nil {
			return wire.LiveReply{}, ctx.Err()
		}
		return wire.LiveReply{}, Unavailable("the session's live sandbox cannot be reached: %v", err)
	}
	var reply wire.LiveReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return wire.LiveReply{}, Unavailable("the session's live sandbox answered something malformed")
	}
	if reply.Error != nil {
		return reply, reply.Error
	}
	return reply, nil
}

// wakeLive runs a job of the session that makes its live sandbox (an
// empty cell) and returns the session as it then is.
func (sb *Sandboxes) wakeLive(ctx context.Context, p Principal, sess jobs.Session) (jobs.Session, error) {
	s := sb.s
	job, _, err := s.SubmitJob(ctx, p, jobs.Request{Language: "python", Code: "pass", SessionID: &sess.ID,
		Metadata: map[string]string{"gantry": "starts the session's live sandbox"}})
	if err != nil {
		return sess, err
	}
	job, err = s.WaitJob(ctx, p, job, Watch{Until: time.Now().Add(s.cfg.MaxExecuteWait)})
	if err != nil {
		return sess, err
	}
	if !job.Status.Terminal() {
		if ctx.Err() != nil {
			return sess, ctx.Err()
		}
		return sess, Unavailable("the session's live sandbox is still starting (job %s); retry", job.ID)
	}
	if job.Status != jobs.StatusSucceeded {
		msg := "the session's live sandbox could not be started: job " + job.ID + " ended " + string(job.Status)
		if job.Error != nil {
			msg += ": " + job.Error.Message
		}
		return sess, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: msg}
	}
	return s.Session(ctx, p, sess.ID)
}

// ProcessEvent is a piece of a live process's output, or its end.
type ProcessEvent struct {
	Pid int
	// Stream is queue.HeaderStreamStdout or HeaderStreamStderr with Data,
	// or HeaderStreamExit with Exit.
	Stream string
	Data   []byte
	Exit   *wire.ProcessExit
	// Lost: output of the session's processes was dropped here, the
	// reader having fallen behind (no other field is set).
	Lost bool
}

// ProcessEvents is a subscription to the output and ends of a session's
// live processes. What the runner published before it was made is not in
// it. It holds at most maxProcessEventBytes of output its reader has not
// taken: past that, output is dropped and Next reports it once (Lost);
// ends are always kept. Close ends it.
type ProcessEvents struct {
	sub     *nats.Subscription
	release func()
	ready   chan struct{} // a token: events are waiting

	mu      sync.Mutex
	pending []*nats.Msg
	bytes   int
	ends    int
	lost    bool // output was dropped and Next has not said so yet
}

// Process event bounds: the output held for a reader that has not taken
// it, the ends held, and the streams one session may have open at once.
const (
	maxProcessEventBytes        = 8 << 20
	maxProcessEventEnds         = 4096
	maxProcessWatchesPerSession = 32
)

// WatchProcesses subscribes to the tenant's session's live processes'
// events. Subscribe before starting a process to miss none of its output.
func (sb *Sandboxes) WatchProcesses(ctx context.Context, p Principal, sessionID string) (*ProcessEvents, error) {
	sess, err := sb.s.Session(ctx, p, sessionID)
	if err != nil {
		return nil, err
	}
	release, ok := sb.watches.take(sess.ID, maxProcessWatchesPerSession)
	if !ok {
		return nil, &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: 1,
			Message: fmt.Sprintf("the sandbox already has %d streams of its processes open", maxProcessWatchesPerSession)}
	}
	pe := &ProcessEvents{release: release, ready: make(chan struct{}, 1)}
	if pe.sub, err = sb.s.nc.Subscribe(queue.ProcessSubjectAll(sess.ID), pe.push); err != nil {
		release()
		return nil, Unavailable("cannot follow the sandbox's processes: %v", err)
	}
	return pe, nil
}

// push queues a message, within the bounds (on the subscription's
// goroutine).
func (pe *ProcessEvents) push(m *nats.Msg) {
	pe.mu.Lock()
	if m.Header.Get(queue.HeaderStream) == queue.HeaderStreamExit {
		if pe.ends >= maxProcessEventEnds {
			pe.mu.Unlock()
			return
		}
		pe.ends++
	} else {
		if pe.bytes+len(m.Data) > maxProcessEventBytes {
			pe.lost = true
			pe.mu.Unlock()
			return
		}
		pe.bytes += len(m.Data)
	}
	pe.pending = append(pe.pending, m)
	pe.mu.Unlock()
	select {
	case pe.ready <- struct{}{}:
	default:
	}
}

// pop takes the oldest queued message; lost reports dropped output first.
func (pe *ProcessEvents) pop() (m *nats.Msg, lost bool) {
	pe.mu.Lock()
	defer pe.mu.Unlock()
	if pe.lost {
		pe.lost = false
		return nil, true
	}
	if len(pe.pending) == 0 {
		return nil, false
	}
	m = pe.pending[0]
	pe.pending[0] = nil
	pe.pending = pe.pending[1:]
	if m.Header.Get(queue.HeaderStream) == queue.HeaderStreamExit {
		pe.ends--
	} else {
		pe.bytes -= len(m.Data)
	}
	return m, false
}

// Next returns the next event, or false when ctx ends first. Malformed
// events are skipped. An event with Lost set says that output was dropped
// (the reader fell behind by more than maxProcessEventBytes).
func (pe *ProcessEvents) Next(ctx context.Context) (ProcessEvent, bool) {
	for {
		m, lost := pe.pop()
		if lost {
			return ProcessEvent{Lost: true}, true
		}
		if m == nil {
			select {
			case <-ctx.Done():
				return ProcessEvent{}, false
			case <-pe.ready:
				continue
			}
		}
		ev := ProcessEvent{Pid: queue.PidFromSubject(m.Subject), Stream: m.Header.Get(queue.HeaderStream)}
		switch ev.Stream {
		case queue.HeaderStreamStdout, queue.HeaderStreamStderr:
			ev.Data = m.Data
		case queue.HeaderStreamExit:
			var e wire.ProcessExit
			if json.Unmarshal(m.Data, &e) != nil {
				continue
			}
			ev.Exit = &e
		default:
			continue
		}
		if ev.Pid > 0 {
			return ev, true
		}
	}
}

// Close ends the subscription.
func (pe *ProcessEvents) Close() {
	_ = pe.sub.Unsubscribe()
	pe.release()
}

// watches counts each session's open process streams.
type watches struct {
	mu sync.Mutex
	n  map[string]int
}

// take counts one more stream of the session, if it has fewer than max;
// release (idempotent) counts it off.
func (w *watches) take(session string, max int) (release func(), ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[string]int{}
	}
	if w.n[session] >= max {
		return nil, false
	}
	w.n[session]++
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.n[session]--; w.n[session] <= 0 {
				delete(w.n, session)
			}
		})
	}, true
}

// StartLive makes sure the tenant's stateful session holds a live
// sandbox, running a job of the session that makes one when it does not
// (as its next job would).
func (sb *Sandboxes) StartLive(ctx context.Context, p Principal, sessionID string) error {
	sess, err := sb.s.Session(ctx, p, sessionID)
	if err != nil {
		return err
	}
	if !sess.Stateful {
		return BadRequest("session_id", "session %s is not stateful: only a stateful session keeps a live sandbox", sess.ID)
	}
	if sess.Live != "" {
		return nil
	}
	_, err = sb.wakeLive(ctx, p, sess)
	return err
}
