package e2b

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/compat/e2b/sandbox"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// E2B's sandbox lifecycle over gantry's stateful sessions.

// templateKey is the session metadata key that keeps the template an E2B
// sandbox was made from (hidden from the sandbox's E2B metadata), and
// sandbox.AutoResumeKey the one that keeps its lifecycle's autoResume.
const templateKey = "e2b.template"

// hiddenMetadata are the session metadata keys gantry keeps for itself:
// not the sandbox's E2B metadata.
var hiddenMetadata = map[string]bool{templateKey: true, sandbox.AutoResumeKey: true}

// defaultTemplates are E2B's own templates: gantry runs them in its
// default environment (Python with the data libraries, Node, bash).
var defaultTemplates = map[string]bool{"": true, "base": true, "default": true, "code-interpreter-v1": true,
	"code-interpreter": true, "code-interpreter-beta": true, "code-interpreter-stateful": true}

// newSandbox is E2B's NewSandbox (and NewSandboxV2) request.
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *float64          `json:"timeout"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkConfig    `json:"network"`
	Secure              *bool             `json:"secure"`
	AutoPause           *bool             `json:"autoPause"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory"`
	AutoResume          *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
	MCP          json.RawMessage   `json:"mcp"`
	VolumeMounts []json.RawMessage `json:"volumeMounts"`
	IAM          json.RawMessage   `json:"iam"`
}

// sandboxJSON is E2B's Sandbox, and with the detail fields its
// SandboxDetail and ListedSandbox.
type sandboxJSON struct {
	TemplateID         string            `json:"templateID"`
	SandboxID          string            `json:"sandboxID"`
	Alias              string            `json:"alias,omitempty"`
	ClientID           string            `json:"clientID"`
	EnvdVersion        string            `json:"envdVersion"`
	EnvdAccessToken    string            `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string            `json:"trafficAccessToken,omitempty"`
	Domain             *string           `json:"domain"`
	StartedAt          *time.Time        `json:"startedAt,omitempty"`
	EndAt              *time.Time        `json:"endAt,omitempty"`
	CPUCount           int               `json:"cpuCount,omitempty"`
	MemoryMB           int               `json:"memoryMB,omitempty"`
	DiskSizeMB         int               `json:"diskSizeMB,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	State              string            `json:"state,omitempty"`
	Lifecycle          *lifecycle        `json:"lifecycle,omitempty"`
	AllowInternet      *bool             `json:"allowInternetAccess,omitempty"`
	Network            *networkInfo      `json:"network,omitempty"`
	VolumeMounts       []struct{}        `json:"volumeMounts,omitempty"`
}

// lifecycle is E2B's SandboxLifecycle: what the sandbox's timeout does,
// and whether a call to it while paused resumes it.
type lifecycle struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// maxRequest bounds a control-plane request body.
const maxRequest = 1 << 20

// decode reads a JSON body into v (an empty body is {}).
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequest+1))
	if err != nil {
		return &apiError{http.StatusBadRequest, "read the request: " + err.Error()}
	}
	if len(body) > maxRequest {
		return &apiError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the request is larger than %d bytes", maxRequest)}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return &apiError{http.StatusBadRequest, fmt.Sprintf("%s: %s is not of its type", te.Field, te.Value)}
		}
		return &apiError{http.StatusBadRequest, "the request is not JSON: " + err.Error()}
	}
	return nil
}

// ttl is a timeout in seconds as a session's TTL, within the session
// bounds.
func ttl(seconds float64) int {
	switch {
	case math.IsNaN(seconds) || seconds < jobs.MinSessionTTL:
		return jobs.MinSessionTTL
	case seconds > jobs.MaxSessionTTL:
		return jobs.MaxSessionTTL
	}
	return int(math.Ceil(seconds))
}

// refuse says why gantry cannot make the sandbox asked for, or nil.
func (req *newSandbox) refuse() error {
	switch {
	case req.AutoPauseMemory != nil && !*req.AutoPauseMemory:
		return notImplemented(noFilesystemPause)
	case req.autoResume() && !req.autoPause():
		return &apiError{http.StatusBadRequest, "autoResume can only be true when the timeout pauses the sandbox (lifecycle.onTimeout 'pause')"}
	case len(req.MCP) > 0 && string(req.MCP) != "null":
		return notImplemented("E2B's MCP gateway is not offered by gantry (gantry's own code mode calls MCP servers from a sandbox: see its README)")
	case len(req.VolumeMounts) > 0:
		return notImplemented("volumes are not offered by gantry: a sandbox's files are its session's workspace")
	case len(req.IAM) > 0 && string(req.IAM) != "null":
		return notImplemented("workload identity tokens are not offered by gantry")
	}
	return nil
}

