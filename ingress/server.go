// Package ingress is gantry's front door: the HTTP API (/v1/...), MCP
// (/mcp), health and metrics endpoints (Server), and the background work
// every ingress replica does beside them (Maintenance: sessions, stranded
// jobs, code-mode tool lists, privacy tokens, history retention, webhook
// deliveries). It authenticates requests, validates them, records jobs in
// the store, publishes them on JetStream and answers; it never runs code.
// Any number of ingress replicas can serve the same gantry.
package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/webhook"
)

// Config is the ingress's own configuration.
type Config struct {
	Policy jobs.Policy
	Queue  jobs.QueueConfig
	// MaxBodyBytes caps request bodies (413 beyond).
	MaxBodyBytes int64
	// BodyTimeout is how long a request's body may take to arrive (408
	// beyond). Negative: no limit.
	BodyTimeout time.Duration
	// MaxWait caps ?wait= on GET /v1/jobs/{id}.
	MaxWait time.Duration
	// MaxExecuteWait caps how long POST /v1/execute waits (default: the
	// policy's longest timeout and 30 s).
	MaxExecuteWait time.Duration
	// PresignExpiry is how long artifact download URLs work.
	PresignExpiry time.Duration
	// Version is reported to MCP clients.
	Version string
	// CodeMode is the registry of tenants' upstream MCP servers (nil: code
	// mode is off and its routes answer 503).
	CodeMode *codemode.Registry
	// Privacy says whether privacy tokens can be turned on (they need
	// GANTRY_SECRET_KEY).
	Privacy bool
	// Box seals jobs' env values and tenants' webhook signing secrets.
	// Without a key webhooks are off (a webhook_url is refused) and env
	// values are stored as they are.
	Box *secret.Box
	// Webhooks configures their delivery (which the Maintenance runs).
	Webhooks webhook.Config
	// BatchMax caps the jobs of one POST /v1/jobs/batch.
	BatchMax int
	// TenantLimits are the quotas of tenants the operator set none for.
	TenantLimits jobs.TenantLimits
	// TrustedProxies are the load balancers whose X-Forwarded-For names a
	// request's source (for throttling invalid keys); none by default.
	TrustedProxies []netip.Prefix
	// History is the job history's retention (the Maintenance sweeps
	// it; the server keeps what expires soon out of its caches and tells
	// MCP clients a task's TTL). nil: history is kept forever.
	History Retention
	// TaskInlineWait is how long execute_code waits for its job before it
	// answers an MCP client of the tasks extension with a task instead.
	TaskInlineWait time.Duration
	// Agent answers POST /v1/agent/chat/completions (nil: no model is
	// configured, and the route answers 503 saying so).
	Agent Agent
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.Policy.MaxTimeoutMS == 0 {
		c.Policy = jobs.DefaultPolicy()
	}
	c.Queue = c.Queue.WithDefaults()
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 10 << 20
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = time.Minute
	}
	if c.MaxWait == 0 {
		c.MaxWait = 60 * time.Second
	}
	if c.MaxExecuteWait == 0 {
		// The longest job, and time to record it.
		c.MaxExecuteWait = time.Duration(c.Policy.MaxTimeoutMS)*time.Millisecond + 30*time.Second
	}
	if c.PresignExpiry == 0 {
		c.PresignExpiry = 15 * time.Minute
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.TaskInlineWait == 0 {
		c.TaskInlineWait = 5 * time.Second
	}
	if c.BatchMax == 0 {
		c.BatchMax = 100
	}
	c.TenantLimits = c.TenantLimits.Or(jobs.DefaultTenantLimits())
	return c
}

// Store is what the ingress needs of the store.
type Store interface {
	Ping(ctx context.Context) error
	Authenticate(ctx context.Context, key string) (store.Principal, error)
	EnqueueJob(ctx context.Context, nj store.NewJob, publish func(ctx context.Context, jobID string) (uint64, error)) (jobs.Job, bool, error)
	GetJob(ctx context.Context, tenantID, id string) (jobs.Job, error)
	ListJobs(ctx context.Context, tenantID string, f store.JobFilter) ([]jobs.Job, string, error)
	JobSpecs(ctx context.Context, tenantID string, ids []string) (map[string]jobs.JobSpec, error)
	SealPlainEnv(ctx context.Context, limit int, seal func(tenantID, jobID string, spec *jobs.Spec) error) (int, error)
	CancelJob(ctx context.Context, tenantID, id string, stale time.Duration) (store.CancelOutcome, error)
	TenantLimits(ctx context.Context, tenantID string) (jobs.TenantLimits, error)

	CreateSession(ctx context.Context, tenantID string, req jobs.SessionRequest) (jobs.Session, error)
	GetSession(ctx context.Context, tenantID, id string) (jobs.Session, error)
	ListSessions(ctx context.Context, tenantID string, limit int, before string) ([]jobs.Session, string, error)
	CloseSession(ctx context.Context, tenantID, id string) (store.SessionRef, error)
	FinishClosing(ctx context.Context, id string) (bool, error)
	AcquireSession(ctx context.Context, id, owner string, lease time.Duration) (store.SessionState, bool, error)
	ReleaseSession(ctx context.Context, id, owner string, force bool) (bool, int, error)
	CommitWorkspace(ctx context.Context, sessionID, owner string, snap store.Snapshot) (string, error)

	SyncBuiltins(ctx context.Context, builtins []skills.Skill) (int, error)
	SaveSkill(ctx context.Context, tenantID string, sk skills.Skill) (store.SkillRecord, error)
	GetSkill(ctx context.Context, tenantID, name string, version int) (store.SkillRecord, error)
	CurrentSkills(ctx context.Context, tenantID string) ([]store.SkillRecord, error)
	SearchSkills(ctx context.Context, tenantID, q string, limit int) ([]store.SkillHit, error)
	SkillVersions(ctx context.Context, tenantID, name string) ([]store.SkillVersion, error)
	DeleteSkill(ctx context.Context, tenantID, name string) error

	webhook.Store
	TenantWebhookURL(ctx context.Context, tenantID string) (string, error)
	SetTenantWebhookURL(ctx context.Context, tenantID, url string) error

	TenantPII(ctx context.Context, tenantID string) (bool, error)
	SetTenantPII(ctx context.Context, tenantID string, on bool) error
}

