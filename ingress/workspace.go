package ingress

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// A session's workspace is a tar snapshot in the object store. The files API
// reads the current snapshot directly, and edits it by writing the next
// version while holding the session (so no job runs meanwhile). Every tar
// entry came out of a sandbox and is treated as untrusted: names are
// cleaned and anything that is not a plain relative path is skipped.

// FileInfo describes an entry of a session's workspace.
type FileInfo struct {
	Path       string    `json:"path"`
	Type       string    `json:"type"` // file, dir or symlink
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
	Target     string    `json:"target,omitempty"` // of a symlink
}

// maxListed bounds one listing.
const maxListed = 10000

func entryInfo(hdr *tar.Header) (FileInfo, bool) {
	name := strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "./"), "/")
	if name == "" || name == "." {
		return FileInfo{}, false
	}
	clean, err := jobs.CleanPath(name)
	if err != nil || clean != name {
		return FileInfo{}, false
	}
	fi := FileInfo{Path: clean, Size: hdr.Size, ModifiedAt: hdr.ModTime.UTC()}
	switch hdr.Typeflag {
	case tar.TypeReg:
		fi.Type = "file"
	case tar.TypeDir:
		fi.Type, fi.Size = "dir", 0
	case tar.TypeSymlink:
		fi.Type, fi.Size, fi.Target = "symlink", 0, hdr.Linkname
	default:
		return FileInfo{}, false
	}
	return fi, true
}

// openSnapshot opens the session's current snapshot; nil when the
// workspace is still empty.
func (s *Server) openSnapshot(ctx context.Context, tenantID string, sess jobs.Session) (io.ReadCloser, error) {
	if sess.Version == 0 {
		return nil, nil
	}
	return s.blobs.Get(ctx, jobs.SessionKey(tenantID, sess.ID, sess.Version))
}

