// Package tunnel carries byte streams between two gantry processes over
// core NATS, each end a net.Conn: the ingress reaches a sandbox's port
// through the runner that holds the sandbox, wherever each runs, with no
// connection between them but NATS.
//
// Each process has one Mux: one subscription, to "<inbox>.*", under which
// each of its Conns has a subject of its own. A Conn sends to its peer's
// subject, which it learns when the stream is set up (the opener sends
// its subject in its request; the other end answers with its own). Every
// message is a kind, a sequence number and a payload: data, the end of
// one direction, an acknowledgement of bytes read, a reset, a ping.
//
// Flow control bounds what either end holds: a sender has at most Window
// bytes unacknowledged, and acknowledges what its reader took, so a Conn
// buffers at most Window bytes and a slow reader slows its writer rather
// than growing a buffer. Core NATS delivers at most once, in order from
// one connection: a message lost (a gap in the sequence) resets the Conn
// rather than corrupting it. A Conn that heard nothing from its peer for
// Dead (pings go every Ping while it is quiet) is reset: its peer's
// process is gone.
package tunnel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Window is how many bytes of a Conn may be in flight one way: sent and
// not yet read by the other end's reader. Both ends use the same.
const Window = 128 << 10

// chunk bounds the data one message carries.
const chunk = 32 << 10

// The kinds of messages.
const (
	kindData  = 'd'
	kindEOF   = 'e'
	kindAck   = 'a' // 4 bytes: how many more bytes were read
	kindReset = 'r'
	kindPing  = 'p'
)

// Config is a Mux's.
type Config struct {
	// Ping is how often a quiet Conn pings its peer; Dead how long a Conn
	// waits without hearing from its peer before it is reset.
	Ping, Dead time.Duration
	// MaxConns bounds the Conns open at once.
	MaxConns int
}

// WithDefaults fills in zero fields: pings every 5 s, dead after 20 s,
// 4096 Conns.
func (c Config) WithDefaults() Config {
	if c.Ping <= 0 {
		c.Ping = 5 * time.Second
	}
	if c.Dead <= 0 {
		c.Dead = 20 * time.Second
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 4096
	}
	return c
}

// ErrTooMany is a new connection's error when the Mux has MaxConns open.
var ErrTooMany = errors.New("tunnel: too many connections open")

// ErrReset is a connection's error once its stream was reset (by the
// peer, a lost message, a peer that went quiet, or the Mux closing).
var ErrReset = errors.New("tunnel: connection reset")

// Mux is a process's end of its tunnels.
type Mux struct {
	nc     *nats.Conn
	cfg    Config
	prefix string
	sub    *nats.Subscription

	mu     sync.Mutex
	conns  map[string]*Conn
	next   uint64
	closed bool

	stop chan struct{}
	done chan struct{}
}

// New subscribes a Mux on nc.
func New(nc *nats.Conn, cfg Config) (*Mux, error) {
	m := &Mux{nc: nc, cfg: cfg.WithDefaults(), prefix: nc.NewInbox() + ".", conns: map[string]*Conn{},
		stop: make(chan struct{}), done: make(chan struct{})}
	sub, err := nc.Subscribe(m.prefix+"*", m.receive)
	if err != nil {
		return nil, err
	}
	m.sub = sub
	// The server has the subscription before any peer learns a subject
	// under it (a message to a subject nobody has subscribed to yet is
	// dropped).
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	go m.keepalive()
	return m, nil
}

// Close resets every Conn (telling the peers) and unsubscribes.
func (m *Mux) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	all := make([]*Conn, 0, len(m.conns))
	for _, c := range m.conns {
		all = append(all, c)
	}
	m.mu.Unlock()
	for _, c := range all {
		c.abort(true)
	}
	_ = m.sub.Unsubscribe()
	close(m.stop)
	<-m.done
}

// Open counts the Conns open.
func (m *Mux) Open() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.conns)
}

// NewConn makes a Conn with a subject of its own (Subject), which it
// receives on at once; it sends once it knows its peer's (Connect).
func (m *Mux) NewConn() (*Conn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrReset
	}
	if len(m.conns) >= m.cfg.MaxConns {
		return nil, ErrTooMany
	}
	m.next++
	id := strconv.FormatUint(m.next, 36)
	now := time.Now()
	c := &Conn{m: m, id: id, local: m.prefix + id, credit: Window, lastHeard: now, lastSent: now}
	c.cond = sync.NewCond(&c.mu)
	m.conns[id] = c
	return c, nil
}

