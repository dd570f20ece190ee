package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/tunnel"
)

// A stateful session's ports: what its live sandbox serves on its own
// loopback is reachable through the ingress (the ports adapter routes a
// request by its Host or path). The service finds the session's route
// (PortRoute: its tenant, whether its ports are public, where its live
// sandbox is), checks a request's credential for it, resumes a paused
// session where traffic resumes it, and dials the port (DialPort): a NATS
// request to the runner holding the live sandbox (queue.PortSubject),
// which answers with its end of a tunnel (package tunnel) to a connection
// its agent made inside the sandbox. Traffic keeps the session (Traffic).

// portRouteTTL is how long an ingress trusts a session's route it read:
// a route that led nowhere (the sandbox moved) is read again at once.
const portRouteTTL = 2 * time.Second

// portOpenWait bounds a connection's set-up by the runner.
const portOpenWait = 20 * time.Second

// trafficEvery is how often a session's traffic extends it, at most, from
// one ingress (more often for a session whose timeout is shorter).
const trafficEvery = 30 * time.Second

// TrafficEvery is how often traffic to the session's ports counts:
// every 30 s, or a third of its timeout if that is shorter, so that a
// long connection keeps it.
func TrafficEvery(r PortRoute) time.Duration {
	return max(time.Second, min(trafficEvery, r.TTL/3))
}

// AutoResumeKey is the session metadata key that keeps an E2B sandbox's
// lifecycle.autoResume ("true": traffic to it while it is paused resumes
// it). A session made otherwise resumes on traffic as on any call.
const AutoResumeKey = "e2b.autoResume"

// E2BTemplateKey is the session metadata key that keeps the template an
// E2B sandbox was made from: it marks a session E2B's API made.
const E2BTemplateKey = "e2b.template"

// PortRoute is what routing a request to a session's ports needs.
type PortRoute struct {
	SessionID string
	// Principal is the session's tenant (no key).
	Principal Principal
	// Public: anyone with the URL may reach the ports; else a request
	// needs the session's traffic token or a key of the tenant.
	Public bool
	// Paused: the session's live state is a checkpoint; Resumes says
	// whether traffic resumes it.
	Paused, Resumes bool
	// TTL is the session's timeout, which traffic renews.
	TTL time.Duration

	live       string
	checkpoint string
}

// ports is the service's part for ports.
type ports struct {
	routes  *expirable.LRU[string, PortRoute]
	touched *expirable.LRU[string, time.Time]

	mu      sync.Mutex
	tunnels *tunnel.Mux
}

func newPorts() *ports {
	return &ports{routes: expirable.NewLRU[string, PortRoute](10000, nil, portRouteTTL),
		touched: expirable.NewLRU[string, time.Time](10000, nil, trafficEvery)}
}

// mux is the ingress's tunnels, made on first use.
func (sb *Sandboxes) mux() (*tunnel.Mux, error) {
	p := sb.ports
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tunnels == nil {
		m, err := tunnel.New(sb.s.nc, tunnel.Config{})
		if err != nil {
			return nil, Unavailable("cannot reach the sandbox: %v", err)
		}
		p.tunnels = m
	}
	return p.tunnels, nil
}

// stopPorts ends every connection to a port.
func (sb *Sandboxes) stopPorts() {
	p := sb.ports
	p.mu.Lock()
	m := p.tunnels
	p.tunnels = nil
	p.mu.Unlock()
	if m != nil {
		m.Close()
	}
}

// PortRoute is the route to a session's ports: NotFound for a session
// that does not exist (or is closed, expired, or not stateful). It is
// cached for a moment: it costs a database query. The request's memory
// (Meter) is the session's tenant's from here on.
func (sb *Sandboxes) PortRoute(ctx context.Context, sessionID string) (PortRoute, error) {
	r, ok := sb.ports.routes.Get(sessionID)
	if !ok {
		var err error
		if r, err = sb.readRoute(ctx, sessionID); err != nil {
			return r, err
		}
	}
	bindMeter(ctx, r.Principal)
	return r, nil
}

func (sb *Sandboxes) readRoute(ctx context.Context, sessionID string) (PortRoute, error) {
	notFound := NotFound("sandbox " + strconv.Quote(sessionID))
	if !jobs.ValidID("ses", sessionID) {
		return PortRoute{}, notFound
	}
	sr, err := sb.s.store.PortRoute(ctx, sessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return PortRoute{}, notFound
	case err != nil:
		return PortRoute{}, err
	case !sr.Stateful:
		return PortRoute{}, notFound
	}
	_, e2b := sr.Metadata[E2BTemplateKey]
	r := PortRoute{SessionID: sessionID, Principal: sr.Principal, Public: sr.PublicTraffic,
		Paused:  sr.Paused || sr.Live == "" && sr.Checkpoint != "",
		Resumes: !e2b || sr.Metadata[AutoResumeKey] == "true",
		TTL:     time.Duration(sr.TTLSeconds) * time.Second, live: sr.Live, checkpoint: sr.Checkpoint}
	sb.ports.routes.Add(sessionID, r)
	return r, nil
}

// CheckTrafficToken checks a session token for the session it was
// presented with, as AuthenticateSessionToken does, without admitting the
// request under the tenant's API rate (a port's traffic has limits of its
// own).
func (sb *Sandboxes) CheckTrafficToken(ctx context.Context, token, sessionID, source string) (Principal, error) {
	return sb.checkSessionToken(ctx, token, sessionID, source)
}

