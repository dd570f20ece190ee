package runner

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/tunnel"
)

// liveServer answers the live operations of the stateful sessions whose
// live sandboxes this runner's containers hold (see queue.LiveSubject): it
// subscribes to a session's subject once a job of the session has left
// its live sandbox in a container, relays each operation to the
// container's agent and its reply back, and publishes what the
// sandbox's live processes write and how they end. A container is served
// whether it waits for the session's next job or runs one, until its
// agent's stream ends (the container retired) or another of its live
// sandboxes takes over.
type liveServer struct {
	nc    *nats.Conn
	log   *slog.Logger
	fleet *fleet
	// take answers another runner's request to take the session (on
	// queue.TakeSubject), whose live sandbox this runner holds.
	take func(sessionID, live string, m *nats.Msg)
	// control answers the ingress's pause, snapshot and fork of the session
	// (queue.ControlSubject).
	control func(sessionID, live string, m *nats.Msg)
	// renetwork applies the session's changed network to its live
	// processes' egress (wire.OpNetwork).
	renetwork func(ctx context.Context, sessionID string, c *Container) error
	// metrics counts how long live processes' output was held to its rate.
	metrics *Metrics
	// tunnels carry the connections to the sandboxes' ports (ports.go),
	// bounded by ports; nil until the runner starts.
	tunnels *tunnel.Mux
	ports   PortConfig

	mu       sync.Mutex
	sessions map[string]*liveServed
	// portConns counts each session's connections to its ports.
	portConns map[string]int
}

// liveServed is a session's live sandbox this runner serves.
type liveServed struct {
	ctr  *Container
	live string
	subs []*nats.Subscription
}

func (s *liveServed) unsubscribe() {
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
}

// liveOpTimeout bounds one relayed operation (the agent bounds its own
// waits, e.g. for a process's stdin, below it).
const liveOpTimeout = 45 * time.Second

func newLiveServer(nc *nats.Conn, log *slog.Logger, f *fleet, take, control func(sessionID, live string, m *nats.Msg)) *liveServer {
	return &liveServer{nc: nc, log: log, fleet: f, take: take, control: control, sessions: map[string]*liveServed{},
		portConns: map[string]int{}}
}

