package service

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// TestAuthCacheEvictsOneAtATime: a full cache makes room by dropping the
// least recently used key, not every key at once (which sent every busy
// client to Postgres together).
func TestAuthCacheEvictsOneAtATime(t *testing.T) {
	c := newAuthCache(time.Minute, 100)
	for i := 0; i < 100; i++ {
		c.put(fmt.Sprintf("key-%d", i), store.Principal{TenantID: "ten", KeyID: fmt.Sprintf("id-%d", i)})
	}
	c.get("key-0") // recently used: survives
	c.put("key-100", store.Principal{KeyID: "id-100"})
	missing := 0
	for i := 0; i <= 100; i++ {
		if _, ok := c.get(fmt.Sprintf("key-%d", i)); !ok {
			missing++
			if i != 1 {
				t.Errorf("key-%d was evicted; the least recently used was key-1", i)
			}
		}
	}
	if missing != 1 {
		t.Errorf("%d keys left the cache when one had to", missing)
	}
	// A revoked key is dropped by id.
	c.dropKey("id-7")
	if _, ok := c.get("key-7"); ok {
		t.Error("a dropped key is still cached")
	}
	if _, ok := c.get("key-8"); !ok {
		t.Error("dropping one key dropped another")
	}
}

func TestAuthCacheExpires(t *testing.T) {
	c := newAuthCache(50*time.Millisecond, 10)
	c.put("k", store.Principal{KeyID: "id"})
	eventually.True(t, 5*time.Second, "a cached key lookup to expire", func() bool {
		_, ok := c.get("k")
		return !ok
	})
}

// TestDoneJobsBoundedByBytes: finished jobs are kept within the byte budget
// by evicting the least recently read, one at a time.
func TestDoneJobsBoundedByBytes(t *testing.T) {
	c := newDoneJobs(64*(16<<10), time.Minute) // room for ~60 jobs of 16 KiB
	out := strings.Repeat("x", 15<<10)
	for i := 0; i < 200; i++ {
		c.put("ten", jobs.Job{ID: fmt.Sprintf("job-%03d", i), Status: jobs.StatusSucceeded, Stdout: out})
		c.get("ten", "job-000") // read all along: stays
	}
	if c.bytes.Load() > c.maxBytes {
		t.Errorf("holds %d bytes; budget %d", c.bytes.Load(), c.maxBytes)
	}
	if _, ok := c.get("ten", "job-000"); !ok {
		t.Error("the most read job was evicted")
	}
	kept := 0
	for i := 150; i < 200; i++ {
		if _, ok := c.get("ten", fmt.Sprintf("job-%03d", i)); ok {
			kept++
		}
	}
	if kept != 50 {
		t.Errorf("%d of the 50 newest jobs kept; a full cache must evict the oldest only", kept)
	}
	if _, ok := c.get("ten", "job-010"); ok {
		t.Error("an old, unread job outlived newer ones")
	}
	// Unfinished jobs are never cached.
	c.put("ten", jobs.Job{ID: "job-running", Status: jobs.StatusRunning})
	if _, ok := c.get("ten", "job-running"); ok {
		t.Error("a running job was cached")
	}
}

// TestDoneJobsSkipsJobsAboutToExpire: a finished job the retention sweep
// deletes before its cache entry would expire is not cached, so no replica
// keeps serving it after the sweep.
func TestDoneJobsSkipsJobsAboutToExpire(t *testing.T) {
	c := newDoneJobs(1<<20, 10*time.Minute)
	c.history = time.Hour
	old := time.Now().Add(-55 * time.Minute)
	fresh := time.Now()
	c.put("ten", jobs.Job{ID: "job_old", Status: jobs.StatusSucceeded, FinishedAt: &old})
	c.put("ten", jobs.Job{ID: "job_fresh", Status: jobs.StatusSucceeded, FinishedAt: &fresh})
	if _, ok := c.get("ten", "job_old"); ok {
		t.Error("a job expiring in 5 minutes was cached for 10")
	}
	if _, ok := c.get("ten", "job_fresh"); !ok {
		t.Error("a job kept for another hour was not cached")
	}
}
