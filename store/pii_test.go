package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/pii"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

func TestTenantPIIFlag(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	if on, err := st.TenantPII(ctx, a); err != nil || on {
		t.Fatalf("default = %v, %v", on, err)
	}
	if err := st.SetTenantPII(ctx, a, true); err != nil {
		t.Fatal(err)
	}
	if on, err := st.TenantPII(ctx, a); err != nil || !on {
		t.Fatalf("after on = %v, %v", on, err)
	}
	if err := st.SetTenantPII(ctx, a, false); err != nil {
		t.Fatal(err)
	}
	if on, _ := st.TenantPII(ctx, a); on {
		t.Fatal("still on")
	}
	if _, err := st.TenantPII(ctx, "ten_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown tenant: %v", err)
	}
	if err := st.SetTenantPII(ctx, "ten_nope", true); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown tenant: %v", err)
	}
}

func piiToken(t *testing.T, st *store.Store, tenantID, kind, value string, ttl time.Duration) int {
	t.Helper()
	n, err := st.PIIToken(context.Background(), tenantID, kind, []byte("h:"+kind+":"+value), []byte("sealed:"+value), ttl)
	if err != nil {
		t.Fatalf("PIIToken(%s, %s): %v", kind, value, err)
	}
	return n
}

func TestPIITokens(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	b, _ := storetest.Tenant(t, st, "b")

	// Numbers per tenant and kind, stable per value.
	for _, c := range []struct {
		tenant, kind, value string
		want                int
	}{
		{a, "EMAIL", "x@example.com", 1},
		{a, "EMAIL", "y@example.com", 2},
		{a, "EMAIL", "x@example.com", 1},
		{a, "PHONE", "15551234567", 1},
		{b, "EMAIL", "y@example.com", 1},
		{b, "EMAIL", "z@example.com", 2},
		{a, "EMAIL", "z@example.com", 3},
	} {
		if n := piiToken(t, st, c.tenant, c.kind, c.value, time.Hour); n != c.want {
			t.Errorf("%s %s %s = %d, want %d", c.tenant, c.kind, c.value, n, c.want)
		}
	}

	refs := []pii.Ref{{Kind: "EMAIL", N: 1}, {Kind: "EMAIL", N: 3}, {Kind: "PHONE", N: 1}, {Kind: "EMAIL", N: 1},
		{Kind: "EMAIL", N: 99}, {Kind: "CARD", N: 1}, {Kind: "EMAIL", N: 0}, {Kind: "EMAIL", N: 1 << 40}}
	got, err := st.PIIValues(ctx, a, refs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[pii.Ref]string{{Kind: "EMAIL", N: 1}: "sealed:x@example.com", {Kind: "EMAIL", N: 3}: "sealed:z@example.com", {Kind: "PHONE", N: 1}: "sealed:15551234567"}
	if len(got) != len(want) {
		t.Fatalf("PIIValues = %q", got)
	}
	for r, v := range want {
		if string(got[r]) != v {
			t.Errorf("%s = %q, want %q", r, got[r], v)
		}
	}
	// Tenant b sees its own values under the same refs, never a's.
	got, _ = st.PIIValues(ctx, b, refs)
	if len(got) != 1 || string(got[pii.Ref{Kind: "EMAIL", N: 1}]) != "sealed:y@example.com" {
		t.Errorf("tenant b PIIValues = %q", got)
	}
	if got, err := st.PIIValues(ctx, a, nil); err != nil || len(got) != 0 {
		t.Errorf("no refs: %v %v", got, err)
	}

	// A hash already used for another kind, bad arguments, unknown tenant.
	if _, err := st.PIIToken(ctx, a, "PHONE", []byte("h:EMAIL:x@example.com"), []byte("s"), time.Hour); !errors.Is(err, store.ErrConflict) {
		t.Errorf("hash of another kind: %v", err)
	}
	if _, err := st.PIIToken(ctx, "ten_nope", "EMAIL", []byte("h"), []byte("s"), time.Hour); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown tenant: %v", err)
	}
	for _, c := range []struct {
		kind      string
		hash, val []byte
		ttl       time.Duration
	}{
		{"email", []byte("h"), []byte("s"), time.Hour},
		{"E_1", []byte("h"), []byte("s"), time.Hour},
		{"EMAIL", nil, []byte("s"), time.Hour},
		{"EMAIL", []byte("h"), nil, time.Hour},
		{"EMAIL", []byte("h"), []byte("s"), 0},
	} {
		if _, err := st.PIIToken(ctx, a, c.kind, c.hash, c.val, c.ttl); err == nil {
			t.Errorf("PIIToken(%q, %q, %q, %s) accepted", c.kind, c.hash, c.val, c.ttl)
		}
	}
}

