// Package workspace owns the versions of sessions' workspaces: how one
// moves from version N to N+1, for the runner after a job and for the
// files API's edits. The versions are snapshots (package snapshot: their
// format) in the object store; which one is a session's is its row in
// Postgres.
package workspace

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/snapshot"
	"github.com/gantryhq/gantry/store"
)

// A session's workspace moves from version N to N+1 in one way, whoever
// moves it (the runner after a job, the files API for an edit), while
// holding the session's lease:
//
//  1. Write puts version N+1 beside N in the object store;
//  2. Version.Commit makes it the session's in Postgres (with the job's
//     result, for the runner) and deletes the loser: N when N+1 was taken,
//     N+1 when it was not.
//
// Which one lost is decided by what Postgres holds, not by the commit's
// answer: a commit whose answer was lost may have landed, and a retry of
// it then reports that it did not. Deleting the session's own workspace
// would break it for good; leaving an extra object costs space until the
// session closes (which deletes every object of it).

// Sessions is what committing a version needs of the store.
type Sessions interface {
	// WorkspaceKey is the snapshot the session's workspace is at ("" for
	// none); store.ErrNotFound for a session gone.
	WorkspaceKey(ctx context.Context, sessionID string) (string, error)
}

// cleanupTimeout bounds a commit's deletes, which run even when the
// caller's context ended (the commit did not).
const cleanupTimeout = 30 * time.Second

// Version is a next version of a session's workspace, in the object store:
// the session's only once committed.
type Version struct {
	store.Snapshot
	sessionID string
	blobs     snapshot.Blobs
	sessions  Sessions
	log       *slog.Logger
}

// Write stores version of the session's workspace as write produces it,
// bounded by diskMB (snapshot.ErrTooLarge beyond). On failure nothing is left.
func Write(ctx context.Context, b snapshot.Blobs, s Sessions, log *slog.Logger, tenantID, sessionID string, version int64, diskMB int, write func(w io.Writer) error) (*Version, error) {
	v := &Version{
		Snapshot:  store.Snapshot{Version: version, Key: blob.NewSessionKey(tenantID, sessionID, version)},
		sessionID: sessionID, blobs: b, sessions: s, log: log,
	}
	n, err := snapshot.Put(ctx, b, v.Key, diskMB, write)
	if err != nil {
		return nil, err
	}
	v.Bytes = n
	return v, nil
}

// Commit makes v the session's workspace through commit, which records it
// under the session's lease and says whether it did (taken) and which
// snapshot it replaced. Then it deletes the loser: the replaced snapshot
// when v was taken, else v.
//
// When commit failed or said no, Postgres is asked where the session is:
// if it is at v after all, the commit landed and Commit reports it taken,
// without error (only the replaced snapshot is then unknown, and left to
// the session's close). If that cannot be read, v is left in place.
func (v *Version) Commit(ctx context.Context, commit func(snap store.Snapshot) (taken bool, replaced string, err error)) (bool, error) {
	taken, replaced, err := commit(v.Snapshot)
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err == nil && taken {
		if replaced != "" && replaced != v.Key {
			if derr := v.blobs.Delete(cleanup, replaced); derr != nil {
				v.log.Warn("delete the replaced workspace snapshot", "key", replaced, "err", derr)
			}
		}
		return true, nil
	}
	current, rerr := v.sessions.WorkspaceKey(cleanup, v.sessionID)
	switch {
	case rerr != nil && !errors.Is(rerr, store.ErrNotFound):
		v.log.Warn("a workspace snapshot whose commit is unknown is left to its session's close",
			"key", v.Key, "commit_err", err, "err", rerr)
	case rerr == nil && current == v.Key:
		if err != nil {
			v.log.Info("a workspace commit reported an error but landed", "key", v.Key, "err", err)
		}
		return true, nil
	default:
		if derr := v.blobs.Delete(cleanup, v.Key); derr != nil {
			v.log.Warn("delete a workspace snapshot the session did not take", "key", v.Key, "err", derr)
		}
	}
	return false, err
}

// ErrBusy is a session whose running jobs outlasted an edit's wait.
var ErrBusy = errors.New("the session is busy running jobs")

// Leases is what an edit needs of the store.
type Leases interface {
	Sessions
	AcquireSession(ctx context.Context, id, owner string, lease time.Duration) (store.SessionState, bool, error)
	ReleaseSession(ctx context.Context, id, owner string, force bool) (bool, int, error)
	CommitWorkspace(ctx context.Context, sessionID, owner string, snap store.Snapshot) (string, error)
}

// Editor writes sessions' workspaces between their jobs (the files API).
type Editor struct {
	Store Leases
	Blobs snapshot.Blobs
	// Wait is how long an edit waits for the session's running job
	// before ErrBusy.
	Wait time.Duration
	// Kick announces a session's jobs queued while an edit held it.
	Kick func(ctx context.Context, sessionID, tenantID string)
	Log  *slog.Logger
}

// editLease is how long an edit holds a session before another owner may
// take it over (the edit's process died).
const editLease = time.Minute

// Edit makes the session's next version: holding the session's lease, so
// that no job runs meanwhile, it writes what write makes of the current
// version (st.SnapshotKey, "" for an empty workspace) and commits it.
// store.ErrNotFound when the session is not the tenant's or not active;
// ErrBusy when its jobs outlast Wait; snapshot.ErrTooLarge beyond its disk.
func (e *Editor) Edit(ctx context.Context, owner, tenantID, sessionID string, write func(w io.Writer, st store.SessionState) error) error {
	st, err := e.acquire(ctx, sessionID, owner)
	if err != nil {
		return err
	}
	defer e.release(sessionID, st.TenantID, owner)
	if st.TenantID != tenantID {
		return store.ErrNotFound
	}
	v, err := Write(ctx, e.Blobs, e.Store, e.Log, st.TenantID, sessionID, st.Version+1, st.DiskMB, func(w io.Writer) error {
		return write(w, st)
	})
	if err != nil {
		return err
	}
	_, err = v.Commit(ctx, func(snap store.Snapshot) (bool, string, error) {
		replaced, err := e.Store.CommitWorkspace(ctx, sessionID, owner, snap)
		return err == nil, replaced, err
	})
	return err
}

// acquire takes the session's lease, waiting for its running job.
func (e *Editor) acquire(ctx context.Context, sessionID, owner string) (store.SessionState, error) {
	deadline := time.Now().Add(e.Wait)
	for {
		st, ok, err := e.Store.AcquireSession(ctx, sessionID, owner, editLease)
		if err != nil || ok {
			return st, err
		}
		if time.Now().After(deadline) {
			return st, ErrBusy
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// release lets go of the session after an edit, handing on jobs that were
// queued meanwhile.
func (e *Editor) release(sessionID, tenantID, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, queued, err := e.Store.ReleaseSession(ctx, sessionID, owner, true)
	if err != nil {
		e.Log.Error("release session", "session_id", sessionID, "err", err)
		return
	}
	if queued > 0 && e.Kick != nil {
		e.Kick(ctx, sessionID, tenantID)
	}
}
