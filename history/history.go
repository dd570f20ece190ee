// Package history keeps gantry's job history bounded as it grows. A job's
// output longer than a threshold is moved to the object store when its
// result is recorded (the row keeps only the object's key) and read back
// whenever the job is read, so every API answer is unchanged; and finished
// jobs older than the retention are deleted in batches, with their
// artifacts and moved output.
//
// Store wraps the Postgres store: it embeds *store.Store and overrides the
// methods that write or read job output (FinishJob, FinishSessionJob,
// GetJob, ListJobs, EnqueueJob). cmd/gantry hands it to the runner and the
// ingress in place of the plain store, so neither knows where output lives.
// A store method added later that returns jobs must be overridden here too.
package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// Blobs is what history needs of the object store.
type Blobs interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	DeleteKeys(ctx context.Context, keys []string) error
}

// Config says what is kept where, and for how long.
type Config struct {
	// InlineMax is the longest stream (stdout or stderr, in bytes) kept in
	// the job's row; a longer one is moved to the object store.
	InlineMax int
	// TTL is how long a finished job is kept; Sweep deletes older ones.
	// 0 keeps history forever.
	TTL time.Duration
	// Batch is how many jobs one transaction of the sweep deletes
	// (default 500).
	Batch int
	// SweepBudget bounds how long one Sweep keeps deleting batches
	// (default 10 s); the next sweep goes on where it stopped.
	SweepBudget time.Duration
}

// DefaultInlineMax is the default of Config.InlineMax: most programs print
// far less, and a row stays small enough to read in a few pages.
const DefaultInlineMax = 32 << 10

func (c Config) withDefaults() Config {
	if c.Batch <= 0 {
		c.Batch = 500
	}
	if c.SweepBudget <= 0 {
		c.SweepBudget = 10 * time.Second
	}
	return c
}

// Store is the Postgres store with output moved to the object store and a
// retention sweep.
type Store struct {
	*store.Store
	blobs Blobs
	cfg   Config
	log   *slog.Logger
}

// New wraps st.
func New(st *store.Store, blobs Blobs, cfg Config, log *slog.Logger) *Store {
	return &Store{Store: st, blobs: blobs, cfg: cfg.withDefaults(), log: log}
}

// TTL is how long finished jobs are kept (0: forever).
func (s *Store) TTL() time.Duration { return s.cfg.TTL }

// outputContentType is the type of moved output: bytes as the program
// wrote them, which need not be text.
const outputContentType = "application/octet-stream"

// FinishJob moves long output to the object store, then records the
// result. Objects of a result that did not apply (the attempt lost its job)
// are deleted; after an error they are left alone, since the result may
// have been recorded all the same, and the retention sweep finds them.
func (s *Store) FinishJob(ctx context.Context, id string, attempt int, r jobs.Result) (bool, error) {
	r, moved, err := s.moveOutput(ctx, id, attempt, r)
	if err != nil {
		return false, err
	}
	applied, err := s.Store.FinishJob(ctx, id, attempt, r)
	if err == nil && !applied {
		s.forget(ctx, moved)
	}
	return applied, err
}

// FinishSessionJob is FinishJob for a session's job (see
// store.FinishSessionJob).
func (s *Store) FinishSessionJob(ctx context.Context, jobID string, attempt int, r jobs.Result, sessionID, owner string, snap *store.Snapshot, live *store.Live) (bool, bool, string, error) {
	r, moved, err := s.moveOutput(ctx, jobID, attempt, r)
	if err != nil {
		return false, false, "", err
	}
	applied, snapApplied, replaced, err := s.Store.FinishSessionJob(ctx, jobID, attempt, r, sessionID, owner, snap, live)
	if err == nil && !applied {
		s.forget(ctx, moved)
	}
	return applied, snapApplied, replaced, err
}

// moveOutput uploads each stream longer than InlineMax and leaves its key
// in the result instead of its bytes. It returns the keys it wrote.
func (s *Store) moveOutput(ctx context.Context, id string, attempt int, r jobs.Result) (jobs.Result, []string, error) {
	if len(r.Stdout) <= s.cfg.InlineMax && len(r.Stderr) <= s.cfg.InlineMax {
		return r, nil, nil
	}
	tenantID, err := s.JobTenant(ctx, id)
	if err != nil {
		return r, nil, fmt.Errorf("move output of job %s: %w", id, err)
	}
	var moved []string
	for _, st := range []struct {
		name  string
		bytes *[]byte
		key   *string
	}{{"stdout", &r.Stdout, &r.StdoutKey}, {"stderr", &r.Stderr, &r.StderrKey}} {
		if len(*st.bytes) <= s.cfg.InlineMax {
			continue
		}
		key := blob.OutputKey(tenantID, id, attempt, st.name)
		if err := s.blobs.Put(ctx, key, bytes.NewReader(*st.bytes), int64(len(*st.bytes)), outputContentType); err != nil {
			s.forget(ctx, moved)
			return r, nil, fmt.Errorf("move %s of job %s: %w", st.name, id, err)
		}
		moved = append(moved, key)
		*st.key, *st.bytes = key, nil
	}
	return r, moved, nil
}

