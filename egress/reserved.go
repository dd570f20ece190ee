package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Endpoint is one of gantry's own services, which no egress connection
// may reach.
type Endpoint struct {
	// What it is, for the refusal ("NATS", "Postgres").
	What string
	// Host is a name, an address, a prefix ("10.1.0.0/16"), or "" for
	// every address of this host (a listener on 0.0.0.0 or [::]).
	Host string
	// Port is its port; 0 covers every port.
	Port int
}

// ParseEndpoint reads "host:port", "[v6]:port", "host", an address or a
// prefix (without a port: every port) as an endpoint called what.
func ParseEndpoint(what, s string) (Endpoint, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Endpoint{}, fmt.Errorf("empty")
	}
	if port, ok := strings.CutPrefix(s, ":"); ok { // ":8080": every address of this host
		e, err := parseAllowEntry("0.0.0.0:" + port)
		if err != nil {
			return Endpoint{}, err
		}
		return Endpoint{What: what, Port: e.port}, nil
	}
	if _, err := netip.ParsePrefix(s); err == nil {
		return Endpoint{What: what, Host: s}, nil
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return Endpoint{What: what, Host: a.String()}, nil
	}
	e, err := parseAllowEntry(s)
	if err != nil {
		return Endpoint{}, err
	}
	if e.suffix {
		return Endpoint{}, fmt.Errorf("a name, not a pattern")
	}
	host := e.name
	if host == "" {
		host = e.prefix.String()
		if e.prefix.IsSingleIP() {
			host = e.prefix.Addr().String()
		}
	}
	return Endpoint{What: what, Host: host, Port: e.port}, nil
}

// Reserved is gantry's own services: the addresses no egress connection
// may reach, whatever a tenant or the operator's private list says. A
// connection is checked on the address it is about to dial against every
// endpoint on its port:
//   - an endpoint's names are resolved (again every 30 s), and every
//     address they resolve to is refused;
//   - an endpoint on this host (a loopback or unspecified address, a name
//     resolving to one, one of this host's interface addresses, or no host
//     at all) refuses every address that reaches this host: all of
//     127.0.0.0/8 and ::1, 0.0.0.0 and ::, and each interface address;
//   - IPv6 forms of IPv4 addresses (mapped, compatible, NAT64, 6to4) are
//     checked as the IPv4 address they carry.
//
// A name that cannot be resolved (and never was) refuses its port
// altogether until it can be: not knowing where a service is must not
// open it.
type Reserved struct {
	static []Endpoint
	more   func() []Endpoint

	// lookup and interfaces are replaceable by tests.
	lookup     func(ctx context.Context, host string) ([]netip.Addr, error)
	interfaces func() ([]netip.Addr, error)

	mu      sync.Mutex
	names   map[string]resolved
	local   []netip.Addr
	localAt time.Time
}

type resolved struct {
	addrs []netip.Addr
	at    time.Time
}

// How long a resolved name and this host's interface addresses are
// believed.
const (
	reservedNameTTL  = 30 * time.Second
	reservedLocalTTL = 10 * time.Second
)

// NewReserved makes the reserved set of endpoints, and of those more
// returns on each check (nil: none; it must be cheap, such as the servers
// a NATS connection has discovered).
func NewReserved(endpoints []Endpoint, more func() []Endpoint) *Reserved {
	return &Reserved{static: endpoints, more: more, names: map[string]resolved{},
		lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
		interfaces: interfaceAddrs}
}

func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if x, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, x.Unmap())
			}
		}
	}
	return out, nil
}

// Endpoints is every endpoint now reserved.
func (r *Reserved) Endpoints() []Endpoint {
	if r.more == nil {
		return r.static
	}
	return append(append([]Endpoint(nil), r.static...), r.more()...)
}

// Check refuses ap when it is, or reaches, one of the endpoints (a
// *Refusal saying which).
func (r *Reserved) Check(ctx context.Context, ap netip.AddrPort) error {
	forms := Forms(ap.Addr())
	port := int(ap.Port())
	for _, e := range r.Endpoints() {
		if e.Port != 0 && e.Port != port {
			continue
		}
		set, local, err := r.where(ctx, e.Host)
		if err != nil {
			return &Refusal{fmt.Sprintf("port %d is refused: gantry's own %s there could not be resolved (%v), so it cannot be kept out of reach", port, e.What, err)}
		}
		for _, a := range forms {
			hit := local && r.isLocal(a)
			for _, p := range set {
				hit = hit || p.Contains(a)
			}
			if hit {
				return &Refusal{fmt.Sprintf("%s is gantry's own %s: egress never reaches gantry's services", netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), e.What)}
			}
		}
	}
	return nil
}

// where is what host covers: its prefixes, and whether it is this host.
func (r *Reserved) where(ctx context.Context, host string) ([]netip.Prefix, bool, error) {
	h := strings.Trim(host, "[]")
	if h == "" {
		return nil, true, nil
	}
	if p, err := netip.ParsePrefix(h); err == nil {
		p = p.Masked()
		return []netip.Prefix{p}, r.isLocal(p.Addr()), nil
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(h); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = r.resolve(ctx, h); err != nil {
		return nil, false, err
	}
	local := false
	set := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		a = a.WithZone("").Unmap()
		set = append(set, netip.PrefixFrom(a, a.BitLen()))
		local = local || r.isLocal(a)
	}
	return set, local, nil
}

// resolve looks a name up, or answers from the last lookup younger than
// reservedNameTTL (or any older one, when a new lookup fails).
func (r *Reserved) resolve(ctx context.Context, name string) ([]netip.Addr, error) {
	key := strings.ToLower(strings.TrimSuffix(name, "."))
	r.mu.Lock()
	c, ok := r.names[key]
	r.mu.Unlock()
	if ok && time.Since(c.at) < reservedNameTTL {
		return c.addrs, nil
	}
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	addrs, err := r.lookup(lctx, key)
	cancel()
	if err != nil || len(addrs) == 0 {
		if ok {
			return c.addrs, nil
		}
		if err == nil {
			err = fmt.Errorf("no address")
		}
		return nil, err
	}
	r.mu.Lock()
	r.names[key] = resolved{addrs: addrs, at: time.Now()}
	r.mu.Unlock()
	return addrs, nil
}

// isLocal reports whether a reaches this host: loopback, unspecified, or
// one of its interfaces' addresses.
func (r *Reserved) isLocal(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	if a.IsLoopback() || a.IsUnspecified() || a.Is4() && a.As4()[0] == 0 {
		return true
	}
	r.mu.Lock()
	if time.Since(r.localAt) >= reservedLocalTTL {
		if l, err := r.interfaces(); err == nil {
			r.local, r.localAt = l, time.Now()
		}
	}
	local := r.local
	r.mu.Unlock()
	for _, l := range local {
		if l.WithZone("") == a {
			return true
		}
	}
	return false
}
