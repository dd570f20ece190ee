package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
)

// A stateful session's live state outlives its container where runners
// run it under gVisor (docs/ARCHITECTURE.md, "Live state"): it is paused
// (checkpointed, its container freed) and resumed, snapshotted, and forked.
// The runner holding the session's live sandbox does the checkpointing,
// asked on queue.ControlSubject; a paused session's next job (or file
// call, command, or resume) restores it on whichever runner takes it.

// LiveStore is what the live state's operations need of the store.
type LiveStore interface {
	PauseIdle(ctx context.Context, tenantID, sessionID string) error
	PauseLost(ctx context.Context, sessionID, live, reason string) error
	GetSnapshot(ctx context.Context, tenantID, id string) (jobs.Snapshot, store.SnapshotRef, error)
	ListSnapshots(ctx context.Context, tenantID string, limit int, before string) ([]jobs.Snapshot, string, error)
	DeleteSnapshot(ctx context.Context, tenantID, id string) (string, error)
	SnapshotFromCheckpoint(ctx context.Context, snap jobs.Snapshot, checkpointID, workspaceKey string) (jobs.Snapshot, error)
	SnapshotBytes(ctx context.Context, tenantID string) (int64, error)
	CountLive(ctx context.Context, tenantID string) (int, error)
}

// controlWait bounds a control operation's round trip (a checkpoint of a
// large session, its upload, a fork's restores).
const controlWait = 3 * time.Minute

// Pause pauses the tenant's stateful session: its live state is
// checkpointed and its container freed (it holds no memory on any runner)
// until its next job, file call, command or Resume. Pausing a paused
// session does nothing.
func (sb *Sandboxes) Pause(ctx context.Context, p Principal, sessionID string) (jobs.Session, error) {
	l, err := sb.openDurable(ctx, p, sessionID, "pausing it")
	if err != nil {
		return jobs.Session{}, err
	}
	sess := l.sess
	for try := 0; ; try++ {
		if sess.State == jobs.SessionPaused {
			return sess, nil
		}
		if sess.Live == "" {
			// Nothing holds live state: its checkpoint (if any) is it.
			if err := sb.s.live.PauseIdle(ctx, p.TenantID, sess.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return sess, err
			}
		} else {
			_, err := sb.control(ctx, sess, queue.ControlRequest{Op: queue.ControlPause, TenantID: p.TenantID})
			switch {
			case errors.Is(err, errHolderGone) && try == 0:
				// Its runner is gone: what it held is lost, or is its
				// checkpoint.
				_ = sb.s.live.PauseLost(ctx, sess.ID, sess.Live, "its runner was lost before it was paused")
			case errors.Is(err, errHolderGone) && try > 0:
				return sess, Unavailable("the session's live sandbox moved while it was being paused; retry")
			case err != nil:
				return sess, err
			}
		}
		if sess, err = sb.s.Session(ctx, p, sessionID); err != nil {
			return sess, err
		}
	}
}

// openDurable opens the tenant's durable session's live state: pausing,
// snapshotting and forking need live state that outlives its sandbox.
func (sb *Sandboxes) openDurable(ctx context.Context, p Principal, sessionID, what string) (*Live, error) {
	l, err := sb.OpenLive(ctx, p, sessionID)
	if err != nil {
		return nil, err
	}
	if !l.sess.Durable {
		return nil, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: fmt.Sprintf(
			"session %s keeps its live state in its sandbox's memory only: %s needs a durable session, created with \"durable\": true", l.sess.ID, what)}
	}
	return l, nil
}

// Resume brings the tenant's paused session back: its live state is
// restored (on any runner) before this returns. A running session is
// answered as it is.
func (sb *Sandboxes) Resume(ctx context.Context, p Principal, sessionID string) (jobs.Session, error) {
	l, err := sb.OpenLive(ctx, p, sessionID)
	if err != nil {
		return jobs.Session{}, err
	}
	if l.sess.State != jobs.SessionPaused && l.sess.Live != "" {
		return l.sess, nil
	}
	return sb.wakeLive(ctx, p, l.sess)
}

// Snapshot saves the tenant's stateful session's live state and workspace
// as a snapshot, from which new sessions are made (CreateSession with
// Snapshot); the session goes on. A paused session's snapshot is its
// pause's checkpoint.
func (sb *Sandboxes) Snapshot(ctx context.Context, p Principal, sessionID string, req jobs.SnapshotRequest) (jobs.Snapshot, error) {
	req, err := req.Normalize()
	if err != nil {
		return jobs.Snapshot{}, err
	}
	l, err := sb.openDurable(ctx, p, sessionID, "a snapshot")
	if err != nil {
		return jobs.Snapshot{}, err
	}
	if err := sb.s.checkStorage(ctx, p); err != nil {
		return jobs.Snapshot{}, err
	}
	sess := l.sess
	id := jobs.NewID("snp")
	if sess.Live == "" && sess.Checkpoint != "" {
		return sb.snapshotOfCheckpoint(ctx, p, sess, id, req.Name)
	}
	if sess.Live == "" {
		if sess, err = sb.wakeLive(ctx, p, sess); err != nil {
			return jobs.Snapshot{}, err
		}
	}
	reply, err := sb.control(ctx, sess, queue.ControlRequest{Op: queue.ControlSnapshot, TenantID: p.TenantID, SnapshotID: id, Name: req.Name})
	if errors.Is(err, errHolderGone) {
		return jobs.Snapshot{}, Unavailable("the session's live sandbox was lost (its runner stopped); its next job makes it again: retry")
	}
	if err != nil {
		return jobs.Snapshot{}, err
	}
	if reply.Snapshot == nil {
		return jobs.Snapshot{}, Unavailable("the runner holding the session answered no snapshot")
	}
	return *reply.Snapshot, nil
}

