// Package ingress is gantry's front door: it authenticates requests,
// validates them, records jobs in the store, publishes them on JetStream
// and answers; it never runs code. Any number of ingress replicas can serve
// the same gantry.
//
// It is made of parts, each in a package of its own:
//
//   - service: the operations (jobs, sessions and their workspaces,
//     skills, code mode, settings, webhooks) as one type over a narrow
//     store interface, and Maintenance, the background work every replica
//     runs beside serving;
//   - httpapi: the HTTP API (/v1/...), health, readiness, metrics and the
//     OpenAPI document, an adapter over the service driven by one route
//     table;
//   - mcpapi: MCP at /mcp (tools, tasks, a prompt, resources), an adapter
//     over the service mounted behind the HTTP API's key check;
//   - compat: the compatible APIs (SandboxFusion, Judge0, Piston, E2B), each an
//     adapter over the service in a package of its own, and the key forms
//     their clients send;
//   - openapi: the reflector of JSON Schemas from Go types and the writer
//     of the document, which httpapi's route table and prose feed;
//   - contracttest: the document's check of real traffic, for tests.
//
// New puts the service and its adapters together as one Server; an
// adapter translates a request into calls of the service and never
// reaches the store.
package ingress

import (
	"context"
	_ "embed"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/compat/e2b"
	"github.com/gantryhq/gantry/ingress/compat/judge0"
	"github.com/gantryhq/gantry/ingress/compat/piston"
	"github.com/gantryhq/gantry/ingress/compat/sandboxfusion"
	"github.com/gantryhq/gantry/ingress/httpapi"
	"github.com/gantryhq/gantry/ingress/mcpapi"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/webhook"
)

//go:generate go run ./openapigen

// openapiJSON is the OpenAPI 3.1 description of the HTTP API, served at
// /openapi.json and read by sdk/gen and contracttest. It is what
// httpapi.OpenAPI writes (go generate ./ingress, or make openapi);
// TestOpenAPIUpToDate fails when the committed file is not.
//
//go:embed openapi.json
var openapiJSON []byte

// Config is the ingress's configuration: the service's, and what its
// adapters (httpapi.Config, mcpapi.Config) take besides.
type Config struct {
	service.Config
	// MaxBodyBytes caps request bodies (413 beyond).
	MaxBodyBytes int64
	// BodyTimeout is how long a request's body may take to arrive (408
	// beyond). Negative: no limit.
	BodyTimeout time.Duration
	// MaxWait caps ?wait= on GET /v1/jobs/{id}.
	MaxWait time.Duration
	// TrustedProxies are the load balancers whose X-Forwarded-For names a
	// request's source (for throttling invalid keys); none by default.
	TrustedProxies []netip.Prefix
	// TaskInlineWait is how long execute_code waits for its job before it
	// answers an MCP client of the tasks extension with a task instead.
	TaskInlineWait time.Duration
	// Chat answers POST /v1/agent/chat/completions (nil: no model is
	// configured, and the route answers 503 saying so).
	Chat httpapi.Chat
}

// Check is a named readiness check.
type Check = service.Check

// Server is an ingress: the service with the HTTP API and MCP over it. Its
// background work is the service's Maintenance.
type Server struct {
	svc  *service.Service
	http *httpapi.Server
}

// New makes an ingress over the store, the object store and NATS; its
// metrics are registered with reg (and served at /metrics). Start must be
// called before it serves jobs.
func New(cfg Config, log *slog.Logger, st service.Store, blobs service.Blobs, nc *nats.Conn, reg *prometheus.Registry, extraChecks ...Check) (*Server, error) {
	svc, err := service.New(cfg.Config, log, st, blobs, nc, reg, extraChecks...)
	if err != nil {
		return nil, err
	}
	mcp := mcpapi.New(mcpapi.Config{Version: cfg.Version, MaxBodyBytes: cfg.MaxBodyBytes, TaskInlineWait: cfg.TaskInlineWait, Tracer: cfg.Tracer}, log, svc)
	api := httpapi.New(httpapi.Config{
		MaxBodyBytes: cfg.MaxBodyBytes, BodyTimeout: cfg.BodyTimeout, MaxWait: cfg.MaxWait, TrustedProxies: cfg.TrustedProxies,
		Chat: cfg.Chat, MCP: mcp, Document: openapiJSON, Tracer: cfg.Tracer,
		Compat: map[string]http.Handler{
			"sandboxfusion": sandboxfusion.New(sandboxfusion.Config{Config: compat.Config{MaxBodyBytes: cfg.MaxBodyBytes}}, log, svc).Handler(),
			"judge0":        judge0.New(compat.Config{MaxBodyBytes: cfg.MaxBodyBytes}, log, svc).Handler(),
			"piston":        piston.New(compat.Config{MaxBodyBytes: cfg.MaxBodyBytes}, log, svc).Handler(),
			"e2b":           e2b.New(e2b.Config{Config: compat.Config{MaxBodyBytes: cfg.MaxBodyBytes}}, log, svc).Handler(),
		},
	}, log, svc, reg)
	return &Server{svc: svc, http: api}, nil
}

// Start creates the job stream if needed, stores the built-in skills and
// subscribes to job status events and key revocations. It returns once the
// server is ready to serve.
func (s *Server) Start(ctx context.Context) error { return s.svc.Start(ctx) }

// Stop releases the server's subscriptions.
func (s *Server) Stop() { s.svc.Stop() }

// Handler is the server's HTTP handler: the API, with MCP at /mcp and the
// compatible APIs at /compat/. A key sent in a compatible API's path is
// taken out of the request before anything else sees it. Every request
// carries a meter of the memory its answer may hold (service.Meter).
func (s *Server) Handler() http.Handler {
	next := compat.PathKeys(s.http.Handler())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, end := s.svc.Meter(r.Context())
		defer end()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Webhooks is the server's webhook dispatcher, for the Maintenance to run
// its deliveries (nil: webhooks are off).
func (s *Server) Webhooks() *webhook.Dispatcher { return s.svc.Webhooks() }
