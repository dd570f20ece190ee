package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Egress: a job with an allow-list reaches hosts through the runner's
// egress proxy, which is outside the sandbox (the sandbox has no network).
// The program connects to a proxy on the sandbox's own loopback (a relay,
// `gantry-agent relay`, started in front of the program); the relay
// connects to a unix socket of the agent (EgressSocket); the agent carries
// each connection to the runner as a stream of frames over its attach
// connection, and the runner hands the stream to the proxy. netMux is that
// stream of frames, the same at both ends.
const (
	// EgressSocket is where the relay in the sandbox reaches the agent.
	EgressSocket = ProgramDir + "/egress.sock"
	// EgressProxy is the proxy's address inside the sandbox, as the job's
	// HTTP_PROXY and HTTPS_PROXY name it.
	EgressProxy = "127.0.0.1:3128"
)

// Frame kinds of egress streams. Each payload starts with the stream's id
// (4 bytes, big-endian, chosen by the agent).
const (
	KindNetOpen  Kind = 'n' // agent to runner: a new connection
	KindNetData  Kind = 'N' // both: bytes of the stream
	KindNetEOF   Kind = 'F' // both: the sender writes no more
	KindNetAck   Kind = 'A' // both: the receiver consumed n more bytes (4 bytes after the id)
	KindNetReset Kind = 'R' // both: the stream is over, whatever was left unsent
)

// netWindow is how many bytes of a stream may be in flight one way, unread
// by the receiver: a sender waits for acks beyond it, and a receiver
// that gets more resets the stream, so neither end ever holds more than
// this of a stream.
const netWindow = 256 << 10

// maxNetStreams bounds a run's streams open at once.
const maxNetStreams = 64

// IsNetFrame reports whether kind belongs to egress streams.
func IsNetFrame(kind Kind) bool {
	switch kind {
	case KindNetOpen, KindNetData, KindNetEOF, KindNetAck, KindNetReset:
		return true
	}
	return false
}

// NetMux carries a run's egress streams over frames.
type NetMux struct {
	send func(kind Kind, payload []byte) error
	// accept gets each stream the other end opens (the runner's side);
	// nil at the agent, which opens them.
	accept func(*NetStream)

	mu      sync.Mutex
	streams map[uint32]*NetStream
	closed  bool
}

func NewNetMux(send func(Kind, []byte) error, accept func(*NetStream)) *NetMux {
	return &NetMux{send: send, accept: accept, streams: map[uint32]*NetStream{}}
}

func netHeader(id uint32, extra int) []byte {
	b := make([]byte, 4, 4+extra)
	binary.BigEndian.PutUint32(b, id)
	return b
}

// Open starts a stream from this end (the agent's).
func (m *NetMux) Open(id uint32) (*NetStream, error) {
	m.mu.Lock()
	if m.closed || len(m.streams) >= maxNetStreams {
		m.mu.Unlock()
		return nil, errors.New("too many egress connections at once")
	}
	s := newNetStream(m, id)
	m.streams[id] = s
	m.mu.Unlock()
	if err := m.send(KindNetOpen, netHeader(id, 0)); err != nil {
		s.fail()
		return nil, err
	}
	return s, nil
}

// Handle takes a frame of the other end. A frame that breaks the protocol
// (an unknown stream, more bytes than the window) ends that stream; it
// reports false only for frames that are not egress frames at all.
func (m *NetMux) Handle(kind Kind, payload []byte) bool {
	if !IsNetFrame(kind) {
		return false
	}
	if len(payload) < 4 {
		return true
	}
	id := binary.BigEndian.Uint32(payload)
	body := payload[4:]
	m.mu.Lock()
	s := m.streams[id]
	if kind == KindNetOpen && s == nil && m.accept != nil && !m.closed && len(m.streams) < maxNetStreams {
		s = newNetStream(m, id)
		m.streams[id] = s
		m.mu.Unlock()
		m.accept(s)
		return true
	}
	m.mu.Unlock()
	if s == nil {
		if kind != KindNetReset {
			_ = m.send(KindNetReset, netHeader(id, 0))
		}
		return true
	}
	switch kind {
	case KindNetData:
		s.deliver(body)
	case KindNetEOF:
		s.remoteEOF()
	case KindNetAck:
		if len(body) == 4 {
			s.grant(int(binary.BigEndian.Uint32(body)))
		}
	case KindNetReset:
		s.fail()
	}
	return true
}

func (m *NetMux) Forget(id uint32) {
	m.mu.Lock()
	delete(m.streams, id)
	m.mu.Unlock()
}

// Close ends every stream; none opens after.
func (m *NetMux) Close() {
	m.mu.Lock()
	m.closed = true
	all := make([]*NetStream, 0, len(m.streams))
	for _, s := range m.streams {
		all = append(all, s)
	}
	m.mu.Unlock()
	for _, s := range all {
		s.fail()
	}
}

