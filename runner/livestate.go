package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/internal/clock"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
)

// Live state that outlives its container (docs/ARCHITECTURE.md, "Live
// state"). Where runsc can checkpoint (gvisor.go), a stateful session's
// container runs under gVisor, run by the runner itself, and its whole
// live state can be saved as a checkpoint (checkpoint.go):
//
//   - pause: checkpointed and its container removed; the session holds no
//     memory anywhere; its next job (or file call, command, resume)
//     restores it on whichever runner takes it;
//   - snapshot: checkpointed while it goes on, kept as the tenant's
//     snapshot, from which new sessions are made;
//   - fork: checkpointed while it goes on, and restored N times at once as
//     N new sessions, here;
//   - a runner told to stop pauses the live sessions it holds before it
//     exits; one that holds more than GANTRY_SESSION_LIVE_MAX pauses the
//     one that waited longest rather than lose it; and a session's live
//     state is checkpointed after a job when its last checkpoint is older
//     than CheckpointEvery, so that a runner killed outright loses at most
//     what changed since.

// LiveConfig says how a runner keeps stateful sessions' live state beyond
// their containers.
type LiveConfig struct {
	// GVisor, with Runsc set, runs stateful sessions' containers under
	// runsc itself, so that their live state can be checkpointed. Without
	// it, or where runsc cannot checkpoint, live state is kept in its
	// container's memory only (pause, snapshot and fork answer that they
	// are not available).
	GVisor GVisorConfig
	// CacheMB bounds the checkpoints a runner keeps on local disk (for a
	// resume or a fork here without a download). Default 4096.
	CacheMB int
	// Require makes Start fail when live state cannot be checkpointed here
	// (instead of keeping it in memory).
	Require bool
	// CheckpointEvery: after a job, a session whose last checkpoint is
	// older than this is checkpointed while it goes on (a runner killed
	// outright loses at most what its sessions did since). 0: 5 minutes;
	// negative: never.
	CheckpointEvery time.Duration
}

// WithDefaults fills in zero fields.
func (c LiveConfig) WithDefaults() LiveConfig {
	if c.CacheMB == 0 {
		c.CacheMB = 4096
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = 5 * time.Minute
	}
	if c.GVisor.Platform == "" {
		c.GVisor.Platform = "systrap"
	}
	return c
}

// startLive sets up gVisor for stateful sessions when configured; when it
// cannot checkpoint here, it says why and live state stays in memory.
func (r *Runner) startLive(ctx context.Context) error {
	cfg := r.cfg.Live
	if cfg.GVisor.Runsc == "" {
		if cfg.Require {
			return errors.New("GANTRY_LIVE_STATE=gvisor: no runsc found (scripts/ensure-runsc.sh installs it)")
		}
		r.log.Info("stateful sessions keep their live state in memory only (no runsc): it cannot be paused, snapshotted or forked")
		return nil
	}
	if cfg.GVisor.StateDir == "" {
		cfg.GVisor.StateDir = filepath.Join("/var/lib/gantry", sanitizeID(r.cfg.ID))
	}
	gv, err := newGVisor(cfg.GVisor, r.sandbox)
	if err == nil {
		var cache *checkpointCache
		if cache, err = newCheckpointCache(filepath.Join(cfg.GVisor.StateDir, "checkpoints"), int64(cfg.CacheMB)<<20); err == nil {
			r.checkpoints = cache
		}
	}
	if err != nil {
		if cfg.Require {
			return fmt.Errorf("GANTRY_LIVE_STATE=gvisor: %w", err)
		}
		r.log.Warn("stateful sessions keep their live state in memory only: it cannot be paused, snapshotted or forked, and is lost with its runner", "why", err)
		return nil
	}
	if n, err := gv.RemoveLeftovers(ctx); err != nil {
		r.log.Warn("remove an earlier life's gVisor containers", "err", err)
	} else if n > 0 {
		r.log.Info("removed an earlier life's gVisor containers", "count", n)
	}
	r.gv = gv
	r.fleet.gv = gv
	r.fleet.pauseLive = r.pauseEvicted
	r.log.Info("stateful sessions run under gVisor: their live state can be paused, snapshotted, forked and restored", "runtime", gv.runtime())
	return nil
}

