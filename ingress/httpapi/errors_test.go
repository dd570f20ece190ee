package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gantryhq/gantry/ingress/service"
)

// TestDatabaseOutageErrors: Postgres errors that mean "not now" (a fast
// shutdown terminating backends, a connection failure, too many
// connections) answer 503 unavailable with Retry-After, not 500.
func TestDatabaseOutageErrors(t *testing.T) {
	s := &Server{}
	for _, code := range []string{"57P01", "57P03", "08006", "08001", "53300"} {
		w := httptest.NewRecorder()
		s.writeError(w, httptest.NewRequest("GET", "/v1/jobs", nil), fmt.Errorf("get job: %w", &pgconn.PgError{Severity: "FATAL", Code: code}))
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Errorf("SQLSTATE %s: %d (Retry-After %q) %s", code, w.Code, w.Header().Get("Retry-After"), w.Body)
		}
	}
	if e, internal := service.ToError(&pgconn.PgError{Code: "42P01"}); e.Status != 500 || !internal {
		t.Errorf("a broken query (42P01) answered %d; it is internal", e.Status)
	}
}
