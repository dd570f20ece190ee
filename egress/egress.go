// Package egress guards the connections gantry opens to addresses that
// tenants choose (upstream MCP servers in code mode, webhook receivers): by
// default they may reach only public addresses, checked on the address
// actually dialled, so a name that resolves to a private address (DNS
// rebinding included) is refused as surely as a literal one.
package egress

import (
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
	// AllowPrivate lets connections reach loopback, private, link-local and
	// other non-public addresses.
	AllowPrivate bool
	// Setting names the operator's switch for AllowPrivate (such as
	// GANTRY_MCP_ALLOW_PRIVATE), quoted in refusals.
	Setting string
}

// Dialer returns a dialer that refuses non-public addresses unless the
// policy allows them.
func (p Policy) Dialer(timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !p.AllowPrivate {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip := net.ParseIP(host)
			if ip == nil || !PublicIP(ip) {
				return p.refusal(host)
			}
			return nil
		}
	}
	return d
}

// Transport is an HTTP transport whose connections go through Dialer.
func (p Policy) Transport() *http.Transport {
	return &http.Transport{
		DialContext: p.Dialer(10 * time.Second).DialContext, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 8,
		IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 5 * time.Minute,
	}
}

// CheckHost refuses, before any connection, a host that is plainly not
// public: a literal non-public IP address or a localhost name. Other names
// are checked when dialled.
func (p Policy) CheckHost(host string) error {
	if p.AllowPrivate {
		return nil
	}
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return p.refusal(host)
	}
	if a, err := netip.ParseAddr(h); err == nil && !PublicIP(net.IP(a.AsSlice())) {
		return p.refusal(host)
	}
	return nil
}

func (p Policy) refusal(host string) error {
	return fmt.Errorf("address %s is not public; the operator allows only public addresses (%s)", host, p.Setting)
}

// PublicIP reports whether ip is a public unicast address: not loopback,
// private, link-local, unspecified, multicast or carrier-grade NAT.
func PublicIP(ip net.IP) bool {
	return !(ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() ||
		// Carrier-grade NAT and the IPv4-in-IPv6 forms of private ranges.
		(ip.To4() != nil && ip.To4()[0] == 100 && ip.To4()[1]&0xc0 == 64))
}
