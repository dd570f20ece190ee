package workspace_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/workspace"
)

// memBlobs is an object store in memory.
type memBlobs struct {
	mu      sync.Mutex
	objects map[string][]byte
}

func newMemBlobs(keys ...string) *memBlobs {
	b := &memBlobs{objects: map[string][]byte{}}
	for _, k := range keys {
		b.objects[k] = []byte("old")
	}
	return b
}

func (b *memBlobs) Get(_ context.Context, key string) (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.objects[key]
	if !ok {
		return nil, blob.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(o)), nil
}

func (b *memBlobs) PutStream(_ context.Context, key string, r io.Reader, _ string) (int64, error) {
	o, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objects[key] = o
	return int64(len(o)), nil
}

func (b *memBlobs) Delete(_ context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objects, key)
	return nil
}

func (b *memBlobs) keys() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ks []string
	for k := range b.objects {
		// A key's version, without its random part: "2.tar".
		name := k[strings.LastIndex(k, "/")+1:]
		if i := strings.IndexByte(name, '-'); i >= 0 {
			name = name[:i] + ".tar"
		}
		ks = append(ks, name)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// memSessions is one session's row: its lease and its workspace.
type memSessions struct {
	mu       sync.Mutex
	tenantID string
	version  int64
	key      string
	owner    string
	queued   int
	readErr  error // of WorkspaceKey
	released int
}

func (s *memSessions) WorkspaceKey(context.Context, string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key, s.readErr
}

func (s *memSessions) AcquireSession(_ context.Context, _, owner string, _ time.Duration) (store.SessionState, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := store.SessionState{TenantID: s.tenantID, Version: s.version, SnapshotKey: s.key, DiskMB: 1}
	if s.owner != "" && s.owner != owner {
		return st, false, nil
	}
	s.owner = owner
	return st, true, nil
}

func (s *memSessions) ReleaseSession(_ context.Context, _, owner string, _ bool) (bool, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner == owner {
		s.owner = ""
		s.released++
	}
	return true, s.queued, nil
}

func (s *memSessions) CommitWorkspace(_ context.Context, _, owner string, snap store.Snapshot) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != owner {
		return "", store.ErrNotFound
	}
	prev := s.key
	s.version, s.key = snap.Version, snap.Key
	return prev, nil
}

func TestCommitDeletesTheLoser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	v1 := blob.NewSessionKey("t", "s", 1)
	write := func(w io.Writer) error { _, err := io.WriteString(w, "v2"); return err }
	lostAnswer := errors.New("connection reset while committing")

	for _, tc := range []struct {
		name string
		// commit moves the session (or not) and answers.
		commit    func(s *memSessions, snap store.Snapshot) (bool, string, error)
		readErr   error
		wantTaken bool
		wantErr   error
		wantKeys  string
	}{{
		name: "taken: the replaced version goes",
		commit: func(s *memSessions, snap store.Snapshot) (bool, string, error) {
			s.key = snap.Key
			return true, v1, nil
		},
		wantTaken: true, wantKeys: "2.tar",
	}, {
		name: "not taken: the new version goes",
		commit: func(*memSessions, store.Snapshot) (bool, string, error) {
			return false, "", nil
		},
		wantKeys: "1.tar",
	}, {
		name: "failed: the new version goes",
		commit: func(*memSessions, store.Snapshot) (bool, string, error) {
			return false, "", lostAnswer
		},
		wantErr: lostAnswer, wantKeys: "1.tar",
	}, {
		// The first try landed, its answer was lost, and the retry found the
		// job finished: the session is at the new version all the same.
		name: "landed, answer lost, retry says no: the new version stays",
		commit: func(s *memSessions, snap store.Snapshot) (bool, string, error) {
			s.key = snap.Key
			return false, "", nil
		},
		wantTaken: true, wantKeys: "1.tar,2.tar",
	}, {
		name: "landed, answer lost: taken, without error",
		commit: func(s *memSessions, snap store.Snapshot) (bool, string, error) {
			s.key = snap.Key
			return false, "", lostAnswer
		},
		wantTaken: true, wantKeys: "1.tar,2.tar",
	}, {
		name: "unknown: the new version is left to the session's close",
		commit: func(*memSessions, store.Snapshot) (bool, string, error) {
			return false, "", lostAnswer
		},
		readErr: errors.New("postgres away"),
		wantErr: lostAnswer, wantKeys: "1.tar,2.tar",
	}, {
		name: "session closed: the new version goes",
		commit: func(*memSessions, store.Snapshot) (bool, string, error) {
			return false, "", store.ErrNotFound
		},
		readErr: store.ErrNotFound,
		wantErr: store.ErrNotFound, wantKeys: "1.tar",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMemBlobs(v1)
			s := &memSessions{key: v1, version: 1, readErr: tc.readErr}
			v, err := workspace.Write(ctx, b, s, log, "t", "s", 2, 1, write)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(v.Key, blob.SessionPrefix("t", "s")+"2-") || v.Bytes != 2 {
				t.Fatalf("version %+v", v.Snapshot)
			}
			taken, err := v.Commit(ctx, func(snap store.Snapshot) (bool, string, error) { return tc.commit(s, snap) })
			if taken != tc.wantTaken || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("Commit = %v, %v; want %v, %v", taken, err, tc.wantTaken, tc.wantErr)
			}
			if got := b.keys(); got != tc.wantKeys {
				t.Errorf("objects %s, want %s", got, tc.wantKeys)
			}
		})
	}
}

