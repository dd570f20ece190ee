// Package webhook calls tenants' webhooks when their jobs finish, as the
// Standard Webhooks specification describes (standardwebhooks.com): a JSON
// event signed with HMAC-SHA256 under a per-tenant secret, in the
// webhook-id, webhook-timestamp and webhook-signature headers.
//
// Deliveries come from an outbox in Postgres that the store fills in the
// same statement that finishes a job. Every ingress runs a Dispatcher that
// claims due deliveries (rows skipped when another ingress holds them),
// attempts them and records each attempt on the delivery, retrying with
// exponential backoff for a day. A delivery is made at least once: one
// whose ingress died mid-attempt is taken over when its lease ends.
//
// Every request goes out through a Sender, which the compatible APIs'
// callbacks (Judge0's callback_url) share: the egress check on the address
// dialled, a timeout per try, redirects refused.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantryhq/gantry/internal/startstop"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/tracing"
)

// Config is the operator's webhook configuration.
type Config struct {
	// AllowPrivate lets webhooks reach loopback and private addresses
	// (GANTRY_WEBHOOK_ALLOW_PRIVATE).
	AllowPrivate bool
	// Timeout bounds one attempt.
	Timeout time.Duration
	// Backoff is the wait before the first retry; each retry waits twice
	// as long as the one before, up to MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// RetryFor is how long after the job finished a delivery is retried
	// before it is given up.
	RetryFor time.Duration
	// Batch is how many deliveries one round claims (and attempts at once).
	Batch int
	// Poll is how often due deliveries are looked for.
	Poll time.Duration
	// Overlap is how long a rotated-out secret goes on signing.
	Overlap time.Duration
	// UserAgent is sent with every attempt.
	UserAgent string
	// View prepares a job for the event as the API shows it (artifact
	// URLs filled in).
	View func(jobs.Job) jobs.Job
	// Attempted, when set, is told each attempt's outcome: the delivery's
	// status after it (delivered, pending: to be retried, failed: given up).
	Attempted func(status string)
	// Tracer makes a span of each attempt, linked to the job's trace (nil:
	// none).
	Tracer trace.TracerProvider
	// Sender sends the attempts (nil: one of the dispatcher's own, from
	// AllowPrivate).
	Sender *Sender
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Backoff == 0 {
		c.Backoff = 5 * time.Second
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = time.Hour
	}
	if c.RetryFor == 0 {
		c.RetryFor = 24 * time.Hour
	}
	if c.Batch == 0 {
		c.Batch = 16
	}
	if c.Poll == 0 {
		c.Poll = time.Second
	}
	if c.Overlap == 0 {
		c.Overlap = 24 * time.Hour
	}
	if c.UserAgent == "" {
		c.UserAgent = "gantry-webhooks"
	}
	if c.View == nil {
		c.View = func(j jobs.Job) jobs.Job { return j }
	}
	if c.Sender == nil {
		c.Sender = NewSender(c.AllowPrivate)
	}
	return c
}

// Store is what the dispatcher needs of the store (*store.Store is one).
type Store interface {
	GetJob(ctx context.Context, tenantID, id string) (jobs.Job, error)
	ClaimWebhooks(ctx context.Context, limit int, lease time.Duration) ([]DueDelivery, error)
	RecordWebhookAttempt(ctx context.Context, id string, a jobs.WebhookAttempt, status string, next time.Time) error
	WebhookSecrets(ctx context.Context, tenantID string) (SealedSecrets, error)
	InitWebhookSecret(ctx context.Context, tenantID string, sealed []byte) (SealedSecrets, error)
	RotateWebhookSecret(ctx context.Context, tenantID string, sealed []byte, overlap time.Duration) (SealedSecrets, error)
}

// SealedSecrets are a tenant's webhook signing secrets as stored, sealed.
type SealedSecrets struct {
	Current []byte // nil: none made yet
	// Previous also signs until PreviousUntil (after a rotation).
	Previous      []byte
	PreviousUntil *time.Time
}

// DueDelivery is a delivery an ingress has taken to attempt now.
type DueDelivery struct {
	ID        string
	TenantID  string
	JobID     string
	URL       string
	CreatedAt time.Time
	// Attempts is how many attempts were made before this one.
	Attempts int
	// TraceParent is the traceparent of the span that queued the job (""
	// when it has none): each attempt's span links to the job's trace.
	TraceParent string
}

