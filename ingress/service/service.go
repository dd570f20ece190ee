// Package service is the ingress's core: every operation gantry offers a
// tenant — submitting, waiting for, cancelling and listing jobs, their
// output and artifacts; sessions and their workspace files; skills; code
// mode's upstream MCP servers; settings and webhooks — as methods of one
// type, Service, over a narrow Store, or of the parts it hands out for a
// group of operations (Sandboxes: stateful sessions' live sandboxes;
// CodeMode: code mode's servers and tools). The HTTP API (package httpapi), MCP
// (package mcpapi) and the compatible APIs are adapters over it: they
// authenticate a caller with Authenticate, translate a request into one
// call and the answer back, and never reach the store themselves.
//
// The background work every ingress replica does beside serving requests
// (sessions, stranded jobs, code-mode tool lists, privacy tokens, history
// retention, webhook deliveries) is Maintenance's.
package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/membudget"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/tracing"
	"github.com/gantryhq/gantry/webhook"
	"github.com/gantryhq/gantry/workspace"
)

// Config is the service's configuration.
type Config struct {
	Policy jobs.Policy
	Queue  queue.Config
	// MaxExecuteWait caps how long a caller may wait for a job to finish
	// after submitting it (default: the policy's longest timeout and 30 s).
	MaxExecuteWait time.Duration
	// PresignExpiry is how long artifact download URLs work.
	PresignExpiry time.Duration
	// Version names the software in webhook calls.
	Version string
	// CodeMode is the registry of tenants' upstream MCP servers (nil: code
	// mode is off and its operations answer unavailable).
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
	// BatchMax caps the jobs of one batch.
	BatchMax int
	// TenantLimits are the quotas of tenants the operator set none for.
	TenantLimits jobs.TenantLimits
	// Durable is whether a stateful session is durable when its request
	// does not say (GANTRY_SESSION_DURABLE).
	Durable bool
	// Egress is the operator's word on tenants' egress allow-lists.
	Egress EgressPolicy
	// History is the job history's retention (the Maintenance sweeps it;
	// the service keeps what expires soon out of its caches and tells
	// callers how long a finished job is kept). nil: kept forever.
	History Retention
	// Streams bound what the ingress holds of live processes' output for
	// streams that have not read it (processevents.go).
	Streams StreamLimits
	// Tracer makes the spans of submissions (and the adapters' of
	// requests, and webhook attempts'). nil: none.
	Tracer trace.TracerProvider
	// TenantBufferBytes and BufferBytes bound the memory the ingress holds
	// for answers in progress, per tenant and in all (buffers.go).
	TenantBufferBytes, BufferBytes int64
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.Policy.MaxTimeoutMS == 0 {
		c.Policy = jobs.DefaultPolicy()
	}
	c.Queue = c.Queue.WithDefaults()
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
	if c.BatchMax == 0 {
		c.BatchMax = 100
	}
	c.TenantLimits = c.TenantLimits.Or(jobs.DefaultTenantLimits())
	if c.TenantBufferBytes == 0 {
		c.TenantBufferBytes = DefaultTenantBufferBytes
	}
	if c.BufferBytes == 0 {
		c.BufferBytes = DefaultBufferBytes
	}
	c.Streams = c.Streams.WithDefaults()
	return c
}

// Store is what the service needs of the store.
type Store interface {
	Ping(ctx context.Context) error
	Authenticate(ctx context.Context, key string) (store.Principal, error)
	EnqueueJob(ctx context.Context, nj store.NewJob, publish func(ctx context.Context, jobID string) (uint64, error)) (jobs.Job, bool, error)
	GetJob(ctx context.Context, tenantID, id string) (jobs.Job, error)
	ListJobs(ctx context.Context, tenantID string, f store.JobFilter) ([]jobs.Job, string, error)
	JobSpecs(ctx context.Context, tenantID string, ids []string) (map[string]jobs.JobSpec, error)
	CancelJob(ctx context.Context, tenantID, id string, stale time.Duration) (store.CancelOutcome, error)
	WithdrawJob(ctx context.Context, tenantID, id string) (bool, error)
	TenantLimits(ctx context.Context, tenantID string) (jobs.TenantLimits, error)

	CreateSession(ctx context.Context, tenantID string, req jobs.SessionRequest) (jobs.Session, error)
	GetSession(ctx context.Context, tenantID, id string) (jobs.Session, error)
	ListSessions(ctx context.Context, tenantID string, limit int, before string) ([]jobs.Session, string, error)
	SetSessionTTL(ctx context.Context, tenantID, id string, ttlSeconds int) (jobs.Session, error)
	// Session tokens (sessiontoken.go).
	OpenSessionTokens(ctx context.Context, tenantID, id string) (time.Time, error)
	SessionTokenGrant(ctx context.Context, keyID, tenantID, sessionID string) (store.TokenGrant, error)
	CloseSession(ctx context.Context, tenantID, id string) (store.SessionRef, error)
	FinishClosing(ctx context.Context, id string) (bool, error)
	// The files API's edits take the session's lease and commit a version.
	workspace.Leases

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
	TenantEgress(ctx context.Context, tenantID string) ([]string, error)
	SetTenantEgress(ctx context.Context, tenantID string, allow []string) error

	PutSecret(ctx context.Context, tenantID, name, sessionID string, sealed []byte) (jobs.Secret, bool, error)
	GetSecret(ctx context.Context, tenantID, name string) (jobs.Secret, error)
	ListSecrets(ctx context.Context, tenantID string) ([]jobs.Secret, error)
	DeleteSecret(ctx context.Context, tenantID, name string) error
	MissingSecrets(ctx context.Context, tenantID, sessionID string, names []string) ([]string, error)
	DeleteSessionSecrets(ctx context.Context, tenantID, sessionID string, keep []string) error
	SetSessionNetwork(ctx context.Context, tenantID, id string, n *jobs.Network) (jobs.Session, error)

	Usage(ctx context.Context, tenantID string, from, to time.Time, step time.Duration, by string) (jobs.Usage, error)

	Environments(ctx context.Context) ([]store.Environment, error)

	// Stateful sessions' live state: pause, snapshots (livestate.go).
	LiveStore
	// Their ports' routes, and the traffic that keeps them (ports.go).
	PortRoute(ctx context.Context, sessionID string) (store.PortRoute, error)
	TouchSession(ctx context.Context, tenantID, sessionID string) (time.Time, error)
}

