package main

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyCheck is one dependency /readyz asks about.
type readyCheck struct {
	name string
	fn   func(context.Context) error
}

// runnerHTTP serves a runner's /healthz (the process answers), /readyz (it
// can take jobs: its engines answer) and /metrics (its Prometheus
// registry) on GANTRY_RUNNER_ADDR, for probes and scrapers. It serves from
// the moment the runner starts, so that a runner waiting for its engines
// is alive but not ready.
type runnerHTTP struct {
	reg *prometheus.Registry
	// state is "starting" until the checks are set, "draining" once the
	// runner was asked to stop.
	state  atomic.Value // string
	checks atomic.Pointer[[]readyCheck]
}

func newRunnerHTTP(reg *prometheus.Registry) *runnerHTTP {
	h := &runnerHTTP{reg: reg}
	h.state.Store("starting")
	return h
}

// ready sets what /readyz checks from now on.
func (h *runnerHTTP) ready(checks []readyCheck) {
	h.checks.Store(&checks)
	h.state.Store("running")
}

// draining makes /readyz answer 503 while running jobs finish.
func (h *runnerHTTP) draining() { h.state.Store("draining") }

func (h *runnerHTTP) handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeHealthJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	m.HandleFunc("GET /readyz", h.handleReady)
	m.Handle("GET /metrics", promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{}))
	return m
}

func (h *runnerHTTP) handleReady(w http.ResponseWriter, r *http.Request) {
	state := h.state.Load().(string)
	checks := h.checks.Load()
	if state != "running" || checks == nil {
		writeHealthJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "state": state})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	out := make(map[string]string, len(*checks))
	var mu sync.Mutex
	var wg sync.WaitGroup
	ok := true
	for _, c := range *checks {
		wg.Go(func() {
			err := c.fn(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out[c.name] = "error: " + err.Error()
				ok = false
			} else {
				out[c.name] = "ok"
			}
		})
	}
	wg.Wait()
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	writeHealthJSON(w, status, map[string]any{"ready": ok, "state": state, "checks": out})
}

func writeHealthJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
