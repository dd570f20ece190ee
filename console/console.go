// Package console is gantry's web console: server-rendered pages for people
// (jobs, run, sessions and snapshots, skills, MCP servers and settings, the agent
// playground) served next to the API at /console/. It holds no state and no
// logic of its own: every page is made from API calls, served in-process by
// the ingress's handler (package localapi) as the signed-in tenant, so the
// console shows exactly what the API allows and the API's own error
// messages. Templates and assets (htmx, the stylesheet, one script) are
// embedded; there is no build step.
package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gantryhq/gantry/localapi"
	"github.com/gantryhq/gantry/secret"
)

//go:embed templates static
var files embed.FS

// Prefix is where the console is served.
const Prefix = "/console/"

// Config configures the console.
type Config struct {
	// SessionKey seals sign-in cookies (secret.KeySize bytes). Consoles that
	// share it accept each other's sign-ins (replicas behind one address).
	SessionKey []byte
	// SessionTTL is how long a sign-in lasts (default 12 hours).
	SessionTTL time.Duration
	// ImageOrigins are origins besides the console's own that images may
	// come from: the object store's public endpoint, where artifact
	// downloads redirect.
	ImageOrigins []string
	// Model is the agent's model ("": no model is configured, and the
	// playground says how to configure one).
	Model string
	// Version is shown in the footer.
	Version string
	// Guard wraps the console's own handler (nil: none): the ingress's
	// deadline for request bodies, so a slow sign-in or upload cannot
	// hold a connection for as long as it likes.
	Guard func(http.Handler) http.Handler
}

// Console serves the pages.
type Console struct {
	cfg   Config
	log   *slog.Logger
	api   http.Handler
	box   *secret.Box
	pages map[string]*template.Template
	csp   string
	mux   *http.ServeMux
}

// New returns a console that serves its pages from api, the ingress's
// handler.
func New(cfg Config, log *slog.Logger, api http.Handler) (*Console, error) {
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	box, err := secret.New(cfg.SessionKey)
	if err != nil {
		return nil, fmt.Errorf("console session key: %w", err)
	}
	c := &Console{cfg: cfg, log: log, api: api, box: box, pages: map[string]*template.Template{}}
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(files, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", n, err)
		}
		c.pages[base] = t
	}
	img := []string{"'self'", "data:"}
	for _, o := range cfg.ImageOrigins {
		if u, err := url.Parse(o); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			img = append(img, u.Scheme+"://"+u.Host)
		}
	}
	c.csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src " + strings.Join(img, " ") +
		"; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	c.routes()
	return c, nil
}

// Handler serves the console under /console/, sends / there, and hands
// everything else to api.
func (c *Console) Handler() http.Handler {
	m := http.NewServeMux()
	var own http.Handler = c
	if c.cfg.Guard != nil {
		own = c.cfg.Guard(c)
	}
	m.Handle(Prefix, own)
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
	})
	m.Handle("/", c.api)
	return m
}