// CheckKey resolves an API key to its tenant, as Authenticate does,
// without admitting the request under the tenant's API rate.
func (s *Service) CheckKey(ctx context.Context, key, source string) (Principal, error) {
	return s.lookupKey(ctx, key, source)
}

// PortError is why a session's port could not be reached.
type PortError struct {
	Code PortErrorCode
	// Limit is the bound a busy sandbox is at.
	Limit   int
	Message string
}

func (e *PortError) Error() string { return e.Message }

// PortErrorCode says what kind of failure a PortError is.
type PortErrorCode string

// The codes.
const (
	// PortClosed: nothing listens on the port (or the session holds no
	// live sandbox: nothing can).
	PortClosed PortErrorCode = "closed"
	// PortForbidden: the port is gantry's own in the sandbox.
	PortForbidden PortErrorCode = "forbidden"
	// PortBusy: the sandbox has as many connections open as it may.
	PortBusy PortErrorCode = "busy"
	// PortPaused: the session is paused, and traffic does not resume it.
	PortPaused PortErrorCode = "paused"
)

// DialPort connects to port on the session's live sandbox, resuming the
// session first if it is paused and traffic resumes it: a connection
// whose bytes are the port's, or a *PortError, or an *Error (the session
// is gone: NotFound). The connection is the caller's to close.
func (sb *Sandboxes) DialPort(ctx context.Context, r PortRoute, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, &PortError{Code: PortClosed, Message: fmt.Sprintf("port %d does not exist", port)}
	}
	m, err := sb.mux()
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		if r.Paused {
			if !r.Resumes {
				return nil, &PortError{Code: PortPaused, Message: "the sandbox is paused"}
			}
			if _, err := sb.Resume(ctx, r.Principal, r.SessionID); err != nil {
				return nil, err
			}
			if r, err = sb.readRoute(ctx, r.SessionID); err != nil {
				return nil, err
			}
			continue
		}
		if r.live == "" {
			return nil, &PortError{Code: PortClosed, Message: "the sandbox holds no live state: nothing listens on its ports"}
		}
		c, err := sb.openPort(ctx, m, r, port)
		var pe *PortError
		stale := errors.Is(err, nats.ErrNoResponders) || errors.As(err, &pe) && pe.Code == "gone"
		if !stale {
			return c, err
		}
		// The runner that held the live sandbox is gone, or another
		// sandbox took over: read where it is now, once.
		sb.ports.routes.Remove(r.SessionID)
		if try > 0 {
			return nil, &PortError{Code: PortClosed, Message: "the sandbox's live state was lost (its runner stopped): nothing listens on its ports"}
		}
		if r, err = sb.readRoute(ctx, r.SessionID); err != nil {
			return nil, err
		}
	}
}

// openPort asks the runner holding the live sandbox for a connection.
func (sb *Sandboxes) openPort(ctx context.Context, m *tunnel.Mux, r PortRoute, port int) (net.Conn, error) {
	c, err := m.NewConn()
	if errors.Is(err, tunnel.ErrTooMany) {
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: 1,
			Message: "this ingress has as many connections to sandboxes open as it may"}
	}
	if err != nil {
		return nil, Unavailable("cannot reach the sandbox: %v", err)
	}
	body, _ := json.Marshal(queue.PortOpen{Port: port, TenantID: r.Principal.TenantID, Stream: c.Subject(), KeepMS: r.TTL.Milliseconds()})
	ctx, cancel := context.WithTimeout(ctx, portOpenWait)
	defer cancel()
	msg, err := sb.s.nc.RequestWithContext(ctx, queue.PortSubject(r.SessionID, r.live), body)
	if err != nil {
		c.Close()
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return nil, err
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
			return nil, &Error{Status: http.StatusGatewayTimeout, Code: CodeUnavailable,
				Message: "the sandbox did not answer within " + portOpenWait.String()}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		return nil, Unavailable("cannot reach the sandbox: %v", err)
	}
	var reply queue.PortReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil || reply.Error == nil && reply.Stream == "" {
		c.Close()
		return nil, Unavailable("the sandbox's runner answered something malformed")
	}
	if e := reply.Error; e != nil {
		c.Close()
		switch e.Code {
		case queue.PortClosed:
			return nil, &PortError{Code: PortClosed, Message: e.Message}
		case queue.PortForbidden:
			return nil, &PortError{Code: PortForbidden, Message: e.Message}
		case queue.PortBusy:
			return nil, &PortError{Code: PortBusy, Limit: e.Limit, Message: e.Message}
		case queue.PortGone:
			return nil, &PortError{Code: "gone", Message: e.Message}
		}
		return nil, Unavailable("the sandbox's port could not be reached: %s", e.Message)
	}
	c.Connect(reply.Stream)
	return c, nil
}

// Traffic records that the session's ports were used: the session is
// kept its timeout from now, as after a job (never its tokens' deadline).
// One ingress writes it at most every TrafficEvery(r).
func (sb *Sandboxes) Traffic(ctx context.Context, r PortRoute) {
	if last, ok := sb.ports.touched.Get(r.SessionID); ok && time.Since(last) < TrafficEvery(r) {
		return
	}
	sb.ports.touched.Add(r.SessionID, time.Now())
	if _, err := sb.s.store.TouchSession(ctx, r.Principal.TenantID, r.SessionID); err != nil && !errors.Is(err, store.ErrNotFound) {
		sb.s.log.Warn("extend a session for its traffic", "session_id", r.SessionID, "err", err)
	}
}
