package ingress_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// TestUsage: a tenant's usage from its history — jobs by status, run-time
// percentiles, the files kept, the sessions used, CPU time and peak memory,
// per bucket and in all — shows its own jobs only, and bad ranges are 400s naming the field.
func TestUsage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	sess := h.newSession(t, h.keyA)
	submit := func(key, body string) string {
		r := h.do(t, key, "POST", "/v1/jobs", body)
		if r.status != 202 {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
		return r.job(t).ID
	}
	ok1 := submit(h.keyA, `{"language":"python","code":"a"}`)
	ok2 := submit(h.keyA, `{"language":"python","code":"b","session_id":"`+sess.ID+`"}`)
	bad := submit(h.keyA, `{"language":"python","code":"c"}`)
	submit(h.keyA, `{"language":"python","code":"d"}`) // stays queued
	submit(h.keyB, `{"language":"python","code":"e"}`)
	res := succeeded("x")
	res.Duration = 100 * time.Millisecond
	res.Usage = &jobs.ProgramUsage{CPUTime: 1500 * time.Millisecond, PeakMemoryKB: new(int64(20000))}
	res.Artifacts = []jobs.Artifact{{Path: "out/a", Size: 1000, SHA256: strings.Repeat("0", 64)}}
	res.ArtifactsOmitted = []jobs.OmittedArtifact{{Path: "out/big", Size: 1 << 30, Reason: "too big"}}
	h.finish(t, ok1, res)
	res.Duration, res.Artifacts, res.ArtifactsOmitted = 300*time.Millisecond, nil, nil
	res.Usage = &jobs.ProgramUsage{CPUTime: 250 * time.Millisecond, PeakMemoryKB: new(int64(90000))}
	h.finish(t, ok2, res)
	h.finish(t, bad, jobs.Result{Status: jobs.StatusFailed, ExitCode: new(int), Duration: 200 * time.Millisecond})

	var u jobs.Usage
	r := h.do(t, h.keyA, "GET", "/v1/usage?by=hour", "")
	r.json(t, &u)
	if r.status != 200 || u.By != "hour" || len(u.Buckets) != 24 || !u.To.After(time.Now()) {
		t.Fatalf("usage: %d %+v", r.status, u)
	}
	last := u.Buckets[len(u.Buckets)-1]
	tot := u.Total
	if tot.JobsTotal != 4 || tot.Jobs[jobs.StatusSucceeded] != 2 || tot.Jobs[jobs.StatusFailed] != 1 || tot.Jobs[jobs.StatusQueued] != 1 ||
		tot.ArtifactBytes != 1000 || tot.Sessions != 1 || tot.DurationP50MS == nil || *tot.DurationP50MS != 200 || *tot.DurationP95MS != 300 ||
		tot.CPUSeconds != 1.75 || tot.PeakMemoryKB == nil || *tot.PeakMemoryKB != 90000 {
		t.Errorf("total: %+v (p50 %v p95 %v peak %v)", tot, tot.DurationP50MS, tot.DurationP95MS, tot.PeakMemoryKB)
	}
	if last.JobsTotal != 4 || last.ArtifactBytes != 1000 {
		t.Errorf("the last hour: %+v", last)
	}
	if first := u.Buckets[0]; first.JobsTotal != 0 || first.DurationP50MS != nil || first.PeakMemoryKB != nil || first.CPUSeconds != 0 || len(first.Jobs) != len(jobs.Statuses) {
		t.Errorf("an empty hour: %+v", first)
	}
	h.do(t, h.keyB, "GET", "/v1/usage", "").json(t, &u)
	if u.By != "day" || len(u.Buckets) != 7 || u.Total.JobsTotal != 1 {
		t.Errorf("tenant B's usage: %+v", u)
	}
	for q, field := range map[string]string{
		"?by=week": "by", "?from=yesterday": "from", "?to=2026-01-01": "to",
		"?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z": "from",
		"?by=hour&from=2020-01-01T00:00:00Z":                 "from", "?colour=red": "colour",
	} {
		if r := h.do(t, h.keyA, "GET", "/v1/usage"+q, ""); r.status != 400 || !strings.Contains(string(r.body), `"field":"`+field+`"`) {
			t.Errorf("%s: %d %s", q, r.status, r.body)
		}
	}
	_ = context.Background()
}
