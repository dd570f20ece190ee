package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// keySource is the address a request's key attempts are counted against
// (service.Authenticate throttles invalid keys per source): ClientAddr.
func (s *Server) keySource(r *http.Request) string { return ClientAddr(r, s.cfg.TrustedProxies) }

// ClientAddr is where a request came from: the peer's address, or behind
// a trusted proxy (GANTRY_TRUSTED_PROXIES) the nearest address in
// X-Forwarded-For that is not one of the proxies.
func ClientAddr(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	isTrusted := func(a netip.Addr) bool {
		a = a.Unmap()
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !isTrusted(addr) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if !isTrusted(hop) {
			return hop.String()
		}
	}
	return host
}
