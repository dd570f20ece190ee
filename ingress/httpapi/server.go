// Package httpapi is gantry's HTTP API (/v1/...), health, readiness,
// metrics and the OpenAPI document: an adapter over the service
// (ingress/service). One route table (routes.go) drives both the mux and
// the document; each handler reads its request, makes one call of the
// service and writes the answer, and every error becomes the API's error
// body in one place (WriteError). It never reaches the store.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/tracing"
)

// Config is the HTTP API's own configuration.
type Config struct {
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
	// Chat answers POST /v1/agent/chat/completions (nil: no model is
	// configured, and the route answers 503 saying so).
	Chat Chat
	// MCP serves /mcp, behind the API's key check (nil: 404). It finds
	// the caller with service.PrincipalFrom.
	MCP http.Handler
	// Compat are the compatible APIs by name (sandboxfusion, judge0,
	// piston), each served at /compat/<name>/... with that prefix stripped.
	// They authenticate their own callers (package compat) and are not
	// part of the document.
	Compat map[string]http.Handler
	// Document is the OpenAPI document served at /openapi.json (what
	// OpenAPI writes, as committed).
	Document []byte
	// Tracer makes a span of each API request (public routes aside: health,
	// readiness, metrics, the document). nil: none.
	Tracer trace.TracerProvider
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 10 << 20
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = time.Minute
	}
	if c.MaxWait == 0 {
		c.MaxWait = 60 * time.Second
	}
	return c
}

// Server serves the HTTP API over the service.
type Server struct {
	cfg     Config
	log     *slog.Logger
	svc     *service.Service
	metrics *metrics
	mux     *http.ServeMux
	// metricsHandler serves GET /metrics from the registry.
	metricsHandler http.Handler
	tracer         trace.Tracer
}

// New makes the HTTP API over svc. Its metrics are registered with reg,
// which GET /metrics serves.
func New(cfg Config, log *slog.Logger, svc *service.Service, reg *prometheus.Registry) *Server {
	s := &Server{cfg: cfg.WithDefaults(), log: log, svc: svc, metrics: newMetrics(reg),
		tracer: tracing.Tracer(cfg.Tracer, "github.com/gantryhq/gantry/ingress/httpapi")}
	s.metricsHandler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	s.routes()
	return s
}

// Handler is the API's HTTP handler.
func (s *Server) Handler() http.Handler { return s.recoverer(BodyDeadline(s.cfg.BodyTimeout, s.mux)) }

// routes builds the mux from the route table.
func (s *Server) routes() {
	m := http.NewServeMux()
	for _, rt := range s.routeTable() {
		pattern := rt.Method + " " + rt.Path
		if rt.Public {
			m.Handle(pattern, rt.serve)
			continue
		}
		m.Handle(pattern, s.instrument(pattern, s.authenticated(rt.handle)))
	}
	if s.cfg.MCP != nil {
		m.Handle("/mcp", s.instrument("/mcp", s.authenticated(func(w http.ResponseWriter, r *http.Request, p service.Principal) error {
			s.cfg.MCP.ServeHTTP(w, r.WithContext(service.WithPrincipal(r.Context(), p)))
			return nil
		})))
	}
	for name, h := range s.cfg.Compat {
		base := compat.Prefix + name
		h := http.StripPrefix(base, h)
		// The route label is the API's name: a key sent in the path was
		// taken out before (compat.PathKeys), and never names a series.
		m.Handle(base+"/", s.instrument(base, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(compat.Arrived(r.Context(), s.keySource(r))))
		})))
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, service.NotFound("route "+r.Method+" "+r.URL.Path))
	})
	s.mux = m
}

// apiHandler serves an authenticated request of the tenant p. An error it
// returns becomes the API's error body (WriteError).
type apiHandler func(w http.ResponseWriter, r *http.Request, p service.Principal) error

// authenticated resolves the bearer key to a tenant before calling h, and
// turns h's error into the API error body.
func (s *Server) authenticated(h apiHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			key = ""
		}
		p, err := s.svc.Authenticate(r.Context(), strings.TrimSpace(key), s.keySource(r))
		if err == nil {
			trace.SpanFromContext(r.Context()).SetAttributes(tracing.TenantID.String(p.TenantID))
		}
		if err != nil {
			var e *service.Error
			if errors.As(err, &e) && e.Status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="gantry"`)
			}
			s.writeError(w, r, err)
			return
		}
		if err := h(w, r, p); err != nil {
			s.writeError(w, r, err)
		}
	})
}

func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				s.writeError(w, r, errors.New("panic"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	WriteError(w, r, s.log, err)
}

// WriteError answers a request with err as the API's error body
// ({"error": {...}}, service.ToError) and its status, with Retry-After
// when the error has one. An internal error is logged, not shown.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e, internal := service.ToError(err)
	if internal {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	WriteJSON(w, e.Status, errorBody{Error: *e})
}

// WriteJSON answers with v as JSON (HTML characters not escaped).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// serveHealth answers GET /healthz: the process is up.
func serveHealth(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, health{Status: "ok"})
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	status := http.StatusOK
	out := map[string]string{}
	for name, err := range s.svc.Ready(ctx) {
		if err != nil {
			out[name] = "error: " + err.Error()
			status = http.StatusServiceUnavailable
		} else {
			out[name] = "ok"
		}
	}
	WriteJSON(w, status, readiness{Ready: status == http.StatusOK, Checks: out})
}
