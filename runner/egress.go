package runner

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/egress"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// EgressConfig is the operator's word on jobs' egress.
type EgressConfig struct {
	// Off: no job gets a proxy, whatever its tenant's settings say
	// (GANTRY_EGRESS=false).
	Off bool
	// Private is where, of the non-public addresses, the proxy may dial
	// what a tenant lists (GANTRY_EGRESS_PRIVATE); AllowPrivate lets it
	// dial them all (GANTRY_EGRESS_ALLOW_PRIVATE=true, the older switch).
	Private      egress.PrivateList
	AllowPrivate bool
	// Reserved is gantry's own services, which the proxy never dials,
	// whatever a tenant or the settings above say.
	Reserved *egress.Reserved
}

// policy is what the proxy checks each address it dials against.
func (c EgressConfig) policy() egress.Policy {
	return egress.Policy{AllowPrivate: c.AllowPrivate, Private: c.Private, Reserved: c.Reserved, Setting: "GANTRY_EGRESS_PRIVATE"}
}

// EgressStore is what the runner reads of a job's egress beyond its claim.
type EgressStore interface {
	// SealedSecrets returns the sealed values of those of names the tenant
	// (or the session, when sessionID is not "") has.
	SealedSecrets(ctx context.Context, tenantID, sessionID string, names []string) (map[string][]byte, error)
	// TenantCA and SetTenantCA keep the tenant's egress CA (its key
	// sealed); SetTenantCA keeps the first one made.
	TenantCA(ctx context.Context, tenantID string) (string, []byte, error)
	SetTenantCA(ctx context.Context, tenantID, cert string, sealedKey []byte) (string, []byte, error)
	// TenantEgress and SessionNetwork are read again when a live
	// session's network changes.
	TenantEgress(ctx context.Context, tenantID string) ([]string, error)
	SessionNetwork(ctx context.Context, sessionID string) (*jobs.Network, error)
}

// caBundlePath is where a job finds the CA bundle its proxy variables
// name: the image's system roots and its tenant's egress CA.
const caBundlePath = wire.ProgramDir + "/egress-ca.pem"

// jobEgress is one job's egress: its proxy over the tenant's allow-list
// (narrowed by the job's and its session's network, with their header
// rules), and the record of every connection asked for.
type jobEgress struct {
	proxy *egress.Proxy
	// ca is the tenant's egress CA when the job may need it (header rules,
	// or a stateful session's live sandbox, whose network may get rules
	// while it lives); nil otherwise.
	ca *egress.CA
	// live is a stateful session's proxy for its live processes between
	// runs: the session's network, not the job's (nil: not stateful).
	live *egress.Proxy

	mu      sync.Mutex
	conns   []jobs.EgressConnection
	omitted int
}

// egressPlan is what a proxy is made of: the tenant's allow-list and the
// networks that narrow it (each must allow a connection; their rules
// apply in order, a later network's host replacing an earlier one's).
type egressPlan struct {
	tenantID, sessionID string
	allow               []string
	networks            []*jobs.Network
}

