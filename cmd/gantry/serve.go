package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/devstack"
	"github.com/gantryhq/gantry/history"
	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/pii"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/runner"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/tracing"
	"github.com/gantryhq/gantry/webhook"
)

// deps are the connections every service needs.
type deps struct {
	log   *slog.Logger
	store *store.Store
	// history deletes finished jobs past their retention, with their
	// objects (the store keeps long output in blobs: history.Output).
	history *history.Retention
	blobs   *blob.Store
	nc      *nats.Conn
	reg     *prometheus.Registry
	// box seals credentials and personal data (nil without a key).
	box       *secret.Box
	codeMode  *codemode.Registry
	upstreams *codemode.Upstreams
	privacy   *pii.Tokenizer // nil without a key
	// tracer makes every part's spans (a no-op one with tracing off).
	tracer *tracing.Provider
}

func (d *deps) close() {
	if d.upstreams != nil {
		d.upstreams.Stop()
	}
	if d.tracer != nil {
		// Last: what the parts did while stopping is sent too.
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := d.tracer.Shutdown(ctx); err != nil {
				d.log.Warn("send the last traces", "err", err)
			}
		}()
	}
	if d.nc != nil {
		d.nc.Close()
	}
	if d.store != nil {
		d.store.Close()
	}
}

func newDeps(log *slog.Logger) *deps {
	d := &deps{log: log, reg: prometheus.NewRegistry()}
	d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return d
}

// connect opens what every service needs, waiting for engines that are not
// up yet (see startup.go). With migrate it applies pending migrations;
// without, it waits until another process has. On error the caller still
// closes d.
func (d *deps) connect(ctx context.Context, cfg config, migrate bool) error {
	log := d.log
	var err error
	tc := cfg.Traces
	tc.Log = log
	if d.tracer, err = tracing.New(ctx, tc); err != nil {
		return err
	}
	if tc.Enabled() {
		log.Info("traces are exported over OTLP/HTTP", "endpoint", traceEndpoint(tc), "sampler", cmp.Or(os.Getenv("OTEL_TRACES_SAMPLER"), "parentbased_always_on"))
	}
	if d.store, err = awaitStore(ctx, log, cfg.DatabaseURL); err != nil {
		return err
	}
	if migrate {
		applied, err := d.store.Migrate(ctx)
		if err != nil {
			return err
		}
		for _, m := range applied {
			log.Info("applied migration", "file", m)
		}
	} else if err := awaitSchema(ctx, log, d.store); err != nil {
		return err
	}
	if cfg.SecretKey != nil {
		if d.box, err = secret.New(cfg.SecretKey); err != nil {
			return err
		}
	} else {
		log.Warn("GANTRY_SECRET_KEY is not set: code mode (upstream MCP servers), privacy tokens and webhooks are off, and jobs' env values are stored unsealed")
	}
	if d.box.Enabled() {
		d.privacy = pii.New(d.store, d.box, cfg.PIITTL)
	}
	if d.blobs, err = blob.New(cfg.S3); err != nil {
		return fmt.Errorf("s3: %w", err)
	}
	if err := awaitBucket(ctx, log, d.blobs); err != nil {
		return err
	}
	d.store.KeepOutput(history.NewOutput(d.blobs, log), cfg.OutputInlineBytes)
	d.history = history.NewRetention(d.store, d.blobs, history.Config{TTL: cfg.HistoryTTL})
	d.nc, err = awaitNATS(ctx, log, cfg.NATSURL, append(cfg.NATSAuth.Options(),
		nats.Name("gantry"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "server", nc.ConnectedUrlRedacted()) }),
	)...)
	if err != nil {
		return err
	}
	// The ingress's code mode has no Launcher: it starts no stdio MCP
	// server itself but asks a runner for their tools.
	mcp := codeModeConfig(cfg)
	mcp.Remote = codemode.NewRemoteTools(d.nc)
	d.upstreams = codemode.NewUpstreams(mcp, log)
	if err := d.upstreams.Start(ctx); err != nil {
		return err
	}
	d.codeMode = codemode.NewRegistry(d.store, d.box, d.upstreams, log)
	return nil
}

