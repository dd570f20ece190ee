package store_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestHistoryQueriesUseIndexes fills the jobs table with a million rows
// (a big tenant with 40% of them, 99 others, sessions, idempotency keys,
// every status, a retention backlog) and checks the plan of every query
// the history API and the job lifecycle run: each is an index probe, never
// a scan of the table nor a sort of its rows. The statements are the
// store's own, recorded as it runs them.
func TestHistoryQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	start := time.Now()
	for _, q := range []string{
		`INSERT INTO tenants (id, name) SELECT 'ten_' || t, 'load-' || t FROM generate_series(0, 99) t`,
		`INSERT INTO jobs (id, tenant_id, status, language, session_id, session_seq, spec, metadata, created_at, started_at, finished_at,
			exit_code, duration_ms, stdout, idempotency_key, request_hash)
		SELECT 'job_' || lpad(i::text, 26, '0'),
			'ten_' || CASE WHEN i % 10 < 4 THEN 0 ELSE (i::bigint * 7919) % 100 END,
			CASE WHEN i > 999900 THEN (ARRAY['queued', 'running'])[1 + i % 2]
			     ELSE (ARRAY['succeeded','succeeded','succeeded','succeeded','succeeded','succeeded','failed','timed_out','cancelled','error'])[1 + (i * 31) % 10] END,
			(ARRAY['python', 'python', 'python', 'bash', 'node'])[1 + i % 5],
			CASE WHEN i % 20 = 0 THEN 'ses_' || lpad((i / 400)::text, 26, '0') END,
			CASE WHEN i % 20 = 0 THEN i END,
			'{"language":"python","code":"print(6*7)","timeout_ms":30000,"limits":{},"artifacts":["out/**"]}',
			CASE WHEN i % 50 = 0 THEN jsonb_build_object('run', (i / 5000)::text, 'agent', 'eval') ELSE '{}' END,
			now() - (1000000 - i) * interval '2 second',
			now() - (1000000 - i) * interval '2 second' + interval '50 ms',
			CASE WHEN i > 999900 THEN NULL ELSE now() - (1000000 - i) * interval '2 second' + interval '900 ms' END,
			0, 850, convert_to(repeat('output line ' || i || E'\n', 8), 'UTF8'),
			CASE WHEN i % 3 = 0 THEN 'key-' || i END, CASE WHEN i % 3 = 0 THEN '\x00'::bytea END
		FROM generate_series(1, 1000000) i`,
		`ANALYZE jobs`,
	} {
		if err := storetest.Exec(st, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("filled 1,000,000 jobs in %s", time.Since(start).Round(time.Millisecond))

	const big, small = "ten_0", "ten_5"
	id := func(i int) string { return "job_" + strings.Repeat("0", 26-len(strconv.Itoa(i))) + strconv.Itoa(i) }
	session := "ses_" + strings.Repeat("0", 26-len("1000")) + "1000"
	log := &storetest.QueryLog{}
	lctx := storetest.WithQueryLog(ctx, log)
	run := func(name string, f func() error) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, f := range []store.JobFilter{
		{Limit: 20},
		{Limit: 20, Before: id(500000)},
		{Limit: 20, Statuses: []jobs.Status{jobs.StatusError}},
		{Limit: 20, Statuses: []jobs.Status{jobs.StatusQueued}},
		{Limit: 20, SessionID: session},
		{Limit: 20, SessionID: session, Statuses: []jobs.Status{jobs.StatusSucceeded}},
		// History search.
		{Limit: 20, Statuses: []jobs.Status{jobs.StatusFailed, jobs.StatusError}},
		{Limit: 20, Languages: []string{"bash"}},
		{Limit: 20, Languages: []string{"bash", "node"}, Before: id(500000)},
		{Limit: 20, CreatedAfter: time.Now().Add(-time.Hour)},
		{Limit: 20, CreatedAfter: time.Now().Add(-3 * time.Hour), CreatedBefore: time.Now().Add(-2 * time.Hour)},
		{Limit: 20, Metadata: map[string]string{"run": "42"}},
		{Limit: 20, Metadata: map[string]string{"run": "42", "agent": "eval"}, Languages: []string{"python"}},
		{Limit: 20, Statuses: []jobs.Status{jobs.StatusFailed}, Languages: []string{"python"},
			CreatedAfter: time.Now().Add(-24 * time.Hour), Metadata: map[string]string{"agent": "eval"}},
	} {
		for _, tenant := range []string{big, small} {
			run("ListJobs", func() error { _, _, err := st.ListJobs(lctx, tenant, f); return err })
		}
	}
	run("GetJob", func() error { _, err := st.GetJob(lctx, big, id(400000)); return err })
	run("JobSpecs", func() error {
		_, err := st.JobSpecs(lctx, big, []string{id(400000), id(400010), id(400020)})
		return err
	})
	run("SealPlainEnv", func() error {
		_, err := st.SealPlainEnv(lctx, 200, func(string, string, *jobs.Spec) error { return nil })
		return err
	})
	run("CancelJob", func() error { _, err := st.CancelJob(lctx, big, id(400000), 30*time.Second); return err })
	run("JobTenant", func() error { _, err := st.JobTenant(lctx, id(400000)); return err })
	run("idempotent EnqueueJob", func() error {
		req := jobs.Request{Language: "python", Code: "print(1)", IdempotencyKey: "key-300"}
		spec, _ := jobs.DefaultPolicy().Normalize(req)
		_, _, err := st.EnqueueJob(lctx, store.NewJob{TenantID: "ten_0", Spec: spec, IdempotencyKey: "key-300", RequestHash: jobs.RequestHash(req)},
			func(context.Context, string) (uint64, error) { return 0, nil })
		if err == nil || strings.Contains(err.Error(), "different request") {
			return nil // the key's row was found; its request differs
		}
		return err
	})
	// A session of the big tenant with 20 finished jobs and a queued one.
	sess, err := st.CreateSession(ctx, big, jobs.SessionRequest{Language: "python"})
	if err != nil {
		t.Fatal(err)
	}
	if err := storetest.Exec(st, `UPDATE jobs SET session_id = $1 WHERE session_id = $2`, sess.ID, session); err != nil {
		t.Fatal(err)
	}
	if err := storetest.Exec(st, `UPDATE jobs SET status = 'queued', finished_at = NULL WHERE id = $1`, id(400020)); err != nil {
		t.Fatal(err)
	}
	run("StalledSessions", func() error { _, err := st.StalledSessions(lctx, 100); return err })
	run("AcquireSession", func() error { _, _, err := st.AcquireSession(lctx, sess.ID, "owner", time.Minute); return err })
	run("NextSessionJob", func() error { _, _, err := st.NextSessionJob(lctx, sess.ID, "owner", "runner", 3); return err })
	run("ReleaseSession", func() error { _, _, err := st.ReleaseSession(lctx, sess.ID, "owner", false); return err })
	run("CloseSession", func() error { _, err := st.CloseSession(lctx, big, sess.ID); return err })
	run("DeleteFinishedBefore", func() error {
		_, err := st.DeleteFinishedBefore(lctx, time.Now().Add(-10*24*time.Hour), 500,
			func(context.Context, []store.ExpiredJob) error { return errStop })
		if err == errStop {
			return nil // the batch was selected: roll back
		}
		return err
	})

	checked := 0
	for _, s := range log.Statements() {
		verb := strings.ToUpper(strings.Fields(strings.TrimSpace(s.SQL))[0])
		if verb != "SELECT" && verb != "UPDATE" && verb != "DELETE" && verb != "WITH" {
			continue
		}
		var raw []byte
		if err := storetest.QueryRow(st, "EXPLAIN (FORMAT JSON) "+s.SQL, s.Args...).Scan(&raw); err != nil {
			t.Fatalf("explain %s: %v", s.SQL, err)
		}
		var plans []struct{ Plan planNode }
		if err := json.Unmarshal(raw, &plans); err != nil {
			t.Fatal(err)
		}
		p := plans[0].Plan
		if bad := p.find(func(n planNode) bool {
			return n.NodeType == "Seq Scan" && n.Relation == "jobs" ||
				n.NodeType == "Sort" && n.PlanRows > 1000 ||
				n.NodeType == "Bitmap Heap Scan" && n.Relation == "jobs" && n.PlanRows > 10000
		}); bad != nil {
			t.Errorf("%s\n%v: %s on %s (%.0f rows)", oneLine(s.SQL), s.Args, bad.NodeType, bad.Relation, bad.PlanRows)
		}
		if p.TotalCost > 5000 {
			t.Errorf("%s\n%v: estimated cost %.0f: not an index probe", oneLine(s.SQL), s.Args, p.TotalCost)
		}
		checked++
	}
	if checked < 20 {
		t.Errorf("checked %d statements, want the 20 or more the calls run", checked)
	}
}

type stopErr struct{}

func (stopErr) Error() string { return "stop" }

var errStop error = stopErr{}

type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	PlanRows  float64    `json:"Plan Rows"`
	TotalCost float64    `json:"Total Cost"`
	Plans     []planNode `json:"Plans"`
}

func (n planNode) find(bad func(planNode) bool) *planNode {
	if bad(n) {
		return &n
	}
	for _, c := range n.Plans {
		if b := c.find(bad); b != nil {
			return b
		}
	}
	return nil
}

func oneLine(sql string) string { return strings.Join(strings.Fields(sql), " ") }
