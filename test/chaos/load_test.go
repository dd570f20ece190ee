package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

// client talks to the two ingresses as a careful client does: every
// submission carries an idempotency key and is retried, on the other
// ingress, until one accepts it.
type client struct {
	urls     [2]string
	key      string
	http     *http.Client
	inflight [2]atomic.Int64
	errors   atomic.Int64 // requests that failed (connection, 5xx)
}

func newClient(urls [2]string, key string) *client {
	return &client{urls: urls, key: key, http: &http.Client{Timeout: 45 * time.Second}}
}

// do sends one request to ingress i.
func (c *client) do(ctx context.Context, i int, method, path string, body []byte) (int, []byte, error) {
	c.inflight[i].Add(1)
	defer c.inflight[i].Add(-1)
	req, err := http.NewRequestWithContext(ctx, method, c.urls[i]+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	r, err := c.http.Do(req)
	if err != nil {
		c.errors.Add(1)
		return 0, nil, err
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		c.errors.Add(1)
		return 0, nil, err
	}
	if r.StatusCode >= 500 {
		c.errors.Add(1)
	}
	return r.StatusCode, b, nil
}

// retry sends a request until an ingress answers it with a status other
// than 5xx, alternating ingresses, for up to within. It returns the last
// answer.
func (c *client) retry(ctx context.Context, first int, within time.Duration, method, path string, body []byte) (int, []byte, error) {
	deadline := time.Now().Add(within)
	wait := 100 * time.Millisecond
	for try := 0; ; try++ {
		status, b, err := c.do(ctx, (first+try)%2, method, path, body)
		// 429 (the tenant's request rate, which the final polls of every
		// job can pass) is retried, as a client does.
		if err == nil && status < 500 && status != http.StatusTooManyRequests {
			return status, b, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err == nil {
				err = fmt.Errorf("%s %s: %d %s", method, path, status, b)
			}
			return status, b, err
		}
		eventually.Pause(ctx, wait)
		wait = min(wait*2, time.Second)
	}
}

// record is one logical job of the load: a key, and what became of it.
type record struct {
	key       string
	phase     int    // set at the end (phaseOf)
	session   string // "" for a plain job
	submitted time.Time
	accepted  time.Time // zero: never accepted
	id        string
	refused   string // a 4xx answer: a bug in the test or in gantry
	final     jobs.Job
	found     bool
	terminal  bool
}

// load drives jobs and sessions through a client and keeps a record of
// each.
type load struct {
	c    *client
	stop chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex
	recs []*record
	n    int
}

func newLoad(c *client) *load { return &load{c: c, stop: make(chan struct{})} }

func (l *load) add(r *record) {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
}

func (l *load) records() []*record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*record(nil), l.recs...)
}

// jobCode is a chaos job: it waits (so that faults hit it mid-run), writes
// an artifact, makes its side effect outside the sandbox (one call of the
// marker's tool, counted per key) and prints its key.
func jobCode(key string) string {
	return fmt.Sprintf(`import os, time
from servers.marker import mark
time.sleep(1)
os.makedirs("out", exist_ok=True)
open("out/r.txt", "w").write(%[1]q)
mark(key=%[1]q)
print("done", %[1]q)
`, key)
}

// sessionCode appends the job's number to the session's log file and
// marks it.
func sessionCode(key string, n int) string {
	return fmt.Sprintf(`from servers.marker import mark
with open("log.txt", "a") as f:
    f.write("%d\n")
mark(key=%q)
print("done", %q)
`, n, key, key)
}

