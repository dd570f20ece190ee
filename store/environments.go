package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Environment is a registered environment: a named sandbox image, for
// every tenant (Tenants nil) or the tenants named.
type Environment struct {
	Name        string
	Image       string
	Description string
	Tenants     []string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// For reports whether tenantID may use the environment.
func (e Environment) For(tenantID string) bool {
	if e.Tenants == nil {
		return true
	}
	for _, t := range e.Tenants {
		if t == tenantID {
			return true
		}
	}
	return false
}

// PutEnvironment registers an environment, or replaces the one of that
// name (its image, description and tenants).
func (s *Store) PutEnvironment(ctx context.Context, e Environment) (Environment, error) {
	err := s.pool.QueryRow(ctx, `
		INSERT INTO environments (name, image, description, tenants) VALUES ($1, $2, $3, $4)
		ON CONFLICT (name) DO UPDATE SET image = $2, description = $3, tenants = $4, updated_at = now()
		RETURNING created_at, updated_at`, e.Name, e.Image, e.Description, e.Tenants).Scan(&e.CreatedAt, &e.UpdatedAt)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23514" {
		return e, fmt.Errorf("environment %q: the name must be lowercase letters, digits and '-' (not \"default\")", e.Name)
	}
	return e, err
}

// Environments lists every registered environment, by name.
func (s *Store) Environments(ctx context.Context) ([]Environment, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, image, description, tenants, created_at, updated_at FROM environments ORDER BY name`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Environment, error) {
		var e Environment
		err := r.Scan(&e.Name, &e.Image, &e.Description, &e.Tenants, &e.CreatedAt, &e.UpdatedAt)
		return e, err
	})
}

// DeleteEnvironment removes an environment, or returns ErrNotFound. Jobs
// already queued in it fail when a runner takes them; sessions in it
// can run no more jobs.
func (s *Store) DeleteEnvironment(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM environments WHERE name = $1`, name)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}
