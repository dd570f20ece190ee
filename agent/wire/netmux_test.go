package wire

import (
	"bytes"
	"crypto/rand"
	"io"
	"sync"
	"testing"
)

// pair connects two muxes as the agent and the runner are: every frame one
// sends, the other handles, in order.
func pair(t *testing.T) (agentSide, runnerSide *NetMux, accepted <-chan *NetStream) {
	t.Helper()
	type fr struct {
		kind    Kind
		payload []byte
	}
	toRunner, toAgent := make(chan fr, 1024), make(chan fr, 1024)
	acc := make(chan *NetStream, 16)
	agentSide = NewNetMux(func(k Kind, p []byte) error { toRunner <- fr{k, append([]byte(nil), p...)}; return nil }, nil)
	runnerSide = NewNetMux(func(k Kind, p []byte) error { toAgent <- fr{k, append([]byte(nil), p...)}; return nil },
		func(s *NetStream) { acc <- s })
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case f := <-toRunner:
				runnerSide.Handle(f.kind, f.payload)
			case <-done:
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case f := <-toAgent:
				agentSide.Handle(f.kind, f.payload)
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { agentSide.Close(); runnerSide.Close(); close(done); wg.Wait() })
	return agentSide, runnerSide, acc
}

// TestNetMuxStreams: bytes cross both ways whole and in order, many times
// the window, each side ending its own way; many streams at once.
func TestNetMuxStreams(t *testing.T) {
	a, _, acc := pair(t)
	up := make([]byte, 3<<20)
	down := make([]byte, 2<<20)
	_, _ = rand.Read(up)
	_, _ = rand.Read(down)
	var wg sync.WaitGroup
	for i := range 8 {
		s, err := a.Open(uint32(i + 1))
		if err != nil {
			t.Fatal(err)
		}
		r := <-acc
		wg.Add(2)
		go func() { // the "program" writes up, then reads down
			defer wg.Done()
			if _, err := s.Write(up); err != nil {
				t.Error(err)
			}
			_ = s.CloseWrite()
			got, err := io.ReadAll(s)
			if err != nil || !bytes.Equal(got, down) {
				t.Errorf("down: %d bytes, %v", len(got), err)
			}
			s.Close()
		}()
		go func() { // the "proxy" reads up, then answers down
			defer wg.Done()
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, up) {
				t.Errorf("up: %d bytes, %v", len(got), err)
			}
			if _, err := r.Write(down); err != nil {
				t.Error(err)
			}
			_ = r.CloseWrite()
			r.Close()
		}()
	}
	wg.Wait()
}

// TestNetMuxHoldsAtMostAWindow: a sender that ignores flow control loses
// its stream rather than making the receiver hold more than the window; a
// reset ends both ends' reads and writes.
func TestNetMuxHoldsAtMostAWindow(t *testing.T) {
	_, r, acc := pair(t)
	r.Handle(KindNetOpen, netHeader(7, 0))
	s := <-acc
	flood := append(netHeader(7, netWindow), make([]byte, netWindow)...)
	r.Handle(KindNetData, flood) // exactly the window: kept
	r.Handle(KindNetData, append(netHeader(7, 1), 'x'))
	buf := make([]byte, 1)
	// The window's bytes were taken, then the stream was reset.
	s.mu.Lock()
	reset := s.reset
	s.mu.Unlock()
	if !reset {
		t.Fatal("a stream past its window was not reset")
	}
	if _, err := s.Write([]byte("y")); err == nil {
		t.Error("write after reset")
	}
	if n, _ := s.Read(buf); n != 0 {
		// Bytes read before the reset may be served; none after.
		t.Logf("read %d", n)
	}
	// Frames for unknown streams are answered with a reset, never kept.
	if !r.Handle(KindNetData, append(netHeader(99, 3), "abc"...)) || len(r.streams) != 0 {
		t.Errorf("an unknown stream: %d streams", len(r.streams))
	}
	if r.Handle(KindStdout, nil) {
		t.Error("a stdout frame was taken for egress")
	}
}
