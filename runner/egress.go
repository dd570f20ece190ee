package runner

import (
	"context"
	"maps"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/egress"
	"github.com/gantryhq/gantry/jobs"
)

// EgressConfig is the operator's word on jobs' egress.
type EgressConfig struct {
	// Off: no job gets a proxy, whatever its tenant's settings say
	// (GANTRY_EGRESS=false).
	Off bool
	// AllowPrivate lets the proxy dial loopback, private and link-local
	// addresses a tenant lists (GANTRY_EGRESS_ALLOW_PRIVATE).
	AllowPrivate bool
}

// jobEgress is one job's egress: its proxy over the tenant's allow-list,
// and the record of every connection asked for.
type jobEgress struct {
	proxy   *egress.Proxy
	mu      sync.Mutex
	conns   []jobs.EgressConnection
	omitted int
}

// egressFor makes the job's egress, or nil when it has none: its tenant
// lists no host, or the operator turned egress off. (In a stateful
// session it serves the run: what the sandbox's processes connect to
// between runs is refused.)
func (r *Runner) egressFor(allow []string) (*jobEgress, error) {
	if len(allow) == 0 || r.cfg.Egress.Off {
		return nil, nil
	}
	list, err := egress.ParseAllowList(allow)
	if err != nil {
		return nil, err
	}
	e := &jobEgress{}
	e.proxy = &egress.Proxy{Allow: list, Policy: egress.Policy{AllowPrivate: r.cfg.Egress.AllowPrivate, Setting: "GANTRY_EGRESS_ALLOW_PRIVATE"},
		Record: func(c egress.Connection) {
			r.metrics.egress(c.Allowed)
			e.mu.Lock()
			defer e.mu.Unlock()
			if len(e.conns) >= jobs.MaxEgressRecords {
				e.omitted++
				return
			}
			e.conns = append(e.conns, jobs.EgressConnection{Host: c.Host, Port: c.Port, Allowed: c.Allowed, Reason: c.Reason,
				StartedAt: c.Start.UTC(), DurationMS: c.DurationMS, BytesOut: c.BytesOut, BytesIn: c.BytesIn})
		}}
	return e, nil
}

// env is what the job's environment gets: the proxy for HTTP and HTTPS
// (in both spellings programs read), and nothing through it for loopback.
func (e *jobEgress) env(in map[string]string) map[string]string {
	env := maps.Clone(in)
	if env == nil {
		env = map[string]string{}
	}
	proxy := "http://" + wire.EgressProxy
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		env[k] = proxy
	}
	env["NO_PROXY"], env["no_proxy"] = "localhost,127.0.0.1,::1", "localhost,127.0.0.1,::1"
	return env
}

// handler is the agent's Egress for this job (nil when it has none).
func (e *jobEgress) handler() wire.Egress {
	if e == nil {
		return nil
	}
	return egressHandler{e.proxy}
}

type egressHandler struct{ p *egress.Proxy }

func (h egressHandler) ServeConn(ctx context.Context, c net.Conn) { h.p.ServeConn(ctx, c) }

// record copies what the job connected to into its result.
func (e *jobEgress) record(res *jobs.Result) {
	if e == nil {
		return
	}
	e.proxy.Close()
	e.mu.Lock()
	defer e.mu.Unlock()
	res.Egress, res.EgressOmitted = append([]jobs.EgressConnection{}, e.conns...), e.omitted
}

// egressMetrics counts the proxy's decisions.
func newEgressCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gantry_egress_connections_total", Help: "Connections jobs asked the egress proxy for, by decision: allowed (on the tenant's allow-list and reached) or refused (not on it, not public, or not reachable).",
	}, []string{"decision"})
}

func (m *Metrics) egress(allowed bool) {
	if m == nil {
		return
	}
	d := "refused"
	if allowed {
		d = "allowed"
	}
	m.egressConns.WithLabelValues(d).Inc()
}
