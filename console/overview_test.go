package console

import (
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

func TestCountScale(t *testing.T) {
	for max, want := range map[int]string{0: "0 1 2 3 4", 1: "0 1 2 3 4", 4: "0 1 2 3 4", 5: "0 2 4 6 8", 9: "0 5 10 15 20",
		37: "0 10 20 30 40", 160: "0 50 100 150 200", 1001: "0 500 1000 1500 2000"} {
		top, ticks := countScale(max)
		var labels []string
		for _, tk := range ticks {
			labels = append(labels, tk.Label)
		}
		if got := strings.Join(labels, " "); got != want || top < float64(max) {
			t.Errorf("countScale(%d) = %v %s, want %s", max, top, got, want)
		}
	}
}

// TestCharts: each bucket has a bar whose parts stack its jobs by status
// in proportion, and a bucket without jobs has none.
func TestCharts(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	u := jobs.Usage{By: jobs.UsageByDay}
	for i := range 3 {
		b := jobs.UsageBucket{Start: start.AddDate(0, 0, i), UsageFigures: jobs.NewUsageFigures()}
		u.Buckets = append(u.Buckets, b)
	}
	u.Buckets[1].Jobs[jobs.StatusSucceeded], u.Buckets[1].Jobs[jobs.StatusFailed], u.Buckets[1].JobsTotal = 3, 1, 4
	ch := jobsChart(u)
	if len(ch.Bars) != 3 || len(ch.Bars[0].Parts) != 0 || len(ch.Bars[1].Parts) != 2 {
		t.Fatalf("bars %+v", ch.Bars)
	}
	ok, bad := ch.Bars[1].Parts[0], ch.Bars[1].Parts[1]
	if ok.Class != "s-succeeded" || bad.Class != "s-failed" || ok.H != 3*bad.H || bad.Y+bad.H != ok.Y {
		t.Errorf("stack %+v %+v", ok, bad)
	}
	if !strings.Contains(ch.Bars[1].Title, "2026-11-02: 4 jobs, 3 succeeded, 1 failed") {
		t.Errorf("title %q", ch.Bars[1].Title)
	}
}
