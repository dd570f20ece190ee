package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestSecrets: a tenant's secrets are its own (another tenant sees, finds
// and opens none of them); a session's go with the session and are not
// listed; a network is kept on the session and read with its jobs'
// claims; the first egress CA kept wins.
func TestSecrets(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	b, _ := storetest.Tenant(t, st, "b")
	sec, created, err := st.PutSecret(ctx, a, "API_KEY", "", []byte("sealed-1"))
	if err != nil || !created || sec.Name != "API_KEY" {
		t.Fatalf("put: %+v %v %v", sec, created, err)
	}
	if _, created, err = st.PutSecret(ctx, a, "API_KEY", "", []byte("sealed-2")); err != nil || created {
		t.Fatalf("replace: %v %v", created, err)
	}
	if got, err := st.SealedSecrets(ctx, a, "", []string{"API_KEY", "NONE"}); err != nil || string(got["API_KEY"]) != "sealed-2" || len(got) != 1 {
		t.Fatalf("sealed: %q %v", got, err)
	}
	if got, _ := st.SealedSecrets(ctx, b, "", []string{"API_KEY"}); len(got) != 0 {
		t.Fatalf("tenant b opened a's secret: %q", got)
	}
	if missing, _ := st.MissingSecrets(ctx, b, "", []string{"API_KEY"}); !slices.Equal(missing, []string{"API_KEY"}) {
		t.Fatalf("tenant b found a's secret: %v", missing)
	}
	if err := st.DeleteSecret(ctx, b, "API_KEY"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("tenant b deleted a's secret: %v", err)
	}

	n := &jobs.Network{DenyOut: []string{jobs.AllTraffic}, Rules: map[string][]jobs.NetworkRule{"api.example.com": {{Headers: map[string]string{"X-Key": "${secrets._e2b_x}"}}}}}
	sess, err := st.CreateSession(ctx, a, jobs.SessionRequest{Language: "python", TTLSeconds: 60, DiskMB: 64, Network: n})
	if err != nil || sess.Network == nil || sess.Network.Rules["api.example.com"][0].Headers["X-Key"] != "${secrets._e2b_x}" {
		t.Fatalf("session with a network: %+v %v", sess.Network, err)
	}
	if _, _, err := st.PutSecret(ctx, a, "_e2b_x", sess.ID, []byte("sealed-e2b")); err != nil {
		t.Fatal(err)
	}
	list, err := st.ListSecrets(ctx, a)
	if err != nil || len(list) != 1 || list[0].Name != "API_KEY" {
		t.Fatalf("list shows a session's secrets: %+v %v", list, err)
	}
	if got, _ := st.SealedSecrets(ctx, a, sess.ID, []string{"_e2b_x", "API_KEY"}); len(got) != 2 {
		t.Fatalf("the session's and the tenant's: %q", got)
	}
	if got, _ := st.SealedSecrets(ctx, a, "", []string{"_e2b_x"}); len(got) != 0 {
		t.Fatalf("a session's secret outside it: %q", got)
	}
	if sess, err = st.SetSessionNetwork(ctx, a, sess.ID, nil); err != nil || sess.Network != nil {
		t.Fatalf("clear the network: %+v %v", sess.Network, err)
	}
	if _, err := st.SetSessionNetwork(ctx, b, sess.ID, n); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("tenant b set a's session's network: %v", err)
	}
	if err := st.DeleteSessionSecrets(ctx, a, sess.ID, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.SealedSecrets(ctx, a, sess.ID, []string{"_e2b_x"}); len(got) != 0 {
		t.Fatalf("the session's secret outlived its deletion: %q", got)
	}
	if err := st.DeleteSecret(ctx, a, "API_KEY"); err != nil {
		t.Fatal(err)
	}

	if cert, key, err := st.TenantCA(ctx, a); err != nil || cert != "" || key != nil {
		t.Fatalf("a CA before any: %q %v", cert, err)
	}
	if cert, key, err := st.SetTenantCA(ctx, a, "first", []byte("k1")); err != nil || cert != "first" || string(key) != "k1" {
		t.Fatalf("set: %q %q %v", cert, key, err)
	}
	if cert, _, err := st.SetTenantCA(ctx, a, "second", []byte("k2")); err != nil || cert != "first" {
		t.Fatalf("a second CA replaced the first: %q %v", cert, err)
	}
}
