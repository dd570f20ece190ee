package service

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// dependencyUp is gantry_dependency_up: whether each engine a process
// needs answers (1) or not (0), checked at scrape time, at most every 5
// seconds, each check bounded by 2. Ingresses and runners export it with
// their own checks; an alert on it says which engine is away.
type dependencyUp struct {
	checks []Check
	desc   *prometheus.Desc

	mu   sync.Mutex
	at   time.Time
	last map[string]float64
}

// RegisterDependencyGauges exports gantry_dependency_up{dependency} for
// checks on reg.
func RegisterDependencyGauges(reg prometheus.Registerer, checks []Check) {
	reg.MustRegister(&dependencyUp{checks: checks, desc: prometheus.NewDesc("gantry_dependency_up",
		"Whether a dependency answers this process (1) or not (0): postgres, nats, s3, docker.", []string{"dependency"}, nil)})
}

func (d *dependencyUp) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

func (d *dependencyUp) Collect(ch chan<- prometheus.Metric) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil || time.Since(d.at) > 5*time.Second {
		now := map[string]float64{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, c := range d.checks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				up := 0.0
				if c.Fn(ctx) == nil {
					up = 1
				}
				mu.Lock()
				now[c.Name] = up
				mu.Unlock()
			}()
		}
		wg.Wait()
		d.last, d.at = now, time.Now()
	}
	for name, v := range d.last {
		ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, v, name)
	}
}
