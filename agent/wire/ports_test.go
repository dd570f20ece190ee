package wire

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

// portPair connects a runner's port mux to an agent's, as a container's
// stream does; the agent's accepts with accept.
func portPair(t *testing.T, accept func(s *NetStream, port int)) (runnerSide, agentSide *NetMux) {
	t.Helper()
	type fr struct {
		kind    Kind
		payload []byte
	}
	toRunner, toAgent := make(chan fr, 1024), make(chan fr, 1024)
	runnerSide = NewPortMux(func(k Kind, p []byte) error { toAgent <- fr{k, append([]byte(nil), p...)}; return nil }, nil)
	agentSide = NewPortMux(func(k Kind, p []byte) error { toRunner <- fr{k, append([]byte(nil), p...)}; return nil }, accept)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	pump := func(from chan fr, to *NetMux) {
		defer wg.Done()
		for {
			select {
			case f := <-from:
				if !to.Handle(f.kind, f.payload) {
					t.Errorf("frame %q is not a port frame", f.kind)
				}
			case <-done:
				return
			}
		}
	}
	go pump(toRunner, runnerSide)
	go pump(toAgent, agentSide)
	t.Cleanup(func() { runnerSide.Close(); agentSide.Close(); close(done); wg.Wait() })
	return runnerSide, agentSide
}

// TestPortStreams: a dialled port answers with a stream whose bytes cross
// both ways whole, many windows long; a refused one says why; a dial
// nobody answers ends with its context.
func TestPortStreams(t *testing.T) {
	echoed := make(chan int, 8)
	r, _ := portPair(t, func(s *NetStream, port int) {
		switch port {
		case 8080:
			go func() {
				if err := s.Accept(); err != nil {
					t.Error(err)
				}
				echoed <- port
				_, _ = io.Copy(s, s) // an echo server
				_ = s.CloseWrite()
				s.Close()
			}()
		case 3128:
			s.Refuse(PortForbidden)
		case 9:
			// never answered
		default:
			s.Refuse(PortClosed)
		}
	})
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		s, err := r.Dial(ctx, 8080)
		if err != nil {
			t.Fatal(err)
		}
		<-echoed
		up := make([]byte, 1<<20)
		_, _ = rand.Read(up)
		wg.Add(1)
		go func() {
			defer wg.Done()
			go func() {
				_, _ = s.Write(up)
				_ = s.CloseWrite()
			}()
			got, err := io.ReadAll(s)
			if err != nil || !bytes.Equal(got, up) {
				t.Errorf("echoed %d of %d bytes: %v", len(got), len(up), err)
			}
			s.Close()
		}()
	}
	wg.Wait()

	for port, want := range map[int]PortRefusal{3128: PortForbidden, 3000: PortClosed, 0: PortFailed, 70000: PortFailed} {
		_, err := r.Dial(ctx, port)
		var pe *PortError
		if !errors.As(err, &pe) || pe.Why != want {
			t.Errorf("port %d: %v, want refusal %q", port, err, want)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := r.Dial(short, 9); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an unanswered dial: %v", err)
	}
	if !ReservedPort(3128) || ReservedPort(3000) {
		t.Error("ReservedPort")
	}
}

// TestPortMuxBounds: the agent's end refuses streams past its bound, and
// the runner's dials fail once its connection is gone.
func TestPortMuxBounds(t *testing.T) {
	r, a := portPair(t, func(s *NetStream, port int) { _ = s.Accept() })
	a.max = 2
	ctx := context.Background()
	for range 2 {
		if _, err := r.Dial(ctx, 80); err != nil {
			t.Fatal(err)
		}
	}
	var pe *PortError
	if _, err := r.Dial(ctx, 80); !errors.As(err, &pe) || pe.Why != PortBusy {
		t.Errorf("a third stream: %v", err)
	}
	r.Close()
	if _, err := r.Dial(ctx, 80); err == nil {
		t.Error("a dial after the mux closed")
	}
}
