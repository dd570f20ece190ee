package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/tunnel"
)

// openPort asks the runner holding the session's live sandbox for a
// connection to port, as the ingress does: the tunnel's end, or why not.
func (h *harness) openPort(t *testing.T, m *tunnel.Mux, sid, tenant string, port int) (net.Conn, *queue.PortError) {
	t.Helper()
	sess, err := h.st.GetSession(context.Background(), h.tenant, sid)
	if err != nil || sess.Live == "" {
		t.Fatalf("session %s holds no live sandbox (%v)", sid, err)
	}
	c, err := m.NewConn()
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(queue.PortOpen{Port: port, TenantID: tenant, Stream: c.Subject(), KeepMS: 60000})
	msg, err := h.nc.Request(queue.PortSubject(sid, sess.Live), body, 30*time.Second)
	if err != nil {
		t.Fatalf("port %d: %v", port, err)
	}
	var r queue.PortReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		t.Fatalf("port %d: reply %q", port, msg.Data)
	}
	if r.Error != nil {
		c.Close()
		return nil, r.Error
	}
	c.Connect(r.Stream)
	return c, nil
}

// TestPorts: a server in a stateful session's live sandbox is reached
// through the runner holding it: HTTP, and bytes both ways with each side
// ending its own way; a closed port, gantry's own port and another
// tenant's request are refused, and a sandbox's connections are bounded.
func TestPorts(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 2, func(_ *harness, c *Config) { c.Ports.MaxConns = 3 })
	sid := h.statefulSession(t)
	if j := h.in(t, sid, py("open('hello.txt', 'w').write('hello from the sandbox\\n')")); j.Status != jobs.StatusSucceeded {
		t.Fatalf("first job: %+v", j)
	}
	live := h.live(t, sid)
	// An HTTP server, and an echo server that answers after its client's
	// end (a half-close crosses).
	live.ok(wire.LiveOp{Op: wire.OpSpawn, Argv: []string{"python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"}, Cwd: "/workspace"})
	live.ok(wire.LiveOp{Op: wire.OpSpawn, Argv: []string{"python3", "-c", `
import socket
s = socket.socket(socket.AF_INET6)
s.bind(("::1", 9000))
s.listen()
while True:
    c, _ = s.accept()
    data = b""
    while True:
        b = c.recv(65536)
        if not b:
            break
        data += b
    c.sendall(data[::-1])
    c.close()
`}})
	m, err := tunnel.New(h.nc, tunnel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)

	var c net.Conn
	eventually.True(t, 30*time.Second, "the server listens", func() bool {
		var pe *queue.PortError
		if c, pe = h.openPort(t, m, sid, h.tenant, 8000); pe != nil && pe.Code != queue.PortClosed {
			t.Fatalf("port 8000: %+v", pe)
		}
		return c != nil
	})
	if _, err := io.WriteString(c, "GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	if resp.StatusCode != 200 || string(body) != "hello from the sandbox\n" {
		t.Errorf("GET: %d %q", resp.StatusCode, body)
	}

	eventually.True(t, 30*time.Second, "the echo server listens (on ::1 only)", func() bool {
		var pe *queue.PortError
		if c, pe = h.openPort(t, m, sid, h.tenant, 9000); pe != nil && pe.Code != queue.PortClosed {
			t.Fatalf("port 9000: %+v", pe)
		}
		return c != nil
	})
	up := strings.Repeat("0123456789", 100000) // a million bytes, many windows
	go func() {
		_, _ = io.WriteString(c, up)
		_ = c.(*tunnel.Conn).CloseWrite()
	}()
	down, err := io.ReadAll(c)
	c.Close()
	if err != nil || len(down) != len(up) || string(down[:10]) != "9876543210" {
		t.Errorf("echo: %d bytes, %v", len(down), err)
	}

	for name, tc := range map[string]struct {
		port   int
		tenant string
		want   queue.PortErrorCode
	}{
		"a closed port":    {8001, h.tenant, queue.PortClosed},
		"the egress relay": {3128, h.tenant, queue.PortForbidden},
		"another tenant":   {8000, "ten_01jzzzzzzzzzzzzzzzzzzzzzzz", queue.PortGone},
	} {
		if c, pe := h.openPort(t, m, sid, tc.tenant, tc.port); pe == nil || pe.Code != tc.want {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s: %+v, want %s", name, pe, tc.want)
		}
	}

	// At most MaxConns at once; one closed makes room.
	var open []net.Conn
	for range 3 {
		c, pe := h.openPort(t, m, sid, h.tenant, 8000)
		if pe != nil {
			t.Fatalf("a connection within the bound: %+v", pe)
		}
		open = append(open, c)
	}
	if c, pe := h.openPort(t, m, sid, h.tenant, 8000); pe == nil || pe.Code != queue.PortBusy || pe.Limit != 3 {
		if c != nil {
			c.Close()
		}
		t.Errorf("a fourth connection: %+v", pe)
	}
	open[0].Close()
	eventually.True(t, 10*time.Second, "a closed connection makes room", func() bool {
		c, pe := h.openPort(t, m, sid, h.tenant, 8000)
		if c != nil {
			c.Close()
		}
		return pe == nil
	})
	for _, c := range open[1:] {
		c.Close()
	}
}
