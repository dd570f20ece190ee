package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestSessionTokenDeadline: tokens open a session until the deadline a
// key holder set (handing one out, setting the timeout); the session's
// jobs extend the session, not the deadline; while it is paused they
// open it until its expiry; a revoked key or a deleted tenant grants
// nothing.
func TestSessionTokenDeadline(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, key := storetest.Tenant(t, st, "a")
	p, err := st.Authenticate(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	sess := newSession(t, st, a, 60)
	if g, err := st.SessionTokenGrant(ctx, p.KeyID, a, sess.ID); err != nil || !g.Until.IsZero() {
		t.Fatalf("before any token was handed out: %+v %v", g, err)
	}
	until, err := st.OpenSessionTokens(ctx, a, sess.ID)
	if err != nil || until.Sub(sess.ExpiresAt).Abs() > time.Second {
		t.Fatalf("a token handed out: until %s (the session expires %s): %v", until, sess.ExpiresAt, err)
	}
	var pubs []string
	queueSessionJobs(t, st, a, sess.ID, &pubs, "x")
	got, _ := st.GetSession(ctx, a, sess.ID)
	g, err := st.SessionTokenGrant(ctx, p.KeyID, a, sess.ID)
	if err != nil || !g.Until.Equal(until) || got.ExpiresAt.Before(until) || g.Principal.TenantID != a {
		t.Fatalf("after a job: grant %+v %v, session expires %s", g, err, got.ExpiresAt)
	}
	if _, err := st.SetSessionTTL(ctx, a, sess.ID, 10); err != nil {
		t.Fatal(err)
	}
	if g, _ := st.SessionTokenGrant(ctx, p.KeyID, a, sess.ID); !g.Until.Before(until) {
		t.Errorf("a shorter timeout left the deadline at %s (was %s)", g.Until, until)
	}
	// Paused (at its timeout, say), its tokens open it until its expiry,
	// for the caller to resume it or refuse; running again, they do not.
	if err := storetest.Exec(st, `UPDATE sessions SET paused = true, token_until = now() - interval '1 minute',
		expires_at = now() + interval '1 hour' WHERE id = $1`, sess.ID); err != nil {
		t.Fatal(err)
	}
	if g, _ := st.SessionTokenGrant(ctx, p.KeyID, a, sess.ID); time.Until(g.Until) < 59*time.Minute {
		t.Errorf("a paused session's tokens open it until %s", g.Until)
	}
	if err := storetest.Exec(st, `UPDATE sessions SET paused = false WHERE id = $1`, sess.ID); err != nil {
		t.Fatal(err)
	}
	if g, _ := st.SessionTokenGrant(ctx, p.KeyID, a, sess.ID); g.Until.After(time.Now()) {
		t.Errorf("running again, its tokens open it until %s", g.Until)
	}
	b, bKey := storetest.Tenant(t, st, "b")
	pb, _ := st.Authenticate(ctx, bKey)
	if _, err := st.SessionTokenGrant(ctx, pb.KeyID, a, sess.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant's key: %v", err)
	}
	if _, err := st.OpenSessionTokens(ctx, b, sess.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant opens the session: %v", err)
	}
	if _, err := st.RevokeAPIKey(ctx, p.KeyID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionTokenGrant(ctx, p.KeyID, a, sess.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a revoked key: %v", err)
	}
	if err := storetest.Exec(st, `DELETE FROM tenants WHERE id = $1`, b); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionTokenGrant(ctx, pb.KeyID, b, sess.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a deleted tenant's key: %v", err)
	}
}
