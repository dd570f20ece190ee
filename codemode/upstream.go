package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/gantryhq/gantry/egress"
	"github.com/gantryhq/gantry/internal/startstop"
)

// Config is the operator's code-mode configuration, shared by the ingress
// (which lists tools) and the runners (which call them).
type Config struct {
	// Commands are the stdio MCP servers tenants may register: a
	// registration's command must equal one of these exactly, every
	// argument included.
	Commands [][]string
	// Env is the operator's allow-list of the environment names a tenant
	// may set for a stdio server: names or '*' globs ("GITHUB_TOKEN",
	// "*_API_KEY"). Names that change what a program loads or runs are
	// refused whatever it says (see Forbidden).
	Env []string
	// Launcher starts stdio servers in sandboxes (a runner's); nil where
	// gantry has none (an ingress), which then lists a stdio server's
	// tools through Remote.
	Launcher Launcher
	// Remote lists a stdio server's tools on a runner, for a process
	// without a Launcher.
	Remote *RemoteTools
	// AllowPrivate lets upstream URLs reach loopback, private and
	// link-local addresses. Off in production, so a tenant cannot point
	// gantry at internal services; on in dev mode.
	AllowPrivate bool
	// ToolsTTL is how old a cached tool list may get before it is fetched
	// again.
	ToolsTTL time.Duration
	// MaxResultBytes caps one tool result handed to the sandbox.
	MaxResultBytes int
	// MaxResponseBytes caps one HTTP response read from an upstream.
	MaxResponseBytes int64
	// MaxTools caps how many tools of one server are kept.
	MaxTools int
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.ToolsTTL == 0 {
		c.ToolsTTL = 10 * time.Minute
	}
	if c.MaxResultBytes == 0 {
		c.MaxResultBytes = 4 << 20
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = 16 << 20
	}
	if c.MaxTools == 0 {
		c.MaxTools = 1000
	}
	return c
}

// UpstreamError is a failure to reach or use an upstream server, as opposed
// to a tool that ran and reported an error.
type UpstreamError struct {
	Server string
	Err    error
}

func (e *UpstreamError) Error() string { return fmt.Sprintf("MCP server %q: %v", e.Server, e.Err) }
func (e *UpstreamError) Unwrap() error { return e.Err }

// Upstreams keeps one initialised client per registered server version and
// reuses it across jobs: an MCP handshake (or a stdio server's start) is
// paid once, not per call. Between Start and Stop idle clients are closed;
// Stop closes them all. Every connect and close runs in a goroutine that
// Stop waits for.
type Upstreams struct {
	cfg   Config
	log   *slog.Logger
	idle  time.Duration
	loops startstop.Loops

	mu    sync.Mutex
	conns map[string]*upstream
	// closing counts the connects and closes in flight (a connect's
	// goroutine is counted until its client is closed or kept).
	closing sync.WaitGroup
}

type upstream struct {
	key      string
	ready    chan struct{}
	c        *client.Client
	err      error
	lastUsed time.Time
	inUse    int
}

// NewUpstreams returns an empty connection cache.
func NewUpstreams(cfg Config, log *slog.Logger) *Upstreams {
	return &Upstreams{cfg: cfg.WithDefaults(), log: log, idle: 5 * time.Minute, conns: map[string]*upstream{}}
}

func connKey(m ServerRecord) string {
	return fmt.Sprintf("%s\x00%s\x00%d", m.TenantID, m.Name, m.Version)
}

// acquire returns a connected client for the server, connecting if needed.
// The caller calls release with whether the connection still works.
func (u *Upstreams) acquire(ctx context.Context, m ServerRecord, sec secrets) (*upstream, error) {
	key := connKey(m)
	u.mu.Lock()
	c, ok := u.conns[key]
	if !ok {
		c = &upstream{key: key, ready: make(chan struct{})}
		u.conns[key] = c
		// Older versions of this server are replaced: close them when idle.
		prefix := m.TenantID + "\x00" + m.Name + "\x00"
		for k, old := range u.conns {
			if k != key && strings.HasPrefix(k, prefix) && old.inUse == 0 {
				delete(u.conns, k)
				u.closing.Go(old.close)
			}
		}
		u.closing.Go(func() {
			cctx, cancel := context.WithTimeout(context.Background(), callTimeout(m))
			defer cancel()
			c.c, c.err = u.connect(cctx, m, sec)
			close(c.ready)
		})
	}
	c.inUse++
	u.mu.Unlock()
	select {
	case <-c.ready:
	case <-ctx.Done():
		u.release(c, true)
		return nil, ctx.Err()
	}
	if c.err != nil {
		u.release(c, false)
		return nil, &UpstreamError{Server: m.Name, Err: c.err}
	}
	return c, nil
}

