package e2b

import (
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"

	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// E2B's per-sandbox egress (network: allowOut, denyOut, rules, and
// allow_internet_access) over a session's network: the tenant's
// allow-list (gantry's settings) stays the ceiling. A rule's header values
// come from the client in the clear (E2B's SDK resolves its secrets
// client-side): each becomes a secret of the session's own, sealed and
// gone with it, which the rule then names, so that no value is stored in
// the session's network or shown again.

// networkConfig is E2B's SandboxNetworkConfig, and with
// allow_internet_access its SandboxNetworkUpdateConfig.
type networkConfig struct {
	AllowOut            []string                 `json:"allowOut"`
	DenyOut             []string                 `json:"denyOut"`
	Rules               map[string][]networkRule `json:"rules"`
	EgressProxy         json.RawMessage          `json:"egressProxy"`
	AllowPublicTraffic  *bool                    `json:"allowPublicTraffic"`
	MaskRequestHost     *string                  `json:"maskRequestHost"`
	HTTPSPorts          []int                    `json:"httpsPorts"`
	AllowInternetAccess *bool                    `json:"allow_internet_access"`
}

// networkRule is E2B's SandboxNetworkRule.
type networkRule struct {
	Transform *struct {
		Headers map[string]string `json:"headers"`
	} `json:"transform"`
}

// networkInfo is E2B's network in a sandbox's detail: header values are
// never shown.
type networkInfo struct {
	AllowOut []string                 `json:"allowOut,omitempty"`
	DenyOut  []string                 `json:"denyOut,omitempty"`
	Rules    map[string][]networkRule `json:"rules,omitempty"`
}

// hiddenValue stands for a header value in a sandbox's detail.
const hiddenValue = "[hidden: set at gantry's egress proxy]"

// toNetwork is a session's network for E2B's config (nil: none) and the
// values of the session's own secrets it names. allowInternet false denies
// all traffic but what allowOut names, as E2B's does.
func toNetwork(cfg *networkConfig, allowInternet *bool) (*jobs.Network, map[string]string, error) {
	var n jobs.Network
	values := map[string]string{}
	if cfg != nil {
		if len(cfg.EgressProxy) > 0 && string(cfg.EgressProxy) != "null" {
			return nil, nil, notImplemented("tunnelling a sandbox's egress through a SOCKS5 proxy of yours (egressProxy) is not offered by gantry: its own egress proxy serves the tenant's allow-list")
		}
		n.AllowOut, n.DenyOut = cfg.AllowOut, cfg.DenyOut
		byValue := map[string]string{}
		for host, rules := range cfg.Rules {
			for _, r := range rules {
				var headers map[string]string
				if r.Transform != nil && len(r.Transform.Headers) > 0 {
					headers = map[string]string{}
					for k, v := range r.Transform.Headers {
						if strings.Contains(v, "${e2b.identity.") {
							return nil, nil, notImplemented("workload identity tokens (iam) are not offered by gantry: name a value, or a secret of gantry's (PUT /v1/secrets/NAME) in its native API")
						}
						name, ok := byValue[v]
						if !ok {
							name = service.SessionSecretName("e2b")
							byValue[v], values[name] = name, v
						}
						headers[k] = jobs.SecretRef(name)
					}
				}
				if n.Rules == nil {
					n.Rules = map[string][]jobs.NetworkRule{}
				}
				n.Rules[host] = append(n.Rules[host], jobs.NetworkRule{Headers: headers})
			}
		}
	}
	if allowInternet != nil && !*allowInternet && !contains(n.DenyOut, jobs.AllTraffic) {
		n.DenyOut = append(n.DenyOut, jobs.AllTraffic)
	}
	if n.Empty() {
		return nil, nil, nil
	}
	out := jobs.NormalizeNetwork(&n)
	if err := out.Check("network"); err != nil {
		var fe *jobs.FieldError
		if errors.As(err, &fe) {
			return nil, nil, &apiError{http.StatusBadRequest, fe.Error()}
		}
		return nil, nil, err
	}
	return out, values, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// info is a session's network as E2B's detail shows it (nil: none).
func info(n *jobs.Network) *networkInfo {
	if n.Empty() {
		return nil
	}
	out := &networkInfo{AllowOut: n.AllowOut, DenyOut: n.DenyOut}
	for _, host := range n.RuleHosts() {
		if out.Rules == nil {
			out.Rules = map[string][]networkRule{}
		}
		for _, r := range n.Rules[host] {
			var nr networkRule
			if len(r.Headers) > 0 {
				nr.Transform = &struct {
					Headers map[string]string `json:"headers"`
				}{Headers: map[string]string{}}
				names := make([]string, 0, len(r.Headers))
				for k := range r.Headers {
					names = append(names, k)
				}
				sort.Strings(names)
				for _, k := range names {
					nr.Transform.Headers[k] = hiddenValue
				}
			}
			out.Rules[host] = append(out.Rules[host], nr)
		}
	}
	return out
}

// internet says whether a sandbox reaches any host: its tenant allows
// some, and its network does not deny all traffic with nothing allowed.
func internet(allow []string, n *jobs.Network) bool {
	if len(allow) == 0 {
		return false
	}
	return n == nil || len(n.AllowOut) > 0 || !contains(n.DenyOut, jobs.AllTraffic)
}

// updateNetwork is E2B's updateNetwork: the sandbox's network replaced
// whole (omitted fields clear), its processes' new connections under it.
func (s *Server) updateNetwork(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var cfg networkConfig
	if err := decode(r, &cfg); err != nil {
		return err
	}
	sess, err := s.session(r, p)
	if err != nil {
		return err
	}
	n, values, err := toNetwork(&cfg, cfg.AllowInternetAccess)
	if err != nil {
		return err
	}
	if _, err := s.svc.SetSessionNetwork(r.Context(), p, sess.ID, n, values); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
