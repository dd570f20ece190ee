package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestUnavailableTerminatedBackend: a query whose backend is terminated (as
// in a fast shutdown: SQLSTATE 57P01) is an outage, not a failed query.
func TestUnavailableTerminatedBackend(t *testing.T) {
	url := storetest.DatabaseURL(t)
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })

	errc := make(chan error, 1)
	go func() { errc <- st.ExecForTest(ctx, `SELECT pg_sleep(30) /* victim */`) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%/* victim */%' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the query never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	err = <-errc
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57P01" {
		t.Fatalf("err = %v, want SQLSTATE 57P01", err)
	}
	if !store.Unavailable(err) {
		t.Errorf("Unavailable(%v) = false", err)
	}
	for _, code := range []string{"08006", "57P03", "53300"} {
		if !store.Unavailable(&pgconn.PgError{Code: code}) {
			t.Errorf("Unavailable(%s) = false", code)
		}
	}
	for _, code := range []string{"22P05", "23505", "42P01"} {
		if store.Unavailable(&pgconn.PgError{Code: code}) {
			t.Errorf("Unavailable(%s) = true: a retry cannot fix it", code)
		}
	}
}

// TestBinaryStdinStored: stdin with NUL and invalid UTF-8 goes into the
// jobs table and comes back to the runner's claim byte for byte.
func TestBinaryStdinStored(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	tenantID, _ := storetest.Tenant(t, st, "acme")
	nj := newJob(tenantID, "")
	nj.Spec.Stdin = "\x00\x01\xff\xfe\n"
	var ids []string
	job, _, err := st.EnqueueJob(ctx, nj, published(&ids))
	if err != nil {
		t.Fatal(err)
	}
	c, ok, err := st.ClaimJob(ctx, job.ID, 1, "r")
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if c.Spec.Stdin != nj.Spec.Stdin {
		t.Errorf("claimed stdin %q, want %q", c.Spec.Stdin, nj.Spec.Stdin)
	}
}
