package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/internal/clock"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/tracing"
	"github.com/gantryhq/gantry/workspace"
)

// SessionStore is what the runner needs of the store to run sessions.
type SessionStore interface {
	AcquireSession(ctx context.Context, id, owner string, lease time.Duration) (store.SessionState, bool, error)
	ExtendSession(ctx context.Context, id, owner string, lease time.Duration) error
	ReleaseSession(ctx context.Context, id, owner string, force bool) (bool, int, error)
	NextSessionJob(ctx context.Context, sessionID, owner, runnerID string, maxAttempts int) (store.SessionJob, bool, error)
	FinishSessionJob(ctx context.Context, jobID string, attempt int, r jobs.Result, sessionID, owner string, snap *store.Snapshot, live *store.Live) (bool, bool, string, error)
	LoseLive(ctx context.Context, sessionID, live, reason string) error
	// Live state beyond containers (livestate.go).
	CommitWorkspace(ctx context.Context, sessionID, owner string, snap store.Snapshot) (string, error)
	PauseSession(ctx context.Context, sessionID, owner string, cp store.Checkpoint) error
	KeepCheckpoint(ctx context.Context, sessionID, live string, cp store.Checkpoint) (bool, error)
	CreateSnapshot(ctx context.Context, snap jobs.Snapshot, cp store.Checkpoint, workspaceKey string) (jobs.Snapshot, error)
	ForkSession(ctx context.Context, parentID, owner string, cp store.Checkpoint, ttlSeconds int, children []store.ForkChild) ([]jobs.Session, error)
	ForkCheckpoint(ctx context.Context, cp store.Checkpoint, children []string) (int, error)
	// Committing a job's workspace reads back where its session is.
	workspace.Sessions
}

// Blobs is what the runner needs of the object store.
type Blobs interface {
	Uploader
	// Ping answers when the store can be reached.
	Ping(ctx context.Context) error
	PutStream(ctx context.Context, key string, r io.Reader, contentType string) (int64, error)
	// Copy copies an object in the store (a session's workspace, for a
	// snapshot or a fork).
	Copy(ctx context.Context, src, dst string) (int64, error)
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	Delete(ctx context.Context, key string) error
	// DeleteOlder removes what prefix holds written before a time
	// (old builds, buildcache.go).
	DeleteOlder(ctx context.Context, prefix string, before time.Time) (int, error)
}

// errSessionLost means the runner no longer owns the session (it closed,
// expired or was taken over).
var errSessionLost = errors.New("session lost")

// handleSession runs a session's jobs. The message only says the session
// has work: the runner that becomes the session's owner runs all of its
// queued jobs, one at a time in submission order, and lets go only when
// none is left. A runner that cannot become owner acks the message: the
// owner cannot let go while the job it announced is queued. A stateful
// session's live sandbox stays where it is: a runner that does not hold it
// hands the session to the one that does (handover.go).
func (r *Runner) handleSession(ctx context.Context, msg jetstream.Msg, rm queue.RunMessage) {
	// The message's trace is the one of the job whose submission sent it:
	// each job run here is a span in its own job's trace, linked to it.
	ctx = queue.TraceContext(ctx, msg.Headers())
	log := r.log.With("session_id", rm.SessionID)
	stopHolding := r.hold(msg)
	defer stopHolding()
	owner := r.newOwner()
	st, ok, err := r.acquireSession(ctx, log, rm.SessionID, owner, r.sessionLease())
	switch {
	case errors.Is(err, store.ErrNotFound):
		_ = msg.Ack() // closed: its jobs were cancelled
		return
	case err != nil:
		log.Error("acquire session", "err", err)
		r.handBack(ctx, msg, rm.TenantID, 2*time.Second, "database")
		return
	case !ok:
		_ = msg.Ack()
		return
	}
	if r.liveElsewhere(rm.SessionID, st) {
		var done bool
		if st, done = r.handOver(ctx, log, msg, rm, owner, st); done {
			return
		}
	}

	err = r.ownSession(ctx, log, rm.SessionID, owner, st)
	switch {
	case err == nil:
		_ = msg.Ack()
	case errors.Is(err, errSessionLost):
		_ = msg.Ack()
	default:
		r.handBack(ctx, msg, rm.TenantID, time.Second, "session_handover")
	}
}

// newOwner names one ownership of a session. Each is its own: two slots of
// one runner must not both believe they own the session.
func (r *Runner) newOwner() string { return r.cfg.ID + "/" + jobs.NewID("own") }

