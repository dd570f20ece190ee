package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// PrivateList is the operator's list of non-public places connections may
// reach: addresses ("10.1.2.3"), prefixes ("10.1.0.0/16", "fd00::/8") and
// names ("pypi.internal", "*.corp.example": every name below it), each on
// every port. A name lets a connection asked for by that name reach the
// non-public addresses it resolves to; an address or a prefix lets any
// connection reach it. The zero value lists nothing.
type PrivateList struct {
	prefixes []netip.Prefix
	names    []allowEntry // name and suffix only
}

// ParsePrivateList reads entries; an error names the bad one.
func ParsePrivateList(entries []string) (PrivateList, error) {
	var l PrivateList
	for _, raw := range entries {
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		e, err := parseAllowEntry(s)
		if err == nil && e.port != 0 {
			err = fmt.Errorf("has a port: an entry covers every port")
		}
		if err != nil {
			return PrivateList{}, fmt.Errorf("entry %q: %w", raw, err)
		}
		if e.name == "" {
			l.prefixes = append(l.prefixes, e.prefix)
		} else {
			l.names = append(l.names, e)
		}
	}
	return l, nil
}

// Empty reports whether the list allows nothing.
func (l PrivateList) Empty() bool { return len(l.prefixes) == 0 && len(l.names) == 0 }

// String lists the entries, for the log.
func (l PrivateList) String() string {
	var out []string
	for _, p := range l.prefixes {
		out = append(out, p.String())
	}
	for _, n := range l.names {
		if n.suffix {
			out = append(out, "*."+n.name)
		} else {
			out = append(out, n.name)
		}
	}
	return strings.Join(out, ",")
}

func (l PrivateList) allowsAddr(a netip.Addr) bool {
	for _, c := range Forms(a) {
		for _, p := range l.prefixes {
			if p.Contains(c) {
				return true
			}
		}
	}
	return false
}

func (l PrivateList) allowsName(name string) bool {
	h := strings.TrimSuffix(strings.ToLower(name), ".")
	for _, e := range l.names {
		if e.suffix && strings.HasSuffix(h, "."+e.name) || !e.suffix && h == e.name {
			return true
		}
	}
	return false
}
