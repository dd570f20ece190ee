package console

import (
	"net/http"
	"net/url"

	"github.com/gantryhq/gantry/jobs"
)

// Snapshots: the tenant's snapshots of stateful sessions (their live state
// and files), a session started from one, and deleting one.

type snapshotList struct {
	Snapshots []jobs.Snapshot
	Next      string
}

func (c *Console) handleSnapshots(w http.ResponseWriter, r *http.Request, s *session) error {
	q := url.Values{"limit": {"50"}}
	if cur := r.URL.Query().Get("cursor"); cur != "" {
		q.Set("cursor", cur)
	}
	var page struct {
		Snapshots  []jobs.Snapshot `json:"snapshots"`
		NextCursor *string         `json:"next_cursor"`
	}
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/snapshots?"+q.Encode(), nil, &page); err != nil {
		return err
	}
	d := snapshotList{Snapshots: page.Snapshots}
	if page.NextCursor != nil {
		d.Next = Prefix + "snapshots?cursor=" + url.QueryEscape(*page.NextCursor)
	}
	c.render(w, r, s, http.StatusOK, "snapshots", "Snapshots", "snapshots", d, nil)
	return nil
}

func (c *Console) handleDeleteSnapshot(w http.ResponseWriter, r *http.Request, s *session) error {
	if err := s.api.JSON(r.Context(), http.MethodDelete, "/v1/snapshots/"+url.PathEscape(r.PathValue("id")), nil, nil); err != nil {
		return err
	}
	http.Redirect(w, r, Prefix+"snapshots", http.StatusSeeOther)
	return nil
}
