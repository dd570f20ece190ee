package agent

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

// egressRelay is the agent's end of a run's egress: it accepts the
// relay's connections on a unix socket in the run's program directory
// and carries each to the runner as a stream (netMux). Nothing the
// program sends is read here: bytes pass through to the runner's proxy,
// which decides.
type egressRelay struct {
	ln  *net.UnixListener
	mux *wire.NetMux

	mu     sync.Mutex
	nextID uint32
	wg     sync.WaitGroup
}

func openEgress(sock string, fw *wire.FrameWriter) (*egressRelay, error) {
	_ = os.Remove(sock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, err
	}
	e := &egressRelay{ln: ln, mux: wire.NewNetMux(fw.Frame, nil)}
	e.wg.Add(1)
	go e.accept()
	return e, nil
}

func (e *egressRelay) accept() {
	defer e.wg.Done()
	for {
		c, err := e.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of descriptors: do not spin
			continue
		}
		e.mu.Lock()
		e.nextID++
		id := e.nextID
		e.mu.Unlock()
		s, err := e.mux.Open(id)
		if err != nil {
			c.Close()
			continue
		}
		e.wg.Add(2)
		go func() {
			defer e.wg.Done()
			_, _ = io.Copy(s, c)
			_ = s.CloseWrite()
		}()
		go func() {
			defer e.wg.Done()
			_, _ = io.Copy(c, s)
			_ = c.CloseWrite()
			// Both ways done, or the stream was reset: let go.
			if s.Finished() {
				c.Close()
			}
		}()
	}
}

// handle takes one of the runner's egress frames.
func (e *egressRelay) handle(kind wire.Kind, payload []byte) { e.mux.Handle(kind, payload) }

// close ends every connection and waits until nothing more is sent: the
// run's exit must be the last frame of the run.
func (e *egressRelay) close() {
	_ = e.ln.Close()
	e.mux.Close()
	e.wg.Wait()
}