func TestPIIExpiry(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	one := pii.Ref{Kind: "EMAIL", N: 1}
	two := pii.Ref{Kind: "EMAIL", N: 2}
	piiToken(t, st, a, "EMAIL", "old@example.com", time.Hour)
	piiToken(t, st, a, "EMAIL", "gone@example.com", time.Hour)

	expire := func(ref pii.Ref) {
		t.Helper()
		if err := storetest.Exec(st, `UPDATE pii_tokens SET expires_at = now() - interval '1 second' WHERE tenant_id = $1 AND kind = $2 AND n = $3`,
			a, ref.Kind, ref.N); err != nil {
			t.Fatal(err)
		}
	}
	expire(one)
	expire(two)
	if got, _ := st.PIIValues(ctx, a, []pii.Ref{one, two}); len(got) != 0 {
		t.Fatalf("expired values returned: %q", got)
	}
	// Seeing an expired, not yet deleted value again revives its number.
	if n := piiToken(t, st, a, "EMAIL", "old@example.com", time.Hour); n != 1 {
		t.Fatalf("revived = %d", n)
	}
	if got, _ := st.PIIValues(ctx, a, []pii.Ref{one}); len(got) != 1 {
		t.Fatal("revived token not readable")
	}
	// A shorter ttl does not shorten a token's life (the microsecond is
	// long past when the next statement runs).
	piiToken(t, st, a, "EMAIL", "old@example.com", time.Microsecond)
	if got, _ := st.PIIValues(ctx, a, []pii.Ref{one}); len(got) != 1 {
		t.Fatal("a shorter ttl shortened the token's life")
	}

	// The sweeper deletes only expired tokens, in batches.
	piiToken(t, st, a, "CARD", "4111111111111111", time.Hour)
	expire(pii.Ref{Kind: "CARD", N: 1})
	if n, err := st.DeleteExpiredPII(ctx, 1); err != nil || n != 1 {
		t.Fatalf("first sweep = %d, %v", n, err)
	}
	if n, err := st.DeleteExpiredPII(ctx, 0); err != nil || n != 1 {
		t.Fatalf("second sweep = %d, %v", n, err)
	}
	if n, err := st.DeleteExpiredPII(ctx, 100); err != nil || n != 0 {
		t.Fatalf("third sweep = %d, %v", n, err)
	}
	if got, _ := st.PIIValues(ctx, a, []pii.Ref{one}); len(got) != 1 {
		t.Fatal("sweeper deleted a live token")
	}
	// Numbers are never reused, even after the highest was deleted.
	if n := piiToken(t, st, a, "EMAIL", "new@example.com", time.Hour); n != 3 {
		t.Errorf("after sweep, new value = %d, want 3", n)
	}
	if n := piiToken(t, st, a, "EMAIL", "gone@example.com", time.Hour); n != 4 {
		t.Errorf("deleted value seen again = %d, want 4", n)
	}
	if n := piiToken(t, st, a, "CARD", "5555555555554444", time.Hour); n != 2 {
		t.Errorf("card after sweep = %d, want 2", n)
	}

	// Deleting the tenant deletes its tokens.
	if err := storetest.Exec(st, `DELETE FROM tenants WHERE id = $1`, a); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.PIIValues(ctx, a, []pii.Ref{one}); len(got) != 0 {
		t.Fatal("tokens outlived their tenant")
	}
}

func TestPIITokenConcurrent(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	b, _ := storetest.Tenant(t, st, "b")
	const values, workers = 12, 24
	type key struct{ tenant, value string }
	var mu sync.Mutex
	got := map[key]map[int]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range values {
				v := fmt.Sprintf("v%d@example.com", (i+w)%values) // every worker, every value, different orders
				ten := a
				if w%3 == 0 {
					ten = b
				}
				n, err := st.PIIToken(ctx, ten, "EMAIL", []byte(v), []byte("s:"+v), time.Hour)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				k := key{ten, v}
				if got[k] == nil {
					got[k] = map[int]bool{}
				}
				got[k][n] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, ten := range []string{a, b} {
		used := map[int]string{}
		for i := range values {
			v := fmt.Sprintf("v%d@example.com", i)
			ns := got[key{ten, v}]
			if len(ns) != 1 {
				t.Fatalf("%s %s got numbers %v", ten, v, ns)
			}
			for n := range ns {
				if other, dup := used[n]; dup {
					t.Fatalf("%s: %s and %s both got %d", ten, other, v, n)
				}
				if n < 1 || n > values {
					t.Fatalf("%s: number %d out of 1..%d (gaps)", ten, n, values)
				}
				used[n] = v
			}
		}
	}
}