// snapshotOfCheckpoint makes a snapshot of a session that holds no live
// sandbox from its checkpoint (a paused session's).
func (sb *Sandboxes) snapshotOfCheckpoint(ctx context.Context, p Principal, sess jobs.Session, id, name string) (jobs.Snapshot, error) {
	key := ""
	var wsBytes int64
	if ws, err := sb.s.store.GetSession(ctx, p.TenantID, sess.ID); err == nil && ws.WorkspaceKey != "" {
		key = blob.SnapshotWorkspaceKey(p.TenantID, id)
		var err error
		if wsBytes, err = sb.s.blobs.Copy(ctx, ws.WorkspaceKey, key); err != nil {
			return jobs.Snapshot{}, liveBlobError(err)
		}
	}
	snap, err := sb.s.live.SnapshotFromCheckpoint(ctx, jobs.Snapshot{ID: id, Name: name, SessionID: sess.ID, Language: sess.Language,
		Environment: envName(sess.Environment), DiskMB: sess.DiskMB, Bytes: wsBytes}, sess.Checkpoint, key)
	if err != nil && key != "" {
		_ = sb.s.blobs.Delete(context.WithoutCancel(ctx), key)
	}
	return snap, err
}

func envName(env string) string {
	if env == jobs.DefaultEnvironment {
		return ""
	}
	return env
}

// Fork makes req.Count new sessions from the tenant's stateful session,
// each with its live state (memory, processes, /tmp) and workspace at this
// moment, apart from each other and from it; the session goes on.
func (sb *Sandboxes) Fork(ctx context.Context, p Principal, sessionID string, req jobs.ForkRequest) (jobs.Fork, error) {
	req, err := req.Normalize()
	if err != nil {
		return jobs.Fork{}, err
	}
	l, err := sb.openDurable(ctx, p, sessionID, "a fork")
	if err != nil {
		return jobs.Fork{}, err
	}
	limit := sb.s.Limits(p).MaxLiveSessions
	if n, err := sb.s.live.CountLive(ctx, p.TenantID); err != nil {
		return jobs.Fork{}, err
	} else if limit > 0 && n+req.Count > limit {
		return jobs.Fork{}, &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: 5,
			Message: fmt.Sprintf("the tenant has %d stateful sessions and may have %d: a fork of %d would pass that", n, limit, req.Count)}
	}
	sess := l.sess
	if sess.Live == "" {
		if sess, err = sb.wakeLive(ctx, p, sess); err != nil {
			return jobs.Fork{}, err
		}
	}
	ids := make([]string, req.Count)
	for i := range ids {
		ids[i] = jobs.NewID("ses")
	}
	reply, err := sb.control(ctx, sess, queue.ControlRequest{Op: queue.ControlFork, TenantID: p.TenantID, ChildIDs: ids, TTLSeconds: req.TTLSeconds})
	if errors.Is(err, errHolderGone) {
		return jobs.Fork{}, Unavailable("the session's live sandbox was lost (its runner stopped); its next job makes it again: retry")
	}
	if err != nil {
		return jobs.Fork{}, err
	}
	return jobs.Fork{Sessions: reply.Sessions}, nil
}

// errHolderGone: no runner holds the session's live sandbox any more.
var errHolderGone = errors.New("no runner holds the session's live sandbox")

// control asks the runner holding the session's live sandbox for a
// control operation. errHolderGone when none does; the runner's failures
// as *Error.
func (sb *Sandboxes) control(ctx context.Context, sess jobs.Session, req queue.ControlRequest) (queue.ControlReply, error) {
	return control(ctx, sb.s.nc, sess.ID, sess.Live, req)
}