// Dispatcher delivers webhooks and keeps tenants' signing secrets.
type Dispatcher struct {
	cfg    Config
	store  Store
	box    *secret.Box
	log    *slog.Logger
	loops  startstop.Loops
	tracer trace.Tracer
}

// New returns a Dispatcher. Secrets are sealed in the store with box, which
// must have a key.
func New(cfg Config, st Store, box *secret.Box, log *slog.Logger) (*Dispatcher, error) {
	if !box.Enabled() {
		return nil, secret.ErrNoKey
	}
	cfg = cfg.WithDefaults()
	return &Dispatcher{cfg: cfg, store: st, box: box, log: log,
		tracer: tracing.Tracer(cfg.Tracer, "github.com/gantryhq/gantry/webhook")}, nil
}

// Secrets are a tenant's signing secrets as it sees them.
type Secrets struct {
	Secret string `json:"secret"`
	// PreviousExpiresAt is when the secret replaced by the last rotation
	// stops signing (null: none signs).
	PreviousExpiresAt *time.Time `json:"previous_expires_at"`
}

// Secret returns the tenant's signing secret, making one on first use.
func (d *Dispatcher) Secret(ctx context.Context, tenantID string) (Secrets, error) {
	w, err := d.secrets(ctx, tenantID)
	if err != nil {
		return Secrets{}, err
	}
	return d.shown(tenantID, w)
}

// Rotate gives the tenant a new signing secret. The one it replaces goes on
// signing (alongside) for Overlap, so receivers can switch over.
func (d *Dispatcher) Rotate(ctx context.Context, tenantID string) (Secrets, error) {
	sealed, err := d.box.Seal([]byte(NewSecret()), secretContext(tenantID))
	if err != nil {
		return Secrets{}, err
	}
	w, err := d.store.RotateWebhookSecret(ctx, tenantID, sealed, d.cfg.Overlap)
	if err != nil {
		return Secrets{}, err
	}
	return d.shown(tenantID, w)
}

func (d *Dispatcher) shown(tenantID string, w SealedSecrets) (Secrets, error) {
	cur, err := d.box.Open(w.Current, secretContext(tenantID))
	if err != nil {
		return Secrets{}, fmt.Errorf("open webhook secret: %w", err)
	}
	s := Secrets{Secret: string(cur)}
	if w.Previous != nil {
		s.PreviousExpiresAt = w.PreviousUntil
	}
	return s, nil
}

func secretContext(tenantID string) string { return "webhook-secret:" + tenantID }

// secrets returns the tenant's sealed secrets, making the first if needed.
func (d *Dispatcher) secrets(ctx context.Context, tenantID string) (SealedSecrets, error) {
	w, err := d.store.WebhookSecrets(ctx, tenantID)
	if err != nil || w.Current != nil {
		return w, err
	}
	sealed, err := d.box.Seal([]byte(NewSecret()), secretContext(tenantID))
	if err != nil {
		return w, err
	}
	return d.store.InitWebhookSecret(ctx, tenantID, sealed)
}

// signing returns the secrets that sign a tenant's messages now.
func (d *Dispatcher) signing(ctx context.Context, tenantID string) ([]string, error) {
	w, err := d.secrets(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sealed := range [][]byte{w.Current, w.Previous} {
		if sealed == nil {
			continue
		}
		s, err := d.box.Open(sealed, secretContext(tenantID))
		if err != nil {
			return nil, fmt.Errorf("open webhook secret: %w", err)
		}
		out = append(out, string(s))
	}
	return out, nil
}

// Start starts delivering what is due, every Poll, until Stop (see
// startstop).
func (d *Dispatcher) Start(ctx context.Context) error { return d.loops.Start(ctx, d.run) }

// Stop stops delivering and returns once the attempts in progress have
// been cancelled and have returned.
func (d *Dispatcher) Stop() { d.loops.Stop() }

// run delivers what is due every Poll until ctx ends (at once again after
// a full round, so a backlog drains).
func (d *Dispatcher) run(ctx context.Context) {
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	for {
		n, err := d.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("deliver webhooks", "err", err)
		}
		if n == d.cfg.Batch && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce claims the deliveries that are due (up to Batch) and attempts
// them at once, returning how many it claimed.
func (d *Dispatcher) RunOnce(ctx context.Context) (int, error) {
	due, err := d.store.ClaimWebhooks(ctx, d.cfg.Batch, 2*d.cfg.Timeout+5*time.Second)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, w := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.deliver(ctx, w)
		}()
	}
	wg.Wait()
	return len(due), nil
}

// Event is the body of a webhook: a job that finished.
type Event struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      jobs.Job  `json:"data"`
}