// listFiles lists the workspace below dir ("" for all), recursively.
func (s *Server) listFiles(ctx context.Context, p store.Principal, sessionID, dir string) ([]FileInfo, error) {
	sess, err := s.getSession(ctx, p, sessionID)
	if err != nil {
		return nil, err
	}
	if dir != "" {
		if dir, err = jobs.CleanPath(dir); err != nil {
			return nil, badRequest("path", "%v", err)
		}
	}
	out := []FileInfo{}
	rc, err := s.openSnapshot(ctx, p.TenantID, sess)
	if err != nil || rc == nil {
		return out, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read workspace snapshot: %w", err)
		}
		fi, ok := entryInfo(hdr)
		if !ok || (dir != "" && !strings.HasPrefix(fi.Path, dir+"/")) {
			continue
		}
		out = append(out, fi)
		if len(out) >= maxListed {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// readFile calls fn with the content of a regular file of the workspace.
func (s *Server) readFile(ctx context.Context, p store.Principal, sessionID, rawPath string, fn func(FileInfo, io.Reader) error) error {
	sess, err := s.getSession(ctx, p, sessionID)
	if err != nil {
		return err
	}
	want, err := jobs.CleanPath(rawPath)
	if err != nil {
		return badRequest("path", "%v", err)
	}
	rc, err := s.openSnapshot(ctx, p.TenantID, sess)
	if err != nil {
		return err
	}
	if rc == nil {
		return notFound("file " + want)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return notFound("file " + want)
		}
		if err != nil {
			return fmt.Errorf("read workspace snapshot: %w", err)
		}
		fi, ok := entryInfo(hdr)
		if !ok || fi.Path != want {
			continue
		}
		switch fi.Type {
		case "file":
			return fn(fi, tr)
		case "dir":
			return badRequest("path", "%q is a directory; list it with ?path=", want)
		default:
			return badRequest("path", "%q is a symlink; gantry does not follow links in workspaces", want)
		}
	}
}

// editWorkspace applies an edit to the workspace as its next version. It
// holds the session while it does, waiting up to busyWait for a running
// job to end.
func (s *Server) editWorkspace(ctx context.Context, p store.Principal, sessionID string, edit func(tw *tar.Writer, existing map[string]FileInfo) (skip func(FileInfo) bool, err error)) error {
	sess, err := s.getSession(ctx, p, sessionID)
	if err != nil {
		return err
	}
	owner := "ingress-" + jobs.NewID("own")
	st, err := s.acquire(ctx, sess.ID, owner)
	if err != nil {
		return err
	}
	defer s.release(sess.ID, st.TenantID, owner)
	if st.TenantID != p.TenantID {
		return sessionNotFound(sess.ID)
	}

	// Pass 1: index the current entries, so the edit can check for
	// conflicts (writing over a directory, under a symlink).
	existing := map[string]FileInfo{}
	if err := s.walkSnapshot(ctx, st, func(fi FileInfo, _ io.Reader) error {
		existing[fi.Path] = fi
		return nil
	}); err != nil {
		return err
	}

	// Pass 2: copy the entries the edit keeps, then add the edit's own.
	next := store.Snapshot{Version: st.Version + 1, Key: jobs.SessionKey(st.TenantID, sess.ID, st.Version+1)}
	pr, pw := io.Pipe()
	writeErr := make(chan error, 1)
	go func() {
		tw := tar.NewWriter(pw)
		err := func() error {
			skip, err := edit(tw, existing)
			if err != nil {
				return err
			}
			return s.walkSnapshot(ctx, st, func(fi FileInfo, r io.Reader) error {
				if skip(fi) {
					return nil
				}
				return copyEntry(tw, fi, r)
			})
		}()
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
		writeErr <- err
	}()
	limit := int64(st.DiskMB) << 20
	n, err := s.blobs.PutStream(ctx, next.Key, pr, "application/x-tar")
	pr.CloseWithError(io.ErrClosedPipe)
	if werr := <-writeErr; werr != nil {
		err = werr
	}
	if err == nil && n > limit+limit/8+1<<20 {
		err = &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge,
			Message: fmt.Sprintf("the workspace would exceed the session's %d MB", st.DiskMB)}
	}
	if err != nil {
		_ = s.blobs.Delete(context.WithoutCancel(ctx), next.Key)
		return err
	}
	next.Bytes = n
	replaced, err := s.store.CommitWorkspace(ctx, sess.ID, owner, next)
	if err != nil {
		_ = s.blobs.Delete(context.WithoutCancel(ctx), next.Key)
		if errors.Is(err, store.ErrNotFound) {
			return sessionNotFound(sess.ID)
		}
		return err
	}
	if replaced != "" && replaced != next.Key {
		_ = s.blobs.Delete(context.WithoutCancel(ctx), replaced)
	}
	return nil
}

// walkSnapshot calls fn for each valid entry of the session's snapshot.
func (s *Server) walkSnapshot(ctx context.Context, st store.SessionState, fn func(FileInfo, io.Reader) error) error {
	if st.Version == 0 || st.SnapshotKey == "" {
		return nil
	}
	rc, err := s.blobs.Get(ctx, st.SnapshotKey)
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read workspace snapshot: %w", err)
		}
		if fi, ok := entryInfo(hdr); ok {
			if err := fn(fi, tr); err != nil {
				return err
			}
		}
	}
}

