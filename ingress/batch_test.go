package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
)

type batchResponse struct {
	BatchID string `json:"batch_id"`
	Jobs    []struct {
		Status int
		Job    *jobs.Job
		Error  *service.Error
	}
}

// TestBatch: each job of a batch is validated and queued on its own, with
// its own result; the batch's jobs are listed by its id.
func TestBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.BatchMax = 5 })
	body := `{"jobs": [
		{"language":"python","code":"print(1)","idempotency_key":"b-1"},
		{"language":"cobol","code":"x"},
		{"language":"bash","code":"echo 2","nope":true},
		{"language":"python","code":"print(3)","session_id":"ses_nothere"},
		{"language":"bash","code":"echo 4","metadata":{"n":"4"}}
	]}`
	r := h.do(t, h.keyA, "POST", "/v1/jobs/batch", body)
	var b batchResponse
	r.json(t, &b)
	if r.status != 200 || !jobs.ValidID("bat", b.BatchID) || len(b.Jobs) != 5 {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	want := []struct {
		status      int
		code, field string
	}{{202, "", ""}, {400, "invalid_argument", "language"}, {400, "invalid_argument", "nope"}, {404, "not_found", "session_id"}, {202, "", ""}}
	var queued []string
	for i, w := range want {
		it := b.Jobs[i]
		if it.Status != w.status {
			t.Errorf("item %d: status %d, want %d", i, it.Status, w.status)
			continue
		}
		if w.status == 202 {
			if it.Job == nil || it.Job.Status != jobs.StatusQueued || it.Job.BatchID == nil || *it.Job.BatchID != b.BatchID || it.Error != nil {
				t.Errorf("item %d: %+v", i, it)
				continue
			}
			queued = append(queued, it.Job.ID)
		} else if it.Error == nil || string(it.Error.Code) != w.code || it.Error.Field != w.field || it.Job != nil {
			t.Errorf("item %d: %+v, want %s on %s", i, it.Error, w.code, w.field)
		}
	}

	// Each accepted job is on the queue, once.
	stream, err := h.js.Stream(context.Background(), queue.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := stream.Info(context.Background())
	if info.State.Msgs != uint64(len(queued)) {
		t.Errorf("%d messages on the queue, want %d", info.State.Msgs, len(queued))
	}

	// Listing by batch: the accepted jobs, newest first; another tenant
	// sees none of them.
	var list struct{ Jobs []jobs.Job }
	h.do(t, h.keyA, "GET", "/v1/jobs?batch_id="+b.BatchID, "").json(t, &list)
	if len(list.Jobs) != 2 || list.Jobs[0].ID != queued[1] || list.Jobs[1].ID != queued[0] {
		t.Errorf("jobs of the batch = %+v, want %v", list.Jobs, queued)
	}
	h.do(t, h.keyB, "GET", "/v1/jobs?batch_id="+b.BatchID, "").json(t, &list)
	if len(list.Jobs) != 0 {
		t.Errorf("tenant B sees %d jobs of A's batch", len(list.Jobs))
	}

	// Retrying the batch: the item with an idempotency key is the same job.
	var again batchResponse
	h.do(t, h.keyA, "POST", "/v1/jobs/batch", body).json(t, &again)
	if again.Jobs[0].Job == nil || again.Jobs[0].Job.ID != queued[0] || again.Jobs[4].Job.ID == queued[1] {
		t.Errorf("retried batch: %+v", again.Jobs)
	}

	for name, c := range map[string]struct {
		body, field string
		hdr         []string
	}{
		"empty":           {`{"jobs": []}`, "jobs", nil},
		"missing":         {`{}`, "jobs", nil},
		"too many":        {`{"jobs": [` + strings.TrimSuffix(strings.Repeat(pyJob+",", 6), ",") + `]}`, "jobs", nil},
		"not a list":      {`{"jobs": {}}`, "jobs", nil},
		"unknown field":   {`{"jobs": [` + pyJob + `], "x": 1}`, "x", nil},
		"idempotency key": {`{"jobs": [` + pyJob + `]}`, "Idempotency-Key", []string{"Idempotency-Key", "k"}},
	} {
		r := h.do(t, h.keyA, "POST", "/v1/jobs/batch", c.body, c.hdr...)
		var e struct{ Error service.Error }
		_ = json.Unmarshal(r.body, &e)
		if r.status != 400 || e.Error.Field != c.field {
			t.Errorf("%s: %d %s, want 400 naming %s", name, r.status, r.body, c.field)
		}
	}
	info, _ = stream.Info(context.Background())
	if info.State.Msgs != uint64(len(queued)+1) {
		t.Errorf("%d messages on the queue after the refused batches, want %d", info.State.Msgs, len(queued)+1)
	}
}

// TestBatchQueueDown: items that cannot be queued answer 503 each, and
// leave no job behind.
func TestBatchQueueDown(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if err := h.js.DeleteStream(context.Background(), queue.StreamName); err != nil {
		t.Fatal(err)
	}
	var b batchResponse
	r := h.do(t, h.keyA, "POST", "/v1/jobs/batch", fmt.Sprintf(`{"jobs": [%s, %s]}`, pyJob, pyJob))
	r.json(t, &b)
	for i, it := range b.Jobs {
		if it.Status != 503 || it.Error == nil || it.Error.Code != "unavailable" {
			t.Errorf("item %d with the queue gone: %+v", i, it)
		}
	}
	var list struct{ Jobs []jobs.Job }
	h.do(t, h.keyA, "GET", "/v1/jobs", "").json(t, &list)
	if len(list.Jobs) != 0 {
		t.Errorf("%d jobs left behind", len(list.Jobs))
	}
}
