package jobs

import (
	"fmt"
	"net/textproto"
	"regexp"
	"sort"
	"strings"
)

// Network is what a job or a session asks of its egress beyond its
// tenant's allow-list (settings' egress.allow), which stays the ceiling:
// nothing here reaches a host the tenant's list does not name.
//
// AllowOut and DenyOut narrow it, as E2B's network options do: a
// connection whose destination matches AllowOut is allowed; else one
// matching DenyOut is refused; else it is allowed. Entries are host names
// ("api.example.com"), every name below one ("*.example.com"), addresses
// and CIDR prefixes; "0.0.0.0/0" (AllTraffic) matches everything.
//
// Rules set headers on the requests to some hosts (exact names, or
// "*.example.com"), at the egress proxy: a value may name the tenant's
// secrets as ${secrets.NAME}, so the secret never enters the sandbox. For
// HTTPS to such a host the proxy terminates TLS with the tenant's CA,
// which the sandbox trusts; every other host stays end-to-end TLS.
type Network struct {
	AllowOut []string `json:"allow_out,omitempty"`
	DenyOut  []string `json:"deny_out,omitempty"`
	// Rules maps a host to the rules applied to requests to it.
	Rules map[string][]NetworkRule `json:"rules,omitempty"`
}

// NetworkRule is what the egress proxy does to a request to its host.
type NetworkRule struct {
	// Headers are set on the request, replacing any of the same name.
	Headers map[string]string `json:"headers,omitempty"`
}

// AllTraffic is the destination that matches every address.
const AllTraffic = "0.0.0.0/0"

// Bounds of a Network.
const (
	MaxNetworkEntries = 100
	MaxNetworkRules   = 50 // hosts with rules
	MaxRuleHeaders    = 20 // headers of one host's rules, together
	MaxHeaderValue    = 8 << 10
)

// Empty reports whether n asks nothing.
func (n *Network) Empty() bool {
	return n == nil || len(n.AllowOut) == 0 && len(n.DenyOut) == 0 && len(n.Rules) == 0
}

// secretRef is how a header value names a secret.
var secretRef = regexp.MustCompile(`\$\{secrets\.([^}]*)\}`)

// SecretNameRE is what a tenant's secret's name looks like. A session's
// own secrets (a compatible API's literal values) start with _ instead,
// which no tenant's name does.
var (
	SecretNameRE    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,127}$`)
	secretRefNameRE = regexp.MustCompile(`^_?[A-Za-z][A-Za-z0-9_]{0,127}$`)
)

// headers a rule may not set: they frame the request, or are the proxy's.
var reservedHeaders = map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Connection": true, "Proxy-Authorization": true}

// Check validates the network's form (field prefixes the fields named in
// errors): bounds, rule hosts, header names and values, and the secrets
// the values name (each must look like a name; whether it exists is the
// service's to check). Destinations are parsed by the egress package.
func (n *Network) Check(field string) error {
	if n == nil {
		return nil
	}
	if len(n.AllowOut) > MaxNetworkEntries {
		return fieldErr(field+".allow_out", "has %d entries; at most %d", len(n.AllowOut), MaxNetworkEntries)
	}
	if len(n.DenyOut) > MaxNetworkEntries {
		return fieldErr(field+".deny_out", "has %d entries; at most %d", len(n.DenyOut), MaxNetworkEntries)
	}
	if len(n.Rules) > MaxNetworkRules {
		return fieldErr(field+".rules", "has %d hosts; at most %d", len(n.Rules), MaxNetworkRules)
	}
	for _, host := range n.RuleHosts() {
		f := fmt.Sprintf("%s.rules[%q]", field, host)
		if !validRuleHost(host) {
			return fieldErr(f, "is not a host name or *.name (no address, port or bare *)")
		}
		count := 0
		for i, r := range n.Rules[host] {
			for name, v := range r.Headers {
				hf := fmt.Sprintf("%s[%d].headers[%q]", f, i, name)
				count++
				if !validHeaderName(name) {
					return fieldErr(hf, "is not a header name")
				}
				if reservedHeaders[textproto.CanonicalMIMEHeaderKey(name)] {
					return fieldErr(hf, "may not be set by a rule (it frames the request)")
				}
				if len(v) > MaxHeaderValue || strings.ContainsAny(v, "\r\n\x00") {
					return fieldErr(hf, "must be at most %d bytes, without CR, LF or NUL", MaxHeaderValue)
				}
				for _, ref := range SecretRefs(v) {
					if !secretRefNameRE.MatchString(ref) {
						return fieldErr(hf, "names secret %q, which is not a secret's name", ref)
					}
				}
			}
		}
		if count > MaxRuleHeaders {
			return fieldErr(f, "sets %d headers; at most %d", count, MaxRuleHeaders)
		}
	}
	return nil
}

// RuleHosts are the hosts with rules, sorted.
func (n *Network) RuleHosts() []string {
	if n == nil {
		return nil
	}
	hosts := make([]string, 0, len(n.Rules))
	for h := range n.Rules {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	return hosts
}

// ruleList is every rule of every host.
func (n *Network) ruleList() []NetworkRule {
	if n == nil {
		return nil
	}
	var out []NetworkRule
	for _, r := range n.Rules {
		out = append(out, r...)
	}
	return out
}

// SecretRefs are the secrets a header value names, in order.
func SecretRefs(v string) []string {
	var out []string
	for _, m := range secretRef.FindAllStringSubmatch(v, -1) {
		out = append(out, m[1])
	}
	return out
}

// Secrets are the names of every secret the network's rules name, sorted,
// each once.
func (n *Network) Secrets() []string {
	if n == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, rules := range n.Rules {
		for _, r := range rules {
			for _, v := range r.Headers {
				for _, ref := range SecretRefs(v) {
					if !seen[ref] {
						seen[ref] = true
						out = append(out, ref)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// Render replaces each ${secrets.NAME} of v with its value; a name missing
// from values is an error naming it (never a value).
func Render(v string, values map[string]string) (string, error) {
	var missing string
	out := secretRef.ReplaceAllStringFunc(v, func(m string) string {
		name := secretRef.FindStringSubmatch(m)[1]
		s, ok := values[name]
		if !ok && missing == "" {
			missing = name
		}
		return s
	})
	if missing != "" {
		return "", fmt.Errorf("secret %q is not set", missing)
	}
	return out, nil
}

// SecretRef is how a header value names the secret name.
func SecretRef(name string) string { return "${secrets." + name + "}" }

func validRuleHost(h string) bool {
	h = strings.TrimPrefix(h, "*.")
	if h == "" || len(h) > 253 || h != strings.ToLower(h) {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	// A name, not an address: an address's last label is all digits.
	last := h[strings.LastIndexByte(h, '.')+1:]
	return strings.Trim(last, "0123456789") != ""
}

func validHeaderName(name string) bool {
	if name == "" || len(name) > 256 {
		return false
	}
	for _, c := range name {
		if c > 0x7e || c <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}

// NormalizeNetwork lowercases the rules' hosts (names match without
// regard to case); nil stays nil.
func NormalizeNetwork(n *Network) *Network {
	if n == nil {
		return nil
	}
	out := &Network{AllowOut: n.AllowOut, DenyOut: n.DenyOut}
	if len(n.Rules) > 0 {
		out.Rules = make(map[string][]NetworkRule, len(n.Rules))
		for h, r := range n.Rules {
			h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
			out.Rules[h] = append(out.Rules[h], r...)
		}
	}
	return out
}