// ownSession runs the session's jobs as owner (who holds its lease) until
// none is queued and it is released (nil), keeping the lease alive
// meanwhile. errSessionLost: the session closed or was taken over. Any
// other error (shutdown, a failure of gantry's own) has let the session go
// with its container: the caller must see that another owner takes it.
func (r *Runner) ownSession(ctx context.Context, log *slog.Logger, sessionID, owner string, st store.SessionState) error {
	// Keep the lease alive while the session runs; a renewal that failed
	// (Postgres away) is retried every second, so that this owner holds
	// the session again as soon as Postgres is back.
	lease := r.sessionLease()
	loopCtx, stopLoop := context.WithCancelCause(ctx)
	renewed := make(chan struct{})
	defer func() { stopLoop(nil); <-renewed }()
	go func() {
		defer close(renewed)
		every := lease / 3
		t := time.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-loopCtx.Done():
				return
			case <-t.C:
			}
			err := r.sessions.ExtendSession(loopCtx, sessionID, owner, lease)
			switch {
			case errors.Is(err, store.ErrNotFound):
				stopLoop(errSessionLost)
				return
			case err != nil:
				t.Reset(min(time.Second, every))
			default:
				t.Reset(every)
			}
		}
	}()

	err := r.runSession(loopCtx, log, sessionID, owner, st)
	if err == nil {
		return nil
	}
	if errors.Is(err, errSessionLost) || errors.Is(context.Cause(loopCtx), errSessionLost) {
		r.fleet.dropSession(sessionID)
		return errSessionLost
	}
	// Shutdown or a failure of gantry's own: let the session go.
	log.Warn("handing the session back to the queue", "err", err)
	r.fleet.dropSession(sessionID)
	if _, _, rerr := r.sessions.ReleaseSession(context.WithoutCancel(ctx), sessionID, owner, true); rerr != nil {
		log.Error("release session", "err", rerr)
	}
	return err
}

// acquireSession tries to become the session's owner, holding the message
// while Postgres is unreachable. After an outage it gives the session's
// owner a moment to renew its lease, which lapsed while Postgres was away,
// before trying to take it over: an owner that is alive keeps its session
// (a takeover would run its job again).
func (r *Runner) acquireSession(ctx context.Context, log *slog.Logger, id, owner string, lease time.Duration) (store.SessionState, bool, error) {
	start := time.Now()
	for {
		st, ok, err := r.sessions.AcquireSession(ctx, id, owner, lease)
		if err == nil || !store.Unavailable(err) || time.Since(start) > maxHold || r.isStopping() {
			return st, ok, err
		}
		log.Warn("database unavailable; holding the session's message until it is back", "err", err)
		if _, ok := r.waitForStore(ctx, log); !ok {
			return st, false, err
		}
		if !clock.Sleep(ctx, 2*time.Second) {
			return st, false, err
		}
	}
}

func (r *Runner) sessionLease() time.Duration { return max(r.cfg.Queue.AckWait, 15*time.Second) }

// runSession runs jobs until none is queued and the session is released.
func (r *Runner) runSession(ctx context.Context, log *slog.Logger, sessionID, owner string, st store.SessionState) error {
	at := sessionAt{version: st.Version, key: st.SnapshotKey, live: store.Live{ID: st.LiveID, Lost: st.LiveLost}, checkpoint: st.Checkpoint}
	for {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		if r.isStopping() {
			return errShutdown
		}
		sj, ok, err := r.sessions.NextSessionJob(ctx, sessionID, owner, r.cfg.ID, r.cfg.Queue.MaxAttempts)
		if errors.Is(err, store.ErrNotFound) {
			return errSessionLost
		}
		if store.Unavailable(err) {
			if _, ok := r.waitForStore(ctx, log); ok {
				continue
			}
		}
		if err != nil {
			return err
		}
		if !ok {
			released, _, err := r.sessions.ReleaseSession(ctx, sessionID, owner, false)
			if store.Unavailable(err) {
				if _, ok := r.waitForStore(ctx, log); ok {
					continue
				}
			}
			if err != nil {
				return err
			}
			if released {
				return nil
			}
			continue // a job was queued meanwhile
		}
		if at, err = r.runSessionJob(ctx, log, sessionID, owner, st, at, sj); err != nil {
			return err
		}
	}
}

