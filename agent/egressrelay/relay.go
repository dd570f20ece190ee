// Package egressrelay is the egress relay of a sandbox: it joins each
// connection the sandbox's programs make to the egress proxy's address on
// the sandbox's own loopback to the agent's egress socket, where the agent
// carries it to the runner's proxy. Both the agent (`gantry-agent relay`,
// in front of a program under bubblewrap) and the init of a sandbox the
// warm interpreter made (cmd/gantry-sandbox-init) serve it. Standard
// library only: the init imports it and stays small.
package egressrelay

import (
	"errors"
	"io"
	"net"
	"time"
)

// Serve joins each connection ln accepts to the unix socket at socket,
// until ln is closed.
func Serve(ln net.Listener, socket string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of descriptors: do not spin
			continue
		}
		go splice(c, socket)
	}
}

// splice joins a program's proxy connection to the agent's socket.
func splice(c net.Conn, socket string) {
	defer c.Close()
	up, err := net.Dial("unix", socket)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(c, up)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	<-done
}
