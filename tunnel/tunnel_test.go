package tunnel

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/queue/queuetest"
)

// pair makes two Muxes on their own NATS connections, as two processes
// have, and a Conn between them.
func pair(t *testing.T, cfg Config) (a, b *Mux, ca, cb *Conn, ncB *nats.Conn) {
	t.Helper()
	ns := queuetest.Server(t)
	ncA := queuetest.Connect(t, ns)
	ncB = queuetest.Connect(t, ns)
	var err error
	if a, err = New(ncA, cfg); err != nil {
		t.Fatal(err)
	}
	if b, err = New(ncB, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	if ca, err = a.NewConn(); err != nil {
		t.Fatal(err)
	}
	if cb, err = b.NewConn(); err != nil {
		t.Fatal(err)
	}
	cb.Connect(ca.Subject())
	ca.Connect(cb.Subject())
	return a, b, ca, cb, ncB
}

// TestStreams: bytes cross both ways whole and in order, many windows
// long, each end ending its own way, the Conns gone from their Muxes after.
func TestStreams(t *testing.T) {
	a, b, ca, cb, _ := pair(t, Config{})
	up, down := make([]byte, 3<<20), make([]byte, 2<<20)
	_, _ = rand.Read(up)
	_, _ = rand.Read(down)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if _, err := ca.Write(up); err != nil {
			t.Error(err)
		}
		_ = ca.CloseWrite()
		got, err := io.ReadAll(ca)
		if err != nil || !bytes.Equal(got, down) {
			t.Errorf("down: %d bytes, %v", len(got), err)
		}
	}()
	go func() {
		defer wg.Done()
		got, err := io.ReadAll(cb)
		if err != nil || !bytes.Equal(got, up) {
			t.Errorf("up: %d bytes, %v", len(got), err)
		}
		if _, err := cb.Write(down); err != nil {
			t.Error(err)
		}
		_ = cb.CloseWrite()
	}()
	wg.Wait()
	ca.Close()
	cb.Close()
	if a.Open() != 0 || b.Open() != 0 {
		t.Errorf("conns left: %d, %d", a.Open(), b.Open())
	}
}

// TestHoldsAtMostAWindow: a writer whose reader does not read waits once
// a window is in flight; the reader's end holds no more than that.
func TestHoldsAtMostAWindow(t *testing.T) {
	_, _, ca, cb, _ := pair(t, Config{})
	wrote := make(chan int, 1)
	go func() {
		n, _ := ca.Write(make([]byte, 4*Window))
		wrote <- n
	}()
	eventually.True(t, 10*time.Second, "a window of bytes arrives", func() bool {
		cb.mu.Lock()
		defer cb.mu.Unlock()
		return cb.in.Len() == Window
	})
	select {
	case n := <-wrote:
		t.Fatalf("the writer finished (%d bytes) past the window", n)
	case <-time.After(200 * time.Millisecond):
	}
	// Reading lets the rest through.
	got, err := io.ReadFull(cb, make([]byte, 4*Window))
	if err != nil || got != 4*Window || <-wrote != 4*Window {
		t.Fatalf("read %d: %v", got, err)
	}
}

// TestResets: a Close that is not an end both ways resets the peer; a
// message out of sequence resets the Conn; data for a Conn that is gone
// resets its sender; deadlines end waits.
func TestResets(t *testing.T) {
	a, b, ca, cb, ncB := pair(t, Config{})
	ca.Close()
	if _, err := cb.Read(make([]byte, 1)); !errors.Is(err, ErrReset) {
		t.Errorf("read after the peer's close: %v", err)
	}
	if _, err := cb.Write([]byte("x")); !errors.Is(err, ErrReset) {
		t.Errorf("write after the peer's close: %v", err)
	}

	// A lost message: sequence 2 before 1.
	c, _ := a.NewConn()
	c.Connect("nobody")
	if err := ncB.Publish(c.Subject(), []byte{kindData, 0, 0, 0, 2, 'x'}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, ErrReset) {
		t.Errorf("read after a gap: %v", err)
	}

	// Data for a Conn that is gone.
	gone, _ := b.NewConn()
	orphan, _ := a.NewConn()
	orphan.Connect(gone.Subject())
	gone.Connect(orphan.Subject())
	gone.Close()
	_, _ = orphan.Write([]byte("hello"))
	if _, err := orphan.Read(make([]byte, 1)); !errors.Is(err, ErrReset) {
		t.Errorf("read from a Conn whose peer is gone: %v", err)
	}

	d, _ := a.NewConn()
	d.Connect("nobody")
	_ = d.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := d.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read past its deadline: %v", err)
	}
	d.Close()
	if _, err := d.Read(make([]byte, 1)); err == nil {
		t.Error("read after close")
	}
}

// TestDeadPeer: a Conn whose peer's process went away (its NATS
// connection gone) is reset once it has heard nothing for Dead; a quiet
// live one is not.
func TestDeadPeer(t *testing.T) {
	_, _, ca, cb, ncB := pair(t, Config{Ping: 50 * time.Millisecond, Dead: 2 * time.Second})
	time.Sleep(2500 * time.Millisecond) // time passing, quiet, both alive: pings keep them
	if _, err := ca.Write([]byte("still")); err != nil {
		t.Fatalf("a quiet live conn was reset: %v", err)
	}
	if got, err := io.ReadFull(cb, make([]byte, 5)); err != nil || got != 5 {
		t.Fatalf("%d %v", got, err)
	}
	ncB.Close()
	done := make(chan error, 1)
	go func() {
		_, err := ca.Read(make([]byte, 1))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrReset) {
			t.Errorf("read from a dead peer: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a dead peer's conn was never reset")
	}
}

// TestMaxConns: a Mux makes at most MaxConns.
func TestMaxConns(t *testing.T) {
	a, _, _, _, _ := pair(t, Config{MaxConns: 2})
	if _, err := a.NewConn(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.NewConn(); !errors.Is(err, ErrTooMany) {
		t.Errorf("a third conn: %v", err)
	}
}