func (u *Upstreams) release(c *upstream, healthy bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	c.inUse--
	c.lastUsed = time.Now()
	if !healthy && u.conns[c.key] == c {
		// The next call connects afresh.
		delete(u.conns, c.key)
	}
	if c.inUse == 0 && u.conns[c.key] != c {
		u.closing.Go(c.close)
	}
}

func (c *upstream) close() {
	<-c.ready
	if c.c != nil {
		_ = c.c.Close()
	}
}

// sweep closes connections idle for longer than the idle time.
func (u *Upstreams) sweep() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, c := range u.conns {
		if c.inUse == 0 && time.Since(c.lastUsed) > u.idle {
			select {
			case <-c.ready:
			default:
				continue
			}
			delete(u.conns, k)
			u.closing.Go(c.close)
		}
	}
}

// Start starts closing idle connections, every minute until Stop (see
// startstop). Upstreams serve without it; they are then only closed by
// Stop.
func (u *Upstreams) Start(ctx context.Context) error {
	return u.loops.Start(ctx, func(ctx context.Context) {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				u.sweep()
			}
		}
	})
}

// Stop stops the sweeps and closes every connection at once (a stdio
// server's stop can take a moment each): when it returns, no upstream
// process is left. Connections made after it are closed by another Stop.
func (u *Upstreams) Stop() {
	u.loops.Stop()
	u.mu.Lock()
	all := u.conns
	u.conns = map[string]*upstream{}
	for _, c := range all {
		u.closing.Go(c.close)
	}
	u.mu.Unlock()
	u.closing.Wait()
}

func (u *Upstreams) connect(ctx context.Context, m ServerRecord, sec secrets) (*client.Client, error) {
	var c *client.Client
	stderr := func() string { return "" }
	switch m.Transport {
	case "http":
		hc := &http.Client{Transport: &limitedTransport{base: u.httpTransport(), max: u.cfg.MaxResponseBytes}}
		var err error
		c, err = client.NewStreamableHttpClient(sec.URL,
			transport.WithHTTPHeaders(sec.Headers), transport.WithHTTPBasicClient(hc),
			transport.WithHTTPLogger(quietLogger()))
		if err != nil {
			return nil, err
		}
	case "stdio":
		p, err := u.launch(ctx, m, sec)
		if err != nil {
			return nil, err
		}
		out := &lineCap{r: p.Stdout(), max: u.cfg.MaxResponseBytes}
		t := transport.NewIO(out, &processInput{p: p}, nil)
		c, stderr = client.NewClient(t), p.Stderr
	default:
		return nil, fmt.Errorf("unknown transport %q", m.Transport)
	}
	fail := func(err error) (*client.Client, error) {
		_ = c.Close()
		// A stdio server that fails its handshake usually said why.
		if msg := stderr(); msg != "" {
			err = fmt.Errorf("%w (its stderr: %s)", err, truncate(msg, 500))
		}
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return fail(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "gantry", Version: "code-mode"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return fail(fmt.Errorf("initialize: %w", err))
	}
	return c, nil
}

// launch starts a stdio server through the Launcher: the operator's
// command exactly, with gantry's PATH and HOME and the tenant's allowed
// names only, each checked again against the operator's settings as they
// are now.
func (u *Upstreams) launch(ctx context.Context, m ServerRecord, sec secrets) (Process, error) {
	if u.cfg.Launcher == nil {
		return nil, errNoLauncher
	}
	if err := u.cfg.checkCommand(m.Command); err != nil {
		return nil, errors.New("the command is no longer allowed by the operator")
	}
	env, err := u.cfg.stdioEnv(sec.Env)
	if err != nil {
		return nil, err
	}
	p, err := u.cfg.Launcher.Launch(ctx, Launch{TenantID: m.TenantID, Server: m.Name, Argv: m.Command, Env: env})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", m.Command[0], err)
	}
	return p, nil
}

// lineCap ends a stdio server's output when one line (one JSON-RPC
// message) grows past max bytes: the MCP library reads whole lines, so an
// endless one would take the runner's memory.
type lineCap struct {
	r    io.Reader
	max  int64
	line int64
}

func (l *lineCap) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, b := range p[:n] {
		if b == '\n' {
			l.line = 0
		} else if l.line++; l.line > l.max {
			return 0, errResponseTooLarge
		}
	}
	return n, err
}

// processInput is a Process's stdin whose Close stops the process: the MCP
// client closes its transport's input when it is closed, and nothing of
// the server may outlive that.
type processInput struct{ p Process }

func (w *processInput) Write(b []byte) (int, error) { return w.p.Stdin().Write(b) }
func (w *processInput) Close() error {
	_ = w.p.Stdin().Close()
	return w.p.Close()
}

// quietLogger drops the MCP library's own logging: its messages may quote
// request URLs.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// httpTransport dials only public addresses unless AllowPrivate: the check
// is on the address actually dialled, so DNS tricks cannot get round it.
func (u *Upstreams) httpTransport() *http.Transport {
	return egress.Policy{AllowPrivate: u.cfg.AllowPrivate, Setting: "GANTRY_MCP_ALLOW_PRIVATE"}.Transport()
}