func (req *newSandbox) autoPause() bool  { return req.AutoPause != nil && *req.AutoPause }
func (req *newSandbox) autoResume() bool { return req.AutoResume != nil && req.AutoResume.Enabled }

// noFilesystemPause is why a pause without memory is refused.
const noFilesystemPause = "gantry pauses a sandbox with its memory (keepMemory: true, the default): a filesystem-only pause, resumed by a reboot, is not offered"

func (s *Server) create(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var req newSandbox
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := req.refuse(); err != nil {
		return err
	}
	network, secrets, err := toNetwork(req.Network, req.AllowInternetAccess)
	if err != nil {
		return err
	}
	if !s.sandboxes.SessionTokens() {
		return &apiError{http.StatusServiceUnavailable, "E2B's sandboxes need access tokens, which need GANTRY_SECRET_KEY: this gantry was started without it"}
	}
	seconds := 300.0 // NewSandboxV2's default
	if !strings.HasPrefix(r.URL.Path, "/v2/") {
		seconds = 15 // NewSandbox's
	}
	if req.Timeout != nil {
		seconds = *req.Timeout
	}
	meta := map[string]string{}
	for k, v := range req.Metadata {
		meta[k] = v
	}
	template := req.TemplateID
	if template == "" {
		template = "base"
	}
	meta[templateKey] = template
	if req.autoResume() {
		meta[sandbox.AutoResumeKey] = "true"
	}
	sreq := jobs.SessionRequest{Language: "python", TTLSeconds: ttl(seconds), Metadata: meta, Stateful: true,
		Env: req.EnvVars, Network: network, Secrets: secrets, OnTimeout: jobs.OnTimeoutKill}
	if req.autoPause() {
		sreq.OnTimeout = jobs.OnTimeoutPause
	}
	switch {
	case jobs.ValidID("snp", req.TemplateID):
		// A snapshot's id takes the template's place (Sandbox.create(snapshotId)).
		sreq.Snapshot = req.TemplateID
	case !defaultTemplates[req.TemplateID]:
		sreq.Environment = req.TemplateID
	}
	ctx := r.Context()
	sess, err := s.svc.CreateSession(ctx, p, sreq)
	var se *service.Error
	if errors.As(err, &se) && se.Field == "environment" {
		// Not an environment: a snapshot's name, as E2B's are templates.
		var id string
		if id, err = s.snapshotNamed(ctx, p, req.TemplateID); err == nil && id != "" {
			sreq.Environment, sreq.Snapshot = "", id
			sess, err = s.svc.CreateSession(ctx, p, sreq)
		} else if err == nil {
			return &apiError{http.StatusNotFound, fmt.Sprintf("template '%s' not found: gantry runs a sandbox in one of its environments, named as the template (GET /v1/environments lists yours), or from a snapshot (its id or name); E2B's base and code-interpreter templates are its default environment", req.TemplateID)}
		}
	}
	if errors.As(err, &se) && se.Field == "snapshot" {
		return &apiError{http.StatusNotFound, fmt.Sprintf("template '%s' not found: no snapshot of yours has that id", req.TemplateID)}
	}
	if errors.As(err, &se) && se.Field == "metadata" || errors.As(err, &se) && strings.HasPrefix(se.Field, "metadata.") ||
		errors.As(err, &se) && strings.HasPrefix(se.Field, "network") {
		return &apiError{http.StatusBadRequest, se.Field + " " + se.Message}
	}
	if err != nil {
		return err
	}
	// The sandbox is running when create returns, as E2B's is.
	if err := s.sandboxes.StartLive(ctx, p, sess.ID); err != nil {
		_ = s.svc.CloseSession(ctx, p, sess.ID)
		return err
	}
	out, err := s.view(r, p, sess, false)
	if err != nil {
		return err
	}
	compat.WriteJSON(w, http.StatusCreated, out)
	return nil
}

