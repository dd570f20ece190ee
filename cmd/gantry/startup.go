package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/store"
)

// A cluster's processes start in no particular order (compose, Kubernetes,
// a reboot): ingress and runner wait for the engines they need instead of
// exiting, saying what they wait for. They give up only on errors that
// waiting cannot fix (a refused password, a missing database), or when
// stopped.

// awaitEngine runs fn until it succeeds, fails with an error retry does not
// accept, or ctx ends. It logs the first failure and then one line every
// 10 s.
func awaitEngine(ctx context.Context, log *slog.Logger, what string, fn func(context.Context) error, retry func(error) bool) error {
	start := time.Now()
	delay := 250 * time.Millisecond
	var lastLog time.Time
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			if attempt > 1 {
				log.Info(what+" is ready", "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return nil
		}
		if ctx.Err() != nil || !retry(err) {
			return err
		}
		if attempt == 1 || time.Since(lastLog) >= 10*time.Second {
			log.Warn("waiting for "+what, "attempt", attempt, "err", err)
			lastLog = time.Now()
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return fmt.Errorf("%w (stopped while waiting for %s)", err, what)
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// awaitStore connects to Postgres, waiting while it cannot be reached or is
// still starting.
func awaitStore(ctx context.Context, log *slog.Logger, dbURL string) (*store.Store, error) {
	var st *store.Store
	err := awaitEngine(ctx, log, "postgres", func(ctx context.Context) error {
		var err error
		st, err = store.Open(ctx, dbURL)
		return err
	}, postgresRetryable)
	if err != nil {
		return nil, fmt.Errorf("%w (set GANTRY_DATABASE_URL; `make postgres` starts a local one)", err)
	}
	return st, nil
}

// postgresRetryable: Postgres could not be reached or is starting up, but
// did not refuse the role or say the database does not exist.
func postgresRetryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "57P03" || // cannot_connect_now: starting up or shutting down
			pgErr.Code == "53300" // too_many_connections
	}
	return store.Unavailable(err)
}

// errSchemaBehind means the database has not been migrated to what this
// build expects yet.
var errSchemaBehind = errors.New("database schema is behind")

// awaitSchema waits until another process (an ingress, `gantry migrate`)
// has migrated the database at least to the version this build expects.
func awaitSchema(ctx context.Context, log *slog.Logger, st *store.Store) error {
	return awaitEngine(ctx, log, "the database schema (applied by `gantry ingress` with GANTRY_AUTO_MIGRATE=true, or `gantry migrate`)",
		func(ctx context.Context) error {
			cur, want, err := st.SchemaVersion(ctx)
			if err != nil {
				return err
			}
			if cur < want {
				return fmt.Errorf("%w: at version %d, this gantry needs %d", errSchemaBehind, cur, want)
			}
			return nil
		},
		func(err error) bool { return errors.Is(err, errSchemaBehind) || postgresRetryable(err) })
}

// awaitNATS connects to the NATS servers in the comma-separated list,
// waiting while none can be reached.
func awaitNATS(ctx context.Context, log *slog.Logger, servers string, opts ...nats.Option) (*nats.Conn, error) {
	var nc *nats.Conn
	err := awaitEngine(ctx, log, "nats at "+redactServers(servers), func(context.Context) error {
		var err error
		nc, err = nats.Connect(servers, opts...)
		return err
	}, func(err error) bool {
		return !errors.Is(err, nats.ErrAuthorization) && !errors.Is(err, nats.ErrAuthExpired) && !errors.Is(err, nats.ErrAuthRevoked)
	})
	if err != nil {
		return nil, fmt.Errorf("connect to nats at %s: %w (set GANTRY_NATS_URL)", redactServers(servers), err)
	}
	return nc, nil
}

// awaitBucket makes sure the bucket exists, creating it when the
// credentials allow, waiting while the object store cannot be reached.
func awaitBucket(ctx context.Context, log *slog.Logger, blobs *blob.Store) error {
	err := awaitEngine(ctx, log, "the object store (GANTRY_S3_ENDPOINT)", blobs.EnsureBucket, blob.Unavailable)
	switch {
	case errors.Is(err, blob.ErrDenied):
		return fmt.Errorf("s3: %w; use credentials (GANTRY_S3_ACCESS_KEY, GANTRY_S3_SECRET_KEY) that may create it, or create bucket %s yourself (docs/DEPLOY.md)", err, blobs.Bucket())
	case err != nil:
		return fmt.Errorf("s3: %w", err)
	}
	return nil
}

// redactServers drops the user information (a password or token) from each
// URL in a comma-separated server list, for logs and errors.
func redactServers(servers string) string {
	parts := strings.Split(servers, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if u, err := url.Parse(p); err == nil && u.User != nil {
			u.User = nil
			p = u.String()
		} else if at := strings.LastIndex(p, "@"); at >= 0 {
			p = p[at+1:]
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}
