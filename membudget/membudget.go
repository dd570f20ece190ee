// Package membudget bounds the memory a process holds on behalf of its
// callers: bytes that answers are assembled from (a job's output read back
// from the object store, the files an API fetches for its answer, their
// base64 and JSON), per tenant and in all.
//
// A Budget is the process's: a limit per tenant and a limit in all. A Meter
// is one call's share of it, carried in the call's context (WithMeter):
// whatever code holds bytes for the call charges them to the meter in its
// context (Charge, Reader), and everything the call held is given back
// when the call ends (Meter.Close). Charges never wait: a charge that does
// not fit fails at once with an *Error saying which limit it met, so a call
// holding bytes can never wait for another that waits for it. Code without
// a meter in its context (background work) is not bounded here.
package membudget

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// Budget is a limit on bytes held per tenant and in all. Its methods are
// safe for concurrent use.
type Budget struct {
	perTenant, total int64

	mu       sync.Mutex
	held     int64
	byTenant map[string]int64
	refused  [scopes]int64
}

// New makes a budget of perTenant bytes per tenant and total in all. A
// tenant's limit above the total is the total.
func New(perTenant, total int64) *Budget {
	return &Budget{perTenant: min(perTenant, total), total: total, byTenant: map[string]int64{}}
}

// Limits are the budget's limits: per tenant and in all.
func (b *Budget) Limits() (perTenant, total int64) { return b.perTenant, b.total }

// Held is how many bytes are held now, in all.
func (b *Budget) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// Refused is how many charges were refused for the scope so far.
func (b *Budget) Refused(s Scope) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refused[s]
}

// Scope is the limit a refused charge met.
type Scope int

// The scopes of a refusal.
const (
	// ScopeCall: the call alone would hold more than a tenant may: it can
	// never fit, however long it waits.
	ScopeCall Scope = iota
	// ScopeTenant: the tenant's calls in progress hold its limit.
	ScopeTenant
	// ScopeTotal: all calls in progress hold the process's limit.
	ScopeTotal
	scopes
)

// Error is a refused charge.
type Error struct {
	Scope Scope
	// Need is what the charge asked for; Held what its scope held then;
	// Limit the scope's limit.
	Need, Held, Limit int64
}

func (e *Error) Error() string {
	switch e.Scope {
	case ScopeCall:
		return fmt.Sprintf("the answer would hold %d bytes of memory, more than the %d one tenant's answers may hold at once", e.Held+e.Need, e.Limit)
	case ScopeTenant:
		return fmt.Sprintf("the tenant's answers in progress hold %d of the %d bytes of memory they may hold at once", e.Held, e.Limit)
	}
	return fmt.Sprintf("the answers in progress hold %d of the %d bytes of memory this process gives them", e.Held, e.Limit)
}

// hold takes n bytes for the tenant, whose call already holds call bytes,
// or nothing.
func (b *Budget) hold(tenant string, call, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var err *Error
	switch t := b.byTenant[tenant]; {
	case call+n > b.perTenant:
		err = &Error{Scope: ScopeCall, Need: n, Held: call, Limit: b.perTenant}
	case t+n > b.perTenant:
		err = &Error{Scope: ScopeTenant, Need: n, Held: t, Limit: b.perTenant}
	case b.held+n > b.total:
		err = &Error{Scope: ScopeTotal, Need: n, Held: b.held, Limit: b.total}
	}
	if err != nil {
		b.refused[err.Scope]++
		return err
	}
	b.held += n
	b.byTenant[tenant] += n
	return nil
}

func (b *Budget) release(tenant string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
	if b.byTenant[tenant] -= n; b.byTenant[tenant] <= 0 {
		delete(b.byTenant, tenant)
	}
}

// Meter is one call's share of a budget. Its methods are safe for
// concurrent use (a call may read several objects at once), and do
// nothing on a nil Meter.
type Meter struct {
	b *Budget

	mu     sync.Mutex
	tenant string
	held   int64
	closed bool
}

// Meter starts a call's meter. Its charges count against the tenant it is
// bound to (Bind), and until then against the unnamed tenant "".
func (b *Budget) Meter() *Meter { return &Meter{b: b} }

// Bind names the call's tenant, once it is known (when the call is
// authenticated), before the first charge: once the call holds bytes,
// Bind is ignored.
func (m *Meter) Bind(tenant string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == 0 && !m.closed {
		m.tenant = tenant
	}
}

// Charge holds n more bytes for the call until release is called or the
// call ends (Close), whichever comes first; release may be called more
// than once. A charge that does not fit holds nothing and is an *Error. A
// charge after Close holds nothing and succeeds: the call is over, and what
// still runs on its behalf is not its answer.
func (m *Meter) Charge(n int64) (release func(), err error) {
	if m == nil || n <= 0 {
		return func() {}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return func() {}, nil
	}
	if err := m.b.hold(m.tenant, m.held, n); err != nil {
		return func() {}, err
	}
	m.held += n
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.closed {
				return
			}
			m.held -= n
			m.b.release(m.tenant, n)
		})
	}, nil
}

// Close gives back everything the call holds. It is idempotent.
func (m *Meter) Close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	m.b.release(m.tenant, m.held)
	m.held = 0
}

type meterKey struct{}

// WithMeter is ctx carrying the call's meter.
func WithMeter(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// From is the meter ctx carries (nil: none).
func From(ctx context.Context) *Meter {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m
}

// Charge charges n bytes to the meter ctx carries (Meter.Charge); without
// one it holds nothing and succeeds.
func Charge(ctx context.Context, n int64) (release func(), err error) {
	return From(ctx).Charge(n)
}

// Reader is r with every chunk read from it charged, times per, to the
// meter ctx carries, before the chunk is handed on: a read that would go
// past the budget fails with the *Error at that chunk instead of holding
// the rest. per counts what the caller makes of each byte (2: the bytes
// and one copy of them). What it charges is held until the call ends.
func Reader(ctx context.Context, r io.Reader, per int64) io.Reader {
	m := From(ctx)
	if m == nil {
		return r
	}
	return &reader{r: r, m: m, per: per}
}

type reader struct {
	r   io.Reader
	m   *Meter
	per int64
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		if _, cerr := r.m.Charge(int64(n) * r.per); cerr != nil {
			return 0, cerr
		}
	}
	return n, err
}
