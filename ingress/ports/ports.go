// Package ports makes what a stateful session's live sandbox serves on its
// ports reachable at URLs, as E2B's sandboxes are (getHost): an adapter
// over the service, in front of every other handler of the ingress.
//
// Two forms name a port:
//   - a host, PORT-SESSIONID.DOMAIN (DOMAIN is GANTRY_SANDBOX_DOMAIN, whose
//     wildcard resolves to the ingresses; "localhost:PORT" in dev, where
//     every *.localhost is this machine), answered in E2B's words. Its
//     traffic is public unless the session was made without
//     (allowPublicTraffic false, public_traffic false): then a request
//     needs the session's traffic token in e2b-traffic-access-token (or,
//     natively, an API key of the tenant in Authorization);
//   - a path of the API, /v1/sessions/{id}/ports/{port}/…, which always
//     needs an API key of the session's tenant, for clients without
//     wildcard DNS; its answers carry a sandboxing Content-Security-Policy,
//     since they come from the sandbox but are served in the API's origin.
//
// Each request is proxied as HTTP/1.1 (responses streamed as they come,
// WebSocket and other upgrades spliced both ways) over a connection the
// service dials (service.Sandboxes.DialPort): a tunnel through NATS to the
// runner holding the sandbox, and from there a stream to a connection its
// agent made to the port inside the sandbox. Nothing but the port's HTTP
// is reachable: the request is parsed here, gantry's own port in the
// sandbox is refused, and the session named is the only one dialled.
// Requests and connections are bounded per sandbox and per tenant
// (limits.go), and each holds the ingress's memory it may use from the
// tenant's share (service.Hold); traffic keeps the session alive.
package ports

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/httpapi"
	"github.com/gantryhq/gantry/ingress/service"
)

// TrafficTokenHeader carries a session's traffic token (E2B's
// trafficAccessToken).
const TrafficTokenHeader = "e2b-traffic-access-token"

// E2B's ports its SDKs name in a sandbox's host: envd's and the code
// interpreter's, which are gantry's E2B API, not the sandbox's.
const (
	envdPort        = 49983
	interpreterPort = 49999
)

// Config bounds the traffic to sandboxes' ports.
type Config struct {
	// Domain is the sandboxes' domain: a port's host is PORT-ID.Domain
	// ("": the path form only).
	Domain string
	// SandboxConns and TenantConns bound the requests in progress at
	// once on this ingress (a WebSocket counts while it is open) to one
	// sandbox and to one tenant's sandboxes; SandboxRate and TenantRate
	// bound their requests per second.
	SandboxConns, TenantConns int
	SandboxRate, TenantRate   float64
	// TrustedProxies are the load balancers whose X-Forwarded-For names a
	// request's source.
	TrustedProxies []netip.Prefix
	// E2B serves E2B's API (paths relative to /compat/e2b), for hosts
	// naming envd's or the code interpreter's port (nil: those are ports
	// like any other).
	E2B http.Handler
}

// WithDefaults fills in zero fields: 64 connections and 100 requests a
// second to a sandbox, 256 and 500 to a tenant's.
func (c Config) WithDefaults() Config {
	if c.SandboxConns <= 0 {
		c.SandboxConns = 64
	}
	if c.TenantConns <= 0 {
		c.TenantConns = 256
	}
	if c.SandboxRate <= 0 {
		c.SandboxRate = 100
	}
	if c.TenantRate <= 0 {
		c.TenantRate = 500
	}
	return c
}

// holdBytes is what a request in progress may hold of the ingress's
// memory: a tunnel's window and the proxy's buffers.
const holdBytes = 192 << 10

// Server serves the sandboxes' ports.
type Server struct {
	cfg       Config
	log       *slog.Logger
	svc       *service.Service
	sandboxes *service.Sandboxes
	limits    *limits
	proxy     *httputil.ReverseProxy
	requests  *prometheus.CounterVec
}

// New makes the ports' server over svc; its metrics are registered with
// reg.
func New(cfg Config, log *slog.Logger, svc *service.Service, reg prometheus.Registerer) *Server {
	cfg = cfg.WithDefaults()
	s := &Server{cfg: cfg, log: log.With("component", "ports"), svc: svc, sandboxes: svc.Sandboxes(), limits: newLimits(cfg),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_port_requests_total",
			Help: "Requests to sandboxes' ports, by the form that named the port (host, path) and outcome (proxied, not_found, closed, denied, limited, paused, failed, invalid).",
		}, []string{"form", "outcome"})}
	transport := &http.Transport{
		DialContext:            s.dial,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        30 * time.Second,
		DisableCompression:     true,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
	s.proxy = &httputil.ReverseProxy{Rewrite: s.rewrite, Transport: transport, FlushInterval: -1,
		ModifyResponse: s.modifyResponse, ErrorHandler: s.proxyError}
	if reg != nil {
		reg.MustRegister(s.requests, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gantry_port_requests_open", Help: "Requests to sandboxes' ports in progress on this ingress (WebSockets included).",
		}, func() float64 { _, n := s.limits.open(); return float64(n) }))
	}
	return s
}

