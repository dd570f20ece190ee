package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/codemode/codemodetest"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

// fault is one injected fault and the tally of the jobs submitted while it
// played out.
type fault struct {
	name, detail string
	inject       func(*fault)
	after        time.Duration // load after the fault was undone

	start, at, back time.Time

	submitted, accepted, succeeded, failed, lost int
	dupRows, dupExec, stuck, refused, reruns     int
	recovery                                     time.Duration
	examples                                     []string
}

func (f *fault) example(format string, args ...any) {
	if len(f.examples) < 8 {
		f.examples = append(f.examples, fmt.Sprintf(format, args...))
	}
}

// tally counts the jobs submitted in phase, and measures the recovery:
// from the fault until every job accepted before it had ended and a job
// submitted after it had succeeded.
//
// A job's program may run once; a job that was running on a runner killed
// under it (orphans) as often as gantry started it: it is run again by
// design, and its first run may have made its side effect already.
func (f *fault) tally(recs []*record, phase int, marks *codemodetest.Marks, dupRows map[string]int, orphans map[string]bool) {
	for _, r := range recs {
		if r.phase != phase {
			continue
		}
		f.submitted++
		if r.refused != "" {
			f.refused++
			f.example("%s refused: %s", r.key, r.refused)
			continue
		}
		if r.id == "" {
			f.example("%s never accepted (2 minutes of retries)", r.key)
			continue
		}
		f.accepted++
		f.dupRows += dupRows[r.key]
		if dupRows[r.key] > 0 {
			f.example("%s has %d rows", r.key, dupRows[r.key]+1)
		}
		switch {
		case !r.found:
			f.lost++
			f.example("%s (%s) accepted, then not found", r.key, r.id)
			continue
		case !r.terminal:
			f.stuck++
			f.example("%s (%s) still %s after recovery", r.key, r.id, r.final.Status)
			continue
		}
		j := r.final
		n := marks.Count(r.key)
		allowed := 1
		if orphans[r.id] {
			allowed = max(j.Attempt, 1)
		}
		if n > allowed {
			f.dupExec++
			f.example("%s (%s) ran %d times (%d attempts; its runner was killed under it: %v)", r.key, r.id, n, j.Attempt, orphans[r.id])
		}
		if j.Attempt > 1 {
			f.reruns++
		}
		switch {
		case j.Status == jobs.StatusSucceeded && j.Stdout == "done "+r.key+"\n" && n >= 1:
			f.succeeded++
		case j.Status == jobs.StatusError:
			// gantry gave up on it: the job was accepted and never ran to
			// a result of its own.
			f.lost++
			f.example("%s (%s) ended as error after %d attempts: %s", r.key, r.id, j.Attempt, errText(j))
		default:
			f.failed++
			f.example("%s (%s) %s, %d marks, stdout %q: %s", r.key, r.id, j.Status, n, j.Stdout, errText(j))
		}
	}
	var inflightDone, firstOK time.Time
	for _, r := range recs {
		if r.id == "" || !r.terminal || r.final.FinishedAt == nil {
			continue
		}
		done := *r.final.FinishedAt
		if r.accepted.Before(f.at) && done.After(f.at) && done.After(inflightDone) {
			inflightDone = done
		}
		if r.submitted.After(f.at) && r.final.Status == jobs.StatusSucceeded && (firstOK.IsZero() || done.Before(firstOK)) {
			firstOK = done
		}
	}
	end := inflightDone
	if firstOK.After(end) {
		end = firstOK
	}
	if end.After(f.at) {
		f.recovery = end.Sub(f.at)
	}
}

func errText(j jobs.Job) string {
	if j.Error == nil {
		return ""
	}
	return string(j.Error.Code) + ": " + j.Error.Message
}

// report prints the per-job costs and a row per fault.
func report(t *testing.T, costs []costRow, faults []fault, recs []*record) {
	var b strings.Builder
	b.WriteString("\nper-job costs, measured on this cluster (3 NATS nodes, R3 stream; background activity subtracted):\n")
	fmt.Fprintf(&b, "%-32s %5s %8s %8s %10s %9s %9s %9s %7s\n", "job", "jobs", "row B", "WAL B", "SQL stmts", "of which", "rows", "NATS msgs", "S3 objs")
	fmt.Fprintf(&b, "%-32s %5s %8s %8s %10s %9s %9s %9s %7s\n", "", "", "", "", "", "writes", "written", "", "")
	for _, c := range costs {
		fmt.Fprintf(&b, "%-32s %5d %8.0f %8.0f %10.1f %9.1f %9.1f %9.1f %7.2f\n", c.kind, c.jobs, c.rowBytes, c.walBytes,
			c.stmts, c.writes, c.rows, c.natsMsgs, c.s3Objects)
	}
	b.WriteString("\nfaults (each job counted once: for the first fault that hit it between its submission and its end, else the last before it; sessions included):\n")
	fmt.Fprintf(&b, "%-38s %9s %8s %9s %6s %4s %8s %8s %5s %6s %10s\n", "fault", "submitted", "accepted", "succeeded", "failed", "lost",
		"dup rows", "dup exec", "stuck", "reruns", "recovery s")
	for _, f := range faults {
		fmt.Fprintf(&b, "%-38s %9d %8d %9d %6d %4d %8d %8d %5d %6d %10.1f\n", f.name, f.submitted, f.accepted, f.succeeded, f.failed, f.lost,
			f.dupRows, f.dupExec, f.stuck, f.reruns, f.recovery.Seconds())
	}
	b.WriteString("(dup exec: a job whose program ran more than once, but for the rerun gantry owes a job whose runner was killed under it;\n" +
		" reruns: jobs with more than one attempt)\n")
	t.Log(b.String())
	fmt.Println(b.String())
}

