package service

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
	"github.com/gantryhq/gantry/snapshot"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/workspace"
)

// A session's workspace is a tar snapshot in the object store. The files API
// reads the current snapshot directly, and edits it by writing the next
// version while holding the session (so no job runs meanwhile). Every tar
// entry came out of a sandbox and is treated as untrusted: names are
// cleaned and anything that is not a plain relative path is skipped.

// FileInfo describes an entry of a session's workspace.
type FileInfo = snapshot.Entry

// maxListed bounds one listing.
const maxListed = 10000

// ListFiles lists the session's workspace below dir ("" for all),
// recursively, by path, at most 10,000 entries.
func (s *Service) ListFiles(ctx context.Context, p Principal, sessionID, dir string) ([]FileInfo, error) {
	sess, err := s.Session(ctx, p, sessionID)
	if err != nil {
		return nil, err
	}
	if dir != "" {
		if dir, err = jobs.CleanPath(dir); err != nil {
			return nil, BadRequest("path", "%v", err)
		}
	}
	out := []FileInfo{}
	errFull := errors.New("listing full")
	err = snapshot.Walk(ctx, s.blobs, sess.WorkspaceKey, func(fi FileInfo, _ io.Reader) error {
		if dir != "" && !strings.HasPrefix(fi.Path, dir+"/") {
			return nil
		}
		out = append(out, fi)
		if len(out) >= maxListed {
			return errFull
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFull) {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// ReadFile calls fn with the content of a regular file of the session's
// workspace, streamed from its snapshot; fn's error is ReadFile's.
func (s *Service) ReadFile(ctx context.Context, p Principal, sessionID, rawPath string, fn func(FileInfo, io.Reader) error) error {
	sess, err := s.Session(ctx, p, sessionID)
	if err != nil {
		return err
	}
	want, err := jobs.CleanPath(rawPath)
	if err != nil {
		return BadRequest("path", "%v", err)
	}
	errFound := errors.New("found")
	var result error
	err = snapshot.Walk(ctx, s.blobs, sess.WorkspaceKey, func(fi FileInfo, r io.Reader) error {
		if fi.Path != want {
			return nil
		}
		switch fi.Type {
		case "file":
			result = fn(fi, r)
		case "dir":
			result = BadRequest("path", "%q is a directory; list it with ?path=", want)
		default:
			result = BadRequest("path", "%q is a symlink; gantry does not follow links in workspaces", want)
		}
		return errFound
	})
	switch {
	case errors.Is(err, errFound):
		return result
	case err != nil:
		return err
	}
	return NotFound("file " + want)
}

// editWorkspace applies an edit to the tenant's session's workspace as its
// next version, waiting up to busyWait for the session's running job.
func (s *Service) editWorkspace(ctx context.Context, p Principal, sessionID string, edit editFunc) error {
	sess, err := s.Session(ctx, p, sessionID)
	if err != nil {
		return err
	}
	owner := "ingress-" + jobs.NewID("own")
	var diskMB int
	err = s.editor.Edit(ctx, owner, p.TenantID, sess.ID, func(w io.Writer, st store.SessionState) error {
		diskMB = st.DiskMB
		return applyEdit(ctx, s.blobs, st.SnapshotKey, w, edit)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return sessionNotFound(sessionID)
	case errors.Is(err, workspace.ErrBusy):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, RetryAfter: 5,
			Message: "the session is busy running jobs; retry when they finish"}
	case errors.Is(err, snapshot.ErrTooLarge):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge,
			Message: fmt.Sprintf("the workspace would exceed the session's %d MB", diskMB)}
	}
	return err
}

// editFunc writes a workspace's new entries to tw, given the entries it
// has, and says which of those to leave out of the next version.
type editFunc func(tw *tar.Writer, existing map[string]FileInfo) (skip func(FileInfo) bool, err error)

// applyEdit writes to w the workspace at key with edit applied.
func applyEdit(ctx context.Context, blobs Blobs, key string, w io.Writer, edit editFunc) error {
	// Pass 1: index the current entries, so the edit can check for
	// conflicts (writing over a directory, under a symlink).
	existing := map[string]FileInfo{}
	if err := snapshot.Walk(ctx, blobs, key, func(fi FileInfo, _ io.Reader) error {
		existing[fi.Path] = fi
		return nil
	}); err != nil {
		return err
	}
	// Pass 2: copy the entries the edit keeps, then add the edit's own.
	tw := tar.NewWriter(w)
	skip, err := edit(tw, existing)
	if err != nil {
		return err
	}
	err = snapshot.Walk(ctx, blobs, key, func(fi FileInfo, r io.Reader) error {
		if skip(fi) {
			return nil
		}
		return snapshot.WriteEntry(tw, fi, r)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// WriteFile puts content at path in the session's workspace, replacing a
// file there, as the workspace's next version (after the session's
// running job, waiting up to 30 s for it; 409 beyond).
func (s *Service) WriteFile(ctx context.Context, p Principal, sessionID, rawPath string, content []byte) (FileInfo, error) {
	want, err := jobs.CleanPath(rawPath)
	if err != nil {
		return FileInfo{}, BadRequest("path", "%v", err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	fi := FileInfo{Path: want, Type: "file", Size: int64(len(content)), ModifiedAt: now}
	return fi, s.editWorkspace(ctx, p, sessionID, func(tw *tar.Writer, existing map[string]FileInfo) (func(FileInfo) bool, error) {
		if fi, ok := existing[want]; ok && fi.Type != "file" {
			return nil, &Error{Status: http.StatusConflict, Code: CodeConflict, Field: "path",
				Message: fmt.Sprintf("%q is a %s in the workspace", want, fi.Type)}
		}
		for dir := path.Dir(want); dir != "."; dir = path.Dir(dir) {
			if fi, ok := existing[dir]; ok && fi.Type != "dir" {
				return nil, &Error{Status: http.StatusConflict, Code: CodeConflict, Field: "path",
					Message: fmt.Sprintf("%q is a %s, not a directory", dir, fi.Type)}
			}
		}
		// Parent directories the workspace lacks get entries of their own,
		// so that they show in listings like directories a program made.
		if err := snapshot.WriteFile(tw, want, content, now, func(dir string) bool { _, ok := existing[dir]; return ok }); err != nil {
			return nil, err
		}
		return func(fi FileInfo) bool { return fi.Path == want }, nil
	})
}

// DeleteFile removes a path from the session's workspace, as WriteFile
// writes: a directory with everything below it.
func (s *Service) DeleteFile(ctx context.Context, p Principal, sessionID, rawPath string) error {
	want, err := jobs.CleanPath(rawPath)
	if err != nil {
		return BadRequest("path", "%v", err)
	}
	return s.editWorkspace(ctx, p, sessionID, func(_ *tar.Writer, existing map[string]FileInfo) (func(FileInfo) bool, error) {
		if _, ok := existing[want]; !ok {
			return nil, NotFound("file " + want)
		}
		return func(fi FileInfo) bool { return fi.Path == want || strings.HasPrefix(fi.Path, want+"/") }, nil
	})
}

// busyWait is how long a files API edit waits for the session's running
// jobs before answering 409.
const busyWait = 30 * time.Second
