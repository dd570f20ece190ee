package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Ports: a stateful session's live sandbox serves HTTP on its own loopback
// (a web app, an API, a notebook), and the ingress makes such a port
// reachable at a URL. The runner holding the sandbox's container opens a
// stream to the agent for each connection (Conn.DialPort): the agent
// connects to the port inside the sandbox's network namespace (through its
// process service, which lives there) and splices the connection to the
// stream. The streams are NetMux streams of their own kinds, opened by the
// runner and answered by the agent (opened, or reset with why), carried
// beside everything else on the container's stream at any time, while a
// job runs or the container waits for the next one.

// Frame kinds of port streams. Each payload starts with the stream's id
// (4 bytes, big-endian, chosen by the runner).
const (
	KindPortOpen   Kind = 'i' // runner to agent: connect to a port (2 bytes after the id)
	KindPortOpened Kind = 'I' // agent to runner: connected
	KindPortData   Kind = 'D' // both: bytes of the stream
	KindPortEOF    Kind = 'f' // both: the sender writes no more
	KindPortAck    Kind = 'a' // both: the receiver consumed n more bytes (4 bytes after the id)
	KindPortReset  Kind = 'r' // both: the stream is over; after an open, 1 byte says why (PortRefusal)
)

var portKinds = netKinds{open: KindPortOpen, opened: KindPortOpened, data: KindPortData, eof: KindPortEOF, ack: KindPortAck, reset: KindPortReset}

// IsPortFrame reports whether kind belongs to port streams.
func IsPortFrame(kind Kind) bool { return portKinds.has(kind) }

// portWindow is how many bytes of a port stream may be in flight one way:
// smaller than an egress stream's, as a sandbox may have many connections
// open (the runner holds at most this much of each, one way).
const portWindow = 128 << 10

// maxPortStreams bounds a container's port streams open at once, at the
// agent (the runner keeps its own, lower, bound per sandbox).
const maxPortStreams = 1024

// MaxPortStreams is the most port streams a container may have open at
// once: the agent refuses more.
const MaxPortStreams = maxPortStreams

// NewPortMux makes a container's port mux. The runner's end dials (accept
// nil); the agent's accepts each stream with the port it is for, and
// answers it with Accept or Refuse.
func NewPortMux(send func(Kind, []byte) error, accept func(s *NetStream, port int)) *NetMux {
	m := &NetMux{kinds: portKinds, window: portWindow, max: maxPortStreams, send: send, streams: map[uint32]*NetStream{}}
	if accept != nil {
		m.accept = func(s *NetStream, open []byte) {
			if len(open) != 2 {
				s.Refuse(PortFailed)
				return
			}
			accept(s, int(binary.BigEndian.Uint16(open)))
		}
	}
	return m
}

// PortRefusal is why the agent refused a port stream.
type PortRefusal byte

// The refusals.
const (
	// PortClosed: nothing listens on the port (the connection was refused).
	PortClosed PortRefusal = 'c'
	// PortNoSandbox: the container holds no live sandbox, or its process
	// service is gone.
	PortNoSandbox PortRefusal = 's'
	// PortForbidden: the port is gantry's own inside the sandbox
	// (ReservedPort).
	PortForbidden PortRefusal = 'x'
	// PortBusy: too many streams are open.
	PortBusy PortRefusal = 'b'
	// PortFailed: anything else.
	PortFailed PortRefusal = 'f'
)

// PortError is a refused port stream.
type PortError struct {
	Port int
	Why  PortRefusal
}

func (e *PortError) Error() string {
	switch e.Why {
	case PortClosed:
		return fmt.Sprintf("nothing listens on port %d in the sandbox", e.Port)
	case PortNoSandbox:
		return "the container holds no live sandbox"
	case PortForbidden:
		return fmt.Sprintf("port %d is gantry's own in the sandbox", e.Port)
	case PortBusy:
		return "too many connections to the sandbox's ports are open"
	}
	return fmt.Sprintf("the sandbox could not connect to port %d", e.Port)
}

// ReservedPort reports whether port is one gantry itself listens on inside
// a sandbox (the egress relay's, EgressProxy): never reachable from
// outside, whatever the sandbox runs, since behind it are the tenant's
// egress and the secrets its rules inject.
func ReservedPort(port int) bool {
	_, p, _ := strings.Cut(EgressProxy, ":")
	return strconv.Itoa(port) == p
}

// Dial opens a stream to the other end (the runner's, to the agent) for
// port and waits until it is answered: the stream, or a *PortError saying
// why it was refused, or ctx's error.
func (m *NetMux) Dial(ctx context.Context, port int) (*NetStream, error) {
	if port < 1 || port > 65535 {
		return nil, &PortError{Port: port, Why: PortFailed}
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errors.New("the sandbox agent stopped")
	}
	if len(m.streams) >= m.max {
		m.mu.Unlock()
		return nil, &PortError{Port: port, Why: PortBusy}
	}
	for {
		m.nextID++
		if _, taken := m.streams[m.nextID]; m.nextID != 0 && !taken {
			break
		}
	}
	s := newNetStream(m, m.nextID)
	s.dialing = make(chan struct{})
	m.streams[s.id] = s
	m.mu.Unlock()
	open := binary.BigEndian.AppendUint16(netHeader(s.id, 2), uint16(port))
	if err := m.send(m.kinds.open, open); err != nil {
		s.fail()
		return nil, err
	}
	select {
	case <-s.dialing:
	case <-ctx.Done():
		_ = s.Close()
		return nil, ctx.Err()
	}
	s.mu.Lock()
	opened, why := s.opened, s.refusal
	s.mu.Unlock()
	if !opened {
		if why == 0 {
			why = PortFailed
		}
		return nil, &PortError{Port: port, Why: why}
	}
	return s, nil
}

// Accept answers a stream the other end dialled: it is connected.
func (s *NetStream) Accept() error {
	return s.m.send(s.m.kinds.opened, netHeader(s.id, 0))
}

// Refuse answers a stream the other end dialled with why it cannot be.
func (s *NetStream) Refuse(why PortRefusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reset {
		return
	}
	s.reset = true
	s.cond.Broadcast()
	_ = s.m.send(s.m.kinds.reset, append(netHeader(s.id, 1), byte(why)))
	s.finished = true
	s.m.Forget(s.id)
}