// ServeHTTP serves the console's own paths (under Prefix).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", c.csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(files, "static")
	fileServer := http.StripPrefix(Prefix+"static/", http.FileServerFS(static))
	m.Handle("GET "+Prefix+"static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fileServer.ServeHTTP(w, r)
	}))
	m.HandleFunc("GET "+Prefix+"signin", c.handleSigninPage)
	m.HandleFunc("POST "+Prefix+"signin", c.handleSignin)
	page := func(pattern string, h handler) { m.Handle(pattern, c.signedIn(h)) }
	page("POST "+Prefix+"signout", c.handleSignout)
	page("GET "+Prefix+"{$}", func(w http.ResponseWriter, r *http.Request, s *session) error {
		http.Redirect(w, r, Prefix+"overview", http.StatusSeeOther)
		return nil
	})
	page("GET "+Prefix+"overview", c.handleOverview)
	page("GET "+Prefix+"jobs", c.handleJobs)
	page("GET "+Prefix+"jobs/{id}", c.handleJob)
	page("GET "+Prefix+"jobs/{id}/logs", c.handleJobLogs)
	page("GET "+Prefix+"jobs/{id}/artifacts/{path...}", c.handleArtifact)
	page("POST "+Prefix+"jobs/{id}/cancel", c.handleCancel)
	page("GET "+Prefix+"run", c.handleRunPage)
	page("POST "+Prefix+"run", c.handleRun)
	page("GET "+Prefix+"sessions", c.handleSessions)
	page("POST "+Prefix+"sessions", c.handleCreateSession)
	page("GET "+Prefix+"sessions/{id}", c.handleSession)
	page("POST "+Prefix+"sessions/{id}/close", c.handleCloseSession)
	page("POST "+Prefix+"sessions/{id}/files", c.handleUpload)
	page("POST "+Prefix+"sessions/{id}/files/delete", c.handleDeleteFile)
	page("GET "+Prefix+"sessions/{id}/files/{path...}", c.handleDownload)
	page("GET "+Prefix+"snapshots", c.handleSnapshots)
	page("POST "+Prefix+"snapshots/{id}/delete", c.handleDeleteSnapshot)
	page("GET "+Prefix+"skills", c.handleSkills)
	page("POST "+Prefix+"skills", c.handleUploadSkill)
	page("GET "+Prefix+"skills/{name}", c.handleSkill)
	page("GET "+Prefix+"skills/{name}/download", c.handleSkillDownload)
	page("POST "+Prefix+"skills/{name}/delete", c.handleDeleteSkill)
	page("GET "+Prefix+"mcp", c.handleMCP)
	page("POST "+Prefix+"mcp", c.handleRegisterMCP)
	page("GET "+Prefix+"mcp/{name}", c.handleMCPServer)
	page("POST "+Prefix+"mcp/{name}/refresh", c.handleRefreshMCP)
	page("POST "+Prefix+"mcp/{name}/delete", c.handleDeleteMCP)
	page("POST "+Prefix+"settings", c.handleSettings)
	page("GET "+Prefix+"playground", c.handlePlayground)
	page("POST "+Prefix+"playground/chat", c.handlePlaygroundChat)
	m.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, nil, http.StatusNotFound, "error", "Not found", "", nil,
			&localapi.Error{Status: http.StatusNotFound, Code: "not_found", Message: "no console page at " + r.URL.Path})
	})
	// Cross-origin POSTs are refused before anything else (browsers say
	// where a request comes from in Sec-Fetch-Site or Origin); the
	// session's token is checked on every state-changing form too.
	c.mux = http.NewServeMux()
	c.mux.Handle("/", http.NewCrossOriginProtection().Handler(m))
}

// handler serves a page for a signed-in person. An *localapi.Error it
// returns is shown as the page's error.
type handler func(w http.ResponseWriter, r *http.Request, s *session) error

// view is what every page template gets.
type view struct {
	Title   string
	Nav     string
	CSRF    string
	Signed  bool
	Error   *localapi.Error
	Model   string
	Version string
	Data    any
}

// render writes page name with data. apiErr, when set, is shown above the
// page's content.
func (c *Console) render(w http.ResponseWriter, r *http.Request, s *session, status int, name, title, nav string, data any, apiErr *localapi.Error) {
	t, ok := c.pages[name]
	if !ok {
		panic("console: no template " + name)
	}
	v := view{Title: title, Nav: nav, Error: apiErr, Model: c.cfg.Model, Version: c.cfg.Version, Data: data}
	if s != nil {
		v.CSRF, v.Signed = s.csrf, true
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", v); err != nil {
		c.log.Error("render console page", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fail shows err as the page's answer: the API's message and status, or a
// sign-in page when the key stopped working.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	e := localapi.AsError(err)
	if e.Status == http.StatusUnauthorized {
		c.clearCookie(w, r)
		c.render(w, r, nil, http.StatusUnauthorized, "signin", "Sign in", "", nil, e)
		return
	}
	if e.Status >= 500 {
		c.log.Warn("console page failed", "path", r.URL.Path, "status", e.Status, "err", e.Message)
	}
	c.render(w, r, s, e.Status, "error", http.StatusText(e.Status), "", nil, e)
}

// badForm is a form the console itself cannot read.
func badForm(field, format string, a ...any) *localapi.Error {
	return &localapi.Error{Status: http.StatusBadRequest, Code: "invalid_argument", Field: field, Message: fmt.Sprintf(format, a...)}
}

// isAPIError reports whether err came from the API (or the form), rather
// than from the console failing.
func isAPIError(err error) bool {
	var e *localapi.Error
	return errors.As(err, &e)
}