// The store's records the service hands to its adapters as they are.
type (
	// Principal is an authenticated caller: a tenant and the key it used.
	Principal = store.Principal
	// SkillRecord is a stored version of a skill.
	SkillRecord = store.SkillRecord
	// SkillVersion is one version in a skill's history.
	SkillVersion = store.SkillVersion
)

// Retention deletes finished jobs older than the history's TTL, with what
// they stored (history.Retention).
type Retention interface {
	// Sweep deletes a bounded amount of expired history and returns how
	// many jobs it deleted. Replicas may call it at once.
	Sweep(ctx context.Context) (int, error)
	// TTL is how long a finished job is kept (0: forever).
	TTL() time.Duration
}

// Blobs is what the service needs of the object store.
type Blobs interface {
	Ping(ctx context.Context) error
	PresignGet(ctx context.Context, key string, expiry time.Duration, filename string) (*url.URL, error)
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	PutStream(ctx context.Context, key string, r io.Reader, contentType string) (int64, error)
	// Copy copies an object in the store (a snapshot's workspace).
	Copy(ctx context.Context, src, dst string) (int64, error)
	Delete(ctx context.Context, key string) error
	DeletePrefix(ctx context.Context, prefix string) (int, error)
}

// Check is a named readiness check.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Service carries out the operations of gantry's API for its adapters.
// Every operation takes the caller (a Principal from Authenticate) and is
// scoped to its tenant: another tenant's objects are not found. Errors are
// *Error for what the caller can act on (ToError maps any error to one).
type Service struct {
	cfg     Config
	log     *slog.Logger
	store   Store
	blobs   Blobs
	nc      *nats.Conn
	js      jetstream.JetStream
	queue   *publisher
	closer  *closer
	editor  *workspace.Editor
	rates   *rateLimits
	hub     *hub
	checks  []Check
	metrics *metrics
	auth    *authCache
	badKeys *rateLimits        // invalid keys per source address (auth.go)
	revoked *nats.Subscription // key revocations
	// closedSub hears of closed sessions (their port routes forgotten).
	closedSub *nats.Subscription
	done      *doneJobs
	// webhooks keeps tenants' signing secrets; the Maintenance runs its
	// deliveries (nil: off, no secret key).
	webhooks *webhook.Dispatcher
	// sender checks the URLs tenants give for webhooks and callbacks, and
	// sends both.
	sender *webhook.Sender
	// callbacks are the compatible APIs' (callbacks.go).
	callbacks *callbacks
	envs      environments // the registered environments, cached
	tracer    trace.Tracer
	// sandboxes are stateful sessions' live sandboxes (live.go).
	sandboxes *Sandboxes
	codeMode  *CodeMode
	// live is the store's part for live state (the store itself).
	live LiveStore
	// budget bounds the memory held for answers (buffers.go).
	budget *membudget.Budget
}

// tracerName names the ingress's spans' instrumentation scope.
const tracerName = "github.com/gantryhq/gantry/ingress"

