package store_test

import (
	"context"
	"testing"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// BenchmarkJobLifecycle measures how many jobs a Postgres primary records
// per second: the three writes every job makes (the ingress's insert, the
// runner's claim, the runner's result), from 8 goroutines per CPU sharing
// the store's pool, as ingresses and runners do. It reports jobs/s.
func BenchmarkJobLifecycle(b *testing.B) {
	st := storetest.New(b)
	tenant, _ := storetest.Tenant(b, st, "bench")
	ctx := context.Background()
	zero := 0
	res := jobs.Result{Status: jobs.StatusSucceeded, ExitCode: &zero, Stdout: []byte("42\n")}
	noop := func(context.Context, string) (uint64, error) { return 0, nil }
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			j, _, err := st.EnqueueJob(ctx, newJob(tenant, ""), noop)
			if err != nil {
				b.Error(err)
				return
			}
			if _, out, err := st.ClaimJob(ctx, store.ClaimRequest{JobID: j.ID, RunnerID: "bench", MaxAttempts: 3}); err != nil || out != store.Claimed {
				b.Error(err)
				return
			}
			if _, err := st.FinishJob(ctx, j.ID, 1, res); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}