// Domain is the sandboxes' domain ("" for none).
func (s *Server) Domain() string { return s.cfg.Domain }

// Wrap serves the requests for sandboxes' ports (by host or path) and
// hands next the rest.
func (s *Server) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t, ok, err := hostTarget(r.Host, s.cfg.Domain); ok {
			s.metered(w, r, func(w http.ResponseWriter, r *http.Request) { s.serveHost(w, r, t, err) })
			return
		}
		if t, ok, err := pathTarget(r.URL.EscapedPath()); ok {
			s.metered(w, r, func(w http.ResponseWriter, r *http.Request) { s.servePath(w, r, t, err) })
			return
		}
		next.ServeHTTP(w, r)
	})
}

// metered serves h with a meter of the ingress's memory, as the API's
// requests have.
func (s *Server) metered(w http.ResponseWriter, r *http.Request, h http.HandlerFunc) {
	ctx, end := s.svc.Meter(r.Context())
	defer end()
	h(w, r.WithContext(ctx))
}

// proxied is a request on its way to a port.
type proxied struct {
	target target
	route  service.PortRoute
	// stripAuth: Authorization was gantry's credential, not the app's.
	stripAuth bool
}

type proxiedKey struct{}

// serveHost serves a request for PORT-ID.DOMAIN.
func (s *Server) serveHost(w http.ResponseWriter, r *http.Request, t target, err error) {
	if err != nil {
		s.requests.WithLabelValues("host", "invalid").Inc()
		msg := "Invalid host"
		if errors.Is(err, errBadPort) {
			msg = "Invalid sandbox port"
		}
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	source := httpapi.ClientAddr(r, s.cfg.TrustedProxies)
	if s.cfg.E2B != nil && (t.port == envdPort || t.port == interpreterPort) {
		s.serveE2B(w, r, t, source)
		return
	}
	route, err := s.sandboxes.PortRoute(ctx, t.sessionID)
	if err != nil {
		s.hostError(w, r, t, err)
		return
	}
	p := &proxied{target: t, route: route}
	if !route.Public {
		if a, ok := s.checkTraffic(ctx, r, p, source); !ok {
			s.requests.WithLabelValues("host", "denied").Inc()
			a.write(w, r)
			return
		}
	}
	s.forward(w, r, p)
}

// checkTraffic checks the credential of a request to a port whose traffic
// is not public: the session's traffic token, or an API key of its tenant.
func (s *Server) checkTraffic(ctx context.Context, r *http.Request, p *proxied, source string) (answer, bool) {
	sid := p.target.sessionID
	if token := strings.TrimSpace(r.Header.Get(TrafficTokenHeader)); token != "" {
		got, err := s.sandboxes.CheckTrafficToken(ctx, token, sid, source)
		if err == nil && got.TenantID == p.route.Principal.TenantID {
			return answer{}, true
		}
		return s.credentialError(sid, err), false
	}
	if key, ok := bearer(r); ok {
		got, err := s.svc.CheckKey(ctx, key, source)
		if err == nil && got.TenantID == p.route.Principal.TenantID {
			p.stripAuth = true
			return answer{}, true
		}
		return s.credentialError(sid, err), false
	}
	return tokenMissing(sid), false
}

// credentialError is the answer to a credential that does not open the
// sandbox: 429 for a source throttled for bad ones, else E2B's 403.
func (s *Server) credentialError(sid string, err error) answer {
	var se *service.Error
	if errors.As(err, &se) && se.Code == service.CodeRateLimited {
		return failed(sid, se.Status, se.Message, se.RetryAfter)
	}
	if errors.As(err, &se) && se.Code == service.CodeUnavailable {
		return failed(sid, se.Status, se.Message, se.RetryAfter)
	}
	return tokenInvalid(sid)
}

func bearer(r *http.Request) (string, bool) {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	key = strings.TrimSpace(key)
	return key, ok && key != ""
}

// serveE2B serves a host naming envd's or the code interpreter's port:
// E2B's in-sandbox API, as E2B_SANDBOX_URL does with the sandbox and port
// in headers.
func (s *Server) serveE2B(w http.ResponseWriter, r *http.Request, t target, source string) {
	s.requests.WithLabelValues("host", "e2b").Inc()
	out := r.Clone(compat.Arrived(r.Context(), source))
	out.Header.Set("E2b-Sandbox-Id", t.sessionID)
	out.Header.Set("E2b-Sandbox-Port", strconv.Itoa(t.port))
	out.URL.Path = "/sandbox" + r.URL.Path
	if r.URL.RawPath != "" {
		out.URL.RawPath = "/sandbox" + r.URL.RawPath
	}
	s.cfg.E2B.ServeHTTP(w, out)
}

// servePath serves a request for /v1/sessions/{id}/ports/{port}/…: the
// caller's API key, for a session of its tenant.
func (s *Server) servePath(w http.ResponseWriter, r *http.Request, t target, err error) {
	ctx := r.Context()
	fail := func(outcome string, err error) {
		s.requests.WithLabelValues("path", outcome).Inc()
		var se *service.Error
		if errors.As(err, &se) && se.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gantry"`)
		}
		httpapi.WriteError(w, r, s.log, err)
	}
	key, _ := bearer(r)
	p, aerr := s.svc.CheckKey(ctx, key, httpapi.ClientAddr(r, s.cfg.TrustedProxies))
	switch {
	case aerr != nil:
		fail("denied", aerr)
		return
	case errors.Is(err, errBadPort):
		fail("invalid", service.BadRequest("port", "must be a port number, 1 to 65535"))
		return
	case err != nil:
		fail("not_found", service.NotFound("session"))
		return
	}
	route, err := s.sandboxes.PortRoute(ctx, t.sessionID)
	if err == nil && route.Principal.TenantID != p.TenantID {
		err = service.NotFound("sandbox " + strconv.Quote(t.sessionID))
	}
	if err != nil {
		fail("not_found", err)
		return
	}
	s.forward(w, r, &proxied{target: t, route: route, stripAuth: true})
}