// liveImage is what a checkpoint of c restores on: its image's id.
func (r *Runner) liveImage(c *Container) string {
	return r.gv.imageID(c.imageRef(r.sandbox.cfg.Image))
}

// controlWait bounds how long a control operation waits for the session's
// running job to end before it answers busy.
const controlWait = 30 * time.Second

// onControl answers a control request (pause, snapshot, fork) of a session
// whose live sandbox this runner holds. It runs in the background: the
// checkpoint takes a second or more.
func (r *Runner) onControl(sessionID, live string, m *nats.Msg) {
	var req queue.ControlRequest
	answer := func(reply queue.ControlReply) {
		data, _ := json.Marshal(reply)
		_ = m.Respond(data)
	}
	if err := json.Unmarshal(m.Data, &req); err != nil || req.TenantID == "" {
		answer(controlFailed("invalid", "malformed control request"))
		return
	}
	r.goBackground(func(<-chan struct{}) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		answer(r.control(ctx, sessionID, live, req))
	})
}

func controlFailed(code, format string, args ...any) queue.ControlReply {
	return queue.ControlReply{Error: &queue.ControlError{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// control carries out a control request as the session's owner: it waits
// for the session's running job, if one runs, to end.
func (r *Runner) control(ctx context.Context, sessionID, live string, req queue.ControlRequest) queue.ControlReply {
	log := r.log.With("session_id", sessionID, "op", req.Op)
	if r.gv == nil {
		return controlFailed("not_supported", "the runner holding this session keeps live state in memory only (no runsc 2024-07 or later to checkpoint it with; see scripts/ensure-runsc.sh): it cannot be paused, snapshotted or forked")
	}
	owner := r.newOwner()
	st, err := r.ownFor(ctx, sessionID, owner, controlWait)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return controlFailed("gone", "the session is closed")
	case errors.Is(err, errBusy):
		return controlFailed("busy", "a job of the session is running: try again when it has ended")
	case err != nil:
		return controlFailed("unavailable", "%v", err)
	}
	defer r.letGo(context.WithoutCancel(ctx), log, sessionID, owner, st.TenantID)
	if st.TenantID != req.TenantID || st.LiveID != live {
		return controlFailed("gone", "the session's live sandbox is no longer here")
	}
	c, version := r.fleet.unpark(sessionID)
	if c == nil || c.live != live {
		if c != nil {
			c.park(sessionID, version, time.Duration(st.TTLSeconds)*time.Second)
		}
		return controlFailed("gone", "the session's live sandbox is no longer here")
	}
	ttl := time.Duration(st.TTLSeconds) * time.Second
	at := sessionAt{version: st.Version, key: st.SnapshotKey}
	switch req.Op {
	case queue.ControlPause:
		if err := r.pause(ctx, log, sessionID, owner, st, c, &at); err != nil {
			return controlFailed("unavailable", "pause: %v", err)
		}
		return queue.ControlReply{}
	case queue.ControlSnapshot:
		snap, err := r.snapshot(ctx, sessionID, owner, st, c, &at, req)
		c.park(sessionID, at.version, ttl)
		if err != nil {
			return controlFailed("unavailable", "snapshot: %v", err)
		}
		return queue.ControlReply{Snapshot: &snap}
	case queue.ControlFork:
		sessions, err := r.fork(ctx, log, sessionID, owner, st, c, &at, req)
		c.park(sessionID, at.version, ttl)
		if err != nil {
			return controlFailed("unavailable", "fork: %v", err)
		}
		return queue.ControlReply{Sessions: sessions}
	}
	c.park(sessionID, at.version, ttl)
	return controlFailed("invalid", "unknown control operation %q", req.Op)
}

var errBusy = errors.New("busy")

// ownFor becomes the session's owner, trying for up to wait (a job of it
// may be running); errBusy if it could not.
func (r *Runner) ownFor(ctx context.Context, sessionID, owner string, wait time.Duration) (store.SessionState, error) {
	deadline := time.Now().Add(wait)
	for {
		st, ok, err := r.sessions.AcquireSession(ctx, sessionID, owner, r.sessionLease())
		if err != nil || ok {
			return st, err
		}
		if time.Now().After(deadline) {
			return st, errBusy
		}
		if !clock.Sleep(ctx, 200*time.Millisecond) {
			return st, ctx.Err()
		}
	}
}

// letGo lets go of a session owned for a control operation: jobs queued
// meanwhile are announced for any runner to take.
func (r *Runner) letGo(ctx context.Context, log *slog.Logger, sessionID, owner, tenantID string) {
	released, queued, err := r.sessions.ReleaseSession(ctx, sessionID, owner, false)
	if err != nil {
		log.Warn("release session", "err", err)
		return
	}
	if !released {
		if _, _, err := r.sessions.ReleaseSession(ctx, sessionID, owner, true); err != nil {
			log.Warn("release session", "err", err)
		}
	}
	if !released || queued > 0 {
		r.announceSession(ctx, log, sessionID, tenantID)
	}
}

// saveWorkspace makes the container's workspace the session's next
// version (what live operations wrote since its last job is in it), so
// that a checkpoint and the session's workspace agree; at moves to it.
func (r *Runner) saveWorkspace(ctx context.Context, sessionID, owner string, st store.SessionState, c *lease, at *sessionAt) error {
	next, err := r.saveSnapshot(ctx, c.Container, st.TenantID, sessionID, at.version+1, st.DiskMB)
	if err != nil {
		return err
	}
	taken, err := next.Commit(ctx, func(snap store.Snapshot) (bool, string, error) {
		replaced, err := r.sessions.CommitWorkspace(ctx, sessionID, owner, snap)
		return err == nil, replaced, err
	})
	if err != nil {
		return err
	}
	if !taken {
		return errors.New("the session moved on")
	}
	at.version, at.key = next.Version, next.Key
	return nil
}

// pause checkpoints the session's live state (its container is gone
// after it) and records the session paused.
func (r *Runner) pause(ctx context.Context, log *slog.Logger, sessionID, owner string, st store.SessionState, c *lease, at *sessionAt) error {
	start := time.Now()
	if err := r.saveWorkspace(ctx, sessionID, owner, st, c, at); err != nil {
		c.park(sessionID, at.version, time.Duration(st.TTLSeconds)*time.Second)
		return err
	}
	saved := time.Since(start)
	cp, err := r.checkpointHere(ctx, c.Container, st.TenantID, false)
	checkpointed := time.Since(start)
	if err == nil {
		cp.Bytes, err = r.storeCheckpoint(ctx, cp)
	}
	if err != nil {
		// A checkpoint that failed may have stopped the sandbox: what it
		// held is lost.
		c.release(false, "pause failed")
		_ = r.sessions.LoseLive(context.WithoutCancel(ctx), sessionID, c.live, "pausing it failed: "+err.Error())
		return err
	}
	cp.Version = at.version
	c.release(false, "paused")
	if err := r.sessions.PauseSession(ctx, sessionID, owner, cp); err != nil {
		return err
	}
	r.metrics.liveOp("pause", start)
	log.Info("session paused", "checkpoint", cp.ID, "bytes", cp.Bytes, "took", time.Since(start).Round(time.Millisecond),
		"workspace", saved.Round(time.Millisecond), "checkpointed", checkpointed.Round(time.Millisecond))
	return nil
}

// snapshot checkpoints the session while it goes on and records it as the
// tenant's snapshot req.SnapshotID.
func (r *Runner) snapshot(ctx context.Context, sessionID, owner string, st store.SessionState, c *lease, at *sessionAt, req queue.ControlRequest) (jobs.Snapshot, error) {
	start := time.Now()
	if !jobs.ValidID("snp", req.SnapshotID) {
		return jobs.Snapshot{}, errors.New("no snapshot id")
	}
	if err := r.saveWorkspace(ctx, sessionID, owner, st, c, at); err != nil {
		return jobs.Snapshot{}, err
	}
	cp, err := r.takeCheckpoint(ctx, c.Container, st.TenantID, true)
	if err != nil {
		return jobs.Snapshot{}, err
	}
	cp.Version = at.version
	wsKey := ""
	var wsBytes int64
	if at.key != "" {
		wsKey = blob.SnapshotWorkspaceKey(st.TenantID, req.SnapshotID)
		if wsBytes, err = r.blobs.Copy(ctx, at.key, wsKey); err != nil {
			return jobs.Snapshot{}, err
		}
	}
	snap, err := r.sessions.CreateSnapshot(ctx, jobs.Snapshot{ID: req.SnapshotID, Name: req.Name, SessionID: sessionID,
		Language: st.Language, Environment: st.Environment, DiskMB: st.DiskMB, Bytes: cp.Bytes + wsBytes}, cp, wsKey)
	if err != nil {
		if wsKey != "" {
			_ = r.blobs.Delete(context.WithoutCancel(ctx), wsKey)
		}
		return snap, err
	}
	r.metrics.liveOp("snapshot", start)
	return snap, nil
}

// fork checkpoints the session while it goes on and makes the request's
// new sessions from it: their workspaces copies of its, their live state
// restored here at once (a child whose restore failed restores with its
// first job, on any runner).
//
// The checkpoint is stored while the children restore from this runner's
// copy of it. When every child restored, the fork is recorded, and
// answered, without waiting for the store: the children live here, and
// the checkpoint becomes theirs once it is stored (ForkCheckpoint), so a
// runner lost before that loses them. Otherwise it is recorded once
// stored, for the children that did not restore to restore from.
func (r *Runner) fork(ctx context.Context, log *slog.Logger, sessionID, owner string, st store.SessionState, c *lease, at *sessionAt, req queue.ControlRequest) ([]jobs.Session, error) {
	start := time.Now()
	if len(req.ChildIDs) == 0 || len(req.ChildIDs) > jobs.MaxForks {
		return nil, fmt.Errorf("%d sessions asked for", len(req.ChildIDs))
	}
	for _, id := range req.ChildIDs {
		if !jobs.ValidID("ses", id) {
			return nil, fmt.Errorf("bad session id %q", id)
		}
	}
	if err := r.saveWorkspace(ctx, sessionID, owner, st, c, at); err != nil {
		return nil, err
	}
	cp, err := r.checkpointHere(ctx, c.Container, st.TenantID, true)
	if err != nil {
		return nil, err
	}
	checkpointed := time.Since(start)
	cp.Version = 1 // the children's workspace version
	n := c.live[strings.LastIndexByte(c.live, '/')+1:]
	children := make([]store.ForkChild, len(req.ChildIDs))
	ctrs := make([]*lease, len(req.ChildIDs))
	// Four restores at once: a restore is not all CPU (runsc starts its
	// sandbox and gofer, and waits on them), and four overlap better than
	// two on two cores (four forks of a 100 MB session, alternating, under
	// load: 1.9-3.0 s against 2.3-3.4 s; the probe's four at once were all
	// restored in 0.9 s).
	type storing struct {
		bytes int64
		took  time.Duration
		err   error
	}
	stored := make(chan storing, 1)
	go func() {
		t := time.Now()
		n, err := r.storeCheckpoint(context.WithoutCancel(ctx), cp)
		stored <- storing{n, time.Since(t), err}
	}()
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	var copyErr error
	var mu sync.Mutex
	for i, id := range req.ChildIDs {
		children[i].ID = id
		wg.Go(func() {
			if at.key != "" {
				key := blob.NewSessionKey(st.TenantID, id, 1)
				size, err := r.blobs.Copy(ctx, at.key, key)
				if err != nil {
					mu.Lock()
					copyErr = err
					mu.Unlock()
					return
				}
				children[i].Workspace = jobs.WorkspaceCopy{Key: key, Bytes: size}
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			spec := ContainerSpec{SessionID: id, Limits: c.limits, Image: c.image}
			restored, err := r.restoreCheckpoint(ctx, cp, spec)
			if err != nil {
				log.Warn("restore a fork here; its first job restores it", "child", id, "err", err)
				return
			}
			l := r.fleet.adopt(restored, st.TenantID)
			l.live = shortID(restored.id) + "/" + n
			l.restored = "forked from " + sessionID
			ctrs[i], children[i].Live = l, l.live
		})
	}
	wg.Wait()
	restoredIn := time.Since(start)
	drop := func() {
		for _, l := range ctrs {
			if l != nil {
				l.release(false, "fork failed")
			}
		}
	}
	if copyErr != nil {
		drop()
		<-stored
		r.dropCheckpoint(cp)
		return nil, copyErr
	}
	// When every child lives here, the fork is recorded without its
	// checkpoint and the store goes on behind the answer; the checkpoint
	// becomes the children's once it is stored (attach).
	early := !slices.ContainsFunc(ctrs, func(l *lease) bool { return l == nil })
	record := store.Checkpoint{}
	if !early {
		res := <-stored
		if res.err != nil {
			drop()
			r.dropCheckpoint(cp)
			return nil, res.err
		}
		record, record.Bytes = cp, res.bytes
	}
	sessions, err := r.sessions.ForkSession(ctx, sessionID, owner, record, req.TTLSeconds, children)
	if err != nil {
		drop()
		if early {
			<-stored
		}
		r.dropCheckpoint(cp)
		return nil, err
	}
	if early {
		attach := func() {
			res := <-stored
			err := res.err
			if err == nil {
				cp := cp
				cp.Bytes = res.bytes
				// Recorded even when the runner stops meanwhile (its stop
				// waits for this).
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				var took int
				took, err = r.sessions.ForkCheckpoint(rctx, cp, req.ChildIDs)
				cancel()
				if err == nil {
					log.Info("a fork's checkpoint stored", "checkpoint", cp.ID, "children", took, "stored", res.took.Round(time.Millisecond))
					return
				}
			}
			log.Warn("store a fork's checkpoint; its children keep their live state in their sandboxes only until they next checkpoint", "checkpoint", cp.ID, "err", err)
			r.dropCheckpoint(cp)
		}
		// As background work, which the runner's stop waits for; a
		// runner already stopping attaches it before it answers.
		if !r.loops.Background(func(context.Context) { attach() }) {
			attach()
		}
	}
	for i, l := range ctrs {
		if l == nil {
			continue
		}
		l.park(sessions[i].ID, 1, time.Duration(sessions[i].TTLSeconds)*time.Second)
		r.live.serve(sessions[i].ID, l.Container)
	}
	r.metrics.liveOp("fork", start)
	log.Info("session forked", "children", len(sessions), "checkpoint", cp.ID, "took", time.Since(start).Round(time.Millisecond),
		"checkpointed", checkpointed.Round(time.Millisecond), "restored", restoredIn.Round(time.Millisecond), "stored_behind", early)
	return sessions, nil
}

// dropCheckpoint deletes the stored object of a checkpoint no row names
// (one whose record failed).
func (r *Runner) dropCheckpoint(cp store.Checkpoint) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.blobs.Delete(ctx, cp.Key); err != nil {
		r.log.Warn("delete a checkpoint nothing names", "checkpoint", cp.ID, "err", err)
	}
}

// restoreSession starts the session's container from its checkpoint, for
// its job (a paused session resumes, a fork's child or a snapshot's
// session starts, a session whose runner was lost goes on from its last
// checkpoint). why says what the job found, for its live_state.
func (r *Runner) restoreSession(ctx context.Context, sessionID, tenantID string, lim jobs.Limits, image string, at sessionAt, paused bool, lostBecause string) (*lease, string, error) {
	cp := at.checkpoint
	start := time.Now()
	c, err := r.restoreCheckpoint(ctx, cp, ContainerSpec{SessionID: sessionID, Limits: lim, Image: image})
	if err != nil {
		return nil, "", err
	}
	l := r.fleet.adopt(c, tenantID)
	r.metrics.liveOp("restore", start)
	taken := cp.CreatedAt.UTC().Format(time.RFC3339)
	switch {
	case paused:
		return l, "resumed from its pause of " + taken, nil
	case lostBecause != "":
		return l, "restored from its checkpoint of " + taken + " (" + lostBecause + "): what it did after that was lost", nil
	}
	return l, "restored from checkpoint " + cp.ID + " of " + taken, nil
}

// pauseEvicted pauses a live session's container the fleet lets go (past
// GANTRY_SESSION_LIVE_MAX, idle past its session's TTL, or the runner
// stopping) instead of losing its live state. It reports whether it took
// the container (false: not a gVisor one; the fleet retires it).
func (r *Runner) pauseEvicted(sessionID string, c *Container, why string) bool {
	if r.gv == nil || c.host != containerHost(r.gv) {
		return false
	}
	l := r.fleet.reclaim(c)
	run := func(quit <-chan struct{}) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		log := r.log.With("session_id", sessionID, "why", why)
		owner := r.newOwner()
		st, err := r.ownFor(ctx, sessionID, owner, 10*time.Second)
		if err != nil || st.LiveID != c.live {
			l.release(false, "evicted")
			if err == nil {
				r.letGo(ctx, log, sessionID, owner, st.TenantID)
				return
			}
			_ = r.sessions.LoseLive(ctx, sessionID, c.live, why)
			return
		}
		defer r.letGo(ctx, log, sessionID, owner, st.TenantID)
		at := sessionAt{version: st.Version, key: st.SnapshotKey}
		if err := r.pause(ctx, log, sessionID, owner, st, l, &at); err != nil {
			log.Warn("pause a session's live state on eviction; it is lost", "err", err)
			l.release(false, "evicted")
			_ = r.sessions.LoseLive(ctx, sessionID, c.live, why+"; pausing it failed: "+err.Error())
		}
	}
	r.fleet.pending.Go(func() { run(nil) })
	return true
}

// pauseAll pauses every live session this runner's fleet parks (a runner
// told to stop), and waits for them.
func (r *Runner) pauseAll() {
	if r.gv == nil {
		return
	}
	n := r.fleet.evictLive("the runner holding it stopped")
	if n > 0 {
		r.log.Info("pausing the live sessions this runner holds before it stops", "count", n)
	}
	r.fleet.pending.Wait()
}

// keepCheckpoint checkpoints the session's live state while it goes on,
// when its last checkpoint is older than CheckpointEvery (after a job), so
// that a runner killed outright loses at most that much.
func (r *Runner) keepCheckpoint(ctx context.Context, log *slog.Logger, sessionID string, st store.SessionState, c *lease, at sessionAt) store.Checkpoint {
	every := r.cfg.Live.CheckpointEvery
	if r.gv == nil || every < 0 || c.host != containerHost(r.gv) || c.live == "" {
		return at.checkpoint
	}
	last := c.born
	if at.checkpoint.ID != "" && at.checkpoint.CreatedAt.After(last) {
		last = at.checkpoint.CreatedAt
	}
	if time.Since(last) < every {
		return at.checkpoint
	}
	start := time.Now()
	cp, err := r.takeCheckpoint(ctx, c.Container, st.TenantID, true)
	if err != nil {
		log.Warn("checkpoint a session's live state", "err", err)
		return at.checkpoint
	}
	cp.Version, cp.CreatedAt = at.version, time.Now()
	if kept, err := r.sessions.KeepCheckpoint(ctx, sessionID, c.live, cp); err != nil || !kept {
		log.Warn("record a session's checkpoint", "err", err)
		return at.checkpoint
	}
	r.metrics.liveOp("checkpoint", start)
	return cp
}
