package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The before-and-after rows: the job and session rows of this gantry and
// of an older one (-before, with the sandbox image built from its own
// tree, -before-image), both started at once and sampled in turn, so that
// a shared machine's load falls on both alike. A change to how a job or a
// session's cell runs is judged by these rows of one run, not by figures
// of two runs on a machine whose speed differs by 2× from hour to hour.

var (
	beforeBin   = flag.String("before", "", "an older gantry binary to compare the job and session rows (and, with -tti-n, ComputeSDK's) with, in the same run (its sandbox image: -before-image)")
	beforeImage = flag.String("before-image", "", "the sandbox image of the -before binary, built from its own tree (default: -image)")
	compareN    = flag.Int("compare-n", 200, "samples per row and binary of the before-and-after rows")
)

// compareRows measures `print(6*7)` as a plain job and as a stateful
// session's cell, back to back, on the -before gantry and on this one, in
// turn (which goes first alternates).
func compareRows() ([]row, error) {
	img := *beforeImage
	if img == "" {
		img = *image
	}
	fmt.Fprintf(os.Stderr, "bench: before and after: %s (%s) against %s (%s), %d samples each, in turn\n", *beforeBin, img, *bin, *image, *compareN)
	env := func(image string) map[string]string {
		e := map[string]string{"GANTRY_IMAGE": image}
		// An older binary may not find the S3 server beside itself.
		if gw, err := filepath.Abs(filepath.Join(filepath.Dir(*bin), "versitygw")); err == nil && os.Getenv("GANTRY_VERSITYGW_BIN") == "" {
			if _, err := os.Stat(gw); err == nil {
				e["GANTRY_VERSITYGW_BIN"] = gw
			}
		}
		return e
	}
	type side struct {
		name    string
		c       *client
		session string
		job     []time.Duration
		cell    []time.Duration
	}
	var sides []*side
	for _, s := range []struct{ name, bin, image string }{{"before", *beforeBin, img}, {"after", *bin, *image}} {
		url, key, _, stop, err := startDevOf(s.bin, env(s.image))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		defer stop()
		c := newClient(url, key)
		sid, err := c.session(true)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		sides = append(sides, &side{name: s.name, c: c, session: sid})
	}
	sample := func(s *side, record bool) error {
		j, err := s.c.execute(code)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		cell, err := s.c.executeIn(s.session, code)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if record {
			s.job, s.cell = append(s.job, j.wall), append(s.cell, cell.wall)
		}
		return nil
	}
	for i := range 10 + *compareN {
		order := []*side{sides[0], sides[1]}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, s := range order {
			if err := sample(s, i >= 10); err != nil { // the first 10 warm both up
				return nil, err
			}
		}
	}
	before, after := sides[0], sides[1]
	mk := func(name string, a, b []time.Duration, p float64) row {
		return row{Name: fmt.Sprintf("%s, back to back, p%.0f: this gantry vs -before %s (the baseline column)", name, p, filepath.Base(*beforeBin)),
			Gantry: ms(pct(a, p)), Baseline: ms(pct(b, p)), Ratio: ratio(pct(a, p), pct(b, p)), Value: msf(pct(a, p))}
	}
	rows := []row{
		mk("`print(6*7)` as a plain job", after.job, before.job, 50),
		mk("`print(6*7)` as a plain job", after.job, before.job, 90),
		mk("`print(6*7)` as a stateful session's cell", after.cell, before.cell, 50),
		mk("`print(6*7)` as a stateful session's cell", after.cell, before.cell, 90),
	}
	if *ttiN == 0 {
		return rows, nil
	}
	// ComputeSDK's iteration, in rounds taken in turn, then its burst on
	// each in turn: a sandbox's time to interactive and a burst's wall,
	// before and after, under the same load.
	fmt.Fprintf(os.Stderr, "bench: before and after: ComputeSDK's iteration, 3 rounds of %d each in turn, then %d at once each\n", *ttiN, *ttiBurst)
	tti := map[string][]time.Duration{}
	walls := map[string]time.Duration{}
	lasts := map[string]string{}
	for round := range 4 {
		order := []*side{before, after}
		if round%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, s := range order {
			seq, burst := *ttiN, 0
			if round == 3 {
				seq, burst = 0, *ttiBurst
			}
			res, err := computeSDK(s.c.url, s.c.key, seq, burst)
			if res == nil || err != nil {
				return rows, err
			}
			tti[s.name] = append(tti[s.name], durations(res.Sequential)...)
			if burst > 0 {
				b := durations(res.Burst)
				walls[s.name] = time.Duration(res.BurstWallMS * float64(time.Millisecond))
				lasts[s.name] = fmt.Sprintf("%d/%d, last %s", len(b), burst, ms(pct(b, 100)))
			}
		}
	}
	name := filepath.Base(*beforeBin)
	return append(rows,
		row{Name: fmt.Sprintf("ComputeSDK's iteration, median time to interactive of %d: this gantry vs -before %s", len(tti["after"]), name),
			Gantry: ms(pct(tti["after"], 50)), Baseline: ms(pct(tti["before"], 50)), Ratio: ratio(pct(tti["after"], 50), pct(tti["before"], 50)),
			Value: msf(pct(tti["after"], 50))},
		row{Name: fmt.Sprintf("ComputeSDK's burst of %d: interactive, the last; wall: this gantry vs -before %s", *ttiBurst, name),
			Gantry: lasts["after"] + "; " + ms(walls["after"]), Baseline: lasts["before"] + "; " + ms(walls["before"]),
			Ratio: ratio(walls["after"], walls["before"]), Value: msf(walls["after"])},
	), nil
}
