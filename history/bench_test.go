package history_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gantryhq/gantry/history"
	"github.com/gantryhq/gantry/store/storetest"
)

// BenchmarkSweep measures how fast the retention sweep deletes expired
// history: b.N finished jobs, each with one artifact in S3, deleted in
// batches of 500 (rows in Postgres, objects with multi-object deletes). It
// reports jobs/s.
func BenchmarkSweep(b *testing.B) {
	for _, artifacts := range []int{0, 1} {
		b.Run(fmt.Sprintf("artifacts=%d", artifacts), func(b *testing.B) {
			bd := setup(b, history.DefaultInlineMax, history.Config{TTL: time.Hour, SweepBudget: time.Hour})
			arts := "[]"
			if artifacts == 1 {
				arts = `[{"path":"out/r.txt","size":1,"sha256":"","content_type":"text/plain"}]`
			}
			if err := storetest.Exec(bd.st, `INSERT INTO jobs (id, tenant_id, status, language, spec, attempt, finished_at, artifacts)
				SELECT 'job_' || lpad(i::text, 26, '0'), $1, 'succeeded', 'python', '{}', 1, now() - interval '2 hours', $2::jsonb
				FROM generate_series(1, $3) i`, bd.tenant, arts, b.N); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			n, err := bd.r.Sweep(context.Background())
			b.StopTimer()
			if err != nil || n != b.N {
				b.Fatalf("Sweep = %d, %v; want %d", n, err, b.N)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
