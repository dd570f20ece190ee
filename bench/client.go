package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// client is the benchmark's HTTP client of gantry; the measurements it
// takes through it follow.
type client struct {
	url, key string
	http     *http.Client
}

type timedJob struct {
	id          string
	wall, queue time.Duration
}

func (c *client) do(method, path, body string) ([]byte, int, error) {
	req, _ := http.NewRequest(method, c.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

func newClient(url, key string) *client {
	return &client{url: url, key: key, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

func (c *client) execute(program string) (timedJob, error) { return c.executeIn("", program) }

// executeIn runs a Python program (in a session, if sessionID is set) and
// waits for it.
func (c *client) executeIn(sessionID, program string) (timedJob, error) {
	return c.executeLang("python", sessionID, program)
}

// executeLang runs a program in language (in a session, if sessionID is
// set) and waits for it.
func (c *client) executeLang(language, sessionID, program string) (timedJob, error) {
	req := map[string]any{"language": language, "code": program}
	if sessionID != "" {
		req["session_id"] = sessionID
	}
	return c.executeTimed(req)
}

// executeTimed runs a job request and waits for it; it must succeed.
func (c *client) executeTimed(req map[string]any) (timedJob, error) {
	start := time.Now()
	b, status, err := c.do("POST", "/v1/execute", string(mustJSON(req)))
	wall := time.Since(start)
	if err != nil {
		return timedJob{}, err
	}
	var j struct {
		ID        string    `json:"id"`
		Status    string    `json:"status"`
		Stdout    string    `json:"stdout"`
		CreatedAt time.Time `json:"created_at"`
		StartedAt time.Time `json:"started_at"`
	}
	if err := json.Unmarshal(b, &j); err != nil || status != 200 || j.Status != "succeeded" {
		return timedJob{}, fmt.Errorf("execute answered %d: %s", status, b)
	}
	return timedJob{id: j.ID, wall: wall, queue: j.StartedAt.Sub(j.CreatedAt)}, nil
}

func (c *client) submit() error {
	b, status, err := c.do("POST", "/v1/jobs", `{"language":"python","code":"`+code+`"}`)
	if err != nil {
		return err
	}
	if status != 202 {
		return fmt.Errorf("submit answered %d: %s", status, b)
	}
	return nil
}

// throughput runs n calls of fn on conc workers and returns calls/s.
func throughput(conc, n int, fn func() error) (float64, error) {
	work := make(chan struct{}, n)
	for range n {
		work <- struct{}{}
	}
	close(work)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if err := fn(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds(), firstErr
}

func poll(c *client, id string, conc int, d time.Duration) (float64, time.Duration, error) {
	var mu sync.Mutex
	var lats []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) {
				start := time.Now()
				_, status, err := c.do("GET", "/v1/jobs/"+id, "")
				if err == nil && status != 200 {
					err = fmt.Errorf("poll answered %d", status)
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return float64(len(lats)) / d.Seconds(), pct(lats, 99), firstErr
}

// dockerRun is the baseline: one hardened container per job, as the
// sandbox rules ask, with the docker CLI.