// egressFor makes the job's egress, or nil when it has none: its tenant
// lists no host, or the operator turned egress off. A stateful session's
// job also gets the live proxy its sandbox's processes use between runs.
func (r *Runner) egressFor(ctx context.Context, claim store.Claim, sessionID string, stateful bool) (*jobEgress, error) {
	if len(claim.EgressAllow) == 0 || r.cfg.Egress.Off {
		return nil, nil
	}
	e := &jobEgress{}
	plan := egressPlan{tenantID: claim.TenantID, sessionID: sessionID, allow: claim.EgressAllow,
		networks: []*jobs.Network{claim.SessionNetwork, claim.Spec.Network}}
	var err error
	e.proxy, e.ca, err = r.buildProxy(ctx, plan, stateful, e.add)
	if err != nil {
		return nil, err
	}
	if stateful {
		plan.networks = plan.networks[:1]
		if e.live, _, err = r.buildProxy(ctx, plan, true, nil); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// buildProxy makes a proxy for plan, its connections recorded with record
// (nil: only counted). With rules, or withCA, it has the tenant's CA.
func (r *Runner) buildProxy(ctx context.Context, plan egressPlan, withCA bool, record func(egress.Connection)) (*egress.Proxy, *egress.CA, error) {
	list, err := egress.ParseAllowList(plan.allow)
	if err != nil {
		return nil, nil, fmt.Errorf("the tenant's egress allow-list: %w", err)
	}
	policy := r.cfg.Egress.policy()
	byHost := map[string]http.Header{}
	var names []string
	for _, n := range plan.networks {
		if n.Empty() {
			continue
		}
		nw, err := egress.ParseNarrowing(n.AllowOut, n.DenyOut)
		if err != nil {
			return nil, nil, fmt.Errorf("the network: %w", err)
		}
		policy.Narrow = append(policy.Narrow, nw)
		names = append(names, n.Secrets()...)
	}
	p := &egress.Proxy{Allow: list, Policy: policy, Record: func(c egress.Connection) {
		r.metrics.egress(c.Allowed)
		if record != nil {
			record(c)
		}
	}}
	if len(names) > 0 || hasRules(plan.networks) {
		values, err := r.openSecrets(ctx, plan.tenantID, plan.sessionID, names)
		if err != nil {
			return nil, nil, err
		}
		broken := map[string]string{}
		for _, n := range plan.networks {
			for _, host := range n.RuleHosts() {
				h := http.Header{}
				delete(broken, host)
				for _, rule := range n.Rules[host] {
					for k, v := range rule.Headers {
						val, err := jobs.Render(v, values)
						if err != nil {
							broken[host] = fmt.Sprintf("the egress rule for %s names a secret that is not set (%v)", host, err)
							continue
						}
						h.Set(k, val)
					}
				}
				byHost[host] = h
			}
		}
		p.Rules = egress.NewHeaderRules(byHost)
		for host, why := range broken {
			p.Rules = p.Rules.Broken(host, why)
		}
	}
	var ca *egress.CA
	if !p.Rules.Empty() || withCA && r.cfg.Box.Enabled() {
		if ca, err = r.tenantCA(ctx, plan.tenantID); err != nil {
			return nil, nil, err
		}
		p.CA = ca
	}
	return p, ca, nil
}

func hasRules(networks []*jobs.Network) bool {
	for _, n := range networks {
		if n != nil && len(n.Rules) > 0 {
			return true
		}
	}
	return false
}

// openSecrets opens the tenant's (and the session's) secrets of names; a
// name it has not is left out (its rule then refuses its host).
func (r *Runner) openSecrets(ctx context.Context, tenantID, sessionID string, names []string) (map[string]string, error) {
	out := map[string]string{}
	if len(names) == 0 {
		return out, nil
	}
	if !r.cfg.Box.Enabled() {
		return nil, errors.New("egress rules name secrets, which need GANTRY_SECRET_KEY: this runner has none")
	}
	sealed, err := r.store.SealedSecrets(ctx, tenantID, sessionID, names)
	if err != nil {
		return nil, fmt.Errorf("read the egress rules' secrets: %w", err)
	}
	for name, s := range sealed {
		v, err := r.cfg.Box.Open(s, jobs.SecretSealContext(tenantID, name))
		if err != nil {
			return nil, fmt.Errorf("open secret %s: %w (every ingress and runner needs the same GANTRY_SECRET_KEY)", name, err)
		}
		out[name] = string(v)
	}
	return out, nil
}

// tenantCA returns the tenant's egress CA, making it on first need. It is
// kept in the runner once read.
func (r *Runner) tenantCA(ctx context.Context, tenantID string) (*egress.CA, error) {
	if !r.cfg.Box.Enabled() {
		return nil, errors.New("egress header rules need GANTRY_SECRET_KEY (the tenant's CA key is sealed under it): this runner has none")
	}
	r.cas.mu.Lock()
	ca := r.cas.byTenant[tenantID]
	r.cas.mu.Unlock()
	if ca != nil {
		return ca, nil
	}
	sealTo := "egress-ca:" + tenantID
	cert, sealed, err := r.store.TenantCA(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("read the tenant's egress CA: %w", err)
	}
	if cert == "" {
		certPEM, keyPEM, err := egress.GenerateCA("gantry egress CA of tenant " + tenantID)
		if err != nil {
			return nil, err
		}
		if sealed, err = r.cfg.Box.Seal(keyPEM, sealTo); err != nil {
			return nil, err
		}
		if cert, sealed, err = r.store.SetTenantCA(ctx, tenantID, string(certPEM), sealed); err != nil {
			return nil, fmt.Errorf("keep the tenant's egress CA: %w", err)
		}
	}
	key, err := r.cfg.Box.Open(sealed, sealTo)
	if err != nil {
		return nil, fmt.Errorf("open the tenant's egress CA key: %w", err)
	}
	if ca, err = egress.NewCA([]byte(cert), key); err != nil {
		return nil, err
	}
	r.cas.mu.Lock()
	if r.cas.byTenant == nil {
		r.cas.byTenant = map[string]*egress.CA{}
	}
	if cur := r.cas.byTenant[tenantID]; cur != nil {
		ca = cur
	} else {
		r.cas.byTenant[tenantID] = ca
	}
	r.cas.mu.Unlock()
	return ca, nil
}

// caCache holds the tenants' egress CAs a runner has read.
type caCache struct {
	mu       sync.Mutex
	byTenant map[string]*egress.CA
	// bundles are the images' system CA bundles, by image.
	bundles map[string][]byte
}

// add records one of the job's connections.
func (e *jobEgress) add(c egress.Connection) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.conns) >= jobs.MaxEgressRecords {
		e.omitted++
		return
	}
	e.conns = append(e.conns, jobs.EgressConnection{Host: c.Host, Port: c.Port, Allowed: c.Allowed, Reason: c.Reason,
		StartedAt: c.Start.UTC(), DurationMS: c.DurationMS, BytesOut: c.BytesOut, BytesIn: c.BytesIn})
}

