// Package egress guards the connections gantry opens to addresses that
// tenants choose (jobs' egress, upstream MCP servers in code mode, webhook
// receivers): by default they may reach only public addresses, checked on
// the address actually dialled, so a name that resolves to a private
// address (DNS rebinding included) is refused as surely as a literal one.
// Non-public addresses are reached only where the operator lists them
// (PrivateList), and gantry's own services (Reserved) never, whatever any
// list says.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Policy says where connections may go.
type Policy struct {
	// AllowPrivate lets connections reach every loopback, private,
	// link-local and other non-public address (Reserved still applies).
	AllowPrivate bool
	// Private lists the non-public addresses, prefixes and names the
	// operator lets connections reach.
	Private PrivateList
	// Reserved is never reached, whatever AllowPrivate and Private say:
	// gantry's own services (nil: nothing is).
	Reserved *Reserved
	// Narrow are a job's and its sandbox's own narrowings: each must
	// allow a connection.
	Narrow []Narrowing
	// Setting names the operator's switch for non-public addresses (such
	// as GANTRY_MCP_ALLOW_PRIVATE), quoted in refusals.
	Setting string
}

// Refusal is a connection the policy refused. Its message says why, in
// words for the client that asked (it never holds a credential).
type Refusal struct{ msg string }

func (r *Refusal) Error() string { return r.msg }

// IsRefusal reports whether err is (or wraps) a Refusal, and returns it.
func IsRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}

// Dialer returns a dialer that checks every address it dials: never a
// reserved one, and a non-public one only where the policy allows it.
// Names the operator lists in Private are not known to it (DialContext
// knows them).
func (p Policy) Dialer(timeout time.Duration) *net.Dialer {
	return p.dialer(timeout, "")
}

func (p Policy) dialer(timeout time.Duration, name string) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	d.ControlContext = func(ctx context.Context, _, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &Refusal{fmt.Sprintf("address %s cannot be checked", address)}
		}
		return p.CheckAddr(ctx, name, ap)
	}
	return d
}

// DialContext returns a dial function that checks every address it dials
// as Dialer does, knowing the name it was asked for (so a name on the
// operator's Private list may reach its non-public addresses).
func (p Policy) DialContext(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		name := ""
		if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err != nil {
			name = host
		}
		return p.dialer(timeout, name).DialContext(ctx, network, addr)
	}
}

// CheckAddr decides a connection to ap, asked for by name ("" for a
// literal address): reserved addresses never, non-public ones only where
// the policy allows. It is what every dial runs on the address it is
// about to connect to.
func (p Policy) CheckAddr(ctx context.Context, name string, ap netip.AddrPort) error {
	ap = netip.AddrPortFrom(ap.Addr().WithZone(""), ap.Port())
	if p.Reserved != nil {
		if err := p.Reserved.Check(ctx, ap); err != nil {
			return err
		}
	}
	a := ap.Addr()
	for _, n := range p.Narrow {
		if !n.allows(name, a.Unmap()) {
			return p.narrowed(name, a)
		}
	}
	if PublicAddr(a) || p.AllowPrivate || p.Private.allowsAddr(a) || name != "" && p.Private.allowsName(name) {
		return nil
	}
	return p.refusal(a.Unmap().String())
}

// Transport is an HTTP transport whose connections go through
// DialContext.
func (p Policy) Transport() *http.Transport {
	return &http.Transport{
		DialContext: p.DialContext(10 * time.Second), ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 8,
		IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 5 * time.Minute,
	}
}

// CheckHost refuses, before any connection, a host that is plainly not
// public: a literal non-public IP address or a localhost name, unless the
// policy allows it. Other names are checked when dialled (and every
// address, reserved ones included, when dialled).
func (p Policy) CheckHost(host string) error {
	if p.AllowPrivate {
		return nil
	}
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		if p.Private.allowsName(h) {
			return nil
		}
		return p.refusal(host)
	}
	if a, err := netip.ParseAddr(h); err == nil && !PublicAddr(a) && !p.Private.allowsAddr(a.WithZone("")) {
		return p.refusal(host)
	}
	return nil
}

// CheckName refuses, before any connection, a name the narrowings deny.
func (p Policy) CheckName(name string) error {
	for _, n := range p.Narrow {
		if n.refusesName(name) {
			return p.narrowed(name, netip.Addr{})
		}
	}
	return nil
}

func (p Policy) narrowed(name string, a netip.Addr) error {
	what := name
	if what == "" {
		what = a.Unmap().String()
	} else if a.IsValid() {
		what = fmt.Sprintf("%s (%s)", name, a.Unmap())
	}
	return &Refusal{fmt.Sprintf("%s is refused by this sandbox's or job's own network rules (allow_out, deny_out)", what)}
}

func (p Policy) refusal(host string) error {
	return &Refusal{fmt.Sprintf("address %s is not public; the operator allows only public addresses and those it lists (%s)", host, p.Setting)}
}

// PublicIP reports whether ip is a public unicast address: not loopback,
// private, link-local, unspecified, multicast or carrier-grade NAT, nor
// any of those written as an IPv6 address (IPv4-mapped, IPv4-compatible,
// NAT64, 6to4).
func PublicIP(ip net.IP) bool {
	a, ok := netip.AddrFromSlice(ip)
	return ok && PublicAddr(a)
}

// PublicAddr is PublicIP for a netip.Addr.
func PublicAddr(a netip.Addr) bool {
	a = a.WithZone("")
	for _, c := range Forms(a) {
		ip := net.IP(c.AsSlice())
		if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
			ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() ||
			// Carrier-grade NAT.
			c.Is4() && c.As4()[0] == 100 && c.As4()[1]&0xc0 == 64 ||
			// 0.0.0.0/8 reaches this host on Linux.
			c.Is4() && c.As4()[0] == 0 {
			return false
		}
		if c.Is6() && ipv4Compatible.Contains(c) {
			return false // the deprecated ::a.b.c.d form: not routed
		}
	}
	return a.IsValid()
}

var (
	ipv4Compatible = netip.MustParsePrefix("::/96")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

// Forms is a, unmapped, with every IPv4 address it carries as an IPv6
// one (IPv4-mapped, IPv4-compatible, NAT64's well-known and local-use
// prefixes, 6to4): each is checked, since a translator on the way may
// reach the IPv4 address.
func Forms(a netip.Addr) []netip.Addr {
	a = a.WithZone("").Unmap()
	out := []netip.Addr{a}
	if !a.Is6() {
		return out
	}
	b := a.As16()
	switch {
	case ipv4Compatible.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		out = append(out, netip.AddrFrom4([4]byte(b[12:16])))
	case nat64.Contains(a), nat64Local.Contains(a):
		out = append(out, netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		out = append(out, netip.AddrFrom4([4]byte(b[2:6])))
	}
	return out
}