// sessionAt is where a session is between two of its jobs: its workspace's
// version and snapshot, and (stateful) where its live state is.
type sessionAt struct {
	version int64
	key     string
	live    store.Live
	// checkpoint is the live state to restore where there is no live
	// sandbox (ID "" for none).
	checkpoint store.Checkpoint
}

// runSessionJob runs one job in the session's workspace and records it with
// the workspace it left. It returns where the session is after it.
func (r *Runner) runSessionJob(ctx context.Context, log *slog.Logger, sessionID, owner string, st store.SessionState, at sessionAt, sj store.SessionJob) (sessionAt, error) {
	ctx, span := r.processSessionJob(ctx, sessionID, sj)
	defer span.End()
	log = log.With("job_id", sj.JobID, "attempt", sj.Attempt).With(tracing.LogAttrs(ctx)...)
	work := &sessionWork{r: r, log: log, id: sessionID, state: st, at: at}
	a, execCtx, end := r.begin(ctx, log, sj.JobID, sj.Claim, work)
	defer end()
	res, ctr, err := r.runAttempt(execCtx, log, a)
	if errors.Is(err, errS3Held) {
		// Nothing of it ran, or what ran was never recorded: the job goes
		// back to the session's queue without spending its attempt.
		if rerr := r.store.ReleaseJob(context.WithoutCancel(ctx), sj.JobID, sj.Attempt); rerr != nil {
			log.Error("give back a session job", "err", rerr)
		}
	}
	if err != nil {
		if work.retired != "" && st.Stateful {
			// The container holding the live state is gone (the job goes
			// back to the queue).
			at.live = store.Live{Lost: work.lostBecause(sj.JobID)}
		}
		return at, err
	}

	// The workspace is kept only when the program ended by itself (the
	// attempt then hands the container over): after a timeout or cancel
	// the session stays at the version before this job.
	var next *workspace.Version
	if ctr != nil {
		// While S3 is unavailable the container, the result and the lease
		// are held: every write of the session is kept.
		snapStart := time.Now()
		snapSpanCtx, endSnap := r.stage(ctx, "job.snapshot")
		err = r.throughS3Outage(snapSpanCtx, log, "a session's workspace and its job's result", func() error {
			snapCtx, cancelSnap := context.WithTimeout(snapSpanCtx, artifactTimeout)
			defer cancelSnap()
			next, err = r.saveSnapshot(snapCtx, ctr.Container, st.TenantID, sessionID, at.version+1, st.DiskMB)
			return err
		})
		endSnap(err)
		r.metrics.stage("snapshot", snapStart)
		if errors.Is(err, errS3Held) {
			ctr.release(false, "runner stopping")
			if rerr := r.store.ReleaseJob(context.WithoutCancel(ctx), sj.JobID, sj.Attempt); rerr != nil {
				log.Error("give back a session job", "err", rerr)
			}
			if st.Stateful {
				at.live = store.Live{Lost: "the runner stopped during job " + sj.JobID}
			}
			return at, err
		}
		if err != nil {
			log.Warn("snapshot failed; the session keeps its previous workspace", "err", err)
			ctr.release(false, "snapshot failed")
			work.retired = "snapshot failed"
			ctr = nil
			res.Status = jobs.StatusError
			res.Error = &jobs.ErrorInfo{Code: jobs.ErrCodeInfrastructure, Message: "the program ran, but gantry could not save the session's workspace: " + err.Error()}
		}
	}

	// Where the live state is now: in the container kept for the next
	// job, or lost with the container.
	var live *store.Live
	if st.Stateful {
		live = &store.Live{Lost: work.lostBecause(sj.JobID), Fresh: true}
		if ctr != nil {
			live = &store.Live{ID: ctr.live, Fresh: res.LiveState == jobs.LiveNew || res.LiveState == jobs.LiveLost}
		}
	}

	// While Postgres is unreachable the result and the snapshot wait here;
	// the session's lease is renewed as soon as it is back.
	recordStart := time.Now()
	defer r.metrics.stage("record", recordStart)
	recordCtx, endRecord := r.stage(ctx, "job.record")
	var applied, snapTaken bool
	finish := func(snap *store.Snapshot) (taken bool, replaced string, err error) {
		applied, err = r.record(recordCtx, log, func(ctx context.Context) (applied bool, err error) {
			applied, taken, replaced, err = r.sessions.FinishSessionJob(ctx, sj.JobID, sj.Attempt, res, sessionID, owner, snap, live)
			return applied, err
		})
		return taken, replaced, err
	}
	if next == nil {
		_, _, err = finish(nil)
	} else {
		snapTaken, err = next.Commit(recordCtx, func(snap store.Snapshot) (bool, string, error) { return finish(&snap) })
		// The snapshot is taken only with the job's result, in one
		// transaction: a commit that landed though its answer was lost
		// recorded the job too.
		applied = applied || snapTaken
	}
	endRecord(err)
	if err != nil {
		if ctr != nil {
			ctr.release(false, "record failed")
		}
		if blob.Unavailable(err) {
			// S3 kept the result (its long output): the attempt is not spent.
			if rerr := r.store.ReleaseJob(context.WithoutCancel(ctx), sj.JobID, sj.Attempt); rerr != nil {
				log.Error("give back a session job", "err", rerr)
			}
		}
		return at, fmt.Errorf("record session job: %w", err)
	}
	if next != nil && !snapTaken && ctr != nil {
		// The container holds a workspace the session did not take.
		ctr.release(false, "session moved on")
		ctr = nil
	}
	if snapTaken {
		at.version, at.key = next.Version, next.Key
	}
	if live != nil && applied {
		at.live = *live
	}
	if ctr != nil && st.Stateful && applied {
		// Where live state is checkpointed, a runner killed outright loses
		// at most what the session did since its last checkpoint.
		at.checkpoint = r.keepCheckpoint(ctx, log, sessionID, st, ctr, at)
	}
	if ctr != nil {
		ctr.park(sessionID, at.version, time.Duration(st.TTLSeconds)*time.Second)
		if st.Stateful && applied {
			r.live.serve(sessionID, ctr.Container)
		}
	}
	if applied {
		finished(ctx, res)
		r.publishStatus(sj.JobID, res.Status)
		if r.metrics != nil {
			r.metrics.observe(sj.Claim.Spec.Language, sj.Claim.TenantID, res)
		}
		log.Info("session job finished", "status", res.Status, "version", at.version, "live_state", res.LiveState)
	}
	return at, nil
}

