package runner

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
)

// Metrics are the runner's Prometheus metrics.
type Metrics struct {
	busy      prometheus.Gauge
	finished  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	queued    prometheus.Histogram
	s3Holds   prometheus.Counter
	stages    *prometheus.HistogramVec
	handBacks *prometheus.CounterVec
	handovers *prometheus.CounterVec
	liveOps   *prometheus.HistogramVec
	tenants   *tenantLabels
	byTenant  *prometheus.CounterVec
	tenantCPU *prometheus.CounterVec
	// cpu is the CPU time programs used; accounting is what measuring it
	// cost each run (the agent's wait for the sandbox's init).
	cpu         *prometheus.HistogramVec
	accounting  prometheus.Histogram
	egressConns *prometheus.CounterVec
	throttled   prometheus.Counter
}

// NewMetrics registers the runner's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		busy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gantry_runner_busy_slots", Help: "Jobs running on this runner now.",
		}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_jobs_finished_total", Help: "Jobs finished, by language and status.",
		}, []string{"language", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gantry_job_run_seconds", Help: "Wall time of the program, by language and status.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900},
		}, []string{"language", "status"}),
		queued: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gantry_job_queue_seconds", Help: "Time from publish to a runner taking the job.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30, 120},
		}),
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gantry_job_stage_seconds", Help: "Time a job spends in each stage on the runner: acquire (a container), restore (a session's workspace), collect (its files), snapshot (a session's workspace), record (the result).",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 120},
		}, []string{"stage"}),
		liveOps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gantry_live_op_seconds", Help: "Operations on stateful sessions' live state under gVisor, by op: pause, snapshot, fork (all of its children), restore (a resume, a fork's child or a snapshot's session restored for its job).",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32},
		}, []string{"op"}),
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_session_handovers_total", Help: "Stateful sessions' messages a runner got without holding the session's live sandbox, by what the holder answered: taken (it runs the session), held (another owner has it), gone (closed), busy (asked again later), lost (nobody holds the sandbox, or its runner was stopping: the session ran here without its live state).",
		}, []string{"outcome"}),
		handBacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_job_handbacks_total", Help: "Job messages a runner gave back to the queue, by cause: database (unreachable while claiming), busy (another runner holds it), session_holder and session_holder_busy (the runner holding a stateful session's live sandbox did not answer, or could not take it yet), not_started (failed before its program started), shutdown, object_store (S3 stayed away until the runner stopped), unrecorded, session_handover, uncommitted (the submission's commit not seen yet).",
		}, []string{"cause"}),
		byTenant: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_tenant_jobs_total", Help: "Jobs finished, by tenant (the first 100 tenants a runner sees; the rest as \"other\") and status.",
		}, []string{"tenant", "status"}),
		tenantCPU: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_tenant_cpu_seconds_total", Help: "CPU time (user and system) tenants' programs used, by tenant (bounded as gantry_tenant_jobs_total's), for jobs it was measured of.",
		}, []string{"tenant"}),
		tenants:     &tenantLabels{max: 100, seen: map[string]bool{}},
		egressConns: newEgressCounter(),
		throttled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gantry_live_process_output_throttled_seconds_total",
			Help: "How long live processes' output was held back to the agent's output rate (their writes blocked meanwhile; nothing dropped), counted as each process ends.",
		}),
		s3Holds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gantry_runner_s3_holds_total", Help: "Times a job's files, a session's workspace or a job's output waited for an unavailable object store.",
		}),
		cpu: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gantry_job_cpu_seconds", Help: "CPU time (user and system) of the program's sandbox, by language, for jobs it was measured of.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900},
		}, []string{"language"}),
		accounting: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gantry_sandbox_accounting_seconds", Help: "What measuring a sandbox's usage added to its run: the agent's wait for the sandbox's init after its output ended.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
	}
	reg.MustRegister(m.busy, m.finished, m.duration, m.queued, m.s3Holds, m.stages, m.handBacks, m.handovers, m.liveOps, m.byTenant, m.tenantCPU, m.cpu, m.accounting, m.egressConns, m.throttled)
	return m
}

func (m *Metrics) observe(language, tenantID string, r jobs.Result) {
	m.tenantJob(tenantID, r.Status)
	m.finished.WithLabelValues(language, string(r.Status)).Inc()
	m.duration.WithLabelValues(language, string(r.Status)).Observe(r.Duration.Seconds())
	if r.Usage != nil {
		m.cpu.WithLabelValues(language).Observe(r.Usage.CPUTime.Seconds())
		m.tenantCPU.WithLabelValues(m.tenants.label(tenantID)).Add(r.Usage.CPUTime.Seconds())
	}
}

// accounted records what measuring a sandbox cost; m may be nil.
func (m *Metrics) accounted(u *wire.Usage) {
	if m != nil && u != nil {
		m.accounting.Observe(float64(u.WaitUS) / 1e6)
	}
}

func (m *Metrics) queueLatency(published time.Time) {
	m.queued.Observe(time.Since(published).Seconds())
}

// s3Hold counts one wait for the object store; m may be nil.
func (m *Metrics) s3Hold() {
	if m != nil {
		m.s3Holds.Inc()
	}
}

// stage records how long a job spent in a stage; m may be nil.
func (m *Metrics) stage(name string, since time.Time) {
	if m != nil {
		m.stages.WithLabelValues(name).Observe(time.Since(since).Seconds())
	}
}

func (m *Metrics) handBack(cause string) {
	if m != nil {
		m.handBacks.WithLabelValues(cause).Inc()
	}
}

// outputThrottled counts a live process's output held back for ms.
func (m *Metrics) outputThrottled(ms int64) {
	if m != nil && ms > 0 {
		m.throttled.Add(float64(ms) / 1000)
	}
}

func (m *Metrics) liveOp(op string, start time.Time) {
	if m != nil {
		m.liveOps.WithLabelValues(op).Observe(time.Since(start).Seconds())
	}
}

func (m *Metrics) handedOver(outcome string) {
	if m != nil {
		m.handovers.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) tenantJob(tenantID string, status jobs.Status) {
	if m != nil {
		m.byTenant.WithLabelValues(m.tenants.label(tenantID), string(status)).Inc()
	}
}

// tenantLabels bounds the tenant label's values: the first max tenants
// seen keep their id, every later one is "other".
type tenantLabels struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

func (t *tenantLabels) label(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen[id] {
		return id
	}
	if len(t.seen) >= t.max {
		return "other"
	}
	t.seen[id] = true
	return id
}
