package membudget

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
)

func scope(t *testing.T, err error) Scope {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want an *Error", err)
	}
	return e.Scope
}

func TestLimits(t *testing.T) {
	b := New(100, 150)
	a1, a2, c := b.Meter(), b.Meter(), b.Meter()
	a1.Bind("a")
	a2.Bind("a")
	c.Bind("c")
	if _, err := a1.Charge(101); scope(t, err) != ScopeCall {
		t.Errorf("a call past the tenant's limit: %v", err)
	}
	if _, err := a1.Charge(60); err != nil {
		t.Fatal(err)
	}
	if _, err := a2.Charge(50); scope(t, err) != ScopeTenant {
		t.Errorf("a tenant past its limit: %v", err)
	}
	if _, err := c.Charge(91); scope(t, err) != ScopeTotal {
		t.Errorf("past the total: %v", err)
	}
	release, err := c.Charge(90)
	if err != nil {
		t.Fatal(err)
	}
	if b.Held() != 150 {
		t.Errorf("held %d, want 150", b.Held())
	}
	release()
	release() // twice: once
	if b.Held() != 60 {
		t.Errorf("held %d after a release, want 60", b.Held())
	}
	a1.Close()
	a1.Close()
	if b.Held() != 0 {
		t.Errorf("held %d after the calls ended, want 0", b.Held())
	}
	// A closed call holds nothing more, and fails nothing.
	if _, err := a1.Charge(1000); err != nil || b.Held() != 0 {
		t.Errorf("a charge after close: %v, held %d", err, b.Held())
	}
	if b.Refused(ScopeCall) != 1 || b.Refused(ScopeTenant) != 1 || b.Refused(ScopeTotal) != 1 {
		t.Errorf("refusals counted: %d %d %d", b.Refused(ScopeCall), b.Refused(ScopeTenant), b.Refused(ScopeTotal))
	}
}

func TestReleaseAfterClose(t *testing.T) {
	b := New(100, 100)
	m := b.Meter()
	release, _ := m.Charge(40)
	m.Close()
	release() // the close gave it back already
	if b.Held() != 0 {
		t.Errorf("held %d", b.Held())
	}
}

func TestReader(t *testing.T) {
	b := New(1000, 1000)
	m := b.Meter()
	m.Bind("a")
	ctx := WithMeter(context.Background(), m)
	got, err := io.ReadAll(Reader(ctx, bytes.NewReader(make([]byte, 400)), 2))
	if err != nil || len(got) != 400 || b.Held() != 800 {
		t.Fatalf("read %d bytes, %v; held %d, want 800", len(got), err, b.Held())
	}
	_, err = io.ReadAll(Reader(ctx, bytes.NewReader(make([]byte, 400)), 2))
	if scope(t, err) != ScopeCall {
		t.Errorf("a read past the budget: %v", err)
	}
	m.Close()
	if b.Held() != 0 {
		t.Errorf("held %d after close", b.Held())
	}
	// Without a meter nothing is charged.
	if _, err := io.ReadAll(Reader(context.Background(), bytes.NewReader(make([]byte, 4000)), 2)); err != nil {
		t.Error(err)
	}
}

func TestConcurrent(t *testing.T) {
	b := New(1<<20, 1<<20)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := b.Meter()
			m.Bind("a")
			defer m.Close()
			for range 100 {
				if release, err := m.Charge(100); err == nil {
					release()
				}
				_, _ = m.Charge(10)
			}
		}()
	}
	wg.Wait()
	if b.Held() != 0 {
		t.Errorf("held %d after every call ended", b.Held())
	}
}