// New makes a Service. Start must be called before it serves jobs.
func New(cfg Config, log *slog.Logger, st Store, blobs Blobs, nc *nats.Conn, reg prometheus.Registerer, extraChecks ...Check) (*Service, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	s := &Service{
		cfg: cfg, log: log, store: st, blobs: blobs, nc: nc, js: js, rates: newRateLimits(10_000),
		queue:  newPublisher(nc, js, cfg.Queue, st, cfg.TenantLimits, log, cfg.Tracer),
		closer: &closer{log: log, nc: nc, blobs: blobs, store: st},
		hub:    newHub(), metrics: newMetrics(reg), auth: newAuthCache(KeyCacheTTL, 10000), badKeys: newRateLimits(10000), done: newDoneJobs(64<<20, 10*time.Minute),
		tracer: tracing.Tracer(cfg.Tracer, tracerName), live: st,
		budget: membudget.New(cfg.TenantBufferBytes, cfg.BufferBytes),
	}
	registerBufferMetrics(reg, s.budget)
	s.editor = &workspace.Editor{Store: st, Blobs: blobs, Wait: busyWait, Kick: s.queue.kickSession, Log: log}
	s.sandboxes = &Sandboxes{s: s, streams: newProcessStreams(cfg.Streams, reg), ports: newPorts()}
	s.codeMode = &CodeMode{reg: cfg.CodeMode}
	// One sender for the webhooks and the compatible APIs' callbacks, under
	// one egress policy (GANTRY_WEBHOOK_ALLOW_PRIVATE).
	s.sender = webhook.NewSender(cfg.Webhooks.AllowPrivate)
	s.callbacks = newCallbacks(s.sender)
	if s.cfg.History != nil {
		s.done.history = s.cfg.History.TTL()
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gantry_queue_depth", Help: "Jobs waiting in the stream for a runner (read from JetStream at scrape time).",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := queue.Pending(ctx, js)
		if err != nil {
			return -1
		}
		return float64(n)
	}))
	s.checks = append([]Check{
		{"postgres", st.Ping},
		// Otherwise every submission would fail: not ready.
		{"nats", func(ctx context.Context) error { return queue.Healthy(ctx, nc, js) }},
		{"s3", blobs.Ping},
	}, extraChecks...)
	RegisterDependencyGauges(reg, s.checks)
	if cfg.Box.Enabled() {
		wc := s.cfg.Webhooks
		wc.Sender = s.sender
		wc.View = View
		wc.Attempted = func(status string) { s.metrics.webhooks.WithLabelValues(status).Inc() }
		if wc.Tracer == nil {
			wc.Tracer = cfg.Tracer
		}
		if wc.UserAgent == "" {
			wc.UserAgent = "gantry-webhooks/" + s.cfg.Version
		}
		if s.webhooks, err = webhook.New(wc, st, cfg.Box, log.With("component", "webhooks")); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Start creates the job stream if needed, stores the built-in skills and
// subscribes to job status events and key revocations. It returns once the
// service is ready to serve.
func (s *Service) Start(ctx context.Context) error {
	if err := queue.Ensure(ctx, s.js, s.cfg.Queue); err != nil {
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
	revoked, err := s.nc.Subscribe(queue.KeyRevokedSubject, s.auth.onRevoked(s.log))
	if err != nil {
		return fmt.Errorf("subscribe to key revocations: %w", err)
	}
	s.revoked = revoked
	// A closed session's port route is forgotten at once, on every
	// ingress: a request to its ports must not reach its sandbox's
	// container, which may already serve the tenant's next session.
	closed, err := s.nc.Subscribe(queue.SessionClosedAll, func(m *nats.Msg) {
		s.sandboxes.ports.routes.Remove(queue.SessionIDFromSubject(m.Subject))
	})
	if err != nil {
		return fmt.Errorf("subscribe to closed sessions: %w", err)
	}
	s.closedSub = closed
	return nil
}

// Stop releases the service's subscriptions.
func (s *Service) Stop() {
	s.callbacks.stop()
	s.sandboxes.stopPorts()
	if s.revoked != nil {
		_ = s.revoked.Unsubscribe()
	}
	if s.closedSub != nil {
		_ = s.closedSub.Unsubscribe()
	}
	s.hub.stop()
}

// Webhooks is the service's webhook dispatcher, for the Maintenance to
// run its deliveries (nil: webhooks are off).
func (s *Service) Webhooks() *webhook.Dispatcher { return s.webhooks }

// Policy is what jobs may ask for.
func (s *Service) Policy() jobs.Policy { return s.cfg.Policy }

// MaxWait is the longest a caller may wait for a job after submitting it.
func (s *Service) MaxWait() time.Duration { return s.cfg.MaxExecuteWait }

// HistoryTTL is how long a finished job is kept (0: forever).
func (s *Service) HistoryTTL() time.Duration {
	if s.cfg.History == nil {
		return 0
	}
	return s.cfg.History.TTL()
}

// Ready runs every readiness check (Postgres, NATS, S3 and the extra
// ones) and returns each one's outcome by name: nil when it passed.
func (s *Service) Ready(ctx context.Context) map[string]error {
	out := make(map[string]error, len(s.checks))
	for _, c := range s.checks {
		out[c.Name] = c.Fn(ctx)
	}
	return out
}

// metrics are the service's own: what it accepted.
type metrics struct {
	submitted *prometheus.CounterVec
	webhooks  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		submitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_jobs_submitted_total", Help: "Jobs accepted, by language.",
		}, []string{"language"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_webhook_attempts_total", Help: "Webhook delivery attempts, by the delivery's status after each: delivered, pending (to be retried), failed (given up).",
		}, []string{"status"}),
	}
	reg.MustRegister(m.submitted, m.webhooks)
	return m
}