// view is E2B's view of a session, with its access token and, with
// detail, what E2B's SandboxDetail adds.
func (s *Server) view(r *http.Request, p service.Principal, sess jobs.Session, detail bool) (sandboxJSON, error) {
	out := s.listed(sess)
	token, err := s.sandboxes.SessionToken(r.Context(), p, sess.ID)
	if err != nil {
		return out, err
	}
	out.EnvdAccessToken, out.TrafficAccessToken = token, token
	if !detail {
		out.StartedAt, out.EndAt, out.CPUCount, out.MemoryMB, out.DiskSizeMB, out.Metadata, out.State = nil, nil, 0, 0, 0, nil, ""
		return out, nil
	}
	st, err := s.svc.Settings(r.Context(), p)
	if err != nil {
		return out, err
	}
	reach := internet(st.EgressAllow, sess.Network)
	out.Lifecycle = &lifecycle{OnTimeout: cmp.Or(sess.OnTimeout, jobs.OnTimeoutKill), AutoResume: sess.Metadata[sandbox.AutoResumeKey] == "true"}
	out.AllowInternet, out.Network = &reach, info(sess.Network)
	return out, nil
}

// listed is E2B's ListedSandbox of a session.
func (s *Server) listed(sess jobs.Session) sandboxJSON {
	template := sess.Metadata[templateKey]
	if template == "" {
		template = sess.Environment
	}
	meta := map[string]string{}
	for k, v := range sess.Metadata {
		if !hiddenMetadata[k] {
			meta[k] = v
		}
	}
	started, end := sess.CreatedAt, sess.ExpiresAt
	lim := s.svc.Policy().DefaultLimits
	return sandboxJSON{TemplateID: template, Alias: template, SandboxID: sess.ID, ClientID: "gantry", EnvdVersion: envdVersion,
		StartedAt: &started, EndAt: &end, CPUCount: int(math.Ceil(lim.CPUs)), MemoryMB: max(lim.MemoryMB, sess.DiskMB),
		DiskSizeMB: sess.DiskMB, Metadata: meta, State: state(sess)}
}

// state is E2B's SandboxState of a session: running or paused.
func state(sess jobs.Session) string {
	if sess.State == jobs.SessionPaused {
		return string(jobs.SessionPaused)
	}
	return string(jobs.SessionRunning)
}

