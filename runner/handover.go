package runner

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
)

// A stateful session's live sandbox lives in one container on one runner,
// and its jobs must run there: a session's message goes to whichever
// runner has a free slot, so the runner that gets it and does not hold the
// sandbox hands the session to the one that does. It lets the session go
// and asks the holder, on queue.TakeSubject (which only the holder
// serves), to take it; the holder becomes the owner and runs the session's
// jobs as if it had the message. Only when nobody holds the sandbox any
// more (no answer: its runner stopped or was killed, or its container is
// gone) or the holder refuses (it is stopping) does the session run where
// the message is, its live state lost, for that reason.

// takeTimeout bounds the wait for the holder's answer. A holder that does
// not answer in time is not taken for gone: the message is handed back
// and the question asked again.
const takeTimeout = 5 * time.Second

// liveElsewhere reports whether the session keeps a live sandbox this
// runner does not hold.
func (r *Runner) liveElsewhere(sessionID string, st store.SessionState) bool {
	return st.Stateful && st.LiveID != "" && !r.fleet.holdsLive(sessionID, st.LiveID)
}

// handOver hands the session, whose lease owner holds, to the runner that
// holds its live sandbox. done says the message is dealt with (acked, or
// handed back to be asked again); otherwise owner holds the session again,
// to run it here, and st says why its live state is lost.
func (r *Runner) handOver(ctx context.Context, log *slog.Logger, msg jetstream.Msg, rm queue.RunMessage, owner string, st store.SessionState) (store.SessionState, bool) {
	if _, _, err := r.sessions.ReleaseSession(ctx, rm.SessionID, owner, true); err != nil {
		log.Error("release a session to hand it over", "err", err)
		r.handBack(ctx, msg, rm.TenantID, 2*time.Second, "database")
		return st, true
	}
	reply, err := r.askTake(ctx, rm.SessionID, st.LiveID)
	var lost string
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		lost = "no runner holds its sandbox any more: the runner that held it stopped or was killed, or its container was removed"
	case err != nil:
		log.Warn("the runner holding the session's live sandbox did not answer; asking again later", "live", st.LiveID, "err", err)
		r.handBack(ctx, msg, rm.TenantID, time.Second, "session_holder")
		return st, true
	case reply.Outcome == queue.TakeTaken, reply.Outcome == queue.TakeHeld, reply.Outcome == queue.TakeGone:
		r.metrics.handedOver(string(reply.Outcome))
		log.Debug("session handed to the runner holding its live sandbox", "live", st.LiveID, "outcome", reply.Outcome)
		_ = msg.Ack()
		return st, true
	case reply.Outcome == queue.TakeBusy:
		r.metrics.handedOver(string(reply.Outcome))
		r.handBack(ctx, msg, rm.TenantID, 500*time.Millisecond, "session_holder_busy")
		return st, true
	default:
		lost = reply.Reason
		if lost == "" {
			lost = "the runner holding its sandbox refused to run it"
		}
	}
	r.metrics.handedOver("lost")
	log.Info("running the session away from its live sandbox", "live", st.LiveID, "reason", lost)
	next, ok, err := r.acquireSession(ctx, log, rm.SessionID, owner, r.sessionLease())
	switch {
	case errors.Is(err, store.ErrNotFound):
		_ = msg.Ack()
		return st, true
	case err != nil:
		log.Error("acquire session", "err", err)
		r.handBack(ctx, msg, rm.TenantID, 2*time.Second, "database")
		return st, true
	case !ok:
		_ = msg.Ack() // another owner took it meanwhile
		return st, true
	}
	if next.LiveID == st.LiveID {
		next.LiveID, next.LiveLost = "", lost
	}
	return next, false
}

// askTake asks the runner holding the session's live sandbox live to take
// the session. nats.ErrNoResponders: nobody holds it.
func (r *Runner) askTake(ctx context.Context, sessionID, live string) (queue.TakeReply, error) {
	ctx, cancel := context.WithTimeout(ctx, takeTimeout)
	defer cancel()
	m, err := r.nc.RequestWithContext(ctx, queue.TakeSubject(sessionID, live), nil)
	if err != nil {
		return queue.TakeReply{}, err
	}
	var reply queue.TakeReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		return reply, err
	}
	return reply, nil
}

// onTake answers another runner's request to take a session whose live
// sandbox this runner's container holds: it becomes the session's owner
// and runs its jobs beside its slots' (they need no container of their
// own), at most Slots such sessions at once.
func (r *Runner) onTake(sessionID, live string, m *nats.Msg) {
	answer := func(out queue.TakeOutcome, reason string) {
		data, _ := json.Marshal(queue.TakeReply{Outcome: out, Reason: reason})
		_ = m.Respond(data)
	}
	if r.isStopping() {
		answer(queue.TakeRefused, "the runner that held its sandbox was stopping")
		return
	}
	select {
	case r.handed <- struct{}{}:
	default:
		answer(queue.TakeBusy, "")
		return
	}
	keep := false
	defer func() {
		if !keep {
			<-r.handed
		}
	}()
	log := r.log.With("session_id", sessionID)
	owner := r.newOwner()
	ctx, cancel := context.WithTimeout(context.Background(), takeTimeout)
	st, ok, err := r.sessions.AcquireSession(ctx, sessionID, owner, r.sessionLease())
	cancel()
	switch {
	case errors.Is(err, store.ErrNotFound):
		answer(queue.TakeGone, "")
		return
	case err != nil:
		log.Warn("acquire a session handed over", "err", err)
		answer(queue.TakeBusy, "")
		return
	case !ok:
		answer(queue.TakeHeld, "")
		return
	}
	if st.LiveID != live || !r.fleet.holdsLive(sessionID, live) {
		// The sandbox went (or moved on) since the question was asked.
		if _, _, err := r.sessions.ReleaseSession(context.Background(), sessionID, owner, true); err != nil {
			log.Warn("release a session", "err", err)
		}
		answer(queue.TakeRefused, "the container that held its sandbox was retired")
		return
	}
	keep = true
	answer(queue.TakeTaken, "")
	r.goBackground(func(quit <-chan struct{}) {
		defer func() { <-r.handed }()
		// As a slot's job, it may run past Stop until the drain ends.
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		go func() {
			select {
			case <-quit:
				cancel(errShutdown)
			case <-ctx.Done():
			}
		}()
		err := r.ownSession(ctx, log, sessionID, owner, st)
		if err == nil || errors.Is(err, errSessionLost) {
			return
		}
		// No message holds these jobs: announce them again, for any runner.
		r.announceSession(context.WithoutCancel(ctx), log, sessionID, st.TenantID)
	})
}

// announceSession publishes a session's run message again, so that a
// runner takes its queued jobs (the ingress's sweeper does the same for a
// session left without an owner, later).
func (r *Runner) announceSession(ctx context.Context, log *slog.Logger, sessionID, tenantID string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pub := queue.NewPublisher(r.nc, r.js, r.cfg.Queue)
	if _, err := pub.Publish(ctx, queue.RunMessage{TenantID: tenantID, SessionID: sessionID}, jobs.NewID("ann"), r.tenantMaxRunning(ctx, tenantID)); err != nil {
		log.Warn("announce a session's jobs again; the sweeper will", "err", err)
	}
}
