package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestPortRoute: a session's route is read by its id alone, with its
// tenant and whether its ports are public; traffic extends the session
// (never shortens it), and a closed session has no route.
func TestPortRoute(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	no := false
	req, err := jobs.SessionRequest{TTLSeconds: 60, Stateful: true, PublicTraffic: &no, Metadata: map[string]string{"k": "v"}}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	private, err := st.CreateSession(ctx, a, req)
	if err != nil || private.PublicTraffic {
		t.Fatalf("a session with public_traffic false: %+v %v", private, err)
	}
	public := newSession(t, st, a, 60)
	if !public.PublicTraffic {
		t.Error("a session's ports are public by default")
	}
	r, err := st.PortRoute(ctx, private.ID)
	if err != nil || r.Principal.TenantID != a || r.PublicTraffic || !r.Stateful || r.TTLSeconds != 60 || r.Metadata["k"] != "v" {
		t.Fatalf("route: %+v %v", r, err)
	}
	if _, err := st.SetSessionTTL(ctx, a, private.ID, 3600); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetSessionTTL(ctx, a, private.ID, 30); err != nil {
		t.Fatal(err)
	}
	before, _ := st.GetSession(ctx, a, private.ID)
	time.Sleep(10 * time.Millisecond) // now moves on
	until, err := st.TouchSession(ctx, a, private.ID)
	if err != nil || !until.After(before.ExpiresAt) {
		t.Errorf("traffic: expires %s, before %s: %v", until, before.ExpiresAt, err)
	}
	b, _ := storetest.Tenant(t, st, "b")
	if _, err := st.TouchSession(ctx, b, private.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant's traffic: %v", err)
	}
	if _, err := st.CloseSession(ctx, a, private.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PortRoute(ctx, private.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a closed session's route: %v", err)
	}
	if _, err := st.PortRoute(ctx, "ses_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("no such session: %v", err)
	}
}
