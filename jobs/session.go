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
	// Durable: a stateful session's live state outlives its sandbox (see
	// SessionRequest.Durable): it can be paused, snapshotted and forked.
	Durable bool `json:"durable"`
	// SealedEnv is the session's env (SessionRequest.Env) as the store
	// keeps it, sealed; the service opens it. Not part of the API.
	SealedEnv []byte `json:"-"`
	// Live names the live sandbox holding a stateful session's live state
	// ("" while it has none), where its runner answers the live sandbox's
	// operations (LiveSubject). Not part of the API.
	Live string `json:"-"`
	// State is a stateful session's: running (its live state is in a
	// live sandbox, or made by its next job) or paused (its live state is
	// a checkpoint: it holds no memory; its next job, file call, command
	// or resume restores it). A session that is not stateful is running.
	State SessionState `json:"state"`
	// OnTimeout is what the session's expiry does: kill (close it) or
	// pause (a stateful session is paused instead, its TTL renewed).
	OnTimeout string `json:"on_timeout"`
	// Checkpoint names the live state a stateful session's next job
	// restores when it holds no live sandbox ("" for none). Not part of
	// the API.
	Checkpoint string `json:"-"`
	// WorkspaceKey is where the session's current workspace snapshot is
	// in the object store ("" while it was never saved): the key its row
	// holds, committed with its Version (keys are unique per write, see
	// blob.NewSessionKey). Not part of the API.
	WorkspaceKey string `json:"-"`
	// Network is the session's egress narrowing and header rules (see
	// Network), which each of its jobs' own narrows further; nil: none.
	Network *Network `json:"network,omitempty"`
	// PublicTraffic: a stateful session's ports are reachable by anyone
	// who has their URL; false: only with its traffic token or an API key
	// of its tenant (see SessionRequest).
	PublicTraffic bool `json:"public_traffic"`
}

// SessionState is whether a session is running or paused.
type SessionState string

// The session states.
const (
	SessionRunning SessionState = "running"
	SessionPaused  SessionState = "paused"
)

// PausedTTL is how long a paused session is kept (from its pause, or
// its last use if later): then its timeout closes it, as any session's.
const PausedTTL = 7 * 24 * time.Hour

// What a session's expiry does (SessionRequest.OnTimeout).
const (
	OnTimeoutKill  = "kill"
	OnTimeoutPause = "pause"
)

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
	// Durable makes a stateful session's live state outlive its sandbox:
	// where runners have gVisor, it runs under gVisor, whose checkpoints
	// pause it (its memory, processes and /tmp kept, none of its memory
	// held), snapshot and fork it, and carry it across a runner's restart.
	// A session that is not durable keeps its live state in its
	// container's memory only: it starts faster and runs at native speed,
	// but cannot be paused, snapshotted or forked, and loses its live
	// state with its runner. Absent: the operator's default
	// (GANTRY_SESSION_DURABLE, false unless set); a session made from a
	// snapshot, or that pauses at its timeout, is durable.
	Durable *bool `json:"durable,omitempty"`
	// Env are variables every job of the session gets (a job's own env
	// wins), and a stateful session's live processes: sealed at rest,
	// never shown again.
	Env map[string]string `json:"env,omitempty"`
	// SealedEnv is Env sealed, as the service hands it to the store.
	SealedEnv []byte `json:"-"`
	// OnTimeout is what the session's expiry does: "kill" (the default:
	// it is closed, everything it held reclaimed) or "pause" (a stateful
	// session is paused, its live state kept as a checkpoint and its TTL
	// renewed; its next call resumes it).
	OnTimeout string `json:"on_timeout,omitempty"`
	// Snapshot makes the session from a snapshot of a stateful session
	// (its id, snp_…): the snapshot's live state and workspace, restored
	// by its first job. It makes a stateful session.
	Snapshot string `json:"snapshot,omitempty"`
	// ID, Checkpoint and Workspace are set by the service for a session
	// made from a snapshot: its id, the checkpoint its first job restores,
	// and the copy of the snapshot's workspace that is its version 1.
	ID         string         `json:"-"`
	Checkpoint string         `json:"-"`
	Workspace  *WorkspaceCopy `json:"-"`
	// MaxLive is the tenant's cap on its stateful sessions
	// (TenantLimits.MaxLiveSessions), as the service hands it to the store:
	// a stateful session past it is refused (0: no cap).
	MaxLive int `json:"-"`
	// Network narrows the egress of the session's jobs and live
	// processes below the tenant's allow-list, and sets headers on
	// requests to some hosts (see Network); PUT
	// /v1/sessions/{id}/network replaces it while the session lives.
	Network *Network `json:"network,omitempty"`
	// PublicTraffic false keeps a stateful session's ports from the
	// public: a request to one needs the session's traffic token (header
	// e2b-traffic-access-token) or an API key of the tenant. By default
	// (true, or omitted) a port is reachable by anyone who has its URL.
	PublicTraffic *bool `json:"public_traffic,omitempty"`
	// Secrets are values of the session's own secrets its network names
	// (a compatible API's literal header values): sealed and kept with the
	// session, never shown. Not part of the API.
	Secrets map[string]string `json:"-"`
}

