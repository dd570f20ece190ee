package store

import (
	"context"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// Usage sums the tenant's jobs submitted in [from, to) into buckets of
// step (a day or an hour; from and to on bucket boundaries), plus the
// range's total. Buckets with nothing in them are present, with zeros.
func (s *Store) Usage(ctx context.Context, tenantID string, from, to time.Time, step time.Duration, by string) (jobs.Usage, error) {
	u := jobs.Usage{From: from, To: to, By: by, Total: jobs.NewUsageFigures()}
	index := map[time.Time]*jobs.UsageBucket{}
	for t := from; t.Before(to); t = t.Add(step) {
		u.Buckets = append(u.Buckets, jobs.UsageBucket{Start: t, UsageFigures: jobs.NewUsageFigures()})
	}
	for i := range u.Buckets {
		index[u.Buckets[i].Start] = &u.Buckets[i]
	}
	interval := step.Seconds()
	// Jobs by bucket and status (jobs_history_created serves the range).
	rows, err := s.pool.Query(ctx, `
		SELECT date_bin(make_interval(secs => $4), created_at, 'epoch'), status, count(*)
		FROM jobs WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3
		GROUP BY 1, 2`, tenantID, from, to, interval)
	if err != nil {
		return u, err
	}
	for rows.Next() {
		var at time.Time
		var status string
		var n int
		if err := rows.Scan(&at, &status, &n); err != nil {
			rows.Close()
			return u, err
		}
		if b := index[at.UTC()]; b != nil {
			b.Jobs[jobs.Status(status)] += n
			b.JobsTotal += n
		}
		u.Total.Jobs[jobs.Status(status)] += n
		u.Total.JobsTotal += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return u, err
	}
	// Durations, artifact bytes, sessions, CPU time and peak memory, per
	// bucket and over the range (GROUPING SETS: the range's percentiles
	// are not the buckets').
	rows, err = s.pool.Query(ctx, `
		SELECT date_bin(make_interval(secs => $4), created_at, 'epoch'),
			percentile_disc(0.5) WITHIN GROUP (ORDER BY duration_ms),
			percentile_disc(0.95) WITHIN GROUP (ORDER BY duration_ms),
			coalesce(sum((SELECT coalesce(sum((a->>'size')::bigint), 0) FROM jsonb_array_elements(artifacts) a
				WHERE coalesce(a->>'omitted', '') = '')), 0)::bigint,
			count(DISTINCT session_id),
			coalesce(sum(cpu_time_ms), 0)::bigint,
			max(peak_memory_kb)
		FROM jobs WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3
		GROUP BY GROUPING SETS ((1), ())`, tenantID, from, to, interval)
	if err != nil {
		return u, err
	}
	for rows.Next() {
		var at *time.Time
		var p50, p95 *int64
		var bytes int64
		var sessions int
		var cpuMS int64
		var peakKB *int64
		if err := rows.Scan(&at, &p50, &p95, &bytes, &sessions, &cpuMS, &peakKB); err != nil {
			rows.Close()
			return u, err
		}
		f := &u.Total
		if at != nil {
			b := index[at.UTC()]
			if b == nil {
				continue
			}
			f = &b.UsageFigures
		}
		f.DurationP50MS, f.DurationP95MS, f.ArtifactBytes, f.Sessions = p50, p95, bytes, sessions
		f.CPUSeconds, f.PeakMemoryKB = float64(cpuMS)/1000, peakKB
	}
	rows.Close()
	return u, rows.Err()
}

// LiveJobs is how many jobs are queued and running across tenants, and
// how long the oldest of each has waited (queued: since it was submitted)
// or run (running: since its attempt started), in seconds.
type LiveJobs struct {
	Queued, Running             int
	OldestQueued, OldestRunning float64
}

// LiveJobs counts the unfinished jobs (jobs_live).
func (s *Store) LiveJobs(ctx context.Context) (LiveJobs, error) {
	var l LiveJobs
	rows, err := s.pool.Query(ctx, `
		SELECT status, count(*), coalesce(extract(epoch FROM now() - min(CASE WHEN status = 'running'
			THEN coalesce(started_at, created_at) ELSE created_at END)), 0)::float8
		FROM jobs WHERE status IN ('queued', 'running') GROUP BY status`)
	if err != nil {
		return l, err
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		var age float64
		if err := rows.Scan(&status, &n, &age); err != nil {
			return l, err
		}
		if status == string(jobs.StatusRunning) {
			l.Running, l.OldestRunning = n, age
		} else {
			l.Queued, l.OldestQueued = n, age
		}
	}
	return l, rows.Err()
}