// traces is the provider the parts are given (nil before connect).
func (d *deps) traces() trace.TracerProvider {
	if d.tracer == nil {
		return nil
	}
	return d.tracer
}

// traceEndpoint says where traces go, for the log.
func traceEndpoint(tc tracing.Config) string {
	return cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), tc.Endpoint, os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
}

func codeModeConfig(cfg config) codemode.Config {
	return codemode.Config{Commands: cfg.MCPCommands, Env: cfg.MCPEnv,
		AllowPrivate: cfg.MCPAllowPrivate != nil && *cfg.MCPAllowPrivate, ToolsTTL: cfg.MCPToolsTTL}
}

func newIngress(ctx context.Context, cfg config, d *deps, checks ...ingress.Check) (*ingress.Server, error) {
	chat, err := newChat(cfg, d.log)
	if err != nil {
		return nil, err
	}
	srv, err := ingress.New(ingress.Config{
		Config: service.Config{
			Policy:        cfg.Policy,
			Queue:         cfg.Queue,
			PresignExpiry: cfg.PresignExpiry,
			Version:       version,
			CodeMode:      d.codeMode,
			Privacy:       d.box.Enabled(),
			Box:           d.box,
			Webhooks: webhook.Config{
				AllowPrivate: cfg.WebhookAllowPrivate != nil && *cfg.WebhookAllowPrivate,
				Timeout:      cfg.WebhookTimeout, Backoff: cfg.WebhookBackoff, RetryFor: cfg.WebhookRetryFor,
			},
			BatchMax:     cfg.BatchMax,
			TenantLimits: cfg.TenantLimits,
			History:      d.history,
			Egress:       service.EgressPolicy{Off: cfg.EgressOff, MaxHosts: cfg.EgressMaxHosts},
			Tracer:       d.traces(),
			Streams: service.StreamLimits{PerIngress: int64(cfg.LiveBufferMB) << 20,
				PerTenant: int64(cfg.LiveBufferTenantMB) << 20},

			TenantBufferBytes: int64(cfg.TenantBufferMB) << 20,
			BufferBytes:       int64(cfg.BufferMB) << 20,
		},
		MaxBodyBytes:   cfg.MaxBodyBytes,
		BodyTimeout:    cfg.BodyTimeout,
		TrustedProxies: cfg.TrustedProxies,
		Chat:           chat,
	}, d.log, d.store, d.blobs, d.nc, d.reg, checks...)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(ctx); err != nil {
		return nil, err
	}
	return srv, nil
}