// forward proxies the request to its port, within the limits.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, p *proxied) {
	ctx := r.Context()
	sid, port := p.target.sessionID, p.target.port
	if service.ReservedPort(port) {
		s.refuse(w, r, p, "denied", portNotAllowed(sid, port),
			service.BadRequest("port", "port %d is gantry's own in the sandbox (its egress proxy): it cannot be reached", port))
		return
	}
	done, ref := s.limits.admit(sid, p.route.Principal.TenantID)
	if ref != nil {
		s.refuse(w, r, p, "limited", ref.answer(sid), ref.error())
		return
	}
	defer done()
	release, err := service.Hold(ctx, holdBytes)
	if err != nil {
		release()
		e, _ := service.ToError(err)
		s.refuse(w, r, p, "limited", failed(sid, e.Status, e.Message, e.RetryAfter), err)
		return
	}
	defer release()
	// Traffic keeps the session, for as long as it goes on.
	s.sandboxes.Traffic(ctx, p.route)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(service.TrafficEvery(p.route))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				s.sandboxes.Traffic(context.WithoutCancel(ctx), p.route)
			}
		}
	}()
	s.proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, proxiedKey{}, p)))
}

// refuse answers a request gantry does not forward: in E2B's words by
// host, as the API's error by path.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, p *proxied, outcome string, a answer, err error) {
	if p.target.byPath {
		s.requests.WithLabelValues("path", outcome).Inc()
		httpapi.WriteError(w, r, s.log, err)
		return
	}
	s.requests.WithLabelValues("host", outcome).Inc()
	a.write(w, r)
}

func (ref *refusal) answer(sid string) answer {
	if ref.conns {
		return tooManyConnections(sid, int(ref.limit))
	}
	return tooManyRequests(sid, ref.limit, int(math.Ceil(ref.wait.Seconds())))
}

func (ref *refusal) error() error {
	whose := "this tenant's sandboxes"
	if ref.sandbox {
		whose = "the sandbox"
	}
	if ref.conns {
		return &service.Error{Status: http.StatusTooManyRequests, Code: service.CodeRateLimited, RetryAfter: 1,
			Message: fmt.Sprintf("%s may have %g requests in progress at once on this ingress", whose, ref.limit)}
	}
	return &service.Error{Status: http.StatusTooManyRequests, Code: service.CodeRateLimited, RetryAfter: int(math.Ceil(ref.wait.Seconds())),
		Message: fmt.Sprintf("%s may get %g requests a second on this ingress", whose, ref.limit)}
}