// NetStream is one egress connection, a net.Conn at either end.
type NetStream struct {
	m  *NetMux
	id uint32

	mu       sync.Mutex
	cond     *sync.Cond
	in       bytes.Buffer
	inEOF    bool // the other end sends no more
	unacked  int  // bytes read here and not acked yet
	credit   int  // bytes this end may still send
	outEOF   bool // this end sends no more
	reset    bool
	finished bool
}

func newNetStream(m *NetMux, id uint32) *NetStream {
	s := &NetStream{m: m, id: id, credit: netWindow}
	s.cond = sync.NewCond(&s.mu)
	return s
}

var errNetReset = errors.New("egress connection reset")

func (s *NetStream) deliver(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reset || s.inEOF {
		return
	}
	if s.in.Len()+s.unacked+len(b) > netWindow {
		// More than the window allows: the sender breaks the protocol.
		s.resetLocked(true)
		return
	}
	s.in.Write(b)
	s.cond.Broadcast()
}

func (s *NetStream) remoteEOF() {
	s.mu.Lock()
	s.inEOF = true
	s.cond.Broadcast()
	s.finishLocked()
	s.mu.Unlock()
}

func (s *NetStream) grant(n int) {
	s.mu.Lock()
	if n > 0 && s.credit+n <= netWindow {
		s.credit += n
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *NetStream) fail() {
	s.mu.Lock()
	s.resetLocked(false)
	s.mu.Unlock()
}

// resetLocked ends the stream both ways, telling the other end when tell.
func (s *NetStream) resetLocked(tell bool) {
	if s.reset {
		return
	}
	s.reset = true
	s.cond.Broadcast()
	if tell {
		_ = s.m.send(KindNetReset, netHeader(s.id, 0))
	}
	s.finished = true
	s.m.Forget(s.id)
}

// finishLocked forgets the stream once both ways are over.
func (s *NetStream) finishLocked() {
	if s.inEOF && s.outEOF && !s.finished {
		s.finished = true
		s.m.Forget(s.id)
	}
}

// Read reads what the other end sent.
func (s *NetStream) Read(p []byte) (int, error) {
	s.mu.Lock()
	for s.in.Len() == 0 && !s.inEOF && !s.reset {
		s.cond.Wait()
	}
	if s.in.Len() == 0 {
		err := io.EOF
		if s.reset {
			err = errNetReset
		}
		s.mu.Unlock()
		return 0, err
	}
	n, _ := s.in.Read(p)
	s.unacked += n
	var ack int
	if s.unacked >= netWindow/4 || s.in.Len() == 0 {
		ack, s.unacked = s.unacked, 0
	}
	s.mu.Unlock()
	if ack > 0 {
		b := netHeader(s.id, 4)
		b = binary.BigEndian.AppendUint32(b, uint32(ack))
		_ = s.m.send(KindNetAck, b)
	}
	return n, nil
}

// Write sends p, waiting for the other end's acks beyond the window.
func (s *NetStream) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		s.mu.Lock()
		for s.credit == 0 && !s.reset && !s.outEOF {
			s.cond.Wait()
		}
		if s.reset || s.outEOF {
			s.mu.Unlock()
			return written, errNetReset
		}
		n := min(len(p), s.credit, Chunk)
		s.credit -= n
		s.mu.Unlock()
		b := append(netHeader(s.id, n), p[:n]...)
		if err := s.m.send(KindNetData, b); err != nil {
			s.fail()
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// CloseWrite tells the other end this end sends no more.
func (s *NetStream) CloseWrite() error {
	s.mu.Lock()
	if s.outEOF || s.reset {
		s.mu.Unlock()
		return nil
	}
	s.outEOF = true
	s.finishLocked()
	s.mu.Unlock()
	return s.m.send(KindNetEOF, netHeader(s.id, 0))
}

// Finished reports whether the stream is over: reset, or ended both ways.
func (s *NetStream) Finished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reset || (s.inEOF && s.outEOF)
}

// Close ends the stream: a graceful end when both ways are over, else a
// reset.
func (s *NetStream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !(s.inEOF && s.outEOF) {
		s.resetLocked(true)
	}
	s.cond.Broadcast()
	return nil
}

type netAddr struct{}

func (netAddr) Network() string { return "gantry-egress" }
func (netAddr) String() string  { return EgressProxy }

func (s *NetStream) LocalAddr() net.Addr              { return netAddr{} }
func (s *NetStream) RemoteAddr() net.Addr             { return netAddr{} }
func (s *NetStream) SetDeadline(time.Time) error      { return nil }
func (s *NetStream) SetReadDeadline(time.Time) error  { return nil }
func (s *NetStream) SetWriteDeadline(time.Time) error { return nil }
