package service

import (
	"context"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// UsageQuery asks for a tenant's usage: RFC 3339 times (From inclusive, To
// exclusive; rounded out to whole buckets) and the bucket, "day" (the
// default) or "hour". An empty To is now; an empty From is a week before
// To by the day, a day before it by the hour.
type UsageQuery struct {
	From, To, By string
}

// Usage sums the tenant's jobs over a range, from its history: jobs by
// status, the programs' p50 and p95 wall time, the files kept, the sessions
// used, per day or hour (UTC) and in all. At most jobs.MaxUsageBuckets
// buckets.
func (s *Service) Usage(ctx context.Context, p Principal, q UsageQuery) (jobs.Usage, error) {
	by := q.By
	if by == "" {
		by = jobs.UsageByDay
	}
	var step time.Duration
	switch by {
	case jobs.UsageByDay:
		step = 24 * time.Hour
	case jobs.UsageByHour:
		step = time.Hour
	default:
		return jobs.Usage{}, BadRequest("by", "must be day or hour, not %q", by)
	}
	to, err := timeParam("to", q.To)
	if err != nil {
		return jobs.Usage{}, err
	}
	if to.IsZero() {
		to = time.Now()
	}
	// Whole buckets: to up to a bucket's end, from down to its start.
	to = to.UTC()
	if t := to.Truncate(step); !t.Equal(to) {
		to = t.Add(step)
	}
	from, err := timeParam("from", q.From)
	if err != nil {
		return jobs.Usage{}, err
	}
	if from.IsZero() {
		from = to.Add(-7 * step)
		if by == jobs.UsageByHour {
			from = to.Add(-24 * step)
		}
	}
	from = from.UTC().Truncate(step)
	if !from.Before(to) {
		return jobs.Usage{}, BadRequest("from", "must be before to")
	}
	if n := int(to.Sub(from) / step); n > jobs.MaxUsageBuckets {
		return jobs.Usage{}, BadRequest("from", "the range spans %d %ss; at most %d (use by=day for long ranges)", n, by, jobs.MaxUsageBuckets)
	}
	return s.store.Usage(ctx, p.TenantID, from, to, step, by)
}