// startMaintenance makes and starts the background work of the ingress
// srv; the caller stops it (Stop waits for its loops to exit).
func startMaintenance(ctx context.Context, cfg config, d *deps, srv *ingress.Server) (*service.Maintenance, error) {
	m, err := service.NewMaintenance(service.MaintenanceConfig{
		Interval:     cfg.SweepInterval,
		Queue:        cfg.Queue,
		TenantLimits: cfg.TenantLimits,
		CodeMode:     d.codeMode,
		History:      d.history,
		Webhooks:     srv.Webhooks(),
		Box:          d.box,
		Tracer:       d.traces(),
	}, d.log, d.store, d.blobs, d.nc, d.reg)
	if err != nil {
		return nil, err
	}
	if err := m.Start(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// newRunner makes a runner. Its code mode starts stdio MCP servers in
// containers of their own through the returned Upstreams, which the caller
// closes (removing them) before the Sandbox.
func newRunner(cfg config, d *deps) (*runner.Runner, *runner.Sandbox, *codemode.Upstreams, error) {
	runtime := cfg.Runtime
	if runtime == "runc" {
		runtime = "" // Docker's default
	}
	sb, err := runner.NewSandbox(cfg.DockerHost, runner.SandboxConfig{
		Image: cfg.Image, RunnerID: cfg.RunnerID, Runtime: runtime, Isolation: wire.Isolation(cfg.Isolation),
		Warm: cfg.WarmPreload, WarmMB: cfg.WarmMB,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	mcp := codeModeConfig(cfg)
	mcp.Launcher = runner.NewMCPLauncher(sb, runner.MCPConfig{Image: cfg.MCPImage, Network: cfg.MCPNetwork})
	up := codemode.NewUpstreams(mcp, d.log)
	policy := jobs.DefaultPolicy()
	if cfg.EgressAllowPrivate {
		d.log.Warn("GANTRY_EGRESS_ALLOW_PRIVATE=true: jobs may reach every non-public address their tenant lists (gantry's own services excepted); GANTRY_EGRESS_PRIVATE names only those they may")
	} else if !cfg.EgressPrivate.Empty() {
		d.log.Info("jobs may reach these non-public places their tenant lists", "GANTRY_EGRESS_PRIVATE", cfg.EgressPrivate.String())
	}
	r, err := runner.New(runner.Config{
		ID:           cfg.RunnerID,
		Slots:        cfg.Slots,
		MaxSlots:     cfg.MaxSlots,
		BurstWait:    cfg.BurstWait,
		Queue:        cfg.Queue,
		DrainTimeout: cfg.DrainTimeout,
		Fleet: runner.FleetConfig{
			Min: cfg.PoolMin, Max: cfg.PoolMax, Limits: policy.DefaultLimits,
			MaxJobs: cfg.SandboxJobs, Idle: cfg.SandboxIdle, IdleMax: cfg.SandboxKeep, LiveMax: cfg.LiveMax,
			MemoryMB: int64(cfg.MemoryMB),
		},
		Builds: runner.BuildCacheConfig{MaxBytes: buildCacheBytes(cfg.BuildCacheMB), TTL: cfg.BuildCacheTTL},
		Artifacts: runner.ArtifactLimits{
			MaxFiles: cfg.ArtifactFiles, MaxFileBytes: int64(cfg.ArtifactFileMB) << 20, MaxTotal: int64(cfg.ArtifactTotalMB) << 20,
		},
		CodeMode: codemode.NewRegistry(d.store, d.box, up, d.log),
		Egress: runner.EgressConfig{Off: cfg.EgressOff, Private: cfg.EgressPrivate, AllowPrivate: cfg.EgressAllowPrivate,
			Reserved: reservedEndpoints(cfg, d.nc)},
		Privacy:      d.privacy,
		Box:          d.box,
		TenantLimits: cfg.TenantLimits,
		Tracer:       d.traces(),
		Live:         liveConfig(cfg),
	}, d.log, d.nc, d.store, d.blobs, sb, d.reg)
	return r, sb, up, err
}

// liveConfig is how the runner keeps stateful sessions' live state: under
// gVisor where runsc can checkpoint (GANTRY_LIVE_STATE).
func liveConfig(cfg config) runner.LiveConfig {
	lc := runner.LiveConfig{CacheMB: cfg.LiveCacheMB, CheckpointEvery: cfg.LiveCheckpointEvery,
		Require: cfg.LiveState == "gvisor"}
	if cfg.LiveState == "memory" {
		return lc
	}
	runsc := cfg.Runsc
	if runsc == "" {
		runsc, _ = exec.LookPath("runsc")
	}
	dir := cmp.Or(cfg.LiveDir, "/var/lib/gantry/live")
	lc.GVisor = runner.GVisorConfig{Runsc: runsc, StateDir: filepath.Join(dir, cfg.RunnerID)}
	if lc.Require && runsc == "" {
		lc.GVisor.Runsc = "runsc" // named, so that the runner says why it cannot
	}
	return lc
}

// buildCacheBytes is GANTRY_BUILD_CACHE_MB in bytes; 0 turns the cache
// off.
func buildCacheBytes(mb int) int64 {
	if mb == 0 {
		return -1
	}
	return int64(mb) << 20
}

// serveHTTP serves h on addr until ctx ends, then shuts down gracefully.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	return nil
}

func runIngress(ctx context.Context, cfg config) error {
	log := newLogger(cfg).With("service", "ingress")
	cfg.Queue.Log = log
	if err := cfg.requireS3(); err != nil {
		return err
	}
	d := newDeps(log)
	defer d.close()
	if err := d.connect(ctx, cfg, cfg.AutoMigrate); err != nil {
		return err
	}
	srv, err := newIngress(ctx, cfg, d)
	if err != nil {
		return err
	}
	defer srv.Stop()
	maint, err := startMaintenance(ctx, cfg, d, srv)
	if err != nil {
		return err
	}
	defer maint.Stop()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on GANTRY_ADDR=%s: %w", cfg.Addr, err)
	}
	h, err := withConsole(cfg, d.log, srv.Handler())
	if err != nil {
		return err
	}
	log.Info("ingress listening", "addr", ln.Addr().String())
	return serveHTTP(ctx, ln, h)
}

func runRunner(ctx context.Context, cfg config) error {
	log := newLogger(cfg).With("service", "runner")
	cfg.Queue.Log = log
	if err := cfg.requireS3(); err != nil {
		return err
	}
	d := newDeps(log)
	defer d.close()
	health := newRunnerHTTP(d.reg)
	if cfg.RunnerAddr != "" {
		ln, err := net.Listen("tcp", cfg.RunnerAddr)
		if err != nil {
			return fmt.Errorf("listen on GANTRY_RUNNER_ADDR=%s: %w", cfg.RunnerAddr, err)
		}
		log.Info("runner health and metrics listening", "addr", ln.Addr().String())
		cfg.RunnerAddr = ln.Addr().String() // kept out of jobs' reach
		// It outlives ctx: /metrics and /readyz (answering "draining")
		// go on while running jobs finish.
		httpCtx, stopHTTP := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() { _ = serveHTTP(httpCtx, ln, health.handler()); close(done) }()
		defer func() { stopHTTP(); <-done }()
	}
	if err := d.connect(ctx, cfg, false); err != nil {
		return err
	}
	r, sb, up, err := newRunner(cfg, d)
	if err != nil {
		return err
	}
	defer sb.Close()
	if err := up.Start(ctx); err != nil {
		return err
	}
	defer up.Stop()
	d.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gantry_runner_slots", Help: "Jobs this runner runs at once before burst slots (GANTRY_RUNNER_SLOTS; up to GANTRY_RUNNER_MAX_SLOTS under a burst, as memory allows).",
	}, func() float64 { return float64(cfg.Slots) }))
	js, err := jetstream.New(d.nc)
	if err != nil {
		return err
	}
	natsUp := func(ctx context.Context) error { return queue.Healthy(ctx, d.nc, js) }
	health.ready([]readyCheck{
		{"docker", r.Check}, // the engine answers and has the sandbox image
		{"postgres", d.store.Ping},
		{"nats", natsUp},
		{"s3", d.blobs.Ping},
	})
	// The same, cheaper, for alerts (the engine answering is enough).
	service.RegisterDependencyGauges(d.reg, []service.Check{
		{Name: "docker", Fn: sb.Ping}, {Name: "postgres", Fn: d.store.Ping}, {Name: "nats", Fn: natsUp}, {Name: "s3", Fn: d.blobs.Ping},
	})
	if err := r.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // asked to stop before it started
		}
		return err
	}
	<-ctx.Done()
	health.draining()
	r.Stop() // drains: running jobs finish or go back to the queue
	return nil
}

