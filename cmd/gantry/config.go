package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/devstack"
	"github.com/gantryhq/gantry/egress"
	"github.com/gantryhq/gantry/history"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/runner"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/tracing"
)

// config is everything gantry reads from the environment. Each subcommand
// uses the part it needs.
type config struct {
	Addr        string
	DatabaseURL string
	NATSURL     string
	// NATSAuth is sent to NATS beside any user in NATSURL's servers
	// (GANTRY_NATS_TOKEN, GANTRY_NATS_CREDS, or gantry dev's own user).
	NATSAuth    queue.Auth
	S3          blob.Config
	AutoMigrate bool

	Image      string
	DockerHost string
	RunnerID   string
	RunnerAddr string // "": no health/metrics server
	Slots      int
	// MaxSlots and BurstWait: burst slots beyond Slots (runner.Config);
	// MemoryMB is the host memory the runner's sandboxes may take.
	MaxSlots  int
	BurstWait time.Duration
	MemoryMB  int
	// BuildCacheMB and BuildCacheTTL bound the runner's compiled programs.
	BuildCacheMB  int
	BuildCacheTTL time.Duration
	DrainTimeout  time.Duration
	PoolMin       int
	PoolMax       int
	Runtime       string
	Isolation     string
	SandboxJobs   int
	SandboxIdle   time.Duration
	SandboxKeep   int
	// WarmPreload is what each container's warm interpreter imports (nil:
	// runner.DefaultWarm; empty: no warm interpreter); WarmMB its share of
	// a container's memory (0: the default).
	WarmPreload []string
	WarmMB      int
	// LiveMax bounds the stateful sessions' containers a runner keeps
	// between their jobs.
	LiveMax int
	// LiveState is how a runner keeps stateful sessions' live state:
	// "auto" (under gVisor, checkpointable, where runsc can checkpoint;
	// else in memory), "gvisor" (refuse to start without it) or "memory".
	// Runsc is its runsc; LiveDir its state directory ("": the data dir's
	// for dev, /var/lib/gantry else); LiveCacheMB the checkpoints kept on
	// disk; LiveCheckpointEvery how stale a session's last checkpoint may
	// get before the next job's end takes another.
	LiveState           string
	Runsc               string
	LiveDir             string
	LiveCacheMB         int
	LiveCheckpointEvery time.Duration
	// LiveBufferMB and LiveBufferTenantMB bound what an ingress holds of
	// live processes' output for readers behind, in all and per tenant.
	LiveBufferMB, LiveBufferTenantMB int
	// Artifact caps per job.
	ArtifactFiles   int
	ArtifactFileMB  int
	ArtifactTotalMB int

	Queue        queue.Config
	TenantLimits jobs.TenantLimits
	Policy       jobs.Policy
	MaxBodyBytes int64
	BodyTimeout  time.Duration
	// The ingress's memory for answers in progress: per tenant and in all.
	TenantBufferMB int
	BufferMB       int
	PresignExpiry  time.Duration
	SweepInterval  time.Duration
	// History: how long finished jobs are kept (0: forever), and the
	// longest output stream kept in Postgres.
	HistoryTTL        time.Duration
	OutputInlineBytes int

	LogLevel  slog.Level
	LogFormat string
	// Traces: GANTRY_OTLP_ENDPOINT, beside the standard OTEL_* variables.
	Traces tracing.Config

	// Code mode and privacy tokens.
	SecretKey []byte // nil: not set
	// TrustedProxies are load balancers whose X-Forwarded-For is believed.
	TrustedProxies []netip.Prefix

	MCPCommands     [][]string
	MCPEnv          []string
	MCPImage        string
	MCPNetwork      string
	MCPAllowPrivate *bool // nil: on in dev, off otherwise
	MCPToolsTTL     time.Duration
	PIITTL          time.Duration

	// Webhooks and batches.
	WebhookAllowPrivate *bool // nil: on in dev, off otherwise

	// Egress: jobs' allow-listed connections through the egress proxy.
	EgressOff bool
	// EgressPrivate is the operator's list of the non-public places jobs
	// may reach (GANTRY_EGRESS_PRIVATE); EgressAllowPrivate lets them reach
	// every one (GANTRY_EGRESS_ALLOW_PRIVATE=true, the older switch).
	EgressPrivate      egress.PrivateList
	EgressAllowPrivate bool
	// EgressDeny is what jobs never reach beside gantry's own services
	// (GANTRY_EGRESS_DENY).
	EgressDeny      []egress.Endpoint
	EgressMaxHosts  int
	WebhookTimeout  time.Duration
	WebhookBackoff  time.Duration
	WebhookRetryFor time.Duration
	BatchMax        int

	// The web console and the agent (chat) behind the playground and
	// POST /v1/agent/chat/completions.
	Console     bool
	LLMURL      string // "": no agent
	LLMModel    string
	LLMAPIKey   string
	LLMMaxSteps int
	LLMTimeout  time.Duration
	// LLMRunTimeout bounds a whole agent request; LLMMaxTokens caps its
	// max_tokens (0: no cap).
	LLMRunTimeout time.Duration
	LLMMaxTokens  int

	// dev only
	DataDir      string
	DevAPIKey    string
	DevNATSAddr  string
	DevS3Addr    string
	DevRunner    bool
	VersityGWBin string
}