// session is the caller's sandbox named in the path: a stateful session.
func (s *Server) session(r *http.Request, p service.Principal) (jobs.Session, error) {
	id := r.PathValue("id")
	sess, err := s.svc.Session(r.Context(), p, id)
	var se *service.Error
	if errors.As(err, &se) && se.Code == service.CodeNotFound || err == nil && !sess.Stateful {
		return sess, &apiError{http.StatusNotFound, fmt.Sprintf("sandbox %s not found", id)}
	}
	return sess, err
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	sess, err := s.session(r, p)
	if err != nil {
		return err
	}
	out, err := s.view(r, p, sess, true)
	if err != nil {
		return err
	}
	compat.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) kill(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	sess, err := s.session(r, p)
	if err != nil {
		return err
	}
	if err := s.svc.CloseSession(r.Context(), p, sess.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var req struct {
		Timeout *float64 `json:"timeout"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Timeout == nil {
		return &apiError{http.StatusBadRequest, "timeout is required"}
	}
	return s.retime(w, r, p, *req.Timeout)
}

// refresh is E2B's older way to keep a sandbox alive: for duration
// seconds from now.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var req struct {
		Duration *float64 `json:"duration"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	d := 60.0
	if req.Duration != nil {
		d = *req.Duration
	}
	return s.retime(w, r, p, d)
}

// retime makes the sandbox's session expire seconds from now.
func (s *Server) retime(w http.ResponseWriter, r *http.Request, p service.Principal, seconds float64) error {
	sess, err := s.session(r, p)
	if err != nil {
		return err
	}
	if _, err := s.svc.SetSessionTTL(r.Context(), p, sess.ID, ttl(seconds)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// connect answers a running sandbox (its live sandbox started again if it
// was lost), resuming it first if it is paused (201 then, 200 when it was
// running), its timeout extended to the one asked for (E2B's v2 connect:
// 300 s when none is; its older resume: 15 s).
func (s *Server) connect(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var req struct {
		Timeout *float64 `json:"timeout"`
		Memory  *bool    `json:"memory"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	sess, err := s.session(r, p)
	if err != nil {
		return err
	}
	ctx := r.Context()
	status := http.StatusOK
	if sess.State == jobs.SessionPaused {
		if req.Memory != nil && !*req.Memory {
			return notImplemented("gantry resumes a paused sandbox with its memory: resuming from its files only (a reboot) is not offered")
		}
		if sess, err = s.sandboxes.Resume(ctx, p, sess.ID); err != nil {
			return err
		}
		status = http.StatusCreated
	} else if err := s.sandboxes.StartLive(ctx, p, sess.ID); err != nil {
		return err
	}
	if req.Timeout == nil {
		switch {
		case strings.HasPrefix(r.URL.Path, "/v2/"):
			req.Timeout = new(300.0)
		case strings.HasSuffix(r.URL.Path, "/resume"):
			req.Timeout = new(15.0)
		}
	}
	if req.Timeout != nil {
		if until := time.Now().Add(time.Duration(ttl(*req.Timeout)) * time.Second); until.After(sess.ExpiresAt) {
			if sess, err = s.svc.SetSessionTTL(ctx, p, sess.ID, ttl(*req.Timeout)); err != nil {
				return err
			}
		}
	}
	out, err := s.view(r, p, sess, false)
	if err != nil {
		return err
	}
	compat.WriteJSON(w, status, out)
	return nil
}

// listQuery is what E2B's list filters by.
type listQuery struct {
	metadata map[string]string
	// running and paused: the state filter admits running (paused)
	// sandboxes; both without one.
	running, paused bool
}

func parseListQuery(q url.Values) (listQuery, error) {
	lq := listQuery{metadata: map[string]string{}, running: true, paused: true}
	if m := q.Get("metadata"); m != "" {
		// E2B's SDKs escape each key and value, then the pairs as a query.
		pairs, err := url.ParseQuery(m)
		if err != nil {
			return lq, &apiError{http.StatusBadRequest, "metadata: " + err.Error()}
		}
		for k, vs := range pairs {
			key, err1 := url.QueryUnescape(k)
			val, err2 := url.QueryUnescape(vs[len(vs)-1])
			if err1 != nil || err2 != nil {
				return lq, &apiError{http.StatusBadRequest, "metadata: a malformed key or value"}
			}
			lq.metadata[key] = val
		}
	}
	// The SDKs send an array as state=running&state=paused; a comma
	// list is read too.
	if states := strings.Join(q["state"], ","); states != "" {
		lq.running, lq.paused = false, false
		for _, one := range strings.Split(states, ",") {
			switch strings.TrimSpace(one) {
			case string(jobs.SessionRunning):
				lq.running = true
			case string(jobs.SessionPaused):
				lq.paused = true
			}
		}
	}
	return lq, nil
}

func (lq listQuery) match(sess jobs.Session) bool {
	if !sess.Stateful || state(sess) == string(jobs.SessionRunning) && !lq.running || state(sess) == string(jobs.SessionPaused) && !lq.paused {
		return false
	}
	for k, v := range lq.metadata {
		if sess.Metadata[k] != v {
			return false
		}
	}
	return true
}

// maxListPages bounds the session pages one filtered listing reads.
const maxListPages = 50

func (s *Server) list(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	q := r.URL.Query()
	lq, err := parseListQuery(q)
	if err != nil {
		return err
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > 100 {
			return &apiError{http.StatusBadRequest, "limit must be between 1 and 100"}
		}
	}
	out, next, err := s.find(r, p, lq, limit, q.Get("nextToken"))
	if err != nil {
		return err
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	compat.WriteJSON(w, http.StatusOK, out)
	return nil
}

// listV1 is E2B's first listing: every running sandbox, unpaginated.
func (s *Server) listV1(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	lq, err := parseListQuery(r.URL.Query())
	if err != nil {
		return err
	}
	out, _, err := s.find(r, p, lq, 1000, "")
	if err != nil {
		return err
	}
	compat.WriteJSON(w, http.StatusOK, out)
	return nil
}

// find reads the tenant's sessions, newest first, after cursor, until
// limit match: the matches and the cursor of what follows ("": nothing).
func (s *Server) find(r *http.Request, p service.Principal, lq listQuery, limit int, cursor string) ([]sandboxJSON, string, error) {
	out := []sandboxJSON{}
	for range maxListPages {
		page, err := s.svc.ListSessions(r.Context(), p, 100, cursor)
		if err != nil {
			var se *service.Error
			if errors.As(err, &se) && se.Field == "cursor" {
				return nil, "", &apiError{http.StatusBadRequest, "nextToken: " + se.Message}
			}
			return nil, "", err
		}
		for i, sess := range page.Sessions {
			if !lq.match(sess) {
				continue
			}
			out = append(out, s.listed(sess))
			if len(out) == limit {
				if i == len(page.Sessions)-1 {
					return out, page.NextCursor, nil
				}
				// The next page starts after this session.
				return out, service.Cursor(sess.ID), nil
			}
		}
		if page.NextCursor == "" {
			return out, "", nil
		}
		cursor = page.NextCursor
	}
	return out, cursor, nil
}