// sessionWork is one session job's view of the session: the workspace
// version it must run on and, for a stateful session, where the session's
// live state was before it.
type sessionWork struct {
	r     *Runner
	log   *slog.Logger
	id    string
	state store.SessionState
	at    sessionAt
	// retired is why the attempt retired the session's container (its
	// live state then went with it), "" if it did not.
	retired string
}

// container returns a container holding the session's workspace at its
// version: the one this runner parked, if it fits the job's limits and is
// current (a stateful session's: if it holds the session's live sandbox,
// its workspace brought up to date if the files API changed it), else a
// new one restored from the snapshot.
func (w *sessionWork) container(ctx context.Context, spec jobs.Spec) (*lease, error) {
	defer promiseFrom(ctx).settle() // the session's container is counted from here
	lim := spec.Limits.Container()
	lim.DiskMB = w.state.DiskMB
	if c, version := w.r.fleet.unpark(w.id); c != nil {
		fits := c.conn.Err() == nil && sameShape(c.limits, lim)
		switch {
		case fits && !w.state.Stateful && version == w.at.version:
			return c, nil
		case fits && w.state.Stateful && c.live == w.at.live.ID:
			if version == w.at.version || w.restore(ctx, c.Container) == nil {
				return c, nil
			}
		case !fits && w.state.Stateful && c.live != "" && c.live == w.at.live.ID:
			w.retired = "limits"
		}
		c.release(false, "stale")
	}
	var c *lease
	// A restore that fails because S3 is unavailable waits for it: none
	// of the program ran, and the job keeps its attempt.
	err := w.r.throughS3Outage(ctx, w.log, "a session's workspace to restore", func() error {
		var err error
		image, err := w.r.envs.image(ctx, w.state.TenantID, w.state.Environment)
		if err != nil {
			return err
		}
		// A stateful session whose live state is a checkpoint (paused,
		// forked, made from a snapshot, its runner lost) goes on from it.
		if w.state.Stateful && w.state.Durable && w.r.gv != nil && w.at.checkpoint.ID != "" && w.at.live.ID == "" {
			restored, why, err := w.r.restoreSession(ctx, w.id, w.state.TenantID, lim, image, w.at, w.state.Paused, w.at.live.Lost)
			switch {
			case err == nil && w.at.version != w.at.checkpoint.Version && w.restore(ctx, restored.Container) != nil:
				// The workspace moved on while it was paused (the files
				// API) and could not be brought up to date: a new sandbox.
				restored.release(false, "restore failed")
				w.at.live.Lost = "its workspace changed since its checkpoint and could not be brought into it"
			case err == nil:
				restored.restored = why
				c = restored
				return nil
			case blob.Unavailable(err):
				return err
			default:
				w.log.Warn("restore a session's live state; it starts anew", "checkpoint", w.at.checkpoint.ID, "err", err)
				w.at.live.Lost = "its checkpoint could not be restored: " + err.Error()
			}
		}
		if c, err = w.r.fleet.createSession(ctx, w.id, w.state.TenantID, lim, image, w.state.Stateful && w.state.Durable, w.state.Stateful); err != nil {
			return err
		}
		if err := w.restore(ctx, c.Container); err != nil {
			c.release(false, "restore failed")
			c = nil
			return err
		}
		// A stateful session's interpreter forks from the warm one, which
		// loaded while the workspace was restored.
		if w.state.Stateful {
			if err := c.awaitWarm(ctx); err != nil {
				c.release(false, "warm interpreter failed")
				c = nil
				return err
			}
		}
		return nil
	})
	return c, err
}