// env is what the job's environment gets: the proxy for HTTP and HTTPS
// (in both spellings programs read), nothing through it for loopback,
// and, with the tenant's CA, the CA bundle for the libraries that read
// one (unless the job names its own).
func (e *jobEgress) env(in map[string]string) map[string]string {
	env := maps.Clone(in)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, egressEnv(e.ca != nil, in))
	return env
}

// egressEnv is the variables a program behind the proxy gets; own are the
// program's own, whose CA variables are kept.
func egressEnv(withCA bool, own map[string]string) map[string]string {
	proxy := "http://" + wire.EgressProxy
	env := map[string]string{}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		env[k] = proxy
	}
	env["NO_PROXY"], env["no_proxy"] = "localhost,127.0.0.1,::1", "localhost,127.0.0.1,::1"
	if withCA {
		for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO"} {
			if _, set := own[k]; !set {
				env[k] = caBundlePath
			}
		}
	}
	return env
}

// caFile is the job's CA bundle file (the image's system roots and the
// tenant's CA), none without a CA.
func (r *Runner) caFile(ctx context.Context, e *jobEgress, c *Container) ([]wire.File, error) {
	if e == nil || e.ca == nil {
		return nil, nil
	}
	system, err := r.imageRoots(ctx, c)
	if err != nil {
		return nil, err
	}
	bundle := append(append(append([]byte(nil), system...), '\n'), e.ca.CertPEM()...)
	return []wire.File{{Path: caBundlePath, Data: bundle}}, nil
}

// systemRoots is where Debian-based images keep their CA bundle.
const systemRoots = "/etc/ssl/certs/ca-certificates.crt"

// imageRoots reads the container's image's CA bundle, once per image (an
// image without one gives none: the bundle is then the tenant's CA alone).
func (r *Runner) imageRoots(ctx context.Context, c *Container) ([]byte, error) {
	key := c.image
	r.cas.mu.Lock()
	b, ok := r.cas.bundles[key]
	r.cas.mu.Unlock()
	if ok {
		return b, nil
	}
	var res client.CopyFromContainerResult
	var err error
	if r.gv != nil && c.host == containerHost(r.gv) {
		// A gVisor container's image is mounted here: read it there.
		b, err = r.gv.readImageFile(ctx, c.imageRef(r.sandbox.cfg.Image), systemRoots, 8<<20)
		if errors.Is(err, fs.ErrNotExist) {
			b, err = nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the image's CA bundle: %w", err)
		}
		r.cas.mu.Lock()
		if r.cas.bundles == nil {
			r.cas.bundles = map[string][]byte{}
		}
		r.cas.bundles[key] = b
		r.cas.mu.Unlock()
		return b, nil
	}
	res, err = r.sandbox.docker.CopyFromContainer(ctx, c.id, client.CopyFromContainerOptions{SourcePath: systemRoots})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			b = nil
		} else {
			return nil, fmt.Errorf("read the image's CA bundle: %w", err)
		}
	} else {
		defer res.Content.Close()
		tr := tar.NewReader(res.Content)
		if _, err := tr.Next(); err != nil {
			return nil, fmt.Errorf("read the image's CA bundle: %w", err)
		}
		if b, err = io.ReadAll(io.LimitReader(tr, 8<<20)); err != nil {
			return nil, fmt.Errorf("read the image's CA bundle: %w", err)
		}
	}
	r.cas.mu.Lock()
	if r.cas.bundles == nil {
		r.cas.bundles = map[string][]byte{}
	}
	r.cas.bundles[key] = b
	r.cas.mu.Unlock()
	return b, nil
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