func (s *Store) forget(ctx context.Context, keys []string) {
	if err := s.blobs.DeleteKeys(context.WithoutCancel(ctx), keys); err != nil {
		s.log.Warn("delete output of a result that was not recorded", "err", err)
	}
}

// GetJob returns the tenant's job with all its output.
func (s *Store) GetJob(ctx context.Context, tenantID, id string) (jobs.Job, error) {
	j, err := s.Store.GetJob(ctx, tenantID, id)
	if err != nil {
		return j, err
	}
	return j, s.readOutput(ctx, &j)
}

// EnqueueJob queues a job; when an idempotency key returns an existing
// one, it comes with all its output.
func (s *Store) EnqueueJob(ctx context.Context, nj store.NewJob, publish func(ctx context.Context, jobID string) (uint64, error)) (jobs.Job, bool, error) {
	j, created, err := s.Store.EnqueueJob(ctx, nj, publish)
	if err != nil || created {
		return j, created, err
	}
	return j, created, s.readOutput(ctx, &j)
}

// ListJobs lists jobs as store.ListJobs does, with all their output (read
// from the object store a few jobs at a time).
func (s *Store) ListJobs(ctx context.Context, tenantID string, f store.JobFilter) ([]jobs.Job, string, error) {
	list, next, err := s.Store.ListJobs(ctx, tenantID, f)
	if err != nil {
		return list, next, err
	}
	var (
		wg    sync.WaitGroup
		sem   = make(chan struct{}, 8)
		mu    sync.Mutex
		first error
	)
	for i := range list {
		if list[i].StdoutKey == "" && list[i].StderrKey == "" {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(j *jobs.Job) {
			defer func() { <-sem; wg.Done() }()
			if err := s.readOutput(ctx, j); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}(&list[i])
	}
	wg.Wait()
	if errors.Is(first, store.ErrNotFound) {
		// A job whose objects the sweep deleted is about to go: leave it
		// out of the page.
		kept := list[:0]
		for _, j := range list {
			if j.StdoutKey == "" && j.StderrKey == "" || j.Stdout != "" || j.Stderr != "" {
				kept = append(kept, j)
			}
		}
		return kept, next, nil
	}
	return list, next, first
}

// readOutput reads a job's moved output back into it. An object that is
// gone means the retention sweep is deleting the job: ErrNotFound.
func (s *Store) readOutput(ctx context.Context, j *jobs.Job) error {
	for _, st := range []struct {
		key string
		out *string
	}{{j.StdoutKey, &j.Stdout}, {j.StderrKey, &j.Stderr}} {
		if st.key == "" {
			continue
		}
		rc, err := s.blobs.Get(ctx, st.key)
		if err != nil {
			return fmt.Errorf("read output of job %s: %w", j.ID, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			if minio.ToErrorResponse(err).Code == "NoSuchKey" {
				return fmt.Errorf("output of job %s is gone: %w", j.ID, store.ErrNotFound)
			}
			return fmt.Errorf("read output of job %s: %w", j.ID, err)
		}
		// As the store does for output kept in the row: invalid UTF-8
		// becomes U+FFFD, the stored bytes stay as written.
		*st.out = strings.ToValidUTF8(string(b), "\uFFFD")
	}
	return nil
}

// Sweep deletes finished jobs older than the TTL with their objects, a
// batch per transaction, until none is left or the sweep's budget is
// spent, and returns how many it deleted. Replicas may sweep at once: each
// batch skips the jobs another holds.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	if s.cfg.TTL <= 0 {
		return 0, nil
	}
	cutoff := time.Now().Add(-s.cfg.TTL)
	stop := time.Now().Add(s.cfg.SweepBudget)
	total := 0
	for {
		n, err := s.DeleteFinishedBefore(ctx, cutoff, s.cfg.Batch, s.dropObjects)
		total += n
		if err != nil || n < s.cfg.Batch || time.Now().After(stop) {
			return total, err
		}
	}
}

// dropObjects deletes what a batch of expired jobs left in the object
// store: their artifacts and their output, including any an earlier
// attempt of a redelivered job left.
func (s *Store) dropObjects(ctx context.Context, batch []store.ExpiredJob) error {
	var keys []string
	for _, j := range batch {
		for _, a := range j.Artifacts {
			keys = append(keys, blob.ArtifactKey(j.TenantID, j.ID, a.Path))
		}
		if j.StdoutKey == "" && j.StderrKey == "" && j.Attempt <= 1 {
			continue
		}
		for a := 1; a <= max(j.Attempt, 1); a++ {
			keys = append(keys, blob.OutputKey(j.TenantID, j.ID, a, "stdout"), blob.OutputKey(j.TenantID, j.ID, a, "stderr"))
		}
	}
	return s.blobs.DeleteKeys(ctx, keys)
}