// Retention deletes finished jobs older than the history's TTL, with what
// they stored (history.Store).
type Retention interface {
	// Sweep deletes a bounded amount of expired history and returns how
	// many jobs it deleted. Replicas may call it at once.
	Sweep(ctx context.Context) (int, error)
	// TTL is how long a finished job is kept (0: forever).
	TTL() time.Duration
}

// Blobs is what the ingress needs of the object store.
type Blobs interface {
	Ping(ctx context.Context) error
	PresignGet(ctx context.Context, key string, expiry time.Duration, filename string) (*url.URL, error)
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	PutStream(ctx context.Context, key string, r io.Reader, contentType string) (int64, error)
	Delete(ctx context.Context, key string) error
	DeletePrefix(ctx context.Context, prefix string) (int, error)
}

// Check is a named readiness check.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Server serves the HTTP API and MCP. Its background work is the
// Maintenance's.
type Server struct {
	cfg     Config
	log     *slog.Logger
	store   Store
	blobs   Blobs
	nc      *nats.Conn
	js      jetstream.JetStream
	queue   *queue
	closer  *closer
	rates   *rateLimits
	hub     *hub
	checks  []Check
	metrics *metrics
	reg     prometheus.Gatherer
	mux     *http.ServeMux
	// metricsHandler serves GET /metrics from reg.
	metricsHandler http.Handler
	mcp            *server.MCPServer
	tools          *toolCatalog
	auth           *authCache
	badKeys        *rateLimits        // invalid keys per source address (keythrottle.go)
	revoked        *nats.Subscription // key revocations
	done           *doneJobs
	// webhooks checks webhook URLs and keeps tenants' signing secrets;
	// the Maintenance runs its deliveries (nil: off, no secret key).
	webhooks *webhook.Dispatcher
}

// New makes a Server. Start must be called before it serves jobs.
func New(cfg Config, log *slog.Logger, st Store, blobs Blobs, nc *nats.Conn, reg *prometheus.Registry, extraChecks ...Check) (*Server, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	s := &Server{
		cfg: cfg, log: log, store: st, blobs: blobs, nc: nc, js: js, rates: newRateLimits(10_000),
		queue:  &queue{pub: jobs.NewPublisher(nc, js, cfg.Queue), limits: st, defaults: cfg.TenantLimits, log: log},
		closer: &closer{log: log, nc: nc, blobs: blobs, store: st},
		hub:    newHub(), metrics: newMetrics(reg), reg: reg, auth: newAuthCache(KeyCacheTTL, 10000), badKeys: newRateLimits(10000), done: newDoneJobs(64<<20, 10*time.Minute),
	}
	if s.cfg.History != nil {
		s.done.history = s.cfg.History.TTL()
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gantry_queue_depth", Help: "Jobs waiting in the stream for a runner (read from JetStream at scrape time).",
	}, s.queueDepth))
	s.checks = append([]Check{
		{"postgres", st.Ping},
		{"nats", s.checkQueue},
		{"s3", blobs.Ping},
	}, extraChecks...)
	if cfg.Box.Enabled() {
		wc := s.cfg.Webhooks
		wc.View = s.view
		if wc.UserAgent == "" {
			wc.UserAgent = "gantry-webhooks/" + s.cfg.Version
		}
		if s.webhooks, err = webhook.New(wc, st, cfg.Box, log.With("component", "webhooks")); err != nil {
			return nil, err
		}
	}
	s.metricsHandler = promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	s.routes()
	return s, nil
}