func (m *Mux) forget(id string) {
	m.mu.Lock()
	delete(m.conns, id)
	m.mu.Unlock()
}

// receive takes one message for one of the Mux's Conns (on the
// subscription's goroutine: it never blocks).
func (m *Mux) receive(msg *nats.Msg) {
	id := strings.TrimPrefix(msg.Subject, m.prefix)
	m.mu.Lock()
	c := m.conns[id]
	m.mu.Unlock()
	if c == nil {
		// Data for a Conn that is gone: its sender stops at once.
		if len(msg.Data) > 0 && msg.Data[0] == kindData && msg.Reply != "" {
			_ = m.nc.Publish(msg.Reply, []byte{kindReset, 0, 0, 0, 0})
		}
		return
	}
	c.handle(msg.Data)
}

// keepalive pings quiet Conns and resets those whose peer went quiet.
func (m *Mux) keepalive() {
	defer close(m.done)
	t := time.NewTicker(m.cfg.Ping / 2)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.mu.Lock()
		all := make([]*Conn, 0, len(m.conns))
		for _, c := range m.conns {
			all = append(all, c)
		}
		m.mu.Unlock()
		now := time.Now()
		for _, c := range all {
			c.mu.Lock()
			peer, quiet, dead := c.peer, now.Sub(c.lastSent) >= m.cfg.Ping, now.Sub(c.lastHeard) >= m.cfg.Dead
			c.mu.Unlock()
			switch {
			case dead:
				c.abort(true)
			case peer != "" && quiet:
				_ = c.send(kindPing, nil)
			}
		}
	}
}

// Conn is one end of a tunnel: a net.Conn whose other end is its peer's
// Conn, in another process.
type Conn struct {
	m     *Mux
	id    string
	local string

	// sendMu keeps messages in the order of their sequence numbers.
	sendMu  sync.Mutex
	sendSeq uint32

	mu        sync.Mutex
	cond      *sync.Cond
	peer      string
	in        bytes.Buffer // received, not yet read
	recvSeq   uint32
	unacked   int // read and not yet acknowledged
	credit    int // bytes this end may still send
	inEOF     bool
	outEOF    bool
	reset     bool
	closed    bool
	lastHeard time.Time
	lastSent  time.Time
	rDeadline time.Time
	wDeadline time.Time
	rTimer    *time.Timer
	wTimer    *time.Timer
}

// Subject is where this end receives: its peer sends there.
func (c *Conn) Subject() string { return c.local }

// Connect names the peer's subject; the Conn sends from now on.
func (c *Conn) Connect(peer string) {
	c.mu.Lock()
	c.peer = peer
	c.cond.Broadcast()
	c.mu.Unlock()
}

var errNoPeer = errors.New("tunnel: no peer yet")

// send publishes one message to the peer.
func (c *Conn) send(kind byte, payload []byte) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	c.mu.Lock()
	peer := c.peer
	c.lastSent = time.Now()
	c.mu.Unlock()
	if peer == "" {
		return errNoPeer
	}
	c.sendSeq++
	data := make([]byte, 5+len(payload))
	data[0] = kind
	binary.BigEndian.PutUint32(data[1:], c.sendSeq)
	copy(data[5:], payload)
	return c.m.nc.PublishMsg(&nats.Msg{Subject: peer, Reply: c.local, Data: data})
}

// handle takes one message from the peer.
func (c *Conn) handle(data []byte) {
	if len(data) < 5 {
		c.abort(true)
		return
	}
	kind, seq, payload := data[0], binary.BigEndian.Uint32(data[1:5]), data[5:]
	c.mu.Lock()
	if c.reset {
		c.mu.Unlock()
		return
	}
	if kind == kindReset && seq == 0 {
		// From a Mux that no longer has the peer Conn.
		c.mu.Unlock()
		c.abort(false)
		return
	}
	if seq != c.recvSeq+1 {
		c.mu.Unlock()
		c.abort(true) // a message was lost
		return
	}
	c.recvSeq = seq
	c.lastHeard = time.Now()
	switch kind {
	case kindData:
		if c.inEOF || c.in.Len()+c.unacked+len(payload) > Window {
			c.mu.Unlock()
			c.abort(true) // the peer broke the protocol
			return
		}
		c.in.Write(payload)
	case kindEOF:
		c.inEOF = true
	case kindAck:
		if len(payload) == 4 {
			if n := int(binary.BigEndian.Uint32(payload)); n > 0 && c.credit+n <= Window {
				c.credit += n
			}
		}
	case kindReset:
		c.mu.Unlock()
		c.abort(false)
		return
	case kindPing:
	default:
		c.mu.Unlock()
		c.abort(true)
		return
	}
	c.cond.Broadcast()
	c.mu.Unlock()
}

