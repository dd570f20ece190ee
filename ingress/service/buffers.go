package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/membudget"
)

// The ingress holds some answers in memory while it assembles them from the
// object store: a job's output kept there (read back whenever the job is
// read), the files an API fetches for its answer, their base64 and JSON.
// One budget bounds all of it, per tenant and per ingress (package
// membudget): every request carries a meter of the budget (Meter), bound to
// its tenant when it is authenticated, and what holds bytes for an answer
// charges them to it — the store's reads of output (history.Output), the
// service's reads of artifacts (ReadArtifact), and an adapter for what it
// makes of them (membudget.Charge: base64, a second copy). A request is
// refused rather than left to grow the ingress: 413 when it alone would
// hold more than a tenant may, 429 while its tenant's requests hold the
// tenant's share, 503 while all requests hold the ingress's.

// Default buffer limits.
const (
	DefaultTenantBufferBytes = 256 << 20
	DefaultBufferBytes       = 1 << 30
)

// Meter is ctx carrying a fresh meter of the ingress's answer budget, for
// one request; end gives back everything the request held. The request's
// authentication binds it to the tenant.
func (s *Service) Meter(ctx context.Context) (_ context.Context, end func()) {
	m := s.budget.Meter()
	return membudget.WithMeter(ctx, m), m.Close
}

// bindMeter charges what the request of ctx holds to the tenant.
func bindMeter(ctx context.Context, p Principal) { membudget.From(ctx).Bind(p.TenantID) }

// Hold holds n bytes of the ingress's memory for the request of ctx (an
// adapter's base64 or copy of what it read), until release or the
// request's end. Its error is an *Error (413, 429 or 503: bufferError).
func Hold(ctx context.Context, n int64) (release func(), err error) {
	release, err = membudget.Charge(ctx, n)
	var e *membudget.Error
	if errors.As(err, &e) {
		return release, bufferError(e)
	}
	return release, err
}

// bufferError is a refused charge as the API words it.
func bufferError(e *membudget.Error) *Error {
	const mb = 1 << 20
	switch e.Scope {
	case membudget.ScopeCall:
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge,
			Message: fmt.Sprintf("the answer would hold more than %d MB of the ingress's memory, the most one tenant's requests may hold at once: ask for less at a time (fewer jobs, smaller files)", e.Limit/mb)}
	case membudget.ScopeTenant:
		return &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: 1,
			Message: fmt.Sprintf("this tenant's requests in progress hold %d MB of the ingress's memory, their limit; retry when some have been answered", e.Held/mb)}
	}
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: 1,
		Message: "the ingress holds as many answers in memory as it may; retry later"}
}

func registerBufferMetrics(reg prometheus.Registerer, b *membudget.Budget) {
	perTenant, total := b.Limits()
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gantry_ingress_buffered_bytes",
			Help: "Bytes the ingress holds in memory for answers in progress (output and files read from the object store, their encodings).",
		}, func() float64 { return float64(b.Held()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gantry_ingress_buffer_limit_bytes", Help: "The most the ingress holds for answers in all.",
		}, func() float64 { return float64(total) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gantry_ingress_tenant_buffer_limit_bytes", Help: "The most the ingress holds for one tenant's answers.",
		}, func() float64 { return float64(perTenant) }),
	)
	for _, sc := range []struct {
		scope membudget.Scope
		name  string
	}{{membudget.ScopeCall, "request"}, {membudget.ScopeTenant, "tenant"}, {membudget.ScopeTotal, "ingress"}} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gantry_ingress_buffer_refusals_total", Help: "Requests refused because their answer did not fit the memory budget, by the limit met.",
			ConstLabels: prometheus.Labels{"limit": sc.name},
		}, func() float64 { return float64(b.Refused(sc.scope)) }))
	}
}
