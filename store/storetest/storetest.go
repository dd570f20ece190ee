// Package storetest gives tests a fresh, migrated Postgres database of their
// own on the server named by GANTRY_TEST_DATABASE_URL (default: the local
// cluster `make postgres` sets up), dropped when the test ends.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/store"
)

// DefaultURL is used when GANTRY_TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://gantry:gantry@127.0.0.1:5432/gantry?sslmode=disable"

// Require reports whether missing engines fail tests instead of skipping
// them. `make test` sets GANTRY_TEST_REQUIRE=1 so nothing is silently
// skipped there.
func Require() bool { return os.Getenv("GANTRY_TEST_REQUIRE") == "1" }

// Unavailable skips the test, or fails it under GANTRY_TEST_REQUIRE=1.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if Require() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format+" (set GANTRY_TEST_REQUIRE=1 to fail instead)", args...)
}

// DatabaseURL creates an empty database for the test and returns its URL.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("GANTRY_TEST_DATABASE_URL")
	if admin == "" {
		admin = DefaultURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		Unavailable(t, "postgres not reachable at GANTRY_TEST_DATABASE_URL (run `make postgres`): %v", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "gantry_test_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		conn.Close(ctx)
		t.Fatalf("create test database: %v", err)
	}
	conn.Close(ctx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, admin); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			conn.Close(ctx)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("GANTRY_TEST_DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// New returns a migrated store on a fresh database.
func New(t testing.TB) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, DatabaseURL(t))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return st
}

// Tenant creates a tenant with an API key and returns the tenant id and key.
func Tenant(t testing.TB, st *store.Store, name string) (tenantID, key string) {
	t.Helper()
	ctx := context.Background()
	ten, err := st.CreateTenant(ctx, name)
	if err != nil {
		t.Fatalf("create tenant: %v", err)
	}
	key, _, err = st.CreateAPIKey(ctx, ten.ID, "test")
	if err != nil {
		t.Fatalf("create key: %v", err)
	}
	return ten.ID, key
}

// Exec runs a statement on the store's database, for tests that need to
// set up states the API cannot reach quickly (an expired session).
func Exec(st *store.Store, sql string, args ...any) error {
	return st.ExecForTest(context.Background(), sql, args...)
}

// Claim claims a job as a runner would for a first delivery (its
// message's sequence not checked, up to 3 attempts); ok says whether the
// job is now the caller's to run.
func Claim(st *store.Store, jobID, runnerID string) (c store.Claim, ok bool, err error) {
	c, out, err := st.ClaimJob(context.Background(), store.ClaimRequest{JobID: jobID, RunnerID: runnerID, MaxAttempts: 3})
	return c, err == nil && out == store.Claimed, err
}