// serve answers the session's live operations on c's live sandbox (c.live,
// which the session's attempt just left there).
func (ls *liveServer) serve(sessionID string, c *Container) {
	if ls == nil || ls.nc == nil || c.live == "" {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if cur := ls.sessions[sessionID]; cur != nil {
		if cur.ctr == c && cur.live == c.live {
			return
		}
		cur.unsubscribe()
		if cur.ctr != c {
			cur.ctr.conn.OnProcessEvent(nil)
		}
	}
	served := &liveServed{ctr: c, live: c.live}
	live := c.live
	for subject, handle := range map[string]nats.MsgHandler{
		queue.LiveSubject(sessionID, live):    func(m *nats.Msg) { ls.relay(sessionID, served, m) },
		queue.TakeSubject(sessionID, live):    func(m *nats.Msg) { ls.take(sessionID, live, m) },
		queue.ControlSubject(sessionID, live): func(m *nats.Msg) { ls.control(sessionID, live, m) },
		queue.PortSubject(sessionID, live):    func(m *nats.Msg) { ls.openPort(sessionID, served, m) },
	} {
		sub, err := ls.nc.Subscribe(subject, handle)
		if err != nil {
			ls.log.Warn("serve a live sandbox", "session_id", sessionID, "err", err)
			served.unsubscribe()
			delete(ls.sessions, sessionID)
			return
		}
		served.subs = append(served.subs, sub)
	}
	ls.sessions[sessionID] = served
	c.conn.OnProcessEvent(func(kind wire.Kind, payload []byte) { ls.publish(sessionID, kind, payload) })
	go func() {
		<-c.conn.Done()
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if ls.sessions[sessionID] == served {
			served.unsubscribe()
			delete(ls.sessions, sessionID)
		}
	}()
}

// drop stops serving the session's live sandbox in c: the session let go
// of c, which may serve its tenant's next session, and an operation or a
// port connection meant for the closed one must not reach that one.
func (ls *liveServer) drop(sessionID string, c *Container) {
	if ls == nil {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if cur := ls.sessions[sessionID]; cur != nil && cur.ctr == c {
		cur.unsubscribe()
		c.conn.OnProcessEvent(nil)
		delete(ls.sessions, sessionID)
	}
}

// stop unsubscribes from every session.
func (ls *liveServer) stop() {
	if ls == nil {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for id, s := range ls.sessions {
		s.unsubscribe()
		delete(ls.sessions, id)
	}
}

// relay answers one operation: OpKeep here (the container is kept for
// the session TimeoutMS longer), the rest by the agent.
func (ls *liveServer) relay(sessionID string, s *liveServed, m *nats.Msg) {
	var op wire.LiveOp
	if err := json.Unmarshal(m.Data, &op); err != nil {
		ls.respond(m, wire.LiveReply{Error: &wire.LiveError{Code: wire.LiveErrInvalid, Message: "malformed live operation"}})
		return
	}
	ls.fleet.touch(sessionID, s.ctr, time.Duration(op.TimeoutMS)*time.Millisecond, op.Op == wire.OpKeep)
	if op.Op == wire.OpKeep {
		ls.respond(m, wire.LiveReply{})
		return
	}
	if op.Op == wire.OpNetwork {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), liveOpTimeout)
			defer cancel()
			var reply wire.LiveReply
			if ls.renetwork != nil {
				if err := ls.renetwork(ctx, sessionID, s.ctr); err != nil {
					ls.log.Warn("apply a live session's new network", "session_id", sessionID, "err", err)
					reply.Error = &wire.LiveError{Code: wire.LiveErrFailed, Message: "the runner could not apply the network: " + err.Error()}
				}
			}
			ls.respond(m, reply)
		}()
		return
	}
	if op.Op == wire.OpSpawn {
		// A live process reaches the egress proxy as the session's jobs do.
		if env := s.ctr.egress.spawnEnv(); env != nil {
			merged := make(map[string]string, len(env)+len(op.SessionEnv))
			for k, v := range env {
				merged[k] = v
			}
			for k, v := range op.SessionEnv {
				merged[k] = v
			}
			op.SessionEnv = merged
		}
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), liveOpTimeout)
		defer cancel()
		reply, err := s.ctr.conn.Live(ctx, op)
		if err != nil {
			reply = wire.LiveReply{Error: &wire.LiveError{Code: wire.LiveErrNoSandbox, Message: "the sandbox's container did not answer: " + err.Error()}}
		}
		reply.ID = 0
		ls.respond(m, reply)
	}()
}

func (ls *liveServer) respond(m *nats.Msg, r wire.LiveReply) {
	data, err := json.Marshal(r)
	if err == nil && len(data) > int(ls.nc.MaxPayload()) {
		data, _ = json.Marshal(wire.LiveReply{Error: &wire.LiveError{Code: wire.LiveErrFailed, Message: "the answer is too large"}})
	}
	if err := m.Respond(data); err != nil {
		ls.log.Warn("answer a live operation", "err", err)
	}
}

// publish relays a live process's output or end (from the agent,
// untrusted: malformed events are dropped).
func (ls *liveServer) publish(sessionID string, kind wire.Kind, payload []byte) {
	msg := &nats.Msg{Header: nats.Header{}}
	switch kind {
	case wire.KindProcessOutput:
		pid, stream, data, err := wire.ParseProcessOutput(payload)
		if err != nil || pid <= 0 {
			return
		}
		msg.Subject, msg.Data = queue.ProcessSubject(sessionID, pid), data
		msg.Header.Set(queue.HeaderStream, queue.HeaderStreamStdout)
		if stream == wire.KindStderr {
			msg.Header.Set(queue.HeaderStream, queue.HeaderStreamStderr)
		}
	case wire.KindProcessExit:
		var e wire.ProcessExit
		if json.Unmarshal(payload, &e) != nil || e.Pid <= 0 {
			return
		}
		msg.Subject, msg.Data = queue.ProcessSubject(sessionID, e.Pid), payload
		msg.Header.Set(queue.HeaderStream, queue.HeaderStreamExit)
		ls.metrics.outputThrottled(e.ThrottledMS)
	default:
		return
	}
	if err := ls.nc.PublishMsg(msg); err != nil {
		ls.log.Warn("publish a live process's output", "session_id", sessionID, "err", err)
	}
}