// limitedTransport fails a response body that grows past max, so a huge
// or endless upstream answer cannot exhaust the runner's memory.
type limitedTransport struct {
	base http.RoundTripper
	max  int64
}

func (t *limitedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

var errResponseTooLarge = errors.New("the upstream's response is too large")

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// listTools fetches the server's tool list over its cached connection.
func (u *Upstreams) listTools(ctx context.Context, m ServerRecord, sec secrets) ([]Tool, error) {
	c, err := u.acquire(ctx, m, sec)
	if err != nil {
		return nil, err
	}
	tools, err := fetchTools(ctx, c.c, m, u.cfg.MaxTools, u.log)
	u.release(c, err == nil)
	return tools, err
}

// fetchTools lists a server's tools, dropping what gantry cannot keep:
// invalid or duplicate names, oversized schemas.
func fetchTools(ctx context.Context, c *client.Client, m ServerRecord, maxTools int, log *slog.Logger) ([]Tool, error) {
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, &UpstreamError{Server: m.Name, Err: fmt.Errorf("list tools: %w", err)}
	}
	if len(res.Tools) > maxTools {
		return nil, &UpstreamError{Server: m.Name, Err: fmt.Errorf("it offers %d tools; at most %d are kept", len(res.Tools), maxTools)}
	}
	out := make([]Tool, 0, len(res.Tools))
	seen := map[string]bool{}
	for _, t := range res.Tools {
		raw, err := json.Marshal(t)
		if err != nil {
			return nil, &UpstreamError{Server: m.Name, Err: fmt.Errorf("tool %q: %w", t.Name, err)}
		}
		var w struct {
			Name         string          `json:"name"`
			Description  string          `json:"description"`
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		}
		if err := json.Unmarshal(raw, &w); err != nil {
			return nil, &UpstreamError{Server: m.Name, Err: fmt.Errorf("tool %q: %w", t.Name, err)}
		}
		if w.Name == "" || len(w.Name) > 128 || seen[w.Name] || strings.ContainsAny(w.Name, "\x00\n") {
			log.Warn("upstream MCP server lists an invalid or duplicate tool name; skipped", "tenant_id", m.TenantID, "server", m.Name)
			continue
		}
		seen[w.Name] = true
		if len(w.Description) > 8<<10 {
			w.Description = w.Description[:8<<10] + "…"
		}
		if len(w.InputSchema) > 64<<10 || !json.Valid(w.InputSchema) {
			w.InputSchema = json.RawMessage(`{"type":"object"}`)
		}
		if len(w.OutputSchema) > 64<<10 || !json.Valid(w.OutputSchema) {
			w.OutputSchema = nil
		}
		out = append(out, Tool{Server: m.Name, Name: w.Name, Description: strings.ToValidUTF8(w.Description, "\uFFFD"),
			InputSchema: w.InputSchema, OutputSchema: w.OutputSchema, Allowed: Allowed(m, w.Name)})
	}
	return out, nil
}

// callResult is a tool's answer as the sandbox gets it.
type callResult struct {
	Content    json.RawMessage `json:"content"`
	Structured json.RawMessage `json:"structured"`
	IsError    bool            `json:"-"`
}

// call calls a tool. A returned error means the upstream could not be used;
// a tool that ran and failed gives a result with IsError.
func (u *Upstreams) call(ctx context.Context, m ServerRecord, sec secrets, tool string, args map[string]any) (callResult, error) {
	c, err := u.acquire(ctx, m, sec)
	if err != nil {
		return callResult{}, err
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.c.CallTool(ctx, req)
	// A timed-out call leaves the connection usable; other failures may
	// mean it is not (a restarted upstream forgot our session).
	u.release(c, err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
	if err != nil {
		return callResult{}, &UpstreamError{Server: m.Name, Err: err}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return callResult{}, &UpstreamError{Server: m.Name, Err: err}
	}
	var w struct {
		Content    json.RawMessage `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return callResult{}, &UpstreamError{Server: m.Name, Err: err}
	}
	if len(w.Content) == 0 || string(w.Content) == "null" {
		w.Content = json.RawMessage(`[]`)
	}
	if len(w.Structured) == 0 {
		w.Structured = json.RawMessage(`null`)
	}
	return callResult{Content: w.Content, Structured: w.Structured, IsError: res.IsError}, nil
}

// errorText is the text of an error result: its text blocks joined.
func (r callResult) errorText() string {
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(r.Content, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	if len(parts) == 0 {
		return "the tool reported an error without a message"
	}
	msg := strings.Join(parts, "\n")
	if len(msg) > 4096 {
		msg = msg[:4096] + "…"
	}
	return msg
}
