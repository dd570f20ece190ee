package jobs

// TenantLimits are a tenant's quotas. A zero field means the operator's
// default (Or fills them in).
type TenantLimits struct {
	// RequestsPerSecond is the tenant's rate of API requests (each
	// ingress; bursts of twice this are allowed). Beyond it: 429.
	RequestsPerSecond float64 `json:"requests_per_second,omitempty"`
	// MaxQueued caps the tenant's queued jobs. Beyond it a submission
	// answers 429.
	MaxQueued int `json:"max_queued,omitempty"`
	// MaxRunning caps the tenant's jobs running at once across all
	// runners (its queue's max ack pending).
	MaxRunning int `json:"max_running,omitempty"`
	// MaxLiveSessions caps the tenant's stateful sessions (each keeps a
	// live sandbox, with its memory, on a runner). Beyond it creating one
	// answers 429; nobody else's live state is evicted for it.
	MaxLiveSessions int `json:"max_live_sessions,omitempty"`
	// MaxSnapshotMB caps what the tenant's snapshots of stateful sessions
	// hold in the object store; past it a snapshot answers 429.
	MaxSnapshotMB int `json:"max_snapshot_mb,omitempty"`
}

// Or returns l with its zero fields taken from def.
func (l TenantLimits) Or(def TenantLimits) TenantLimits {
	if l.RequestsPerSecond == 0 {
		l.RequestsPerSecond = def.RequestsPerSecond
	}
	if l.MaxQueued == 0 {
		l.MaxQueued = def.MaxQueued
	}
	if l.MaxRunning == 0 {
		l.MaxRunning = def.MaxRunning
	}
	if l.MaxLiveSessions == 0 {
		l.MaxLiveSessions = def.MaxLiveSessions
	}
	if l.MaxSnapshotMB == 0 {
		l.MaxSnapshotMB = def.MaxSnapshotMB
	}
	return l
}

// DefaultTenantLimits are the operator's defaults unless configured.
func DefaultTenantLimits() TenantLimits {
	return TenantLimits{RequestsPerSecond: 50, MaxQueued: 1000, MaxRunning: 64, MaxLiveSessions: 128, MaxSnapshotMB: 20480}
}