// Start creates the job stream if needed, stores the built-in skills and
// subscribes to job status events and key revocations. It returns once the
// server is ready to serve.
func (s *Server) Start(ctx context.Context) error {
	if _, err := jobs.EnsureQueue(ctx, s.js, s.cfg.Queue); err != nil {
		return err
	}
	builtins, err := skills.Builtins()
	if err != nil {
		return err
	}
	if n, err := s.store.SyncBuiltins(ctx, builtins); err != nil {
		return fmt.Errorf("load built-in skills: %w", err)
	} else if n > 0 {
		s.log.Info("stored new versions of built-in skills", "count", n)
	}
	if err := s.hub.start(s.nc); err != nil {
		return err
	}
	revoked, err := s.nc.Subscribe(jobs.KeyRevokedSubject, s.onKeyRevoked)
	if err != nil {
		return fmt.Errorf("subscribe to key revocations: %w", err)
	}
	s.revoked = revoked
	return nil
}

// Webhooks is the server's webhook dispatcher, for the Maintenance to run
// its deliveries (nil: webhooks are off).
func (s *Server) Webhooks() *webhook.Dispatcher { return s.webhooks }

// Stop releases the server's subscriptions.
func (s *Server) Stop() {
	if s.revoked != nil {
		_ = s.revoked.Unsubscribe()
	}
	s.hub.stop()
}

// onKeyRevoked drops a revoked key from the cache at once, so that it stops
// working on this ingress now rather than when its cache entry expires.
func (s *Server) onKeyRevoked(m *nats.Msg) {
	var ev jobs.KeyRevoked
	if err := json.Unmarshal(m.Data, &ev); err != nil || ev.KeyID == "" {
		s.log.Warn("malformed key revocation message", "err", err)
		return
	}
	s.auth.dropKey(ev.KeyID)
	s.log.Info("API key revoked", "key_id", ev.KeyID, "tenant_id", ev.TenantID)
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.recoverer(s.bodyDeadline(s.mux)) }

// serveHealth answers GET /healthz: the process is up.
func serveHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, health{Status: "ok"})
}

// queueDepth counts the messages no runner has taken yet, over every
// tenant's queue.
func (s *Server) queueDepth() float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stream, err := s.js.Stream(ctx, jobs.StreamName)
	if err != nil {
		return -1
	}
	list := stream.ListConsumers(ctx)
	var n uint64
	for info := range list.Info() {
		n += info.NumPending
	}
	if list.Err() != nil {
		return -1
	}
	return float64(n)
}

// checkQueue checks that the job stream can take a publish: NATS is
// connected and the stream answers its info request, with a leader when it
// is replicated. During a leader election, or with the stream gone, every
// submission would fail: the ingress is not ready.
func (s *Server) checkQueue(ctx context.Context) error {
	if !s.nc.IsConnected() {
		return errors.New("not connected")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	stream, err := s.js.Stream(ctx, jobs.StreamName)
	if err != nil {
		return fmt.Errorf("job stream %s: %w", jobs.StreamName, err)
	}
	if c := stream.CachedInfo().Cluster; c != nil && c.Leader == "" {
		return fmt.Errorf("job stream %s has no leader", jobs.StreamName)
	}
	return nil
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	status := http.StatusOK
	out := map[string]string{}
	for _, c := range s.checks {
		if err := c.Fn(ctx); err != nil {
			out[c.Name] = "error: " + err.Error()
			status = http.StatusServiceUnavailable
		} else {
			out[c.Name] = "ok"
		}
	}
	writeJSON(w, status, readiness{Ready: status == http.StatusOK, Checks: out})
}

// authenticated resolves the bearer key to a tenant before calling h, and
// turns h's error into the API error body.
func (s *Server) authenticated(h func(http.ResponseWriter, *http.Request, store.Principal) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		if err != nil {
			s.unauthorized(w, r, err)
			return
		}
		if err := h(w, r, p); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// unauthorized answers a request whose key did not check out (or that
// went past its tenant's rate).
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, err error) {
	var e *APIError
	if errors.As(err, &e) && e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gantry"`)
	}
	s.writeError(w, r, err)
}

// authenticate resolves a request's bearer key to its tenant, and admits
// the request under the tenant's rate limit.
func (s *Server) authenticate(r *http.Request) (store.Principal, error) {
	p, err := s.lookupKey(r)
	if err != nil {
		return p, err
	}
	return p, s.admitRate(p)
}

// lookupKey resolves a request's bearer key to its tenant.
func (s *Server) lookupKey(r *http.Request) (store.Principal, error) {
	auth := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(auth, "Bearer ")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return store.Principal{}, &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthenticated,
			Message: "missing API key: send the header Authorization: Bearer <key>"}
	}
	if p, ok := s.auth.get(key); ok {
		return p, nil
	}
	source := s.keySource(r)
	if err := s.keyThrottled(source); err != nil {
		return store.Principal{}, err
	}
	p, err := s.store.Authenticate(r.Context(), key)
	if err == nil {
		s.auth.put(key, p)
	}
	if errors.Is(err, store.ErrNotFound) {
		s.keyFailed(source)
		return store.Principal{}, &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "invalid or revoked API key"}
	}
	if err != nil {
		return store.Principal{}, unavailable("cannot check the API key: the database is unavailable")
	}
	return p, nil
}

func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				s.writeError(w, r, errors.New("panic"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}