func runMigrate(ctx context.Context, cfg config) error {
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	applied, err := st.Migrate(ctx)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Println("database is up to date")
	}
	for _, m := range applied {
		fmt.Println("applied", m)
	}
	return nil
}

// runDev runs everything on one machine: embedded NATS, a versitygw child,
// the local Postgres, the ingress and (unless GANTRY_DEV_RUNNER=false) a
// runner.
func runDev(ctx context.Context, cfg config) error {
	if cfg.DevAPIKey != "" {
		if err := checkDevKey(cfg.DevAPIKey); err != nil {
			return fmt.Errorf("bad configuration: GANTRY_DEV_API_KEY %w", err)
		}
	}
	log := newLogger(cfg).With("service", "dev")
	cfg.Queue.Log = log
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("GANTRY_DATA_DIR=%s: %w", dataDir, err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on GANTRY_ADDR=%s: %w (is another gantry running?)", cfg.Addr, err)
	}
	defer ln.Close()

	cfg.Addr = ln.Addr().String() // kept out of jobs' reach

	// NATS admits only dev's own user, kept in the data dir for the
	// processes that join this dev (which read it there).
	natsUser, err := devstack.LoadOrCreateNATSCredentials(filepath.Join(dataDir, devNATSCredentials))
	if err != nil {
		return fmt.Errorf("dev NATS credentials: %w", err)
	}
	ns, err := devstack.StartNATS(filepath.Join(dataDir, "nats"), cfg.DevNATSAddr, natsUser)
	if err != nil {
		return fmt.Errorf("%w (set GANTRY_DEV_NATS_ADDR)", err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	cfg.NATSURL = ns.ClientURL()
	cfg.NATSAuth = queue.Auth{User: natsUser.User, Password: natsUser.Password}

	bin, err := devstack.FindVersityGW(cfg.VersityGWBin)
	if err != nil {
		return err
	}
	// The S3 credentials are kept in the data dir (unless given), so that
	// presigned links made before a restart still work after it.
	switch {
	case cfg.S3.AccessKey == "" && cfg.S3.SecretKey == "":
		creds, err := devstack.LoadOrCreateS3Credentials(filepath.Join(dataDir, "s3-credentials.json"))
		if err != nil {
			return fmt.Errorf("dev S3 credentials: %w", err)
		}
		cfg.S3.AccessKey, cfg.S3.SecretKey = creds.AccessKey, creds.SecretKey
	case cfg.S3.AccessKey == "" || cfg.S3.SecretKey == "":
		return errors.New("bad configuration: set both GANTRY_S3_ACCESS_KEY and GANTRY_S3_SECRET_KEY, or neither (gantry dev then keeps its own in the data dir)")
	}
	s3, err := devstack.StartS3(ctx, bin, filepath.Join(dataDir, "s3"), cfg.DevS3Addr, cfg.S3.AccessKey, cfg.S3.SecretKey)
	if err != nil {
		return fmt.Errorf("%w (set GANTRY_DEV_S3_ADDR)", err)
	}
	defer s3.Stop()
	cfg.S3.Endpoint, cfg.S3.AccessKey, cfg.S3.SecretKey = s3.Endpoint, s3.AccessKey, s3.SecretKey
	// Dev mode keeps its secret key in the data dir, and lets upstream MCP
	// servers live on this machine.
	if cfg.SecretKey == nil {
		if cfg.SecretKey, err = secret.LoadOrCreateKeyFile(filepath.Join(dataDir, "secret-key")); err != nil {
			return fmt.Errorf("dev secret key: %w", err)
		}
	}
	if cfg.MCPAllowPrivate == nil {
		yes := true
		cfg.MCPAllowPrivate = &yes
	}
	if cfg.WebhookAllowPrivate == nil {
		yes := true
		cfg.WebhookAllowPrivate = &yes
	}
	if cfg.S3.PublicEndpoint == "" {
		cfg.S3.PublicEndpoint = s3.Endpoint
	}

	d := newDeps(log)
	defer d.close()
	if err := d.connect(ctx, cfg, true); err != nil {
		return err
	}
	key, err := devKey(ctx, cfg, d.store, dataDir)
	if err != nil {
		return err
	}

	var checks []ingress.Check
	var r *runner.Runner
	if cfg.DevRunner {
		var sb *runner.Sandbox
		var up *codemode.Upstreams
		if cfg.LiveDir == "" {
			cfg.LiveDir = filepath.Join(dataDir, "live")
		}
		if r, sb, up, err = newRunner(cfg, d); err != nil {
			return err
		}
		defer sb.Close()
		if err := up.Start(ctx); err != nil {
			return err
		}
		defer up.Stop()
		if err := r.Check(ctx); err != nil {
			return err
		}
		checks = append(checks, ingress.Check{Name: "docker", Fn: sb.Ping})
		// One process, one image: its languages are the ones offered,
		// unless the operator says otherwise.
		if langs := sb.Languages(); langs != nil && os.Getenv("GANTRY_LANGUAGES") == "" {
			cfg.Policy.Languages = langs
		}
	}
	srv, err := newIngress(ctx, cfg, d, checks...)
	if err != nil {
		return err
	}
	defer srv.Stop()
	h, err := withConsole(cfg, d.log, srv.Handler())
	if err != nil {
		return err
	}

	maint, err := startMaintenance(ctx, cfg, d, srv)
	if err != nil {
		return err
	}
	defer maint.Stop()
	if r != nil {
		if err := r.Start(ctx); err != nil {
			return err
		}
		// Stopped when ctx ends, beside the HTTP server's shutdown, and
		// before the rest: its jobs finish (or go back) first.
		stopRunner := context.AfterFunc(ctx, r.Stop)
		defer func() { stopRunner(); r.Stop() }()
	}
	printBanner(cfg, ln.Addr().String(), key, s3)
	err = serveHTTP(ctx, ln, h)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// devKey makes sure the dev tenant has an API key: GANTRY_DEV_API_KEY if
// set, else the key kept in the data dir from an earlier run, else a new one.
func devKey(ctx context.Context, cfg config, st *store.Store, dataDir string) (string, error) {
	tenant, err := st.EnsureTenant(ctx, "default")
	if err != nil {
		return "", fmt.Errorf("create default tenant: %w", err)
	}
	keyFile := filepath.Join(dataDir, "dev-api-key")
	key := cfg.DevAPIKey
	if key == "" {
		if b, err := os.ReadFile(keyFile); err == nil {
			key = strings.TrimSpace(string(b))
		}
	}
	if key == "" {
		key = store.NewAPIKey()
	}
	if _, err := st.AddAPIKey(ctx, tenant.ID, "dev", key); err != nil {
		return "", fmt.Errorf("GANTRY_DEV_API_KEY: %w", err)
	}
	if cfg.DevAPIKey == "" {
		if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
			return "", err
		}
	}
	return key, nil
}

func printBanner(cfg config, addr, key string, s3 *devstack.S3) {
	base := "http://" + addr
	fmt.Printf(`
gantry dev is ready (version %s)

  Console    %s
  API        %s
  API key    %s
  NATS       %s (user %s, password in %s)
  S3         %s (bucket %s)
  Runner     %s
  Data       %s

Run some Python:

  curl -s %s/v1/execute \
    -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"language": "python", "code": "print(6*7)"}'

Or with the CLI:

  export GANTRY_URL=%s GANTRY_API_KEY=%s
  echo 'print(6*7)' > hello.py && gantry run hello.py

API description: %s/openapi.json   Stop with Ctrl-C.

`, version, consoleLine(cfg, base), base, key, cfg.NATSURL, cfg.NATSAuth.User, filepath.Join(cfg.DataDir, devNATSCredentials), s3.Endpoint, cfg.S3.Bucket, runnerLine(cfg), cfg.DataDir, base, key, base, key, base)
}

func consoleLine(cfg config, base string) string {
	if !cfg.Console {
		return "off (GANTRY_CONSOLE=false)"
	}
	return base + "/  (sign in with the API key)"
}

func runnerLine(cfg config) string {
	if !cfg.DevRunner {
		return fmt.Sprintf("none in this process (GANTRY_DEV_RUNNER=false): start `gantry runner` with this GANTRY_DATA_DIR (NATS's user is kept there) and GANTRY_SECRET_KEY (kept in %s unless given)",
			filepath.Join(cfg.DataDir, "secret-key"))
	}
	return fmt.Sprintf("%s, %d slots (up to %d under a burst, %d MB for sandboxes), image %s", cfg.RunnerID, cfg.Slots, cfg.MaxSlots, cfg.MemoryMB, cfg.Image)
}