// envReader reads GANTRY_* variables and collects every bad one, so that a
// misconfigured start names them all at once.
type envReader struct{ errs []string }

func (e *envReader) str(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func (e *envReader) int(name string, def int, min, max int) int {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		e.errs = append(e.errs, fmt.Sprintf("%s=%q: want an integer from %d to %d", name, v, min, max))
		return def
	}
	return n
}

// moduleName is a Python module's dotted name.
var moduleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// modules reads a comma-separated list of Python modules: nil when unset,
// empty for "none" or an empty value.
func (e *envReader) modules(name string) []string {
	v, ok := os.LookupEnv(name)
	if !ok {
		return nil
	}
	out := []string{}
	if strings.TrimSpace(v) == "none" {
		return out
	}
	for _, m := range strings.Split(v, ",") {
		if m = strings.TrimSpace(m); m == "" {
			continue
		}
		if !moduleName.MatchString(m) {
			e.errs = append(e.errs, fmt.Sprintf("%s: %q is not a Python module name (want a comma-separated list, or none)", name, m))
			continue
		}
		out = append(out, m)
	}
	return out
}

// policy reads the operator's maxima for what a job may ask for. A request
// above one is refused with a 400 naming its field, rather than accepted
// and then failed by every runner. Each maximum must be at least what a job
// gets by default, or default jobs would be refused.
func (e *envReader) policy() jobs.Policy {
	p := jobs.DefaultPolicy()
	d := p.DefaultLimits
	// Docker refuses a container more CPUs than its host has: by default
	// no more than this machine's (set it to the smallest runner's).
	p.MaxLimits.CPUs = e.maximum("GANTRY_MAX_CPUS", float64(runtime.NumCPU()), d.CPUs, 1024, "limits.cpus")
	p.MaxLimits.MemoryMB = int(e.maximum("GANTRY_MAX_MEMORY_MB", float64(p.MaxLimits.MemoryMB), float64(d.MemoryMB), 1<<20, "limits.memory_mb"))
	p.MaxLimits.DiskMB = int(e.maximum("GANTRY_MAX_DISK_MB", float64(p.MaxLimits.DiskMB), float64(max(d.DiskMB, jobs.DefaultSessionMB)), 1<<20, "limits.disk_mb and a session's disk_mb"))
	p.MaxLimits.OutputBytes = int(e.maximum("GANTRY_MAX_OUTPUT_BYTES", float64(p.MaxLimits.OutputBytes), float64(d.OutputBytes), 1<<30, "limits.output_bytes"))
	p.MaxTimeoutMS = int(e.maximum("GANTRY_MAX_TIMEOUT_MS", float64(p.MaxTimeoutMS), float64(p.DefaultTimeoutMS), 24*3600*1000, "timeout_ms"))
	p.Languages = e.languages()
	return p
}