// settleEgress bounds the wait, at a job's end, for its proxy to record
// what is still being served (a connection kept by a session's process
// past its run is recorded only if it ends within it).
const settleEgress = 250 * time.Millisecond

// record copies what the job connected to into its result, once what its
// process read last is recorded too.
func (e *jobEgress) record(res *jobs.Result) {
	if e == nil {
		return
	}
	e.proxy.Settle(settleEgress)
	e.proxy.Close()
	e.mu.Lock()
	defer e.mu.Unlock()
	res.Egress, res.EgressOmitted = append([]jobs.EgressConnection{}, e.conns...), e.omitted
}

// liveEgress is a stateful session's egress between its runs: the proxy
// its live sandbox's processes reach (the session's network, which
// changes while it lives) and the variables they get. Every container has
// one; it serves nothing until a stateful run with egress ends in it.
type liveEgress struct {
	mu     sync.Mutex
	proxy  *egress.Proxy
	env    map[string]string
	tenant string
}

// ServeConn serves a connection with the proxy of the moment.
func (l *liveEgress) ServeConn(ctx context.Context, c net.Conn) {
	l.mu.Lock()
	p := l.proxy
	l.mu.Unlock()
	if p == nil {
		c.Close()
		return
	}
	p.ServeConn(ctx, c)
}

// set makes p the proxy of new connections (nil: none).
func (l *liveEgress) set(tenantID string, p *egress.Proxy, env map[string]string) {
	l.mu.Lock()
	old := l.proxy
	l.proxy, l.env, l.tenant = p, env, tenantID
	l.mu.Unlock()
	if old != nil && old != p {
		old.Close()
	}
}

// spawnEnv is what a live process gets of the egress (nil: nothing).
func (l *liveEgress) spawnEnv() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.proxy == nil {
		return nil
	}
	return l.env
}

// keepLive hands the container's kept egress to the session's live
// proxy once its run ended (e nil: the session has no egress now).
func keepLive(c *Container, tenantID string, e *jobEgress) {
	if e == nil || e.live == nil {
		c.egress.set(tenantID, nil, nil)
		return
	}
	c.egress.set(tenantID, e.live, egressEnv(e.ca != nil, nil))
	c.conn.SetEgress(&c.egress)
}

// renetwork applies a live session's new network to the connections its
// processes open from now on: the tenant's allow-list and the session's
// network are read again.
func (r *Runner) renetwork(ctx context.Context, sessionID string, c *Container) error {
	c.egress.mu.Lock()
	on, tenantID := c.egress.proxy != nil, c.egress.tenant
	c.egress.mu.Unlock()
	if !on {
		return nil // no egress now: the session's next run reads its network
	}
	allow, err := r.store.TenantEgress(ctx, tenantID)
	if err != nil {
		return err
	}
	n, err := r.store.SessionNetwork(ctx, sessionID)
	if err != nil {
		return err
	}
	if len(allow) == 0 || r.cfg.Egress.Off {
		c.egress.set(tenantID, nil, nil)
		return nil
	}
	p, ca, err := r.buildProxy(ctx, egressPlan{tenantID: tenantID, sessionID: sessionID, allow: allow, networks: []*jobs.Network{n}}, true, nil)
	if err != nil {
		return err
	}
	c.egress.set(tenantID, p, egressEnv(ca != nil, nil))
	return nil
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
