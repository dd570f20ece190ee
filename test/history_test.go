package test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestHistoryAtScale: a job's long output is kept in S3 and the API still
// answers it whole; finished jobs older than GANTRY_HISTORY_TTL disappear,
// with their artifacts and output, while younger ones stay.
func TestHistoryAtScale(t *testing.T) {
	d := startDev(t, "GANTRY_OUTPUT_INLINE_BYTES=1024", "GANTRY_HISTORY_TTL=1h", "GANTRY_SWEEP_INTERVAL=200ms")
	conn, err := pgx.Connect(context.Background(), dbURLOf(t, d))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	j := d.job(t, "POST", "/v1/execute", `{"language":"python","code":"open('out/a.txt','w').write('a')\nprint('x' * 99 + '\\n', end='' ) \nfor i in range(2000): print('line %05d' % i)"}`)
	if j.Status != jobs.StatusSucceeded || len(j.Stdout) != 100+2000*11 || !strings.HasSuffix(j.Stdout, "line 01999\n") || len(j.Artifacts) != 1 {
		t.Fatalf("job with long output: %s, %d bytes of stdout", j.Status, len(j.Stdout))
	}
	var rowBytes int
	var key *string
	if err := conn.QueryRow(context.Background(), `SELECT octet_length(stdout), stdout_key FROM jobs WHERE id = $1`, j.ID).Scan(&rowBytes, &key); err != nil {
		t.Fatal(err)
	}
	if rowBytes != 0 || key == nil || !strings.HasSuffix(*key, "/output/1/stdout") {
		t.Fatalf("the row holds %d bytes of stdout and key %v", rowBytes, key)
	}
	// The job is an hour old but for a minute: no ingress caches it now.
	if _, err := conn.Exec(context.Background(), `UPDATE jobs SET finished_at = now() - interval '59 minutes' WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/jobs/" + j.ID, "/v1/jobs?limit=5"} {
		if body := string(d.call(t, "GET", path, "").body); !strings.Contains(body, "line 01999") {
			t.Errorf("GET %s does not carry the whole output", path)
		}
	}
	var tenantID string
	if err := conn.QueryRow(context.Background(), `SELECT tenant_id FROM jobs WHERE id = $1`, j.ID).Scan(&tenantID); err != nil {
		t.Fatal(err)
	}
	bucket, err := blob.New(blob.Config{Endpoint: d.s3URL, AccessKey: "e2eaccess", SecretKey: "e2esecret0123456789", Bucket: "gantry"})
	if err != nil {
		t.Fatal(err)
	}
	objects := func(id string) int {
		n, err := bucket.Count(context.Background(), "tenants/"+tenantID+"/jobs/"+id+"/")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := objects(j.ID); n != 2 {
		t.Fatalf("%d objects under the job's prefix, want the artifact and stdout", n)
	}

	// The job ages past the TTL; a younger one stays.
	young := d.job(t, "POST", "/v1/execute", `{"language":"bash","code":"echo young"}`)
	if _, err := conn.Exec(context.Background(), `UPDATE jobs SET finished_at = now() - interval '2 hours' WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 30*time.Second, "the expired job to be deleted", func() bool {
		return d.call(t, "GET", "/v1/jobs/"+j.ID, "").status == 404
	})
	if n := objects(j.ID); n != 0 {
		t.Errorf("the expired job left %d objects", n)
	}
	if r := d.call(t, "GET", "/v1/jobs/"+young.ID, ""); r.status != 200 {
		t.Errorf("the young job: %d", r.status)
	}
	// Counted once the sweep that deleted it has ended (after its row).
	eventually.True(t, 30*time.Second, "/metrics to count the deleted job", func() bool {
		return strings.Contains(string(get(t, d.url+"/metrics").body), "gantry_history_deleted_total 1")
	})
}

func dbURLOf(t *testing.T, d *dev) string {
	for _, e := range d.env {
		if v, ok := strings.CutPrefix(e, "GANTRY_DATABASE_URL="); ok {
			return v
		}
	}
	t.Fatal("no database URL")
	return storetest.DatabaseURL(t)
}