// control asks the runner holding a session's live sandbox live for a
// control operation (Sandboxes.control; the sweeper's pauses too).
func control(ctx context.Context, nc *nats.Conn, sessionID, live string, req queue.ControlRequest) (queue.ControlReply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return queue.ControlReply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, controlWait)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, queue.ControlSubject(sessionID, live), body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return queue.ControlReply{}, errHolderGone
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return queue.ControlReply{}, &Error{Status: http.StatusGatewayTimeout, Code: CodeUnavailable,
			Message: "the runner holding the session did not finish within " + controlWait.String()}
	case err != nil:
		return queue.ControlReply{}, Unavailable("the session's runner cannot be reached: %v", err)
	}
	var reply queue.ControlReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return reply, Unavailable("the session's runner answered something malformed")
	}
	if e := reply.Error; e != nil {
		switch e.Code {
		case "busy":
			return reply, &Error{Status: http.StatusConflict, Code: CodeConflict, RetryAfter: 1, Message: e.Message}
		case "gone":
			return reply, errHolderGone
		case "not_supported":
			return reply, &Error{Status: http.StatusNotImplemented, Code: CodeUnavailable, Message: e.Message}
		case "invalid":
			return reply, BadRequest("", "%s", e.Message)
		}
		return reply, Unavailable("%s", e.Message)
	}
	return reply, nil
}

// SnapshotPage is a page of the tenant's snapshots, newest first.
type SnapshotPage struct {
	Snapshots  []jobs.Snapshot
	NextCursor string
}

// Snapshots lists the tenant's snapshots, limit (1-100; 0: 20) at a time.
func (s *Service) Snapshots(ctx context.Context, p Principal, limit int, cursor string) (SnapshotPage, error) {
	limit, before, err := page(limit, cursor, "snp")
	if err != nil {
		return SnapshotPage{}, err
	}
	snaps, next, err := s.live.ListSnapshots(ctx, p.TenantID, limit, before)
	return SnapshotPage{Snapshots: snaps, NextCursor: Cursor(next)}, err
}

// Snapshot reads the tenant's snapshot.
func (s *Service) Snapshot(ctx context.Context, p Principal, id string) (jobs.Snapshot, error) {
	if !jobs.ValidID("snp", id) {
		return jobs.Snapshot{}, NotFound("snapshot " + strconv.Quote(id))
	}
	snap, _, err := s.live.GetSnapshot(ctx, p.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return snap, NotFound("snapshot " + strconv.Quote(id))
	}
	return snap, err
}

// DeleteSnapshot deletes the tenant's snapshot; what it held goes from the
// object store (its live state once nothing else names it).
func (s *Service) DeleteSnapshot(ctx context.Context, p Principal, id string) error {
	if !jobs.ValidID("snp", id) {
		return NotFound("snapshot " + strconv.Quote(id))
	}
	key, err := s.live.DeleteSnapshot(ctx, p.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return NotFound("snapshot " + strconv.Quote(id))
	}
	if err != nil {
		return err
	}
	if key != "" {
		if err := s.blobs.Delete(ctx, key); err != nil {
			s.log.Warn("delete a snapshot's workspace copy", "key", key, "err", err)
		}
	}
	return nil
}

// checkStorage refuses a snapshot past the tenant's storage for them.
func (s *Service) checkStorage(ctx context.Context, p Principal) error {
	limit := int64(s.Limits(p).MaxSnapshotMB) << 20
	if limit <= 0 {
		return nil
	}
	used, err := s.live.SnapshotBytes(ctx, p.TenantID)
	if err != nil {
		return err
	}
	if used >= limit {
		return &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: 60,
			Message: fmt.Sprintf("the tenant's snapshots hold %d MiB, its limit: delete some (DELETE /v1/snapshots/{id})", used>>20)}
	}
	return nil
}

// fromSnapshot fills in a session request made from the tenant's snapshot:
// its language, environment and disk, its live state, and a copy of its
// workspace (made here; the caller deletes it if the session is not made).
func (s *Service) fromSnapshot(ctx context.Context, p Principal, req jobs.SessionRequest) (jobs.SessionRequest, error) {
	snap, ref, err := s.live.GetSnapshot(ctx, p.TenantID, req.Snapshot)
	if errors.Is(err, store.ErrNotFound) {
		return req, &Error{Status: http.StatusNotFound, Code: CodeNotFound, Field: "snapshot",
			Message: "snapshot " + strconv.Quote(req.Snapshot) + " not found"}
	}
	if err != nil {
		return req, err
	}
	// The store names the default environment "default"; a session's
	// request names it "" (Normalize), as the runner reads it.
	req.Language, req.Environment, req.DiskMB, req.Stateful = snap.Language, envName(snap.Environment), snap.DiskMB, true
	req.ID, req.Checkpoint = jobs.NewID("ses"), ref.Checkpoint.ID
	if ref.WorkspaceKey != "" {
		key := blob.NewSessionKey(p.TenantID, req.ID, 1)
		n, err := s.blobs.Copy(ctx, ref.WorkspaceKey, key)
		if err != nil {
			return req, liveBlobError(err)
		}
		req.Workspace = &jobs.WorkspaceCopy{Key: key, Bytes: n}
	}
	return req, nil
}

// liveBlobError names an object store that cannot be reached as such.
func liveBlobError(err error) error {
	if blob.Unavailable(err) {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: 5,
			Message: "the object store is unavailable: " + err.Error()}
	}
	return err
}
