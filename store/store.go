// Package store keeps gantry's durable state in Postgres: tenants, their API
// keys and settings; every job with its spec, status and result (the
// history); sessions with their owner lease and snapshot versions; skills,
// versioned and searchable; code mode's registered MCP servers and cached
// tool lists; and privacy tokens. Every query that reads or changes a
// tenant's object is scoped by tenant id. Schema changes are the embedded
// migrations of package migrations, applied by goose under an advisory lock.
package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/gantryhq/gantry/migrations"
)

// Sentinel errors callers branch on.
var (
	// ErrNotFound means the object does not exist for this tenant.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the request collides with existing state, such as
	// an idempotency key reused with a different request.
	ErrConflict = errors.New("conflict")
)

// Store is gantry's Postgres store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// output keeps streams longer than inlineMax (nil: every stream is
	// kept in the row).
	output    Output
	inlineMax int
}

// Option changes how Open connects.
type Option func(*pgxpool.Config)

// WithTracer has every statement the store runs traced by t.
func WithTracer(t pgx.QueryTracer) Option {
	return func(c *pgxpool.Config) { c.ConnConfig.Tracer = t }
}

// Open connects to Postgres. It does not apply migrations.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		// The default (4 on small machines) is too few for long polls,
		// log streams and runners sharing one process.
		cfg.MaxConns = 16
	}
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to postgres at %s: %w", redactURL(cfg), err)
	}
	return &Store{pool: pool}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Migrate applies every pending migration. Several processes may call it at
// once: a Postgres advisory lock serialises them, and the ones that waited
// find nothing left to apply. A process waits for the lock up to 10 minutes
// (a long migration on a big table), checking every second.
func (s *Store) Migrate(ctx context.Context) ([]string, error) {
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 600))
	if err != nil {
		return nil, err
	}
	// Out of order: branches developed side by side took versions that
	// landed in another order (14 and 17 after 18); each migration stands
	// alone, so a database that has the later ones gets the earlier too.
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker),
		goose.WithAllowOutofOrder(true))
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("apply migrations: %w", err)
	}
	applied := make([]string, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Path)
	}
	return applied, nil
}

// SchemaVersion returns the schema version the database is at (0 when no
// migration was ever applied) and the version this build expects. It takes
// no lock, so it answers while another process migrates.
func (s *Store) SchemaVersion(ctx context.Context) (current, want int64, err error) {
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		return 0, 0, fmt.Errorf("load migrations: %w", err)
	}
	current, want, err = p.GetVersions(ctx)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table: never migrated
		return 0, want, nil
	}
	if err != nil {
		return 0, want, fmt.Errorf("read schema version: %w", err)
	}
	// A lower migration still pending (see Migrate) leaves the schema
	// behind it, whatever higher ones were applied.
	statuses, err := p.Status(ctx)
	if err != nil {
		return 0, want, fmt.Errorf("read schema version: %w", err)
	}
	for _, st := range statuses {
		if st.State == goose.StatePending {
			return min(current, st.Source.Version-1), want, nil
		}
	}
	return current, want, nil
}

func redactURL(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("%s:%d/%s (user %s)", c.Host, c.Port, c.Database, c.User)
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// Unavailable reports whether err means Postgres could not be reached or
// cannot serve now, as opposed to a query that failed: a retry may succeed.
// Besides network failures that is SQLSTATE class 08 (connection
// exception), 57 (operator intervention: a shutdown in progress, a
// terminated backend, a cancelled statement) and 53 (insufficient
// resources: too many connections, disk full).
func Unavailable(err error) bool {
	var connErr *pgconn.ConnectError
	var netErr net.Error
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && len(pgErr.Code) == 5 {
		switch pgErr.Code[:2] {
		case "08", "53", "57":
			return true
		}
	}
	return errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.Timeout(err)
}

// Unstorable reports whether err is Postgres refusing a value's text: a NUL
// byte (SQLSTATE 22021 in text, 22P05 in JSON) or an invalid byte sequence.
// The caller sent something it should not have; a retry will not help.
func Unstorable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "22021" || pgErr.Code == "22P05")
}