// languages reads the languages the ingress offers: those of the sandbox
// image its runners run. Unset, the standard image's (gantry dev asks its
// runner's image instead); "all" is every language gantry knows.
func (e *envReader) languages() []string {
	v := e.str("GANTRY_LANGUAGES", "")
	switch strings.TrimSpace(v) {
	case "":
		return jobs.StandardLanguages()
	case "all":
		return jobs.LanguageNames()
	}
	var names []string
	for _, n := range strings.Split(v, ",") {
		l, ok := jobs.LookupLanguage(strings.TrimSpace(n))
		if !ok {
			e.errs = append(e.errs, fmt.Sprintf("GANTRY_LANGUAGES=%q: %q is not a language (want some of %s, or all)", v, n, strings.Join(jobs.LanguageNames(), ", ")))
			return jobs.StandardLanguages()
		}
		if !slices.Contains(names, l.Name) {
			names = append(names, l.Name)
		}
	}
	return names
}

// tenantLimits reads the quotas of tenants the operator set none for
// (gantry tenants set-limits sets a tenant's own).
func (e *envReader) tenantLimits() jobs.TenantLimits {
	def := jobs.DefaultTenantLimits()
	l := jobs.TenantLimits{
		MaxQueued:  e.int("GANTRY_TENANT_MAX_QUEUED", def.MaxQueued, 1, 10_000_000),
		MaxRunning: e.int("GANTRY_TENANT_MAX_RUNNING", def.MaxRunning, 1, 1_000_000),
		// Each stateful session keeps a live sandbox on a runner.
		MaxLiveSessions: e.int("GANTRY_TENANT_MAX_LIVE_SESSIONS", def.MaxLiveSessions, 1, 1_000_000),
		// What snapshots of stateful sessions hold in the object store.
		MaxSnapshotMB: e.int("GANTRY_TENANT_MAX_SNAPSHOT_MB", def.MaxSnapshotMB, 1, 1<<30),
	}
	l.RequestsPerSecond = def.RequestsPerSecond
	if v := e.str("GANTRY_TENANT_RPS", ""); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || f < 0.01 || f > 1_000_000 {
			e.errs = append(e.errs, fmt.Sprintf("GANTRY_TENANT_RPS=%q: want a number of requests per second from 0.01 to 1000000", v))
		} else {
			l.RequestsPerSecond = f
		}
	}
	return l
}

// maximum reads a policy maximum: a whole number (CPUs may be fractional)
// from floor, the default a job gets, to ceil.
func (e *envReader) maximum(name string, def, floor, ceil float64, field string) float64 {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	whole := name != "GANTRY_MAX_CPUS"
	if err != nil || math.IsNaN(f) || f < floor || f > ceil || (whole && f != math.Trunc(f)) {
		kind := "a number"
		if whole {
			kind = "a whole number"
		}
		e.errs = append(e.errs, fmt.Sprintf("%s=%q: want %s from %g (the default %s of a job) to %g", name, v, kind, floor, field, ceil))
		return def
	}
	return f
}

func (e *envReader) duration(name string, def, min, max time.Duration) time.Duration {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < min || d > max {
		e.errs = append(e.errs, fmt.Sprintf("%s=%q: want a duration from %s to %s, such as 30s", name, v, min, max))
		return def
	}
	return d
}

func (e *envReader) bool(name string, def bool) bool {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Sprintf("%s=%q: want true or false", name, v))
		return def
	}
	return b
}

