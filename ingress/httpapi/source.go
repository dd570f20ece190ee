package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// keySource is the address a request's key attempts are counted against
// (service.Authenticate throttles invalid keys per source): the peer's, or
// behind a trusted proxy (GANTRY_TRUSTED_PROXIES) the nearest address in
// X-Forwarded-For that is not one of the proxies.
func (s *Server) keySource(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !s.trusted(addr) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if !s.trusted(hop) {
			return hop.String()
		}
	}
	return host
}

func (s *Server) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
