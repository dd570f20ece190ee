package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// A sandbox's live state, over the service's (service.Sandboxes' Pause,
// Resume, Snapshot and Fork): where gantry's runners run stateful sessions
// under gVisor, a sandbox is paused with its memory, snapshotted and
// forked as E2B's are; a runner that keeps live state in memory only
// answers 501, which is passed on.
//
// E2B's wire format, as the SDK (npm e2b 2.51) sends and reads it:
//   - POST /sandboxes/{id}/pause {memory} → 204; 409 when it is paused
//     already (the SDK's pause() then answers false);
//   - POST /v2/sandboxes/{id}/connect (sandboxes.go) resumes a paused one;
//   - POST /sandboxes/{id}/snapshots {name} → 201 {snapshotID, names};
//   - GET /snapshots ?sandboxID&name&limit&nextToken → [{snapshotID,
//     names}], X-Next-Token;
//   - DELETE /templates/{snapshotID} deletes a snapshot (a snapshot is a
//     template in E2B): 204, or 404 (deleteSnapshot answers false);
//   - POST /sandboxes/{id}/fork {count, timeout} → 201 [{sandbox} or
//     {error: {code, message}}], one per fork.

// pause pauses the sandbox with its memory.
func (s *Server) pause(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var req struct {
		Memory *bool `json:"memory"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Memory != nil && !*req.Memory {
		return notImplemented(noFilesystemPause)
	}
	sess, err := s.session(r, p)
	if err != nil {
		return err
	}
	if sess.State == jobs.SessionPaused {
		return &apiError{http.StatusConflict, fmt.Sprintf("sandbox %s is already paused", sess.ID)}
	}
	if _, err := s.sandboxes.Pause(r.Context(), p, sess.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// snapshotInfo is E2B's SnapshotInfo. A snapshot's id is gantry's (snp_…),
// which Sandbox.create takes as its template; its names are its name, if
// it has one.
type snapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func infoOf(snap jobs.Snapshot) snapshotInfo {
	names := []string{}
	if snap.Name != "" {
		names = append(names, snap.Name)
	}
	return snapshotInfo{SnapshotID: snap.ID, Names: names}
}

// createSnapshot snapshots the sandbox's memory and files; it goes on.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var req struct {
		Name string `json:"name"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	sess, err := s.session(r, p)
	if err != nil {
		return err
	}
	snap, err := s.sandboxes.Snapshot(r.Context(), p, sess.ID, jobs.SnapshotRequest{Name: req.Name})
	var fe *jobs.FieldError
	if errors.As(err, &fe) {
		return &apiError{http.StatusBadRequest, fe.Field + " " + fe.Message}
	}
	if err != nil {
		return err
	}
	compat.WriteJSON(w, http.StatusCreated, infoOf(snap))
	return nil
}

// listSnapshots lists the tenant's snapshots, newest first, of one sandbox
// (sandboxID) or with one name or id (name) if asked.
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	q := r.URL.Query()
	limit := 100
	if l := q.Get("limit"); l != "" {
		var err error
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > 100 {
			return &apiError{http.StatusBadRequest, "limit must be between 1 and 100"}
		}
	}
	sandboxID, name := q.Get("sandboxID"), q.Get("name")
	match := func(snap jobs.Snapshot) bool {
		return (sandboxID == "" || snap.SessionID == sandboxID) && (name == "" || snap.Name == name || snap.ID == name)
	}
	out := []snapshotInfo{}
	cursor := q.Get("nextToken")
	next := ""
	for range maxListPages {
		page, err := s.svc.Snapshots(r.Context(), p, 100, cursor)
		var se *service.Error
		if errors.As(err, &se) && se.Field == "cursor" {
			return &apiError{http.StatusBadRequest, "nextToken: " + se.Message}
		}
		if err != nil {
			return err
		}
		full := false
		for i, snap := range page.Snapshots {
			if !match(snap) {
				continue
			}
			out = append(out, infoOf(snap))
			if len(out) == limit {
				full = true
				if i < len(page.Snapshots)-1 {
					next = service.Cursor(snap.ID)
				} else {
					next = page.NextCursor
				}
				break
			}
		}
		if full || page.NextCursor == "" {
			break
		}
		cursor, next = page.NextCursor, page.NextCursor
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	compat.WriteJSON(w, http.StatusOK, out)
	return nil
}

// deleteTemplate deletes a snapshot (E2B's deleteSnapshot deletes it as
// the template it is); gantry builds no other templates.
func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	id := r.PathValue("id")
	if !jobs.ValidID("snp", id) {
		return notImplemented(noTemplates)
	}
	err := s.svc.DeleteSnapshot(r.Context(), p, id)
	var se *service.Error
	if errors.As(err, &se) && se.Code == service.CodeNotFound {
		return &apiError{http.StatusNotFound, fmt.Sprintf("snapshot %s not found", id)}
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// forkResult is E2B's SandboxForkResult: the fork's sandbox, or why it
// could not start.
type forkResult struct {
	Sandbox *sandboxJSON `json:"sandbox,omitempty"`
	Error   *forkError   `json:"error,omitempty"`
}

type forkError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// defaultForkTimeout is the forks' timeout when none is asked for: E2B's
// API's (SandboxForkRequest.timeout).
const defaultForkTimeout = 15

// fork makes count sandboxes from the sandbox's memory and files at this
// moment, apart from it and from each other; it goes on.
func (s *Server) fork(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var req struct {
		Count   *int     `json:"count"`
		Timeout *float64 `json:"timeout"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	count := 1
	if req.Count != nil {
		count = *req.Count
	}
	if count < 1 || count > jobs.MaxForks {
		return &apiError{http.StatusBadRequest, fmt.Sprintf("count must be between 1 and %d", jobs.MaxForks)}
	}
	seconds := float64(defaultForkTimeout)
	if req.Timeout != nil {
		seconds = *req.Timeout
	}
	sess, err := s.session(r, p)
	if err != nil {
		return err
	}
	fork, err := s.sandboxes.Fork(r.Context(), p, sess.ID, jobs.ForkRequest{Count: count, TTLSeconds: ttl(seconds)})
	if err != nil {
		return err
	}
	out := make([]forkResult, len(fork.Sessions))
	for i, child := range fork.Sessions {
		v, err := s.view(r, p, child, false)
		if err != nil {
			e, _ := service.ToError(err)
			out[i].Error = &forkError{Code: e.Status, Message: e.Message}
			continue
		}
		out[i].Sandbox = &v
	}
	compat.WriteJSON(w, http.StatusCreated, out)
	return nil
}

// maxNamePages bounds the snapshot pages a lookup by name reads.
const maxNamePages = 10

// snapshotNamed is the id of the tenant's newest snapshot named name, or
// "" for none.
func (s *Server) snapshotNamed(ctx context.Context, p service.Principal, name string) (string, error) {
	cursor := ""
	for range maxNamePages {
		page, err := s.svc.Snapshots(ctx, p, 100, cursor)
		if err != nil {
			return "", err
		}
		for _, snap := range page.Snapshots {
			if snap.Name == name {
				return snap.ID, nil
			}
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	return "", nil
}