// EventJobFinished is the type of the event sent when a job finishes.
const EventJobFinished = "job.finished"

// MaxEventOutput caps each of stdout and stderr in an event; GET the job
// for all of it.
const MaxEventOutput = 64 << 10

// event builds the body of a delivery; it is the same on every attempt.
func (d *Dispatcher) event(job jobs.Job) ([]byte, error) {
	job = d.cfg.View(job)
	job.Webhook = nil // the delivery itself: it changes with every attempt
	job.Stdout, job.Stderr = cut(job.Stdout, MaxEventOutput), cut(job.Stderr, MaxEventOutput)
	ts := job.CreatedAt
	if job.FinishedAt != nil {
		ts = *job.FinishedAt
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(Event{Type: EventJobFinished, Timestamp: ts, Data: job})
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), err
}

// cut shortens s to at most n bytes without splitting a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// deliver makes one attempt and records it with what comes next.
func (d *Dispatcher) deliver(ctx context.Context, w DueDelivery) {
	// Each attempt is a trace of its own (a delivery may be retried for a
	// day), linked to the job's.
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithNewRoot(),
		trace.WithAttributes(tracing.JobID.String(w.JobID), tracing.TenantID.String(w.TenantID),
			attribute.String("gantry.webhook.id", w.ID), attribute.Int("gantry.webhook.attempt", w.Attempts+1))}
	job := tracing.SpanContextOf(w.TraceParent)
	if job.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: job}))
	}
	ctx, span := d.tracer.Start(ctx, "webhook.deliver", opts...)
	defer span.End()
	log := d.log.With("webhook_id", w.ID, "job_id", w.JobID, "tenant_id", w.TenantID)
	if job.IsSampled() {
		log = log.With("trace_id", job.TraceID().String())
	}
	started := time.Now()
	code, err := d.attempt(ctx, w)
	if code != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", code))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	if ctx.Err() != nil {
		return // shutting down: the lease ends and the delivery is tried again
	}
	a := jobs.WebhookAttempt{At: started.UTC(), StatusCode: code, DurationMS: time.Since(started).Milliseconds()}
	status, next := jobs.WebhookDelivered, time.Time{}
	if err != nil {
		a.Error = err.Error()
		next = started.Add(d.backoff(w.Attempts + 1))
		status = jobs.WebhookPending
		if next.Sub(w.CreatedAt) > d.cfg.RetryFor {
			status = jobs.WebhookFailed
			log.Warn("webhook given up", "attempts", w.Attempts+1, "err", err)
		}
	}
	span.SetAttributes(tracing.Outcome.String(status))
	if err := d.store.RecordWebhookAttempt(ctx, w.ID, a, status, next); err != nil && ctx.Err() == nil {
		log.Warn("record webhook attempt", "err", err)
	}
	if d.cfg.Attempted != nil {
		d.cfg.Attempted(string(status))
	}
}

// backoff is the wait after the nth failed attempt.
func (d *Dispatcher) backoff(n int) time.Duration {
	b := d.cfg.Backoff
	for i := 1; i < n && b < d.cfg.MaxBackoff; i++ {
		b *= 2
	}
	return min(b, d.cfg.MaxBackoff)
}

// attempt POSTs the signed event once. It returns the receiver's status
// (0 if it did not answer) and an error unless that status is 2xx.
func (d *Dispatcher) attempt(ctx context.Context, w DueDelivery) (int, error) {
	job, err := d.store.GetJob(ctx, w.TenantID, w.JobID)
	if err != nil {
		return 0, fmt.Errorf("read the job: %w", err)
	}
	body, err := d.event(job)
	if err != nil {
		return 0, err
	}
	secrets, err := d.signing(ctx, w.TenantID)
	if err != nil {
		return 0, err
	}
	now := time.Now()
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		if sigs[i], err = Sign(s, w.ID, now, body); err != nil {
			return 0, err
		}
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", d.cfg.UserAgent)
	h.Set(HeaderID, w.ID)
	h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
	// The receiver may continue the attempt's trace (traceparent).
	tracing.Inject(ctx, propagation.HeaderCarrier(h))
	// One try: the outbox retries, with backoff, and records each attempt.
	a, err := d.cfg.Sender.Send(ctx, Message{Method: http.MethodPost, URL: w.URL, Header: h, Body: body, Timeout: d.cfg.Timeout, Tries: 1})
	if err != nil {
		return 0, err
	}
	return a.Status, a.Err()
}
