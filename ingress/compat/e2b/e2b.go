// Package e2b is E2B's API over gantry's service, so that E2B's own SDKs
// (npm e2b and @e2b/code-interpreter, and the Python ones) run against
// gantry unchanged, pointed at it by E2B_API_URL (this control plane, at
// /compat/e2b), E2B_SANDBOX_URL (the in-sandbox API, package sandbox, at
// /compat/e2b/sandbox) and E2B_API_KEY (a gantry API key).
//
// An E2B sandbox is a gantry stateful session: its id is the session's,
// its timeout the session's TTL, its metadata the session's, its code and
// history the session's jobs; its template is one of gantry's
// environments (E2B's base and code-interpreter templates are the default
// one). Creating one starts its live sandbox at once, as E2B does, and
// answers the sandbox's access token (service.Sandboxes.SessionToken),
// which every in-sandbox call carries. Pausing, resuming, snapshots and
// forks are the session's live state's (livestate.go): where the runners
// keep live state in memory only, they answer 501. What gantry does not
// offer (volumes, E2B's secrets, building templates, metrics, logs)
// answers with E2B's error body ({"code": status, "message": why}) and
// 501.
package e2b

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/compat/e2b/sandbox"
	"github.com/gantryhq/gantry/ingress/service"
)

// Config is the E2B API's.
type Config struct {
	compat.Config
}

// Server serves E2B's control plane and, below /sandbox, its in-sandbox
// API.
type Server struct {
	cfg Config
	log *slog.Logger
	svc *service.Service
	// sandboxes are the sessions' live sandboxes (svc.Sandboxes()).
	sandboxes *service.Sandboxes
	mux       *http.ServeMux
	sandbox   *sandbox.Server
}

// envdVersion is the envd version gantry's sandboxes report: the SDKs
// gate features on it. 0.5.7 has what gantry serves (stdin closing, raw
// uploads) and not what it does not (file metadata, watch entries).
const envdVersion = "0.5.7"

// New makes E2B's API over svc.
func New(cfg Config, log *slog.Logger, svc *service.Service) *Server {
	s := &Server{cfg: Config{Config: cfg.WithDefaults()}, log: log.With("api", "e2b"), svc: svc, sandboxes: svc.Sandboxes(), mux: http.NewServeMux()}
	s.sandbox = sandbox.New(s.log, svc)
	s.mux.Handle("/sandbox/", http.StripPrefix("/sandbox", s.sandbox))
	route := func(pattern string, h handler) { s.mux.Handle(pattern, s.authenticated(h)) }
	route("POST /sandboxes", s.create)
	route("POST /v2/sandboxes", s.create)
	route("GET /sandboxes", s.listV1)
	route("GET /v2/sandboxes", s.list)
	route("GET /sandboxes/{id}", s.get)
	route("DELETE /sandboxes/{id}", s.kill)
	route("POST /sandboxes/{id}/timeout", s.setTimeout)
	route("POST /sandboxes/{id}/refreshes", s.refresh)
	route("POST /sandboxes/{id}/connect", s.connect)
	route("POST /v2/sandboxes/{id}/connect", s.connect)
	route("POST /sandboxes/{id}/resume", s.connect)
	route("PUT /sandboxes/{id}/network", s.updateNetwork)
	route("POST /sandboxes/{id}/network", s.updateNetwork)
	route("POST /sandboxes/{id}/pause", s.pause)
	route("POST /sandboxes/{id}/snapshots", s.createSnapshot)
	route("GET /snapshots", s.listSnapshots)
	route("DELETE /templates/{id}", s.deleteTemplate)
	route("POST /sandboxes/{id}/fork", s.fork)
	notOffered := map[string]string{
		"GET /sandboxes/{id}/metrics": "sandbox metrics are not offered by gantry's E2B API (see gantry's /metrics and GET /v1/usage)",
		"GET /sandboxes/metrics":      "sandbox metrics are not offered by gantry's E2B API (see gantry's /metrics and GET /v1/usage)",
		"GET /sandboxes/{id}/logs":    "sandbox logs are not offered by gantry's E2B API: each code run is a job of the session, in gantry's history",
		"GET /v2/sandboxes/{id}/logs": "sandbox logs are not offered by gantry's E2B API: each code run is a job of the session, in gantry's history",
		"/templates":                  noTemplates,
		"/templates/":                 noTemplates,
		"/v2/templates":               noTemplates,
		"/v2/templates/":              noTemplates,
		"/v3/templates":               noTemplates,
		"/v3/templates/":              noTemplates,
		"/volumes":                    "volumes are not offered by gantry: a sandbox's files are its session's workspace",
		"/volumes/":                   "volumes are not offered by gantry: a sandbox's files are its session's workspace",
		"/secrets":                    "E2B's secrets are not offered by gantry",
		"/secrets/":                   "E2B's secrets are not offered by gantry",
	}
	for pattern, why := range notOffered {
		s.mux.Handle(pattern, s.authenticated(func(http.ResponseWriter, *http.Request, service.Principal) error {
			return notImplemented(why)
		}))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "gantry's E2B API does not serve "+r.Method+" "+r.URL.Path)
	})
	return s
}

// noTemplates is why template calls are refused.
const noTemplates = "gantry does not build templates: an operator registers environments (gantry environments add), and a sandbox names one as its template (or a snapshot, by its id or name)"

// Handler is E2B's API, its paths relative to /compat/e2b.
func (s *Server) Handler() http.Handler { return s.mux }

// handler serves an authenticated control-plane call.
type handler func(w http.ResponseWriter, r *http.Request, p service.Principal) error

// authenticated admits the call under its API key: X-API-Key, as E2B's
// SDKs send it, or Authorization: Bearer.
func (s *Server) authenticated(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimSpace(r.Header.Get("X-API-Key"))
		if key == "" {
			key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			key = strings.TrimSpace(key)
		}
		p, err := s.svc.Authenticate(r.Context(), key, compat.Source(r.Context()))
		if err == nil {
			err = h(w, r, p)
		}
		if err != nil {
			s.answer(w, err)
		}
	})
}

// apiError is an error answered in E2B's words: a status and a message.
type apiError struct {
	status  int
	message string
}

func (e *apiError) Error() string { return e.message }

func notImplemented(why string) error { return &apiError{http.StatusNotImplemented, why} }

// answer words err as E2B's API does: {"code": status, "message": …}.
func (s *Server) answer(w http.ResponseWriter, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeError(w, ae.status, ae.message)
		return
	}
	e := compat.ServiceError(w, s.log, err)
	if e == nil {
		return
	}
	writeError(w, e.Status, e.Message)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	compat.WriteJSON(w, status, struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{status, msg})
}
