package jobs

import "time"

// Usage granularities.
const (
	UsageByDay  = "day"
	UsageByHour = "hour"
)

// MaxUsageBuckets bounds the buckets one usage query may span.
const MaxUsageBuckets = 1000

// Usage is what a tenant ran over a time range, in buckets of a day or an
// hour (UTC), as GET /v1/usage shows it, from the job history: a job
// counts in the bucket it was submitted in.
type Usage struct {
	From    time.Time     `json:"from"`
	To      time.Time     `json:"to"`
	By      string        `json:"by"`
	Buckets []UsageBucket `json:"buckets"`
	Total   UsageFigures  `json:"total"`
}

// UsageBucket is one bucket of Usage: Start is its first instant.
type UsageBucket struct {
	Start time.Time `json:"start"`
	UsageFigures
}

// UsageFigures are the figures of a bucket or of a whole range.
type UsageFigures struct {
	// Jobs counts the jobs submitted, by their status now.
	Jobs map[Status]int `json:"jobs"`
	// JobsTotal is the sum of Jobs.
	JobsTotal int `json:"jobs_total"`
	// DurationP50MS and DurationP95MS are percentiles of the programs'
	// wall time over the jobs that ran (null when none did).
	DurationP50MS *int64 `json:"duration_p50_ms"`
	DurationP95MS *int64 `json:"duration_p95_ms"`
	// ArtifactBytes is the size of the files the jobs produced and gantry
	// kept.
	ArtifactBytes int64 `json:"artifact_bytes"`
	// Sessions counts the sessions jobs were submitted to.
	Sessions int `json:"sessions"`
	// CPUSeconds is the CPU time (user and system) the jobs' programs
	// used, summed (jobs recorded without it count nothing).
	CPUSeconds float64 `json:"cpu_seconds"`
	// PeakMemoryKB is the largest resident set any one job's program
	// reached (KiB; null when no job was measured).
	PeakMemoryKB *int64 `json:"peak_memory_kb"`
}

// NewUsageFigures returns figures with every status at 0.
func NewUsageFigures() UsageFigures {
	f := UsageFigures{Jobs: make(map[Status]int, len(Statuses))}
	for _, s := range Statuses {
		f.Jobs[s] = 0
	}
	return f
}
