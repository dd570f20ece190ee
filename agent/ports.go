package agent

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

// The agent's end of port streams (wire.NewPortMux): each stream the
// runner dials is a TCP connection to a port on the live sandbox's own
// loopback. The sandbox has a network namespace of its own, with only
// lo; the agent is outside it (or, under the Container isolation, beside
// it, but goes the same way). The sandbox's process service lives in it:
// asked to dial, it connects there and hands the connection over as a
// descriptor (warm.py's _processes, "dial"), and the agent splices it to
// the stream. Nothing but that connection is made: the port is the
// sandbox's own, on its loopback, and gantry's own port there (the egress
// relay's, wire.ReservedPort) is refused before anything is asked.

// dialWait bounds how long a connection to a sandbox's port may take.
const dialWait = 10 * time.Second

// acceptPort answers a port stream the runner dialled, on a goroutine of
// its own (the reader's must go on).
func (s *server) acceptPort(st *wire.NetStream, port int) {
	go func() {
		if wire.ReservedPort(port) {
			st.Refuse(wire.PortForbidden)
			return
		}
		c, why := s.dialSandbox(port)
		if c == nil {
			st.Refuse(why)
			return
		}
		if err := st.Accept(); err != nil {
			c.Close()
			st.Close()
			return
		}
		splicePort(c, st)
	}()
}

// dialSandbox connects to port on the live sandbox's loopback, or says
// why it cannot.
func (s *server) dialSandbox(port int) (*net.TCPConn, wire.PortRefusal) {
	s.liveMu.Lock()
	l := s.live
	s.liveMu.Unlock()
	if l == nil || l.isGone() {
		return nil, wire.PortNoSandbox
	}
	ps := l.processes()
	if ps == nil || ps.isGone() {
		return nil, wire.PortNoSandbox
	}
	return ps.dial(port)
}

// dial asks the process service for a connection to port on the sandbox's
// loopback. What it hands over is untrusted: only a TCP connection to
// that port on a loopback address is taken.
func (ps *processService) dial(port int) (*net.TCPConn, wire.PortRefusal) {
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, wire.PortFailed
	}
	ours := os.NewFile(uintptr(pair[0]), "dial")
	a, err := ps.request(map[string]any{"op": "dial", "port": port}, []int{pair[1]}, nil)
	syscall.Close(pair[1])
	fc, ferr := net.FileConn(ours)
	ours.Close()
	if ferr != nil {
		return nil, wire.PortFailed
	}
	uc := fc.(*net.UnixConn)
	defer uc.Close()
	switch {
	case err != nil:
		return nil, wire.PortNoSandbox
	case a.Error != "":
		return nil, wire.PortFailed
	}
	_ = uc.SetReadDeadline(time.Now().Add(dialWait))
	buf := make([]byte, 64)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	var fds []int
	if msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for _, m := range msgs {
			if got, perr := syscall.ParseUnixRights(&m); perr == nil {
				fds = append(fds, got...)
			}
		}
	}
	ok := err == nil && string(buf[:n]) == "ok" && len(fds) == 1
	if !ok {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		if err == nil && string(buf[:n]) == "EECONNREFUSED" {
			return nil, wire.PortClosed
		}
		return nil, wire.PortFailed
	}
	f := os.NewFile(uintptr(fds[0]), "port")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, wire.PortFailed
	}
	tc, isTCP := c.(*net.TCPConn)
	if !isTCP {
		c.Close()
		return nil, wire.PortFailed
	}
	if ra, _ := tc.RemoteAddr().(*net.TCPAddr); ra == nil || !ra.IP.IsLoopback() || ra.Port != port {
		tc.Close()
		return nil, wire.PortFailed
	}
	return tc, 0
}

// splicePort joins a connection to a sandbox's port to its stream until
// both ways end, or either is broken (then both are).
func splicePort(c *net.TCPConn, st *wire.NetStream) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := io.Copy(st, c); err != nil && !errors.Is(err, net.ErrClosed) {
			st.Close()
			c.Close()
			return
		}
		_ = st.CloseWrite()
	}()
	if _, err := io.Copy(c, st); err != nil {
		c.Close() // the stream was reset: so is the connection
	} else {
		_ = c.CloseWrite()
	}
	wg.Wait()
	c.Close()
	st.Close()
}
