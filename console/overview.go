package console

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// The overview: the tenant's usage (GET /v1/usage) as charts drawn here,
// as SVG in the page (no script, and the console's stylesheet colours
// them), with the figures in a table beside for those who cannot see them.

// chart geometry, in SVG user units.
const (
	chartW, chartH = 720.0, 196.0
	chartLeft      = 48.0 // room for the axis's labels
	chartBottom    = 22.0 // room for the buckets' names
)

type overview struct {
	Usage  jobs.Usage
	By     string
	Jobs   barChart  // jobs per bucket, stacked by status
	Times  lineChart // p50 and p95 run time per bucket
	Files  barChart  // artifact bytes per bucket
	CPU    barChart  // CPU seconds per bucket
	Status []string  // the statuses, in the legend's order
	Empty  bool
}

// barChart is a stacked bar chart.
type barChart struct {
	W, H    float64
	Bars    []bar
	Ticks   []tick
	XLabels []xlabel
	Label   string
}

// xlabel names a bucket under the chart.
type xlabel struct {
	X      float64
	Label  string
	Anchor string // text-anchor: the last one ends at its bar's edge
}

type bar struct {
	X, W  float64
	Parts []barPart
	Title string // what a pointer over it shows
}

type barPart struct {
	Y, H  float64
	Class string
}

type tick struct {
	Y     float64
	Label string
}

// lineChart is one or more series of points.
type lineChart struct {
	W, H    float64
	Series  []series
	Ticks   []tick
	XLabels []xlabel
	Label   string
}

type series struct {
	Class  string
	Points string // "x,y x,y ..." for a polyline
	Dots   []dot
}

type dot struct {
	X, Y  float64
	Title string
}

func (c *Console) handleOverview(w http.ResponseWriter, r *http.Request, s *session) error {
	by := r.URL.Query().Get("by")
	if by != jobs.UsageByHour {
		by = jobs.UsageByDay
	}
	q := url.Values{"by": {by}}
	if by == jobs.UsageByDay {
		q.Set("from", time.Now().UTC().AddDate(0, 0, -29).Format(time.RFC3339))
	}
	var u jobs.Usage
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/usage?"+q.Encode(), nil, &u); err != nil {
		return err
	}
	d := overview{Usage: u, By: by, Empty: u.Total.JobsTotal == 0}
	for _, st := range jobs.Statuses {
		d.Status = append(d.Status, string(st))
	}
	d.Jobs = jobsChart(u)
	d.Times = timesChart(u)
	d.Files = filesChart(u)
	d.CPU = cpuChart(u)
	c.render(w, r, s, http.StatusOK, "overview", "Overview", "overview", d, nil)
	return nil
}

// slot is where bucket i of n goes across the chart.
func slot(i, n int) (x, w float64) {
	step := (chartW - chartLeft) / float64(n)
	return chartLeft + float64(i)*step + step*0.1, step * 0.8
}

// xlabels names the first, middle and last buckets.
func xlabels(u jobs.Usage) []xlabel {
	n := len(u.Buckets)
	var out []xlabel
	last := -1
	for _, i := range []int{0, n / 2, n - 1} {
		if i <= last {
			continue
		}
		last = i
		x, w := slot(i, n)
		label := u.Buckets[i].Start.UTC().Format("Jan 2")
		if u.By == jobs.UsageByHour {
			label = u.Buckets[i].Start.UTC().Format("15:00")
		}
		l := xlabel{X: x + w/2, Label: label, Anchor: "middle"}
		if i == n-1 && i > 0 {
			l.X, l.Anchor = x+w, "end"
		}
		out = append(out, l)
	}
	return out
}

// countScale is scale for whole numbers: four ticks a whole step apart,
// the step the smallest of 1, 2, 5, 10, 20, 50, ... that reaches max.
func countScale(max int) (top float64, ticks []tick) {
	step := 1
	for mag := 1; 4*step < max; mag *= 10 {
		for _, m := range []int{1, 2, 5} {
			if step = m * mag; 4*step >= max {
				break
			}
		}
	}
	top = float64(4 * step)
	for i := 0; i <= 4; i++ {
		ticks = append(ticks, tick{Y: y(float64(i*step), top), Label: fmt.Sprint(i * step)})
	}
	return top, ticks
}

// scale picks a round top for values up to max and the ticks to draw.
func scale(max float64, format func(float64) string) (top float64, ticks []tick) {
	if max <= 0 {
		max = 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(max)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if top = m * mag; top >= max {
			break
		}
	}
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		ticks = append(ticks, tick{Y: y(v, top), Label: format(v)})
	}
	return top, ticks
}

