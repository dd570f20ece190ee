package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/queue"
)

// Ports: the ingress reaches a stateful session's ports through the runner
// holding its live sandbox. It asks on queue.PortSubject (served beside
// the session's live operations, liveops.go) for a connection to one
// port; the runner dials it through the container's agent
// (wire.Conn.DialPort: a stream to a connection the agent made inside the
// sandbox), makes its end of a tunnel to the ingress's (package tunnel)
// and splices the two. Both are flow-controlled, so the runner holds at
// most a tunnel's window and a port stream's of each connection; a
// sandbox has at most PortConfig.MaxConns open at once. While one is open
// the container is kept for the session as its traffic keeps the session.

// PortConfig bounds the connections to sandboxes' ports.
type PortConfig struct {
	// MaxConns bounds a sandbox's connections open at once (default 64,
	// at most wire.MaxPortStreams).
	MaxConns int
}

// WithDefaults fills in zero fields.
func (c PortConfig) WithDefaults() PortConfig {
	if c.MaxConns <= 0 {
		c.MaxConns = 64
	}
	c.MaxConns = min(c.MaxConns, wire.MaxPortStreams)
	return c
}

// portDialWait bounds how long the agent may take to connect to a port.
const portDialWait = 15 * time.Second

// portKeepEvery is how often an open connection keeps its container (more
// often for a session whose timeout is shorter).
const portKeepEvery = 30 * time.Second

// openPort answers a request for a connection to one of the session's
// ports.
func (ls *liveServer) openPort(sessionID string, s *liveServed, m *nats.Msg) {
	answer := func(reply queue.PortReply) {
		data, _ := json.Marshal(reply)
		if err := m.Respond(data); err != nil {
			ls.log.Warn("answer a port request", "session_id", sessionID, "err", err)
		}
	}
	refuse := func(code queue.PortErrorCode, limit int, format string, args ...any) {
		answer(queue.PortReply{Error: &queue.PortError{Code: code, Limit: limit, Message: fmt.Sprintf(format, args...)}})
	}
	var req queue.PortOpen
	if err := json.Unmarshal(m.Data, &req); err != nil || req.Stream == "" || req.Port < 1 || req.Port > 65535 {
		refuse(queue.PortFailed, 0, "malformed port request")
		return
	}
	if ls.tunnels == nil {
		refuse(queue.PortFailed, 0, "this runner does not serve ports")
		return
	}
	if tenant := ls.fleet.tenantOf(s.ctr); tenant == "" || tenant != req.TenantID {
		refuse(queue.PortGone, 0, "the session's live sandbox is no longer here")
		return
	}
	if wire.ReservedPort(req.Port) {
		refuse(queue.PortForbidden, 0, "port %d is gantry's own in the sandbox", req.Port)
		return
	}
	limit := ls.ports.MaxConns
	ls.mu.Lock()
	if ls.portConns[sessionID] >= limit {
		ls.mu.Unlock()
		refuse(queue.PortBusy, limit, "the sandbox has %d connections open, its limit", limit)
		return
	}
	ls.portConns[sessionID]++
	ls.mu.Unlock()
	keep := time.Duration(req.KeepMS) * time.Millisecond
	go func() {
		defer func() {
			ls.mu.Lock()
			if ls.portConns[sessionID]--; ls.portConns[sessionID] <= 0 {
				delete(ls.portConns, sessionID)
			}
			ls.mu.Unlock()
		}()
		ls.fleet.touch(sessionID, s.ctr, keep, keep > 0)
		ctx, cancel := context.WithTimeout(context.Background(), portDialWait)
		st, err := s.ctr.conn.DialPort(ctx, req.Port)
		cancel()
		var pe *wire.PortError
		switch {
		case errors.As(err, &pe) && pe.Why == wire.PortClosed:
			refuse(queue.PortClosed, 0, "%v", pe)
			return
		case errors.As(err, &pe) && pe.Why == wire.PortForbidden:
			refuse(queue.PortForbidden, 0, "%v", pe)
			return
		case errors.As(err, &pe) && pe.Why == wire.PortBusy:
			refuse(queue.PortBusy, limit, "%v", pe)
			return
		case errors.As(err, &pe) && pe.Why == wire.PortNoSandbox:
			refuse(queue.PortGone, 0, "%v", pe)
			return
		case err != nil:
			refuse(queue.PortFailed, 0, "the sandbox's port could not be reached: %v", err)
			return
		}
		tc, err := ls.tunnels.NewConn()
		if err != nil {
			st.Close()
			refuse(queue.PortBusy, 0, "the runner has too many connections open")
			return
		}
		tc.Connect(req.Stream)
		answer(queue.PortReply{Stream: tc.Subject()})
		// Traffic keeps the container, as it keeps the session.
		stop := make(chan struct{})
		if keep > 0 {
			go func() {
				t := time.NewTicker(max(time.Second, min(portKeepEvery, keep/3)))
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						ls.fleet.touch(sessionID, s.ctr, keep, true)
					}
				}
			}()
		}
		join(tc, st)
		close(stop)
	}()
}

// halfCloser is a connection whose sending side ends alone.
type halfCloser interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// join copies a to b and b to a until both ways ended, or either side
// broke (then both are closed at once).
func join(a, b halfCloser) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := io.Copy(b, a); err != nil {
			a.Close()
			b.Close()
			return
		}
		_ = b.CloseWrite()
	}()
	if _, err := io.Copy(a, b); err != nil {
		a.Close()
		b.Close()
	} else {
		_ = a.CloseWrite()
	}
	wg.Wait()
	a.Close()
	b.Close()
}