// costRow is what one kind of job costs, per job.
type costRow struct {
	kind                string
	jobs                int
	rowBytes, walBytes  float64
	stmts, writes, rows float64
	natsMsgs, s3Objects float64
}

type snapshot struct {
	at                       time.Time
	wal, stmts, writes, rows float64
	nats                     float64
	s3                       float64
}

// measureCosts runs batches of jobs of a few kinds, one batch at a time
// on the otherwise idle cluster, and divides what each batch added to
// Postgres, NATS and S3 by its jobs, less what the idle cluster adds in
// the same time (heartbeats, sweeps).
func measureCosts(t *testing.T, c *cluster, cl *client) []costRow {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.pg.superURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	snap := func() snapshot {
		s := snapshot{at: time.Now()}
		// pg_stat_statements counts as each statement ends (the
		// pg_stat_* views lag by up to seconds).
		if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8,
			(SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s WHERE s.dbid = d.oid)::float8,
			(SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s WHERE s.dbid = d.oid AND s.query ~* '^\s*(insert|update|delete)')::float8,
			(SELECT coalesce(sum(rows), 0) FROM pg_stat_statements s WHERE s.dbid = d.oid AND s.query ~* '^\s*(insert|update|delete)')::float8
			FROM pg_database d WHERE d.datname = current_database()`).Scan(&s.wal, &s.stmts, &s.writes, &s.rows); err != nil {
			t.Fatal(err)
		}
		s.nats = float64(c.nats.varz("in_msgs"))
		s.s3 = float64(c.s3Objects(t))
		return s
	}
	// Statistics reach pg_stat_* within a second of a transaction.
	settle := func() { eventually.Pause(t.Context(), 1500*time.Millisecond) }
	settle()
	idle0 := snap()
	eventually.Pause(t.Context(), 6*time.Second) // six seconds of idling, measured
	settle()
	idle1 := snap()
	idleSecs := idle1.at.Sub(idle0.at).Seconds()

	const n = 20
	kinds := []struct{ kind, code string }{
		{"python print(6*7)", "print(6*7)"},
		{"code mode call + 1 artifact", `import os
from servers.marker import mark
os.makedirs("out", exist_ok=True)
open("out/r.txt", "w").write("r")
mark(key="cost")
print("done")`},
		{"100 KB of stdout (moved to S3)", `print("x" * 100000)`},
	}
	var out []costRow
	for ki, k := range kinds {
		s0 := snap()
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("cost-%d-%d", ki, i)
				body, _ := json.Marshal(map[string]any{"language": "python", "code": k.code, "idempotency_key": key,
					"metadata": map[string]string{"cost": k.kind}})
				status, b, err := cl.retry(ctx, i%2, time.Minute, "POST", "/v1/jobs", body)
				var j jobs.Job
				if err != nil || status != 202 || json.Unmarshal(b, &j) != nil {
					t.Errorf("cost job: %d %s %v", status, b, err)
					return
				}
				for time.Now().Before(s0.at.Add(2 * time.Minute)) {
					status, b, err := cl.retry(ctx, i%2, time.Minute, "GET", "/v1/jobs/"+j.ID+"?wait=30s", nil)
					if err == nil && status == 200 && json.Unmarshal(b, &j) == nil && j.Status.Terminal() {
						break
					}
				}
				if j.Status == jobs.StatusSucceeded {
					mu.Lock()
					ok++
					mu.Unlock()
				} else {
					t.Errorf("cost job %s: %s %s", j.ID, j.Status, errText(j))
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		settle()
		s1 := snap()
		secs := s1.at.Sub(s0.at).Seconds()
		per := func(a, b, i0, i1 float64) float64 {
			return ((b - a) - (i1-i0)/idleSecs*secs) / n
		}
		row := costRow{kind: k.kind, jobs: ok,
			walBytes:  per(s0.wal, s1.wal, idle0.wal, idle1.wal),
			stmts:     per(s0.stmts, s1.stmts, idle0.stmts, idle1.stmts),
			writes:    per(s0.writes, s1.writes, idle0.writes, idle1.writes),
			rows:      per(s0.rows, s1.rows, idle0.rows, idle1.rows),
			natsMsgs:  per(s0.nats, s1.nats, idle0.nats, idle1.nats),
			s3Objects: (s1.s3 - s0.s3) / n,
		}
		if err := conn.QueryRow(ctx, `SELECT avg(pg_column_size(j.*))::float8 FROM jobs j WHERE metadata->>'cost' = $1`, k.kind).Scan(&row.rowBytes); err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
	return out
}