// hostError answers a host's request whose session's route failed.
func (s *Server) hostError(w http.ResponseWriter, r *http.Request, t target, err error) {
	var se *service.Error
	switch {
	case errors.As(err, &se) && se.Code == service.CodeNotFound:
		s.requests.WithLabelValues("host", "not_found").Inc()
		notFound(t.sessionID).write(w, r)
	default:
		s.requests.WithLabelValues("host", "failed").Inc()
		e, internal := service.ToError(err)
		if internal {
			s.log.Error("route a port request", "session_id", t.sessionID, "err", err)
		}
		failed(t.sessionID, e.Status, e.Message, e.RetryAfter).write(w, r)
	}
}

// dial connects to the port of the request being proxied (its context
// carries it).
func (s *Server) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	p, ok := ctx.Value(proxiedKey{}).(*proxied)
	if !ok {
		return nil, errors.New("ports: a dial without its request")
	}
	return s.sandboxes.DialPort(ctx, p.route, p.target.port)
}

// rewrite makes the request the port gets: its own Host (as E2B's proxy
// passes it), the path after the prefix for the path form, X-Forwarded-*,
// and none of gantry's credentials.
func (s *Server) rewrite(pr *httputil.ProxyRequest) {
	p := pr.In.Context().Value(proxiedKey{}).(*proxied)
	t := p.target
	pr.Out.URL.Scheme = "http"
	// The connection pool's key: never resolved (dial finds the port).
	pr.Out.URL.Host = t.sessionID + "-" + strconv.Itoa(t.port) + ".sandbox"
	pr.Out.Host = pr.In.Host
	if t.byPath {
		if u, err := url.Parse(t.path); err == nil {
			pr.Out.URL.Path, pr.Out.URL.RawPath = u.Path, u.RawPath
		}
		pr.Out.Header.Set("X-Forwarded-Prefix", t.prefix)
	}
	pr.SetXForwarded()
	pr.Out.Header.Del(TrafficTokenHeader)
	if p.stripAuth {
		pr.Out.Header.Del("Authorization")
	}
}

// modifyResponse counts a response, and keeps what comes by the path form
// out of the API's origin: it is the sandbox's, not gantry's.
func (s *Server) modifyResponse(resp *http.Response) error {
	p := resp.Request.Context().Value(proxiedKey{}).(*proxied)
	form := "host"
	if p.target.byPath {
		form = "path"
		resp.Header.Set("Content-Security-Policy", "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads")
	}
	s.requests.WithLabelValues(form, "proxied").Inc()
	return nil
}

// proxyError answers a request whose port could not be reached.
func (s *Server) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	p := r.Context().Value(proxiedKey{}).(*proxied)
	sid, port := p.target.sessionID, p.target.port
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away
	}
	var pe *service.PortError
	var se *service.Error
	switch {
	case errors.As(err, &pe) && pe.Code == service.PortClosed:
		s.refuse(w, r, p, "closed", portClosed(sid, port), &service.Error{Status: http.StatusBadGateway, Code: service.CodeUpstream,
			Message: fmt.Sprintf("port %d of the sandbox is not open: %s", port, pe.Message)})
	case errors.As(err, &pe) && pe.Code == service.PortPaused:
		s.refuse(w, r, p, "paused", paused(sid), &service.Error{Status: http.StatusConflict, Code: service.CodeConflict,
			Message: "the session is paused: resume it (POST /v1/sessions/{id}/resume)"})
	case errors.As(err, &pe) && pe.Code == service.PortBusy:
		s.refuse(w, r, p, "limited", tooManyConnections(sid, pe.Limit), &service.Error{Status: http.StatusTooManyRequests,
			Code: service.CodeRateLimited, RetryAfter: 1, Message: pe.Message})
	case errors.As(err, &pe) && pe.Code == service.PortForbidden:
		s.refuse(w, r, p, "denied", portNotAllowed(sid, port), service.BadRequest("port", "%s", pe.Message))
	case errors.As(err, &se) && se.Code == service.CodeNotFound:
		s.refuse(w, r, p, "not_found", notFound(sid), se)
	case errors.As(err, &se):
		s.refuse(w, r, p, "failed", failed(sid, se.Status, se.Message, se.RetryAfter), se)
	default:
		s.log.Warn("proxy to a sandbox's port", "session_id", sid, "port", port, "err", err)
		s.refuse(w, r, p, "failed", failed(sid, http.StatusBadGateway, "The sandbox's port did not answer", 0),
			&service.Error{Status: http.StatusBadGateway, Code: service.CodeUpstream, Message: fmt.Sprintf("port %d of the sandbox did not answer", port)})
	}
}
