package egress

import (
	"fmt"
	"maps"
	"net/http"
	"sort"
	"strings"
)

// HeaderRules are the headers the proxy sets on requests to some hosts: a
// job's or sandbox's network rules, with the secrets they name already in
// place. A host is an exact name or "*.example.com" (every name below it,
// at any depth, not example.com itself); an exact name wins over
// wildcards, and the longest wildcard over shorter ones; rules of two
// matching keys are not merged. For HTTPS to a host with rules the proxy
// terminates TLS (Proxy.CA). The values are secrets: HeaderRules prints
// as its hosts only.
type HeaderRules struct {
	exact map[string]http.Header
	wild  []wildHeaders // longest suffix first
	// broken are rules that cannot be applied (a secret they name is
	// gone), by host: requests to it are refused with the reason.
	broken map[string]string
}

type wildHeaders struct {
	suffix string // ".example.com"
	h      http.Header
}

// NewHeaderRules makes the rules of each host (lowercase, without a final
// dot; "*.name" for wildcards).
func NewHeaderRules(byHost map[string]http.Header) HeaderRules {
	r := HeaderRules{exact: map[string]http.Header{}}
	for host, h := range byHost {
		host = strings.TrimSuffix(strings.ToLower(host), ".")
		if rest, ok := strings.CutPrefix(host, "*."); ok {
			r.wild = append(r.wild, wildHeaders{suffix: "." + rest, h: h})
		} else {
			r.exact[host] = h
		}
	}
	sort.Slice(r.wild, func(i, j int) bool { return len(r.wild[i].suffix) > len(r.wild[j].suffix) })
	return r
}

// Broken returns the rules with host's marked as not applicable, for why
// (which must hold no secret): the proxy refuses the host rather than send
// its requests without their headers.
func (r HeaderRules) Broken(host, why string) HeaderRules {
	b := make(map[string]string, len(r.broken)+1)
	for k, v := range r.broken {
		b[k] = v
	}
	b[strings.TrimSuffix(strings.ToLower(host), ".")] = why
	r.broken = b
	if _, ok := r.exact[host]; !ok && !strings.HasPrefix(host, "*.") {
		r.exact = maps.Clone(r.exact)
		if r.exact == nil {
			r.exact = map[string]http.Header{}
		}
		r.exact[host] = http.Header{}
	}
	return r
}

// refusal is why requests to host are refused ("" when they are not):
// the rule matching it is broken.
func (r HeaderRules) refusal(host string) string {
	if len(r.broken) == 0 {
		return ""
	}
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if why, ok := r.broken[h]; ok {
		return why
	}
	if _, ok := r.exact[h]; ok {
		return ""
	}
	for _, w := range r.wild {
		if strings.HasSuffix(h, w.suffix) {
			return r.broken["*"+w.suffix]
		}
	}
	return ""
}

// Empty reports whether no host has rules.
func (r HeaderRules) Empty() bool { return len(r.exact) == 0 && len(r.wild) == 0 }

// For returns the headers set on requests to host (nil: none).
func (r HeaderRules) For(host string) http.Header {
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if x, ok := r.exact[h]; ok {
		return x
	}
	for _, w := range r.wild {
		if strings.HasSuffix(h, w.suffix) {
			return w.h
		}
	}
	return nil
}

// apply sets the host's headers on h; it reports whether there were any.
func (r HeaderRules) apply(host string, h http.Header) bool {
	set := r.For(host)
	for k, v := range set {
		h[k] = append([]string(nil), v...)
	}
	return set != nil
}

// String names the hosts, never the values.
func (r HeaderRules) String() string {
	var hosts []string
	for h := range r.exact {
		hosts = append(hosts, h)
	}
	for _, w := range r.wild {
		hosts = append(hosts, "*"+w.suffix)
	}
	sort.Strings(hosts)
	return fmt.Sprintf("header rules for %s", strings.Join(hosts, ", "))
}

// GoString is String: %#v shows no value either.
func (r HeaderRules) GoString() string { return r.String() }