// abort resets the Conn, telling the peer when tell.
func (c *Conn) abort(tell bool) {
	c.mu.Lock()
	if c.reset {
		c.mu.Unlock()
		return
	}
	c.reset = true
	c.cond.Broadcast()
	c.mu.Unlock()
	if tell {
		_ = c.send(kindReset, nil)
	}
	c.m.forget(c.id)
}

// Read reads what the peer sent.
func (c *Conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	for c.in.Len() == 0 && !c.inEOF && !c.reset && !c.closed && !passed(c.rDeadline) {
		c.cond.Wait()
	}
	if c.in.Len() == 0 || c.closed {
		var err error
		switch {
		case c.closed:
			err = net.ErrClosed
		case c.inEOF:
			err = io.EOF
		case c.reset:
			err = ErrReset
		default:
			err = os.ErrDeadlineExceeded
		}
		c.mu.Unlock()
		return 0, err
	}
	n, _ := c.in.Read(p)
	c.unacked += n
	ack := 0
	if c.unacked >= Window/4 || c.in.Len() == 0 {
		ack, c.unacked = c.unacked, 0
	}
	c.mu.Unlock()
	if ack > 0 {
		if err := c.send(kindAck, binary.BigEndian.AppendUint32(nil, uint32(ack))); errors.Is(err, errNoPeer) {
			c.mu.Lock()
			c.unacked += ack // owed until the peer is known
			c.mu.Unlock()
		}
	}
	return n, nil
}

// Write sends p, waiting for the peer's reader beyond the window.
func (c *Conn) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		c.mu.Lock()
		for (c.credit == 0 || c.peer == "") && !c.reset && !c.outEOF && !c.closed && !passed(c.wDeadline) {
			c.cond.Wait()
		}
		switch {
		case c.closed:
			c.mu.Unlock()
			return written, net.ErrClosed
		case c.reset || c.outEOF:
			c.mu.Unlock()
			return written, ErrReset
		case c.credit == 0 || c.peer == "":
			c.mu.Unlock()
			return written, os.ErrDeadlineExceeded
		}
		n := min(len(p), c.credit, chunk)
		c.credit -= n
		c.mu.Unlock()
		if err := c.send(kindData, p[:n]); err != nil {
			c.abort(false)
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// CloseWrite tells the peer this end sends no more.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	if c.outEOF || c.reset || c.closed {
		c.mu.Unlock()
		return nil
	}
	c.outEOF = true
	c.cond.Broadcast()
	c.mu.Unlock()
	return c.send(kindEOF, nil)
}

// Close ends the Conn: quietly when both ways ended, else with a reset.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	graceful := c.inEOF && c.outEOF
	for _, t := range []*time.Timer{c.rTimer, c.wTimer} {
		if t != nil {
			t.Stop()
		}
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	if graceful {
		c.mu.Lock()
		c.reset = true
		c.mu.Unlock()
		c.m.forget(c.id)
		return nil
	}
	c.abort(true)
	return nil
}

func passed(t time.Time) bool { return !t.IsZero() && !time.Now().Before(t) }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	_ = c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// SetReadDeadline makes a Read waiting at t fail with
// os.ErrDeadlineExceeded.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rDeadline = t
	c.rTimer = c.wake(c.rTimer, t)
	return nil
}

// SetWriteDeadline makes a Write waiting at t fail with
// os.ErrDeadlineExceeded.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wDeadline = t
	c.wTimer = c.wake(c.wTimer, t)
	return nil
}

// wake wakes the waiters at t (and now, for a new deadline).
func (c *Conn) wake(old *time.Timer, t time.Time) *time.Timer {
	if old != nil {
		old.Stop()
	}
	c.cond.Broadcast()
	if t.IsZero() {
		return nil
	}
	return time.AfterFunc(time.Until(t), func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
}

type addr string

func (a addr) Network() string { return "gantry-tunnel" }
func (a addr) String() string  { return string(a) }

// LocalAddr is this end's subject.
func (c *Conn) LocalAddr() net.Addr { return addr(c.local) }

// RemoteAddr is the peer's subject.
func (c *Conn) RemoteAddr() net.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return addr(c.peer)
}