func TestEditor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	v1 := blob.NewSessionKey("t", "s", 1)
	copyOld := func(w io.Writer, st store.SessionState) error {
		if st.SnapshotKey != v1 || st.Version != 1 {
			t.Errorf("edit of %+v", st)
		}
		_, err := io.WriteString(w, "edited")
		return err
	}

	t.Run("commits the next version and hands on queued jobs", func(t *testing.T) {
		b, s := newMemBlobs(v1), &memSessions{tenantID: "t", key: v1, version: 1, queued: 2}
		var kicked []string
		e := &workspace.Editor{Store: s, Blobs: b, Wait: time.Second, Log: log,
			Kick: func(_ context.Context, sessionID, tenantID string) { kicked = append(kicked, tenantID+"/"+sessionID) }}
		if err := e.Edit(ctx, "ed", "t", "s", copyOld); err != nil {
			t.Fatal(err)
		}
		if s.version != 2 || b.keys() != "2.tar" || s.owner != "" || strings.Join(kicked, ",") != "t/s" {
			t.Errorf("version %d, objects %s, owner %q, kicked %v", s.version, b.keys(), s.owner, kicked)
		}
	})
	t.Run("another tenant's session is not found", func(t *testing.T) {
		b, s := newMemBlobs(v1), &memSessions{tenantID: "other", key: v1, version: 1}
		e := &workspace.Editor{Store: s, Blobs: b, Wait: time.Second, Log: log}
		if err := e.Edit(ctx, "ed", "t", "s", copyOld); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("err = %v", err)
		}
		if s.version != 1 || b.keys() != "1.tar" || s.owner != "" || s.released != 1 {
			t.Errorf("version %d, objects %s, owner %q, released %d", s.version, b.keys(), s.owner, s.released)
		}
	})
	t.Run("a session busy past the wait", func(t *testing.T) {
		b, s := newMemBlobs(v1), &memSessions{tenantID: "t", key: v1, version: 1, owner: "runner"}
		e := &workspace.Editor{Store: s, Blobs: b, Wait: 250 * time.Millisecond, Log: log}
		if err := e.Edit(ctx, "ed", "t", "s", copyOld); !errors.Is(err, workspace.ErrBusy) {
			t.Fatalf("err = %v", err)
		}
		if s.owner != "runner" || b.keys() != "1.tar" {
			t.Errorf("owner %q, objects %s", s.owner, b.keys())
		}
	})
	t.Run("an edit that fails leaves the session as it was", func(t *testing.T) {
		b, s := newMemBlobs(v1), &memSessions{tenantID: "t", key: v1, version: 1}
		e := &workspace.Editor{Store: s, Blobs: b, Wait: time.Second, Log: log}
		conflict := errors.New("a directory is there")
		err := e.Edit(ctx, "ed", "t", "s", func(w io.Writer, _ store.SessionState) error {
			_, _ = io.WriteString(w, "partial")
			return conflict
		})
		if !errors.Is(err, conflict) {
			t.Fatalf("err = %v", err)
		}
		if s.version != 1 || b.keys() != "1.tar" || s.owner != "" {
			t.Errorf("version %d, objects %s, owner %q", s.version, b.keys(), s.owner)
		}
	})
}

// TestLateWriterCannotOverwrite: a writer of a version that lost the
// session's lease (its job ran on through a Postgres outage while the new
// owner re-ran it and committed that version) writes after the commit. It
// writes an object of its own, which the session never names, and its
// commit fails and deletes it: the committed version keeps its bytes.
func TestLateWriterCannotOverwrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	v1 := blob.NewSessionKey("t", "s", 1)
	b, s := newMemBlobs(v1), &memSessions{tenantID: "t", key: v1, version: 1, owner: "new-owner"}
	commitAs := func(owner string) func(store.Snapshot) (bool, string, error) {
		return func(snap store.Snapshot) (bool, string, error) {
			replaced, err := s.CommitWorkspace(ctx, "s", owner, snap)
			return err == nil, replaced, err
		}
	}
	writing := func(content string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, content); return err }
	}
	committed, err := workspace.Write(ctx, b, s, log, "t", "s", 2, 1, writing("the new owner's run"))
	if err != nil {
		t.Fatal(err)
	}
	if taken, err := committed.Commit(ctx, commitAs("new-owner")); !taken || err != nil {
		t.Fatalf("the new owner's commit: %v %v", taken, err)
	}
	late, err := workspace.Write(ctx, b, s, log, "t", "s", 2, 1, writing("the late writer's run"))
	if err != nil {
		t.Fatal(err)
	}
	if late.Key == committed.Key {
		t.Errorf("two writes of version 2 share key %s", late.Key)
	}
	if taken, err := late.Commit(ctx, commitAs("old-owner")); taken || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the late writer's commit: %v %v, want not taken", taken, err)
	}
	key, _ := s.WorkspaceKey(ctx, "s")
	rc, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	if key != committed.Key || string(got) != "the new owner's run" {
		t.Errorf("the session's workspace: %s %q", key, got)
	}
	if b.keys() != "2.tar" {
		t.Errorf("objects %s: want only the committed version", b.keys())
	}
}
