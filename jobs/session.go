package jobs

import (
	"time"
)

// Session is a stateful workspace as the API shows it.
type Session struct {
	ID         string            `json:"id"`
	Status     string            `json:"status"`
	Language   string            `json:"language"`
	TTLSeconds int               `json:"ttl_seconds"`
	DiskMB     int               `json:"disk_mb"`
	CreatedAt  time.Time         `json:"created_at"`
	LastUsedAt time.Time         `json:"last_used_at"`
	ExpiresAt  time.Time         `json:"expires_at"`
	LastJobID  *string           `json:"last_job_id"`
	Version    int64             `json:"version"`
	Bytes      int64             `json:"workspace_bytes"`
	Queued     int               `json:"queued_jobs"`
	Metadata   map[string]string `json:"metadata"`
	// Environment is the environment its jobs run in ("default" for the
	// runner's own image).
	Environment string `json:"environment"`
	// Stateful: the session keeps a live sandbox between its jobs (see
	// SessionRequest).
	Stateful bool `json:"stateful"`
	// SealedEnv is the session's env (SessionRequest.Env) as the store
	// keeps it, sealed; the service opens it. Not part of the API.
	SealedEnv []byte `json:"-"`
	// Live names the live sandbox holding a stateful session's live state
	// ("" while it has none), where its runner answers the live sandbox's
	// operations (LiveSubject). Not part of the API.
	Live string `json:"-"`
	// Network is the session's egress narrowing and header rules (see
	// Network), which each of its jobs' own narrows further; nil: none.
	Network *Network `json:"network,omitempty"`
}

// SessionRequest creates a session.
type SessionRequest struct {
	Language   string            `json:"language"`
	TTLSeconds int               `json:"ttl_seconds,omitempty"`
	DiskMB     int               `json:"disk_mb,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	// Environment names the sandbox image the session's jobs run in.
	Environment string `json:"environment,omitempty"`
	// Stateful keeps the session's sandbox alive between its jobs: Python
	// jobs run one after another in one interpreter (globals, imports and
	// loaded data persist, like notebook cells, and each returns its last
	// expression's value), and /tmp and the processes jobs leave running
	// persist too. The workspace is still saved after every job; the live
	// state is lost with its runner or container, which the next job
	// reports (Job.LiveState).
	Stateful bool `json:"stateful,omitempty"`
	// Env are variables every job of the session gets (a job's own env
	// wins), and a stateful session's live processes: sealed at rest,
	// never shown again.
	Env map[string]string `json:"env,omitempty"`
	// SealedEnv is Env sealed, as the service hands it to the store.
	SealedEnv []byte `json:"-"`
	// MaxLive is the tenant's cap on its stateful sessions
	// (TenantLimits.MaxLiveSessions), as the service hands it to the store:
	// a stateful session past it is refused (0: no cap).
	MaxLive int `json:"-"`
	// Network narrows the egress of the session's jobs and live
	// processes below the tenant's allow-list, and sets headers on
	// requests to some hosts (see Network); PUT
	// /v1/sessions/{id}/network replaces it while the session lives.
	Network *Network `json:"network,omitempty"`
	// Secrets are values of the session's own secrets its network names
	// (a compatible API's literal header values): sealed and kept with the
	// session, never shown. Not part of the API.
	Secrets map[string]string `json:"-"`
}

// Session bounds.
const (
	DefaultSessionTTL = 3600
	MinSessionTTL     = 10
	MaxSessionTTL     = 7 * 24 * 3600
	DefaultSessionMB  = 512
	MaxSessionMB      = 4096
)

// Normalize validates a session request under DefaultPolicy and fills in
// defaults.
func (r SessionRequest) Normalize() (SessionRequest, error) {
	return DefaultPolicy().NormalizeSession(r)
}

// NormalizeSession validates a session request against the policy and
// fills in defaults: its disk_mb is at most MaxSessionMB and at most the
// policy's largest disk.
func (p Policy) NormalizeSession(r SessionRequest) (SessionRequest, error) {
	if r.Language == "" {
		r.Language = "python"
	}
	lang, ok := LookupLanguage(r.Language)
	if !ok {
		return r, fieldErr("language", "unknown language %q (one of %s)", r.Language, languageNames())
	}
	r.Language = lang.Name
	if r.TTLSeconds == 0 {
		r.TTLSeconds = DefaultSessionTTL
	}
	if r.TTLSeconds < MinSessionTTL || r.TTLSeconds > MaxSessionTTL {
		return r, fieldErr("ttl_seconds", "must be between %d and %d", MinSessionTTL, MaxSessionTTL)
	}
	if r.DiskMB == 0 {
		r.DiskMB = DefaultSessionMB
	}
	if maxMB := min(MaxSessionMB, p.MaxLimits.DiskMB); r.DiskMB < 1 || r.DiskMB > maxMB {
		return r, fieldErr("disk_mb", "must be between 1 and %d", maxMB)
	}
	var err error
	if r.Environment, err = normalizeEnvironment(r.Environment); err != nil {
		return r, err
	}
	if err := ValidateEnv(r.Env); err != nil {
		return r, err
	}
	if r.Network.Empty() {
		r.Network = nil
	} else {
		r.Network = NormalizeNetwork(r.Network)
		if err := r.Network.Check("network"); err != nil {
			return r, err
		}
	}
	return r, ValidateMetadata(r.Metadata)
}
