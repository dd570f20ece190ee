package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
	// streams are the streams of live processes on this ingress
	// (processevents.go).
	streams *processStreams
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

// Sandbox is the live sandbox (Session.Live) the last operation reached:
// after a wake, the new one.
func (l *Live) Sandbox() string { return l.sess.Live }

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