// list reads a comma-separated list, without empty entries.
func (e *envReader) list(name string) []string {
	var out []string
	for _, v := range strings.Split(e.str(name, ""), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func (e *envReader) err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return fmt.Errorf("bad configuration:\n  %s", strings.Join(e.errs, "\n  "))
}

// devNATSCredentials is the file in GANTRY_DATA_DIR where gantry dev
// keeps the user its NATS server admits.
const devNATSCredentials = "nats-credentials.json"

// DefaultDatabaseURL is the local cluster `make run` sets up.
const DefaultDatabaseURL = "postgres://gantry:gantry@127.0.0.1:5432/gantry?sslmode=disable"

func loadConfig() (config, error) {
	var e envReader
	host, _ := os.Hostname()
	c := config{
		Addr:        e.str("GANTRY_ADDR", "127.0.0.1:8080"),
		DatabaseURL: e.str("GANTRY_DATABASE_URL", DefaultDatabaseURL),
		NATSURL:     e.str("GANTRY_NATS_URL", "nats://127.0.0.1:4222"),
		S3: blob.Config{
			Endpoint:       e.str("GANTRY_S3_ENDPOINT", ""),
			PublicEndpoint: e.str("GANTRY_S3_PUBLIC_ENDPOINT", ""),
			AccessKey:      e.str("GANTRY_S3_ACCESS_KEY", ""),
			SecretKey:      e.str("GANTRY_S3_SECRET_KEY", ""),
			Bucket:         e.str("GANTRY_S3_BUCKET", "gantry"),
			Region:         e.str("GANTRY_S3_REGION", "us-east-1"),
		},
		AutoMigrate:   e.bool("GANTRY_AUTO_MIGRATE", true),
		Image:         e.str("GANTRY_IMAGE", "gantry-sandbox:latest"),
		DockerHost:    e.str("GANTRY_DOCKER_HOST", ""),
		RunnerID:      e.str("GANTRY_RUNNER_ID", host),
		RunnerAddr:    runnerAddr(),
		Slots:         e.int("GANTRY_RUNNER_SLOTS", max(2, runtime.NumCPU()), 1, 1024),
		MaxSlots:      e.int("GANTRY_RUNNER_MAX_SLOTS", 0, 0, 4096),
		BurstWait:     e.duration("GANTRY_RUNNER_BURST_WAIT", time.Second, 0, time.Hour),
		MemoryMB:      e.int("GANTRY_RUNNER_MEMORY_MB", hostMemoryMB(), 0, 1<<30),
		BuildCacheMB:  e.int("GANTRY_BUILD_CACHE_MB", 256, 0, 1<<20),
		BuildCacheTTL: e.duration("GANTRY_BUILD_CACHE_TTL", 24*time.Hour, time.Minute, 365*24*time.Hour),
		DrainTimeout:  e.duration("GANTRY_DRAIN_TIMEOUT", 30*time.Second, 0, time.Hour),
		PoolMin:       e.int("GANTRY_POOL_MIN", -1, 0, 256),
		PoolMax:       e.int("GANTRY_POOL_MAX", -1, 0, 1024),
		Runtime:       e.str("GANTRY_RUNTIME", ""),
		Isolation:     e.str("GANTRY_ISOLATION", ""),
		SandboxJobs:   e.int("GANTRY_SANDBOX_MAX_JOBS", 1000, 1, 1_000_000),
		SandboxIdle:   e.duration("GANTRY_SANDBOX_IDLE", 5*time.Minute, time.Second, 24*time.Hour),
		SandboxKeep:   e.int("GANTRY_SANDBOX_IDLE_MAX", 0, 0, 4096),
		WarmPreload:   e.modules("GANTRY_WARM_PRELOAD"),
		WarmMB:        e.int("GANTRY_WARM_MB", 0, 0, 64<<10),
		LiveMax:       e.int("GANTRY_SESSION_LIVE_MAX", 0, 0, 4096),

		LiveState:           e.str("GANTRY_LIVE_STATE", "auto"),
		Runsc:               e.str("GANTRY_RUNSC", ""),
		LiveDir:             e.str("GANTRY_LIVE_DIR", ""),
		LiveCacheMB:         e.int("GANTRY_LIVE_CACHE_MB", 4096, 64, 1<<24),
		LiveCheckpointEvery: e.duration("GANTRY_LIVE_CHECKPOINT_EVERY", 5*time.Minute, -1, 24*time.Hour),

		LiveBufferMB:       e.int("GANTRY_LIVE_BUFFER_MB", 256, 1, 1<<20),
		LiveBufferTenantMB: e.int("GANTRY_LIVE_BUFFER_TENANT_MB", 64, 1, 1<<20),

		ArtifactFiles:   e.int("GANTRY_ARTIFACT_MAX_FILES", 100, 1, 100_000),
		ArtifactFileMB:  e.int("GANTRY_ARTIFACT_MAX_FILE_MB", 100, 1, 1<<20),
		ArtifactTotalMB: e.int("GANTRY_ARTIFACT_MAX_TOTAL_MB", 256, 1, 1<<20),
		Queue: queue.Config{
			Replicas:    e.int("GANTRY_NATS_REPLICAS", 1, 1, 5),
			AckWait:     e.duration("GANTRY_ACK_WAIT", 30*time.Second, time.Second, time.Hour),
			MaxAttempts: e.int("GANTRY_MAX_ATTEMPTS", 3, 1, 20),
			MaxMsgs:     int64(e.int("GANTRY_QUEUE_MAX_MSGS", 100_000, 100, 100_000_000)),
			MaxBytes:    int64(e.int("GANTRY_QUEUE_MAX_BYTES", 256<<20, 1<<20, 1<<40)),
		},
		TenantLimits:      e.tenantLimits(),
		Policy:            e.policy(),
		MaxBodyBytes:      int64(e.int("GANTRY_MAX_BODY_BYTES", 10<<20, 1<<10, 1<<30)),
		BodyTimeout:       e.duration("GANTRY_BODY_TIMEOUT", time.Minute, time.Second, time.Hour),
		TenantBufferMB:    e.int("GANTRY_TENANT_BUFFER_MB", service.DefaultTenantBufferBytes>>20, 16, 1<<20),
		BufferMB:          e.int("GANTRY_BUFFER_MB", service.DefaultBufferBytes>>20, 16, 1<<20),
		PresignExpiry:     e.duration("GANTRY_PRESIGN_EXPIRY", 15*time.Minute, time.Second, 7*24*time.Hour),
		SweepInterval:     e.duration("GANTRY_SWEEP_INTERVAL", 15*time.Second, 100*time.Millisecond, time.Hour),
		HistoryTTL:        e.duration("GANTRY_HISTORY_TTL", 0, 0, 100*365*24*time.Hour),
		OutputInlineBytes: e.int("GANTRY_OUTPUT_INLINE_BYTES", history.DefaultInlineMax, 0, 64<<20),
		LogFormat:         e.str("GANTRY_LOG_FORMAT", "text"),
		MCPToolsTTL:       e.duration("GANTRY_MCP_TOOLS_TTL", 10*time.Minute, time.Second, 7*24*time.Hour),
		PIITTL:            e.duration("GANTRY_PII_TTL", 24*time.Hour, time.Minute, 90*24*time.Hour),

		WebhookTimeout:  e.duration("GANTRY_WEBHOOK_TIMEOUT", 10*time.Second, time.Second, 5*time.Minute),
		WebhookBackoff:  e.duration("GANTRY_WEBHOOK_BACKOFF", 5*time.Second, 10*time.Millisecond, time.Hour),
		WebhookRetryFor: e.duration("GANTRY_WEBHOOK_RETRY_FOR", 24*time.Hour, time.Second, 30*24*time.Hour),
		BatchMax:        e.int("GANTRY_BATCH_MAX", 100, 1, 10_000),

		Console:       e.bool("GANTRY_CONSOLE", true),
		LLMURL:        e.str("GANTRY_LLM_URL", ""),
		LLMModel:      e.str("GANTRY_LLM_MODEL", ""),
		LLMAPIKey:     e.str("GANTRY_LLM_API_KEY", ""),
		LLMMaxSteps:   e.int("GANTRY_LLM_MAX_STEPS", 10, 1, 100),
		LLMTimeout:    e.duration("GANTRY_LLM_TIMEOUT", 2*time.Minute, time.Second, time.Hour),
		LLMRunTimeout: e.duration("GANTRY_LLM_RUN_TIMEOUT", 15*time.Minute, time.Second, 24*time.Hour),
		LLMMaxTokens:  e.int("GANTRY_LLM_MAX_TOKENS", 0, 0, 1<<20),

		DataDir:      e.str("GANTRY_DATA_DIR", ".gantry"),
		DevAPIKey:    e.str("GANTRY_DEV_API_KEY", ""),
		DevNATSAddr:  e.str("GANTRY_DEV_NATS_ADDR", "127.0.0.1:4222"),
		DevS3Addr:    e.str("GANTRY_DEV_S3_ADDR", "127.0.0.1:7070"),
		DevRunner:    e.bool("GANTRY_DEV_RUNNER", true),
		VersityGWBin: e.str("GANTRY_VERSITYGW_BIN", ""),
	}
	if v := e.str("GANTRY_SECRET_KEY", ""); v != "" {
		k, err := secret.ParseKey(v)
		if err != nil {
			e.errs = append(e.errs, "GANTRY_SECRET_KEY: "+err.Error())
		}
		c.SecretKey = k
	}
	var err error
	if c.MCPCommands, err = parseCommands(e.str("GANTRY_MCP_COMMANDS", "")); err != nil {
		e.errs = append(e.errs, "GANTRY_MCP_COMMANDS: "+err.Error())
	}
	for _, p := range strings.Split(e.str("GANTRY_MCP_ENV", ""), ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.MCPEnv = append(c.MCPEnv, p)
		}
	}
	if err := codemode.CheckEnvPatterns(c.MCPEnv); err != nil {
		e.errs = append(e.errs, "GANTRY_MCP_ENV: "+err.Error())
	}
	for _, v := range strings.Split(e.str("GANTRY_TRUSTED_PROXIES", ""), ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		if !strings.Contains(v, "/") {
			if a, err := netip.ParseAddr(v); err == nil {
				v = netip.PrefixFrom(a, a.BitLen()).String()
			}
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Sprintf("GANTRY_TRUSTED_PROXIES: %q is not an address or a CIDR prefix", v))
			continue
		}
		c.TrustedProxies = append(c.TrustedProxies, p.Masked())
	}
	c.MCPImage = e.str("GANTRY_MCP_IMAGE", "")
	c.MCPNetwork = e.str("GANTRY_MCP_NETWORK", "")
	if v := e.str("GANTRY_MCP_ALLOW_PRIVATE", ""); v != "" {
		b := e.bool("GANTRY_MCP_ALLOW_PRIVATE", false)
		c.MCPAllowPrivate = &b
	}
	c.EgressOff = !e.bool("GANTRY_EGRESS", true)
	c.EgressMaxHosts = e.int("GANTRY_EGRESS_MAX_HOSTS", 100, 1, 100)
	c.EgressAllowPrivate = e.bool("GANTRY_EGRESS_ALLOW_PRIVATE", false)
	if c.EgressPrivate, err = egress.ParsePrivateList(e.list("GANTRY_EGRESS_PRIVATE")); err != nil {
		e.errs = append(e.errs, "GANTRY_EGRESS_PRIVATE: "+err.Error()+" (want addresses, CIDR prefixes and host names, comma-separated)")
	}
	for _, v := range e.list("GANTRY_EGRESS_DENY") {
		ep, err := egress.ParseEndpoint("service the operator keeps out of reach (GANTRY_EGRESS_DENY)", v)
		if err != nil {
			e.errs = append(e.errs, fmt.Sprintf("GANTRY_EGRESS_DENY: entry %q: %v (want host:port, a host, an address or a CIDR prefix)", v, err))
			continue
		}
		c.EgressDeny = append(c.EgressDeny, ep)
	}
	c.NATSAuth = queue.Auth{Token: e.str("GANTRY_NATS_TOKEN", ""), CredsFile: e.str("GANTRY_NATS_CREDS", "")}
	if err := c.NATSAuth.Check(); err != nil {
		e.errs = append(e.errs, err.Error())
	}
	// gantry dev's server admits only the user it keeps in its data dir: a
	// process given no NATS credentials at all (a runner joining it,
	// `gantry keys revoke`) sends that user when the data dir has one.
	if !queue.URLHasUser(c.NATSURL) && c.NATSAuth.Empty() {
		if creds, err := devstack.ReadNATSCredentials(filepath.Join(c.DataDir, devNATSCredentials)); err == nil {
			c.NATSAuth = queue.Auth{User: creds.User, Password: creds.Password}
		}
	}
	if v := e.str("GANTRY_WEBHOOK_ALLOW_PRIVATE", ""); v != "" {
		b := e.bool("GANTRY_WEBHOOK_ALLOW_PRIVATE", false)
		c.WebhookAllowPrivate = &b
	}
	if err := c.LogLevel.UnmarshalText([]byte(e.str("GANTRY_LOG_LEVEL", "info"))); err != nil {
		e.errs = append(e.errs, "GANTRY_LOG_LEVEL: want debug, info, warn or error")
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		e.errs = append(e.errs, fmt.Sprintf("GANTRY_LOG_FORMAT=%q: want text or json", c.LogFormat))
	}
	// The pool keeps as many containers ready as there are slots, and may
	// grow to twice that under bursts.
	if c.PoolMin < 0 {
		c.PoolMin = c.Slots
	}
	if c.PoolMax < 0 {
		c.PoolMax = max(2*c.Slots, c.PoolMin)
	}
	// Burst slots: as many sandboxes of the default limits as the memory
	// holds (a job asking more takes more of it), never fewer than Slots.
	if c.MaxSlots == 0 {
		c.MaxSlots = c.Slots
		if c.MemoryMB > 0 {
			lim := jobs.DefaultPolicy().DefaultLimits.MemoryMB + max(c.WarmMB, runner.DefaultWarmMB)
			c.MaxSlots = max(c.Slots, min(c.MemoryMB/lim, 64*c.Slots))
		}
	}
	if c.MaxSlots < c.Slots {
		e.errs = append(e.errs, fmt.Sprintf("GANTRY_RUNNER_MAX_SLOTS=%d is below GANTRY_RUNNER_SLOTS=%d", c.MaxSlots, c.Slots))
	}
	if c.PoolMax < c.PoolMin {
		e.errs = append(e.errs, fmt.Sprintf("GANTRY_POOL_MAX=%d is below GANTRY_POOL_MIN=%d", c.PoolMax, c.PoolMin))
	}
	switch c.Runtime {
	case "", "runc", "runsc":
	default:
		e.errs = append(e.errs, fmt.Sprintf("GANTRY_RUNTIME=%q: want runc or runsc (the runtime must be configured in dockerd)", c.Runtime))
	}
	switch c.LiveState {
	case "auto", "gvisor", "memory":
	default:
		e.errs = append(e.errs, fmt.Sprintf("GANTRY_LIVE_STATE=%q: want auto, gvisor or memory", c.LiveState))
	}
	switch c.Isolation {
	case "", "namespaces", "container":
	default:
		e.errs = append(e.errs, fmt.Sprintf("GANTRY_ISOLATION=%q: want namespaces or container", c.Isolation))
	}
	if c.Runtime == "runsc" && c.Isolation == "namespaces" {
		e.errs = append(e.errs, "GANTRY_ISOLATION=namespaces cannot run under GANTRY_RUNTIME=runsc (bubblewrap cannot make namespaces inside gVisor); leave it unset")
	}
	if c.LLMURL != "" {
		if u, err := url.Parse(c.LLMURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			e.errs = append(e.errs, fmt.Sprintf("GANTRY_LLM_URL=%q: want the model server's http:// or https:// base URL, such as http://127.0.0.1:11434/v1", c.LLMURL))
		}
		if c.LLMModel == "" {
			e.errs = append(e.errs, "GANTRY_LLM_MODEL: set it to the model's name on GANTRY_LLM_URL's server")
		}
	} else if c.LLMModel != "" {
		e.errs = append(e.errs, "GANTRY_LLM_MODEL is set but GANTRY_LLM_URL is not: set the model server's URL too")
	}
	if c.TenantBufferMB > c.BufferMB {
		e.errs = append(e.errs, fmt.Sprintf("GANTRY_TENANT_BUFFER_MB=%d is above GANTRY_BUFFER_MB=%d: one tenant's share cannot be more than the whole", c.TenantBufferMB, c.BufferMB))
	}
	if c.RunnerID == "" {
		e.errs = append(e.errs, "GANTRY_RUNNER_ID: empty and the hostname is unknown; set it")
	}
	c.Traces = tracing.Config{Endpoint: e.str("GANTRY_OTLP_ENDPOINT", ""), Version: version}
	e.errs = append(e.errs, c.Traces.Validate()...)
	return c, e.err()
}