// IsDurable reports whether the (normalized) request makes a durable
// session.
func (r SessionRequest) IsDurable() bool { return r.Durable != nil && *r.Durable }

// WorkspaceCopy is a workspace snapshot (a tar in the object store) that
// a new session starts from.
type WorkspaceCopy struct {
	Key   string
	Bytes int64
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
	switch r.OnTimeout {
	case "":
		r.OnTimeout = OnTimeoutKill
	case OnTimeoutKill, OnTimeoutPause:
	default:
		return r, fieldErr("on_timeout", "must be %q or %q", OnTimeoutKill, OnTimeoutPause)
	}
	if r.Snapshot != "" {
		if !ValidID("snp", r.Snapshot) {
			return r, fieldErr("snapshot", "is not a snapshot id (snp_…)")
		}
		r.Stateful = true
	}
	if r.OnTimeout == OnTimeoutPause && !r.Stateful {
		return r, fieldErr("on_timeout", "pause needs a stateful session: only its live state can be paused")
	}
	switch durable := r.Durable != nil && *r.Durable; {
	case durable && !r.Stateful:
		return r, fieldErr("durable", "needs a stateful session: only live state can outlive its sandbox")
	case r.Durable != nil && !durable && r.Snapshot != "":
		return r, fieldErr("durable", "cannot be false for a session made from a snapshot: its live state is a checkpoint")
	case r.Durable != nil && !durable && r.OnTimeout == OnTimeoutPause:
		return r, fieldErr("durable", "cannot be false with on_timeout pause: a paused session's live state is a checkpoint")
	}
	durable := r.Snapshot != "" || r.OnTimeout == OnTimeoutPause || r.Durable != nil && *r.Durable
	r.Durable = &durable
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

// Snapshot is a saved copy of a stateful session's live state and
// workspace, as the API shows it: new sessions are made from it
// (SessionRequest.Snapshot), on any runner, until it is deleted.
type Snapshot struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	Language  string `json:"language"`
	// Environment is the environment its sessions run in.
	Environment string    `json:"environment"`
	DiskMB      int       `json:"disk_mb"`
	Bytes       int64     `json:"bytes"`
	CreatedAt   time.Time `json:"created_at"`
}

// SnapshotRequest snapshots a stateful session.
type SnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// Normalize validates a snapshot request.
func (r SnapshotRequest) Normalize() (SnapshotRequest, error) {
	if len(r.Name) > 200 {
		return r, fieldErr("name", "must be at most 200 bytes")
	}
	for _, c := range r.Name {
		if c < 0x20 || c == 0x7f {
			return r, fieldErr("name", "must hold no control characters")
		}
	}
	return r, nil
}

// ForkRequest forks a stateful session into Count new ones.
type ForkRequest struct {
	Count int `json:"count"`
	// TTLSeconds is the new sessions' (default: the session's).
	TTLSeconds int `json:"ttl_seconds,omitempty"`
}

// MaxForks bounds one fork's new sessions.
const MaxForks = 64

// Normalize validates a fork request.
func (r ForkRequest) Normalize() (ForkRequest, error) {
	if r.Count == 0 {
		r.Count = 1
	}
	if r.Count < 1 || r.Count > MaxForks {
		return r, fieldErr("count", "must be between 1 and %d", MaxForks)
	}
	if r.TTLSeconds != 0 && (r.TTLSeconds < MinSessionTTL || r.TTLSeconds > MaxSessionTTL) {
		return r, fieldErr("ttl_seconds", "must be between %d and %d", MinSessionTTL, MaxSessionTTL)
	}
	return r, nil
}

// Fork is the answer to a fork: the new sessions, in order.
type Fork struct {
	Sessions []Session `json:"sessions"`
}
