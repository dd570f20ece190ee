package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

// liveAcrossRunners runs cells cells in each of n stateful sessions, each
// adding 1 to a counter, through both ingresses in turn while both runners
// take the sessions' messages, and fails for every cell that did not find
// the session's live state (its counter restarted).
func liveAcrossRunners(t *testing.T, cl *client, n, cells int) {
	t.Helper()
	ctx := context.Background()
	lost := 0
	for s := range n {
		status, b, err := cl.retry(ctx, s, time.Minute, "POST", "/v1/sessions", []byte(`{"language":"python","stateful":true}`))
		var sess jobs.Session
		if err != nil || status != 201 || json.Unmarshal(b, &sess) != nil {
			t.Fatalf("create a stateful session: %d %s %v", status, b, err)
		}
		for i := 1; i <= cells; i++ {
			body, _ := json.Marshal(map[string]any{"language": "python", "session_id": sess.ID,
				"code": "n = globals().get('n', 0) + 1\nprint(n)"})
			status, b, err := cl.retry(ctx, i, 2*time.Minute, "POST", "/v1/execute?wait=60s", body)
			var j jobs.Job
			if err != nil || status != 200 || json.Unmarshal(b, &j) != nil {
				t.Fatalf("session %s cell %d: %d %s %v", sess.ID, i, status, b, err)
			}
			if j.Stdout != fmt.Sprintf("%d\n", i) {
				lost++
				t.Errorf("session %s cell %d: %q, live %s (%s)", sess.ID, i, j.Stdout, j.LiveState, j.LiveStateReason)
			}
		}
		_, _, _ = cl.retry(ctx, 0, time.Minute, "DELETE", "/v1/sessions/"+sess.ID, nil)
	}
	t.Logf("stateful sessions on two runners: %d sessions × %d cells, %d lost", n, cells, lost)
}

// cell runs Python in a session through the cluster and waits for it.
func cell(ctx context.Context, cl *client, first int, sid, code string) (jobs.Job, error) {
	body, _ := json.Marshal(map[string]any{"language": "python", "session_id": sid, "code": code})
	status, b, err := cl.retry(ctx, first, 2*time.Minute, "POST", "/v1/execute?wait=60s", body)
	var j jobs.Job
	if err != nil || (status != 200 && status != 202) || json.Unmarshal(b, &j) != nil {
		return j, fmt.Errorf("execute in %s: %d %s %v", sid, status, b, err)
	}
	for deadline := time.Now().Add(3 * time.Minute); !j.Status.Terminal(); {
		if time.Now().After(deadline) {
			return j, fmt.Errorf("job %s still %s", j.ID, j.Status)
		}
		status, b, err = cl.retry(ctx, first, time.Minute, "GET", "/v1/jobs/"+j.ID+"?wait=30s", nil)
		if err != nil || status != 200 || json.Unmarshal(b, &j) != nil {
			return j, fmt.Errorf("job %s: %d %s %v", j.ID, status, b, err)
		}
	}
	return j, nil
}

// rollingRestart is a fault: n stateful sessions each hold a counter
// while every runner in turn is told to stop (SIGTERM), as a rolling
// deploy does, and started again; after each, every session's next cell
// adds 1 to its counter. A stopping runner pauses the live sessions it
// holds, and their next cells restore them on whichever runner takes them:
// no counter may restart. The detail says how many were lost.
func rollingRestart(t *testing.T, c *cluster, cl *client, n int) func(*fault) {
	return func(f *fault) {
		ctx := context.Background()
		ids := make([]string, n)
		lost, restored := 0, 0
		var mu sync.Mutex
		// each runs f(i) for every session, four at a time.
		each := func(f func(i int)) {
			var wg sync.WaitGroup
			sem := make(chan struct{}, 4)
			for i := range n {
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					f(i)
				})
			}
			wg.Wait()
		}
		each(func(i int) {
			status, b, err := cl.retry(ctx, i, time.Minute, "POST", "/v1/sessions", []byte(`{"language":"python","stateful":true,"ttl_seconds":900}`))
			var sess jobs.Session
			if err != nil || status != 201 || json.Unmarshal(b, &sess) != nil {
				t.Errorf("create a stateful session: %d %s %v", status, b, err)
				return
			}
			ids[i] = sess.ID
			if j, err := cell(ctx, cl, i, sess.ID, "counter = 1\nprint(counter)"); err != nil || j.Stdout != "1\n" {
				t.Errorf("session %s: the first cell: %q %v", sess.ID, j.Stdout, err)
			}
		})
		round := func(want int) {
			each(func(i int) {
				if ids[i] == "" {
					return
				}
				j, err := cell(ctx, cl, i, ids[i], "counter += 1\nprint(counter)")
				mu.Lock()
				defer mu.Unlock()
				if j.LiveState == jobs.LiveRestored {
					restored++
				}
				if err != nil || j.Stdout != fmt.Sprintf("%d\n", want) {
					lost++
					t.Errorf("session %s after a rolling restart: %q, live %s (%s) %v", ids[i], j.Stdout, j.LiveState, j.LiveStateReason, err)
				}
			})
		}
		f.at = time.Now()
		for i := range c.runners {
			c.runners[i].stop()
			c.runners[i].start(t)
			// As a rolling deploy waits for readiness before the next
			// runner, for a minute at most: on a loaded machine its
			// checks (its warm interpreter loading, 3 s each) can fail
			// for minutes, and the sessions' cells wait for a runner in
			// any case.
			if !eventually.Within(time.Minute, func() bool { return ready("http://" + c.health[i] + "/readyz") }) {
				t.Logf("runner %d did not answer ready within a minute of its restart; going on", i+1)
			}
			round(2 + i)
		}
		f.back = time.Now()
		f.detail = fmt.Sprintf("%d live sessions, %d cells restored, %d lost their variables", n, restored, lost)
		each(func(i int) {
			if ids[i] != "" {
				_, _, _ = cl.retry(ctx, i, time.Minute, "DELETE", "/v1/sessions/"+ids[i], nil)
			}
		})
	}
}

// ready reports whether url answers 200.
func ready(url string) bool {
	r, err := http.Get(url)
	if err != nil {
		return false
	}
	r.Body.Close()
	return r.StatusCode == http.StatusOK
}
