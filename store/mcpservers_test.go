package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gantryhq/gantry/codemode"
)

// The code-mode methods answer in the sentinels codemode's Store declares:
// a missing row is codemode.ErrNotFound; an outage is
// codemode.ErrUnavailable and still Unavailable (the API's 503), with its
// cause; anything else passes as it is.
func TestMCPErrors(t *testing.T) {
	t.Parallel()
	if err := mcpErr(nil); err != nil {
		t.Errorf("nil became %v", err)
	}
	if err := mcpErr(fmt.Errorf("scan: %w", pgx.ErrNoRows)); !errors.Is(err, codemode.ErrNotFound) {
		t.Errorf("no rows: %v", err)
	}
	down := &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}
	err := mcpErr(down)
	var pgErr *pgconn.PgError
	if !errors.Is(err, codemode.ErrUnavailable) || !Unavailable(err) || !errors.As(err, &pgErr) || pgErr != down {
		t.Errorf("outage: %v", err)
	}
	other := &pgconn.PgError{Code: "42601", Message: "syntax error"}
	if err := mcpErr(other); err != error(other) || errors.Is(err, codemode.ErrUnavailable) {
		t.Errorf("a query error: %v", err)
	}
}
