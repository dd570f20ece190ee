package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"
)

// The live state's rows (issue 34): a stateful session holding pandas and
// a 100 MB DataFrame paused and resumed, snapshotted, a session started
// from the snapshot (its live state restored in a fresh container), and
// forked into 1 and 4 sessions, each to the first answer of every new
// session. Only where the runner keeps live state under gVisor: otherwise
// pause answers 501 and there are no rows.

// liveFrame loads the session's state: 1.25 M rows × 10 float64 columns.
const liveFrame = "import numpy as np, pandas as pd\nframe = pd.DataFrame(np.random.rand(1_250_000, 10))\nprint(frame.memory_usage().sum() >> 20)"

// liveProbe is each session's first answer after an operation.
const liveProbe = "print(len(frame))"

func liveStateRows(c *client, n int) ([]row, error) {
	fmt.Fprintln(os.Stderr, "bench: live state (pause, resume, snapshot, fork) of a session holding a 100 MB DataFrame")
	var cleanup []string
	defer func() {
		for _, path := range cleanup {
			_, _, _ = c.do("DELETE", path, "")
		}
	}()
	newSession := func(body string) (string, error) {
		b, status, err := c.do("POST", "/v1/sessions", body)
		var s struct{ ID string }
		if err != nil || status != 201 || json.Unmarshal(b, &s) != nil {
			return "", fmt.Errorf("create a session: %d %s %v", status, b, err)
		}
		cleanup = append(cleanup, "/v1/sessions/"+s.ID)
		return s.ID, nil
	}
	timed := func(method, path, body string, want int) (time.Duration, []byte, error) {
		start := time.Now()
		b, status, err := c.do(method, path, body)
		if err == nil && status != want {
			err = fmt.Errorf("%s %s answered %d: %s", method, path, status, b)
		}
		return time.Since(start), b, err
	}
	sid, err := newSession(`{"language": "python", "stateful": true}`)
	if err != nil {
		return nil, err
	}
	if _, err := c.executeIn(sid, liveFrame); err != nil {
		return nil, err
	}
	if _, status, _ := c.do("POST", "/v1/sessions/"+sid+"/pause", ""); status == http.StatusNotImplemented {
		fmt.Fprintln(os.Stderr, "bench: the runner keeps live state in memory only (no runsc 2024-07, or not root): no live state rows")
		return nil, nil
	}
	if _, err := c.executeIn(sid, liveProbe); err != nil {
		return nil, err
	}

	var pause, resume, snapshot, restore []time.Duration
	for range n {
		d, _, err := timed("POST", "/v1/sessions/"+sid+"/pause", "", http.StatusOK)
		if err != nil {
			return nil, err
		}
		pause = append(pause, d)
		j, err := c.executeIn(sid, liveProbe)
		if err != nil {
			return nil, err
		}
		resume = append(resume, j.wall)

		d, b, err := timed("POST", "/v1/sessions/"+sid+"/snapshots", "", http.StatusCreated)
		if err != nil {
			return nil, err
		}
		snapshot = append(snapshot, d)
		var snap struct{ ID string }
		_ = json.Unmarshal(b, &snap)
		cleanup = append(cleanup, "/v1/snapshots/"+snap.ID)
		from, err := newSession(`{"snapshot": "` + snap.ID + `"}`)
		if err != nil {
			return nil, err
		}
		if j, err = c.executeIn(from, liveProbe); err != nil {
			return nil, err
		}
		restore = append(restore, j.wall)
		_, _, _ = c.do("DELETE", "/v1/sessions/"+from, "")
	}

	// forkAll forks the session into k and has each answer once: how long
	// until the fork answered, and until every new session had.
	forkAll := func(k int) (time.Duration, time.Duration, error) {
		start := time.Now()
		d, b, err := timed("POST", "/v1/sessions/"+sid+"/fork", fmt.Sprintf(`{"count": %d, "ttl_seconds": 120}`, k), http.StatusCreated)
		if err != nil {
			return 0, 0, err
		}
		var fork struct{ Sessions []struct{ ID string } }
		_ = json.Unmarshal(b, &fork)
		var wg sync.WaitGroup
		errs := make([]error, len(fork.Sessions))
		for i, s := range fork.Sessions {
			cleanup = append(cleanup, "/v1/sessions/"+s.ID)
			wg.Go(func() { _, errs[i] = c.executeIn(s.ID, liveProbe) })
		}
		wg.Wait()
		all := time.Since(start)
		for _, s := range fork.Sessions {
			_, _, _ = c.do("DELETE", "/v1/sessions/"+s.ID, "")
		}
		for _, err := range errs {
			if err != nil {
				return 0, 0, err
			}
		}
		return d, all, nil
	}
	var fork1, fork1All, fork4, fork4All []time.Duration
	for range n {
		d, all, err := forkAll(1)
		if err != nil {
			return nil, err
		}
		fork1, fork1All = append(fork1, d), append(fork1All, all)
		if d, all, err = forkAll(4); err != nil {
			return nil, err
		}
		fork4, fork4All = append(fork4, d), append(fork4All, all)
	}
	p50 := func(name string, ds []time.Duration, target time.Duration) row {
		r := row{Name: fmt.Sprintf("%s, p50 of %d (100 MB DataFrame)", name, len(ds)), Gantry: ms(pct(ds, 50)), Value: msf(pct(ds, 50))}
		if target > 0 {
			r.Target, r.Met = "≤ "+target.String(), met(pct(ds, 50) <= target)
		}
		return r
	}
	return []row{
		p50("live state: pause (checkpoint to S3, container freed)", pause, time.Second),
		p50("live state: resume, to the next cell's answer", resume, time.Second),
		p50("live state: snapshot (the session goes on)", snapshot, 0),
		p50("live state: a session from the snapshot, to its first answer", restore, 0),
		p50("live state: fork N=1", fork1, 0),
		p50("live state: fork N=1, to the new session's first answer", fork1All, 0),
		p50("live state: fork N=4", fork4, 0),
		p50("live state: fork N=4, to all four first answers", fork4All, time.Second),
	}, nil
}
