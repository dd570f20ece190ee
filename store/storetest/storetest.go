// Package storetest gives tests a fresh, migrated Postgres database of their
// own on the server named by GANTRY_TEST_DATABASE_URL (default: the local
// cluster `make postgres` sets up), dropped when the test ends.
//
// Migrating a database takes longer than copying one, so New clones a
// template database migrated once per set of migrations
// (gantry_tmpl_<hash>); `make test` drops the templates when it is done.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gantryhq/gantry/migrations"
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

// adminURL is the server the tests' databases are made on.
func adminURL() string {
	if u := os.Getenv("GANTRY_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// connectAdmin connects to adminURL, or skips (fails) the test.
func connectAdmin(ctx context.Context, t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, adminURL())
	if err != nil {
		Unavailable(t, "postgres not reachable at GANTRY_TEST_DATABASE_URL (run `make postgres`): %v", err)
	}
	return conn
}

// DatabaseURL creates an empty database for the test and returns its URL.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	return database(t, "")
}

// database creates a database for the test, a copy of template (empty
// when ""), and returns its URL.
func database(t testing.TB, template string) string {
	t.Helper()
	admin := adminURL()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := connectAdmin(ctx, t)
	sweepOnce.Do(func() { sweep(ctx, conn) })
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := fmt.Sprintf("%s%d_%s", ownPrefix(), os.Getpid(), hex.EncodeToString(b))
	create := "CREATE DATABASE " + name
	if template != "" {
		create += " TEMPLATE " + template
	}
	if _, err := conn.Exec(ctx, create); err != nil {
		conn.Close(ctx)
		t.Fatalf("create test database: %v", err)
	}
	conn.Close(ctx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err == nil {
			_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			conn.Close(ctx)
		}
		if err != nil {
			// The next test process on this host drops it (sweep).
			fmt.Fprintf(os.Stderr, "storetest: could not drop %s: %v\n", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("GANTRY_TEST_DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// A test database is named gantry_test_<host>_<pid>_<random>: the first
// database a test process makes drops this host's test databases whose
// process is gone (a test binary killed by its timeout runs no cleanup).
var sweepOnce sync.Once

// ownPrefix is this host's test databases' prefix.
func ownPrefix() string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(host))
	return "gantry_test_" + hex.EncodeToString(sum[:4]) + "_"
}

// sweep drops this host's test databases left by processes that ended.
func sweep(ctx context.Context, conn *pgx.Conn) {
	prefix := ownPrefix()
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", prefix)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, name := range names {
		pidText, _, ok := strings.Cut(strings.TrimPrefix(name, prefix), "_")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "storetest: could not drop %s, left by process %d: %v\n", name, pid, err)
		}
	}
}

// alive reports whether process pid exists (one of another user's too).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// New returns a migrated store on a fresh database. Its statements can be
// recorded (WithQueryLog), and Exec and QueryRow reach its database.
func New(t testing.TB) *store.Store {
	t.Helper()
	ctx := context.Background()
	tmpl, err := migratedTemplate(t)
	if err != nil {
		t.Fatalf("template database: %v", err)
	}
	dbURL := database(t, tmpl)
	st, err := store.Open(ctx, dbURL, store.WithTracer(queryTracer{}))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(st.Close)
	side, err := pgxpool.New(ctx, withParam(dbURL, "pool_max_conns", "4"))
	if err != nil {
		t.Fatalf("open the test's own connections: %v", err)
	}
	pools.Store(st, side)
	t.Cleanup(func() { pools.Delete(st); side.Close() })
	return st
}

func withParam(raw, name, value string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// pools are connections of the tests' own to the database of each store
// New made (*store.Store → *pgxpool.Pool), for Exec and QueryRow.
var pools sync.Map

func pool(st *store.Store) *pgxpool.Pool {
	p, ok := pools.Load(st)
	if !ok {
		panic("storetest: a store New did not make")
	}
	return p.(*pgxpool.Pool)
}

// QueryRow runs a query on the store's database, for tests that check
// what a row holds.
func QueryRow(st *store.Store, sql string, args ...any) pgx.Row {
	return pool(st).QueryRow(context.Background(), sql, args...)
}

// TemplatePrefix names the template databases New clones.
const TemplatePrefix = "gantry_tmpl_"

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// migratedTemplate returns the template database for the current
// migrations, making it once (test binaries of several packages may race:
// an advisory lock orders them, and a template appears under its name only
// when fully migrated).
func migratedTemplate(t testing.TB) (string, error) {
	templateOnce.Do(func() {
		h := sha256.New()
		_ = fs.WalkDir(migrations.FS, ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := migrations.FS.ReadFile(p)
				h.Write([]byte(p))
				h.Write(b)
			}
			return nil
		})
		name := TemplatePrefix + hex.EncodeToString(h.Sum(nil))[:12]
		templateName, templateErr = name, makeTemplate(t, name)
	})
	return templateName, templateErr
}

func makeTemplate(t testing.TB, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := connectAdmin(ctx, t)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext('gantry storetest template'))"); err != nil {
		return err
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext('gantry storetest template'))") //nolint:errcheck // the session ends next
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil || exists {
		return err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	building := "gantry_tmplbuild_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return err
	}
	u, err := url.Parse(adminURL())
	if err != nil {
		return err
	}
	u.Path = "/" + building
	st, err := store.Open(ctx, u.String())
	if err == nil {
		_, err = st.Migrate(ctx)
		st.Close()
	}
	if err == nil {
		_, err = conn.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+name)
	}
	if err != nil {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)")
	}
	return err
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
	_, err := pool(st).Exec(context.Background(), sql, args...)
	return err
}

// Claim claims a job as a runner would for a first delivery (its
// message's sequence not checked, up to 3 attempts); ok says whether the
// job is now the caller's to run.
func Claim(st *store.Store, jobID, runnerID string) (c store.Claim, ok bool, err error) {
	c, out, err := st.ClaimJob(context.Background(), store.ClaimRequest{JobID: jobID, RunnerID: runnerID, MaxAttempts: 3})
	return c, err == nil && out == store.Claimed, err
}