func copyEntry(tw *tar.Writer, fi FileInfo, r io.Reader) error {
	hdr := &tar.Header{Name: fi.Path, ModTime: fi.ModifiedAt, Mode: 0o644}
	switch fi.Type {
	case "file":
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size
	case "dir":
		hdr.Typeflag, hdr.Mode, hdr.Name = tar.TypeDir, 0o755, fi.Path+"/"
	case "symlink":
		hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, fi.Target, 0o777
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if fi.Type == "file" {
		if _, err := io.CopyN(tw, r, fi.Size); err != nil {
			return err
		}
	}
	return nil
}

// writeFile puts content at path, replacing a file there.
func (s *Server) writeFile(ctx context.Context, p store.Principal, sessionID, rawPath string, content []byte) (FileInfo, error) {
	want, err := jobs.CleanPath(rawPath)
	if err != nil {
		return FileInfo{}, badRequest("path", "%v", err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	fi := FileInfo{Path: want, Type: "file", Size: int64(len(content)), ModifiedAt: now}
	return fi, s.editWorkspace(ctx, p, sessionID, func(tw *tar.Writer, existing map[string]FileInfo) (func(FileInfo) bool, error) {
		if fi, ok := existing[want]; ok && fi.Type != "file" {
			return nil, &APIError{Status: http.StatusConflict, Code: CodeConflict, Field: "path",
				Message: fmt.Sprintf("%q is a %s in the workspace", want, fi.Type)}
		}
		for dir := path.Dir(want); dir != "."; dir = path.Dir(dir) {
			if fi, ok := existing[dir]; ok && fi.Type != "dir" {
				return nil, &APIError{Status: http.StatusConflict, Code: CodeConflict, Field: "path",
					Message: fmt.Sprintf("%q is a %s, not a directory", dir, fi.Type)}
			}
		}
		// Parent directories the workspace lacks get entries of their own,
		// so that they show in listings like directories a program made.
		var parents []string
		for dir := path.Dir(want); dir != "."; dir = path.Dir(dir) {
			if _, ok := existing[dir]; !ok {
				parents = append([]string{dir}, parents...)
			}
		}
		for _, dir := range parents {
			if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: now}); err != nil {
				return nil, err
			}
		}
		hdr := &tar.Header{Name: want, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content)), ModTime: now}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(content); err != nil {
			return nil, err
		}
		return func(fi FileInfo) bool { return fi.Path == want }, nil
	})
}

// deleteFile removes a file (or an empty... any) path from the workspace;
// a directory is removed with everything below it.
func (s *Server) deleteFile(ctx context.Context, p store.Principal, sessionID, rawPath string) error {
	want, err := jobs.CleanPath(rawPath)
	if err != nil {
		return badRequest("path", "%v", err)
	}
	return s.editWorkspace(ctx, p, sessionID, func(_ *tar.Writer, existing map[string]FileInfo) (func(FileInfo) bool, error) {
		if _, ok := existing[want]; !ok {
			return nil, notFound("file " + want)
		}
		return func(fi FileInfo) bool { return fi.Path == want || strings.HasPrefix(fi.Path, want+"/") }, nil
	})
}

// busyWait is how long a files API edit waits for the session's running
// jobs before answering 409.
const busyWait = 30 * time.Second

// acquire takes the session for an edit, waiting for its jobs.
func (s *Server) acquire(ctx context.Context, sessionID, owner string) (store.SessionState, error) {
	deadline := time.Now().Add(busyWait)
	for {
		st, ok, err := s.store.AcquireSession(ctx, sessionID, owner, time.Minute)
		if errors.Is(err, store.ErrNotFound) {
			return st, sessionNotFound(sessionID)
		}
		if err != nil {
			return st, err
		}
		if ok {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, &APIError{Status: http.StatusConflict, Code: CodeConflict, RetryAfter: 5,
				Message: "the session is busy running jobs; retry when they finish"}
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// release lets go of a session after an edit, handing on jobs that were
// queued meanwhile.
func (s *Server) release(sessionID, tenantID, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, queued, err := s.store.ReleaseSession(ctx, sessionID, owner, true)
	if err != nil {
		s.log.Error("release session", "session_id", sessionID, "err", err)
		return
	}
	if queued > 0 {
		s.kickSession(ctx, sessionID, tenantID)
	}
}

// kickSession announces that a session has jobs to run.
func (s *Server) kickSession(ctx context.Context, sessionID, tenantID string) {
	m := jobs.RunMessage{JobID: jobs.NewID("job"), TenantID: tenantID, SessionID: sessionID}
	if _, err := s.publishFor(ctx, m, m.JobID); err != nil {
		s.log.Error("announce session jobs", "session_id", sessionID, "err", err)
	}
}