// run submits rate jobs a second until stopped, half of them with
// POST /v1/execute (long requests, so that some are always in flight).
func (l *load) run(rate float64) {
	l.wg.Add(1)
	defer l.wg.Done()
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		l.mu.Lock()
		l.n++
		n := l.n
		l.mu.Unlock()
		r := &record{key: fmt.Sprintf("chaos-%05d", n), submitted: time.Now()}
		l.add(r)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			path := "/v1/jobs"
			if n%2 == 0 {
				path = "/v1/execute?wait=20s"
			}
			body, _ := json.Marshal(map[string]any{"language": "python", "code": jobCode(r.key),
				"idempotency_key": r.key, "metadata": map[string]string{"chaos": r.key}})
			l.accept(r, n%2, path, body)
		}()
	}
}

// accept submits until accepted (for up to two minutes) and fills in r.
func (l *load) accept(r *record, first int, path string, body []byte) {
	status, b, err := l.c.retry(context.Background(), first, 2*time.Minute, "POST", path, body)
	if err != nil {
		return // never accepted: counted as such
	}
	var j jobs.Job
	if (status != 200 && status != 202) || json.Unmarshal(b, &j) != nil || j.ID == "" {
		r.refused = fmt.Sprintf("%d %s", status, strings.TrimSpace(string(b)))
		return
	}
	l.mu.Lock()
	r.accepted, r.id = time.Now(), j.ID
	l.mu.Unlock()
}

// session runs one session's jobs one after another until stopped.
func (l *load) session(name string) {
	l.wg.Add(1)
	defer l.wg.Done()
	ctx := context.Background()
	status, b, err := l.c.retry(ctx, 0, 2*time.Minute, "POST", "/v1/sessions", []byte(`{"language":"python","ttl_seconds":3600}`))
	var s jobs.Session
	if err != nil || status != 201 || json.Unmarshal(b, &s) != nil {
		return
	}
	for n := 1; ; n++ {
		select {
		case <-l.stop:
			return
		default:
		}
		key := fmt.Sprintf("%s-%04d", name, n)
		r := &record{key: key, session: s.ID, submitted: time.Now()}
		l.add(r)
		body, _ := json.Marshal(map[string]any{"language": "python", "code": sessionCode(key, n), "session_id": s.ID,
			"idempotency_key": key, "metadata": map[string]string{"chaos": key}})
		l.accept(r, n%2, "/v1/jobs", body)
		if r.id == "" {
			return
		}
		// The next job once this one ended (or a while passed), and a
		// moment more: a session is a person's or agent's steps.
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			status, b, err := l.c.retry(ctx, n%2, 30*time.Second, "GET", "/v1/jobs/"+r.id+"?wait=10s", nil)
			var j jobs.Job
			if err == nil && status == 200 && json.Unmarshal(b, &j) == nil && j.Status.Terminal() {
				eventually.Pause(ctx, 500*time.Millisecond)
				break
			}
			select {
			case <-l.stop:
				return
			default:
			}
		}
	}
}

// sessionIDs are the sessions the load ran.
func (l *load) sessionIDs() map[string][]*record {
	out := map[string][]*record{}
	for _, r := range l.records() {
		if r.session != "" {
			out[r.session] = append(out[r.session], r)
		}
	}
	return out
}

// settle waits until every accepted job has ended (or the deadline) and
// records each job's final state.
func (l *load) settle(within time.Duration) {
	deadline := time.Now().Add(within)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	work := make(chan *record)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := range work {
				for try := 0; ; try++ {
					status, b, err := l.c.do(ctx, (w+try)%2, "GET", "/v1/jobs/"+r.id+"?wait=5s", nil)
					if err == nil && status == 404 {
						r.found = false
						break
					}
					var j jobs.Job
					if err == nil && status == 200 && json.Unmarshal(b, &j) == nil {
						r.found, r.final = true, j
						if j.Status.Terminal() {
							r.terminal = true
							break
						}
					}
					if time.Now().After(deadline) {
						break
					}
					if err != nil || status != 200 {
						eventually.Pause(ctx, 200*time.Millisecond)
					}
				}
			}
		}(w)
	}
	for _, r := range l.records() {
		if r.id != "" {
			work <- r
		}
	}
	close(work)
	wg.Wait()
}
