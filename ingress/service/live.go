package service

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/agent"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
)

// Live operations act on a stateful session's live sandbox beside its
// jobs (agent.LiveOp: start processes that outlive jobs and follow their
// output, write to their stdin, signal and list them; read and change
// files as the sandbox sees them). They are not jobs: they are not in the
// history and do not extend the session; the sandbox's limits hold them.
// The runner holding the sandbox's container answers them (see
// queue.LiveSubject). A session whose live state is not held anywhere (never
// made, or lost with its container) is given a new live sandbox first by a
// job of its own, as its next job would.

// liveWait bounds one live operation's round trip.
const liveWait = 50 * time.Second

// LiveOp carries out a live operation on the tenant's stateful session.
// A failure of the operation itself is an *agent.LiveError (its Code says
// what kind); the session not found, not stateful, or its sandbox not
// reachable are *Error.
func (s *Service) LiveOp(ctx context.Context, p Principal, sessionID string, op agent.LiveOp) (agent.LiveReply, error) {
	sess, err := s.Session(ctx, p, sessionID)
	if err != nil {
		return agent.LiveReply{}, err
	}
	if !sess.Stateful {
		return agent.LiveReply{}, BadRequest("session_id", "session %s is not stateful: only a stateful session keeps a live sandbox", sess.ID)
	}
	op.ID = 0
	if op.Op == agent.OpSpawn {
		senv, err := s.sessionEnv(p.TenantID, sess)
		if err != nil {
			return agent.LiveReply{}, err
		}
		op.Env = underEnv(op.Env, senv)
	}
	body, err := json.Marshal(op)
	if err != nil {
		return agent.LiveReply{}, err
	}
	for woke := false; ; woke = true {
		if sess.Live == "" {
			if woke {
				return agent.LiveReply{}, Unavailable("the session's live sandbox could not be started; see its last job")
			}
			if sess, err = s.wakeLive(ctx, p, sess); err != nil {
				return agent.LiveReply{}, err
			}
			continue
		}
		reply, err := s.liveRequest(ctx, sess, body)
		var le *agent.LiveError
		gone := errors.Is(err, nats.ErrNoResponders) || errors.As(err, &le) && le.Code == agent.LiveErrNoSandbox
		if !gone || woke || op.Op == agent.OpKeep {
			return reply, err
		}
		// The runner that held it is gone, or the sandbox ended: a job
		// makes the session a new one.
		if sess, err = s.wakeLive(ctx, p, sess); err != nil {
			return agent.LiveReply{}, err
		}
	}
}

// liveRequest sends the operation to the runner holding the session's
// live sandbox. An error of the operation is returned as *agent.LiveError.
func (s *Service) liveRequest(ctx context.Context, sess jobs.Session, body []byte) (agent.LiveReply, error) {
	ctx, cancel := context.WithTimeout(ctx, liveWait)
	defer cancel()
	msg, err := s.nc.RequestWithContext(ctx, queue.LiveSubject(sess.ID, sess.Live), body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return agent.LiveReply{}, err
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return agent.LiveReply{}, &Error{Status: http.StatusGatewayTimeout, Code: CodeUnavailable,
			Message: "the session's live sandbox did not answer within " + liveWait.String()}
	case err != nil:
		if ctx.Err() != nil {
			return agent.LiveReply{}, ctx.Err()
		}
		return agent.LiveReply{}, Unavailable("the session's live sandbox cannot be reached: %v", err)
	}
	var reply agent.LiveReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return agent.LiveReply{}, Unavailable("the session's live sandbox answered something malformed")
	}
	if reply.Error != nil {
		return reply, reply.Error
	}
	return reply, nil
}

// wakeLive runs a job of the session that makes its live sandbox (an
// empty cell) and returns the session as it then is.
func (s *Service) wakeLive(ctx context.Context, p Principal, sess jobs.Session) (jobs.Session, error) {
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
	Exit   *agent.ProcessExit
}

// ProcessEvents is a subscription to the output and ends of a session's
// live processes. What the runner published before it was made is not in
// it. Close ends it.
type ProcessEvents struct {
	msgs chan *nats.Msg
	sub  *nats.Subscription
}

// WatchProcesses subscribes to the tenant's session's live processes'
// events, holding up to buffer the caller has not taken yet (later ones
// are dropped). Subscribe before starting a process to miss none of its
// output.
func (s *Service) WatchProcesses(ctx context.Context, p Principal, sessionID string, buffer int) (*ProcessEvents, error) {
	sess, err := s.Session(ctx, p, sessionID)
	if err != nil {
		return nil, err
	}
	pe := &ProcessEvents{msgs: make(chan *nats.Msg, buffer)}
	if pe.sub, err = s.nc.ChanSubscribe(queue.ProcessSubjectAll(sess.ID), pe.msgs); err != nil {
		return nil, Unavailable("cannot follow the sandbox's processes: %v", err)
	}
	return pe, nil
}

// Next returns the next event, or false when ctx ends first. Malformed
// events are skipped.
func (pe *ProcessEvents) Next(ctx context.Context) (ProcessEvent, bool) {
	for {
		select {
		case <-ctx.Done():
			return ProcessEvent{}, false
		case m := <-pe.msgs:
			ev := ProcessEvent{Pid: queue.PidFromSubject(m.Subject), Stream: m.Header.Get(queue.HeaderStream)}
			switch ev.Stream {
			case queue.HeaderStreamStdout, queue.HeaderStreamStderr:
				ev.Data = m.Data
			case queue.HeaderStreamExit:
				var e agent.ProcessExit
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
}

// Close ends the subscription.
func (pe *ProcessEvents) Close() { _ = pe.sub.Unsubscribe() }

// StartLive makes sure the tenant's stateful session holds a live
// sandbox, running a job of the session that makes one when it does not
// (as its next job would).
func (s *Service) StartLive(ctx context.Context, p Principal, sessionID string) error {
	sess, err := s.Session(ctx, p, sessionID)
	if err != nil {
		return err
	}
	if !sess.Stateful {
		return BadRequest("session_id", "session %s is not stateful: only a stateful session keeps a live sandbox", sess.ID)
	}
	if sess.Live != "" {
		return nil
	}
	_, err = s.wakeLive(ctx, p, sess)
	return err
}