// restore puts the session's current workspace version into c (a new
// container's workspace is empty: version 0 needs nothing).
func (w *sessionWork) restore(ctx context.Context, c *Container) error {
	if w.at.version == 0 || w.at.key == "" {
		return nil
	}
	rc, err := w.r.blobs.Get(ctx, w.at.key)
	if err == nil {
		err = c.conn.Restore(ctx, rc)
		rc.Close()
	}
	if err != nil {
		return fmt.Errorf("restore session workspace version %d: %w", w.at.version, err)
	}
	return nil
}

// sameShape reports whether a container made with limits a can run a job
// asking for b: the output cap is the agent's per run, not the
// container's.
func sameShape(a, b jobs.Limits) bool {
	a.OutputBytes, b.OutputBytes = 0, 0
	return a == b
}

// liveState says what a stateful session's job found of the session's
// live state, from what the agent reports of the sandbox it ran in (l),
// and names that sandbox c.live.
func (w *sessionWork) liveState(c *Container, l *wire.Live) (jobs.LiveState, string) {
	if l == nil {
		return "", ""
	}
	prev := c.live
	c.live = fmt.Sprintf("%s/%d", shortID(c.id), l.ID)
	restored := c.restored
	c.restored = ""
	switch {
	case !l.Fresh && restored != "":
		return jobs.LiveRestored, restored
	case !l.Fresh:
		return jobs.LiveKept, ""
	case w.at.live.ID == "" && w.at.live.Lost == "":
		return jobs.LiveNew, ""
	case w.at.live.ID != "" && w.at.live.ID == prev && l.Ended != "":
		return jobs.LiveLost, l.Ended
	case w.at.live.ID == "" && w.at.live.Lost != "":
		return jobs.LiveLost, w.at.live.Lost
	}
	return jobs.LiveLost, "the container that held it is gone: its runner stopped, or the container was removed"
}

// lostBecause says why the session's live state went with this job's
// container ("" when it did not).
func (w *sessionWork) lostBecause(jobID string) string {
	switch w.retired {
	case "":
		return ""
	case "timed out":
		return "job " + jobID + " timed out, and its sandbox was killed"
	case "cancelled":
		return "job " + jobID + " was cancelled, and its sandbox was killed"
	case "out of memory":
		return "job " + jobID + " ran out of memory, and its sandbox was removed"
	case "shutdown":
		return "the runner stopped during job " + jobID
	case "limits":
		return "job " + jobID + " asked for other limits than the session's sandbox has"
	}
	return "the sandbox broke during job " + jobID + " (" + w.retired + ")"
}

// saveSnapshot uploads the container's workspace as the given version.
func (r *Runner) saveSnapshot(ctx context.Context, ctr *Container, tenantID, sessionID string, version int64, diskMB int) (*workspace.Version, error) {
	return workspace.Write(ctx, r.blobs, r.sessions, r.log.With("session_id", sessionID), tenantID, sessionID, version, diskMB, func(w io.Writer) error {
		tr, wait, err := ctr.conn.Tar(ctx, nil, true)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, tr)
		if werr := wait(); err == nil {
			err = werr
		}
		return err
	})
}