// y is where value v of a chart topping at top is drawn.
func y(v, top float64) float64 { return chartH - chartBottom - v/top*(chartH-chartBottom-8) }

func bucketLabel(u jobs.Usage, t time.Time) string {
	if u.By == jobs.UsageByHour {
		return t.UTC().Format("2006-01-02 15:00")
	}
	return t.UTC().Format("2006-01-02")
}

func jobsChart(u jobs.Usage) barChart {
	ch := barChart{W: chartW, H: chartH, Label: "jobs per " + u.By + ", by status", XLabels: xlabels(u)}
	max := 0
	for _, b := range u.Buckets {
		max = int(math.Max(float64(max), float64(b.JobsTotal)))
	}
	top, ticks := countScale(max)
	ch.Ticks = ticks
	for i, b := range u.Buckets {
		x, w := slot(i, len(u.Buckets))
		bar := bar{X: x, W: w, Title: fmt.Sprintf("%s: %d jobs", bucketLabel(u, b.Start), b.JobsTotal)}
		base := 0
		for _, st := range jobs.Statuses {
			n := b.Jobs[st]
			if n == 0 {
				continue
			}
			bar.Title += fmt.Sprintf(", %d %s", n, st)
			y0, y1 := y(float64(base), top), y(float64(base+n), top)
			bar.Parts = append(bar.Parts, barPart{Y: y1, H: y0 - y1, Class: "s-" + string(st)})
			base += n
		}
		ch.Bars = append(ch.Bars, bar)
	}
	return ch
}

func timesChart(u jobs.Usage) lineChart {
	ch := lineChart{W: chartW, H: chartH, Label: "run time per " + u.By + ": median and 95th percentile", XLabels: xlabels(u)}
	var max int64
	for _, b := range u.Buckets {
		if b.DurationP95MS != nil && *b.DurationP95MS > max {
			max = *b.DurationP95MS
		}
	}
	top, ticks := scale(float64(max), func(v float64) string { return fmtMS(v) })
	ch.Ticks = ticks
	for _, s := range []struct {
		class string
		get   func(jobs.UsageBucket) *int64
		name  string
	}{
		{"p50", func(b jobs.UsageBucket) *int64 { return b.DurationP50MS }, "median"},
		{"p95", func(b jobs.UsageBucket) *int64 { return b.DurationP95MS }, "95th percentile"},
	} {
		ser := series{Class: s.class}
		for i, b := range u.Buckets {
			v := s.get(b)
			if v == nil {
				continue
			}
			x, w := slot(i, len(u.Buckets))
			cx, cy := x+w/2, y(float64(*v), top)
			ser.Points += fmt.Sprintf("%.1f,%.1f ", cx, cy)
			ser.Dots = append(ser.Dots, dot{X: cx, Y: cy, Title: fmt.Sprintf("%s: %s %s", bucketLabel(u, b.Start), s.name, fmtMS(float64(*v)))})
		}
		ch.Series = append(ch.Series, ser)
	}
	return ch
}

func filesChart(u jobs.Usage) barChart {
	bytes := funcs["bytes"].(func(int64) string)
	return amountChart(u, "files kept per "+u.By, "files",
		func(b jobs.UsageBucket) float64 { return float64(b.ArtifactBytes) },
		func(v float64) string { return bytes(int64(v)) })
}

func cpuChart(u jobs.Usage) barChart {
	return amountChart(u, "CPU time per "+u.By, "cpu",
		func(b jobs.UsageBucket) float64 { return b.CPUSeconds },
		func(v float64) string { return fmtMS(v * 1000) })
}

// amountChart is a bar per bucket of one amount, labelled by format.
func amountChart(u jobs.Usage, label, class string, amount func(jobs.UsageBucket) float64, format func(float64) string) barChart {
	ch := barChart{W: chartW, H: chartH, Label: label, XLabels: xlabels(u)}
	var max float64
	for _, b := range u.Buckets {
		max = math.Max(max, amount(b))
	}
	top, ticks := scale(max, format)
	ch.Ticks = ticks
	for i, b := range u.Buckets {
		v := amount(b)
		x, w := slot(i, len(u.Buckets))
		bar := bar{X: x, W: w, Title: fmt.Sprintf("%s: %s", bucketLabel(u, b.Start), format(v))}
		if v > 0 {
			y1 := y(v, top)
			bar.Parts = []barPart{{Y: y1, H: y(0, top) - y1, Class: class}}
		}
		ch.Bars = append(ch.Bars, bar)
	}
	return ch
}

func fmtMS(v float64) string {
	if v < 1000 {
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.1f s", v/1000)
}
