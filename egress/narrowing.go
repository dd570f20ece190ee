package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// Narrowing is a sandbox's or a job's own word on its egress, below its
// tenant's allow-list (which it never widens), as E2B's allowOut and
// denyOut: a destination matching Allow is allowed; else one matching Deny
// is refused; else it is allowed. Entries are names ("api.example.com"),
// every name below one ("*.example.com"), addresses and CIDR prefixes, on
// every port; "0.0.0.0/0" is all traffic (IPv6 included). A name entry
// matches the host as the job asked for it; an address entry matches
// every address the connection dials, so a denied prefix is refused
// however the job names the host. The zero value allows everything.
type Narrowing struct {
	allow, deny PrivateList
}

// ParseNarrowing reads the allow and deny lists; an error names the list
// and the bad entry.
func ParseNarrowing(allow, deny []string) (Narrowing, error) {
	var n Narrowing
	var err error
	if n.allow, err = parseNarrowList(allow); err != nil {
		return Narrowing{}, fmt.Errorf("allow_out: %w", err)
	}
	if n.deny, err = parseNarrowList(deny); err != nil {
		return Narrowing{}, fmt.Errorf("deny_out: %w", err)
	}
	return n, nil
}

func parseNarrowList(entries []string) (PrivateList, error) {
	var out []string
	for _, e := range entries {
		e = strings.TrimSpace(e)
		switch e {
		case "":
			return PrivateList{}, fmt.Errorf("an empty entry")
		case "0.0.0.0/0":
			out = append(out, "0.0.0.0/0", "::/0") // all traffic, as E2B's ALL_TRAFFIC
			continue
		}
		out = append(out, e)
	}
	return ParsePrivateList(out)
}

// Empty reports whether n narrows nothing.
func (n Narrowing) Empty() bool { return n.allow.Empty() && n.deny.Empty() }

// allowsName decides on the name alone, before any address is known: a
// name on the deny list that no allow entry names is refused at once.
// (Addresses are decided when dialled, by allows.)
func (n Narrowing) refusesName(name string) bool {
	return name != "" && n.deny.allowsName(name) && !n.allow.allowsName(name)
}

// allows decides a connection asked for by name ("" for a literal
// address) about to dial a.
func (n Narrowing) allows(name string, a netip.Addr) bool {
	if name != "" && n.allow.allowsName(name) || n.allow.allowsAddr(a) {
		return true
	}
	return !(name != "" && n.deny.allowsName(name) || n.deny.allowsAddr(a))
}
