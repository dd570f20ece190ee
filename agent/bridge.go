package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

// The code-mode bridge: while a program runs, the agent listens on a unix
// socket the program can reach (BridgeSocket). A client (the gantry
// library in the image) connects, writes one JSON object on one line and
// reads one line back. The agent relays the request to the runner as a
// KindBridge frame and the runner's reply back. The runner makes every
// upstream call and holds every credential; nothing here is trusted.
const (
	maxBridgeRequest = 1 << 20 // bytes in one request line
	maxBridgePending = 64      // requests waiting for the runner at once
	maxBridgeConns   = 128     // connections not yet answered
)

type bridge struct {
	ln *net.UnixListener
	fw *wire.FrameWriter

	mu      sync.Mutex
	pending map[int64]*net.UnixConn
	conns   map[*net.UnixConn]bool
	nextID  int64
	closed  bool
	wg      sync.WaitGroup
}

func openBridge(sock string, fw *wire.FrameWriter) (*bridge, error) {
	_ = os.Remove(sock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("bridge socket: %w", err)
	}
	b := &bridge{ln: ln, fw: fw, pending: map[int64]*net.UnixConn{}, conns: map[*net.UnixConn]bool{}}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

func (b *bridge) accept() {
	defer b.wg.Done()
	for {
		conn, err := b.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, most likely: the program floods the
			// socket. Slow down rather than spin.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			conn.Close()
			return
		}
		if len(b.conns) >= maxBridgeConns {
			b.mu.Unlock()
			b.fail(conn, "busy", fmt.Sprintf("more than %d tool requests are open; wait for some to finish", maxBridgeConns))
			continue
		}
		b.conns[conn] = true
		b.wg.Add(1)
		b.mu.Unlock()
		go b.read(conn)
	}
}

func (b *bridge) read(conn *net.UnixConn) {
	defer b.wg.Done()
	line, err := bufio.NewReader(io.LimitReader(conn, maxBridgeRequest+2)).ReadBytes('\n')
	if len(line) > maxBridgeRequest {
		b.drop(conn)
		b.fail(conn, "too_large", fmt.Sprintf("a request may be at most %d bytes", maxBridgeRequest))
		return
	}
	if err != nil { // closed before a whole line
		b.drop(conn)
		conn.Close()
		return
	}
	line = bytes.TrimSpace(line)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		b.drop(conn)
		b.fail(conn, "bad_request", "request is not a JSON object: "+err.Error())
		return
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		conn.Close()
		return
	}
	if len(b.pending) >= maxBridgePending {
		delete(b.conns, conn)
		b.mu.Unlock()
		b.fail(conn, "busy", fmt.Sprintf("more than %d tool requests are waiting; wait for some to finish", maxBridgePending))
		return
	}
	b.nextID++
	id := b.nextID
	b.pending[id] = conn
	b.mu.Unlock()
	if err := b.fw.JSON(wire.KindBridge, wire.BridgeRequest{ID: id, Req: line}); err != nil {
		b.take(id)
		conn.Close()
	}
}

func (b *bridge) drop(conn *net.UnixConn) {
	b.mu.Lock()
	delete(b.conns, conn)
	b.mu.Unlock()
}

func (b *bridge) take(id int64) *net.UnixConn {
	b.mu.Lock()
	defer b.mu.Unlock()
	conn := b.pending[id]
	delete(b.pending, id)
	delete(b.conns, conn)
	return conn
}

// reply answers request id; replies to unknown ids (late, or made up) are
// dropped.
func (b *bridge) reply(id int64, body []byte) {
	if conn := b.take(id); conn != nil {
		answer(conn, body)
	}
}

func (b *bridge) fail(conn *net.UnixConn, code, message string) {
	body, _ := json.Marshal(map[string]any{"ok": false, "error": map[string]string{"code": code, "message": message}})
	answer(conn, body)
}

func answer(conn *net.UnixConn, body []byte) {
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, _ = conn.Write(append(body, '\n'))
	conn.Close()
}

// close stops listening and drops every open connection.
func (b *bridge) close() {
	b.mu.Lock()
	b.closed = true
	conns := b.conns
	b.conns, b.pending = map[*net.UnixConn]bool{}, map[int64]*net.UnixConn{}
	b.mu.Unlock()
	b.ln.Close()
	for c := range conns {
		c.Close()
	}
	b.wg.Wait()
}