// checkDevKey checks a key chosen for GANTRY_DEV_API_KEY. It must look like
// every gantry key (gk_, then at least 13 characters, no whitespace): the
// ingress refuses any other before looking it up, so that guessing keys
// costs it nothing, and secret scanners find keys by that prefix. A key
// that did not would be stored and printed, and then refused on every
// call. The key itself is never in the message.
func checkDevKey(key string) error {
	switch {
	case !strings.HasPrefix(key, store.KeyPrefix):
		return fmt.Errorf("must start with %s, as every gantry API key does (leave it unset and gantry dev makes one)", store.KeyPrefix)
	case len(key) < 16 || len(key) > 256:
		return fmt.Errorf("must be 16 to 256 characters long, %s included (it has %d)", store.KeyPrefix, len(key))
	case strings.ContainsAny(key, " \t\r\n"):
		return errors.New("must not contain whitespace")
	}
	return nil
}

// runnerAddr is GANTRY_RUNNER_ADDR: unset means the default, set and empty
// means no health/metrics server.
func runnerAddr() string {
	if v, ok := os.LookupEnv("GANTRY_RUNNER_ADDR"); ok {
		return v
	}
	return "127.0.0.1:9090"
}

// requireS3 checks the S3 settings that ingress and runner need (dev fills
// them in itself).
func (c config) requireS3() error {
	var missing []string
	if c.S3.Endpoint == "" {
		missing = append(missing, "GANTRY_S3_ENDPOINT")
	}
	if c.S3.AccessKey == "" {
		missing = append(missing, "GANTRY_S3_ACCESS_KEY")
	}
	if c.S3.SecretKey == "" {
		missing = append(missing, "GANTRY_S3_SECRET_KEY")
	}
	if len(missing) > 0 {
		return fmt.Errorf("bad configuration: %s must be set", strings.Join(missing, ", "))
	}
	return nil
}

func newLogger(c config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// parseCommands reads GANTRY_MCP_COMMANDS: a JSON array of argv arrays
// (`[["npx", "-y", "@scope/server"], ["/opt/mcp/billing"]]`), or commands
// separated by commas, each split at spaces (`npx -y @scope/server,
// /opt/mcp/billing`). A tenant's registration must equal one exactly.
func parseCommands(v string) ([][]string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	var out [][]string
	if strings.HasPrefix(v, "[") {
		if err := json.Unmarshal([]byte(v), &out); err != nil {
			return nil, fmt.Errorf("not a JSON array of argv arrays: %w", err)
		}
	} else {
		for _, cmd := range strings.Split(v, ",") {
			if f := strings.Fields(cmd); len(f) > 0 {
				out = append(out, f)
			}
		}
	}
	for _, argv := range out {
		if len(argv) == 0 || argv[0] == "" {
			return nil, errors.New("an empty command")
		}
	}
	return out, nil
}

// hostMemoryMB is what the runner's sandboxes may take of this host's
// memory by default: all of it (MemTotal) but an eighth, and at least 1
// GiB, left to the system, dockerd and gantry; 0 (no bound) when
// /proc/meminfo cannot be read.
func hostMemoryMB() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				return 0
			}
			total := kb >> 10
			return max(total-max(total/8, 1024), 0)
		}
	}
	return 0
}
