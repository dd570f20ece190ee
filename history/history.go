// Package history keeps gantry's job history bounded as it grows. Output
// keeps a job's output longer than a threshold in the object store (the
// store puts it there when a result is recorded, keeping only the object's
// key in the row, and reads it back whenever the job is read, so every API
// answer is unchanged); Retention deletes finished jobs older than the
// history's TTL in batches, with their artifacts and moved output.
//
// cmd/gantry hands an Output to the store (store.Store.KeepOutput) and a
// Retention to the ingress's maintenance; the runner and the ingress use
// the store as it is, without knowing where output lives.
package history

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/membudget"
	"github.com/gantryhq/gantry/store"
)

// Blobs is what history needs of the object store.
type Blobs interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	DeleteKeys(ctx context.Context, keys []string) error
}

// DefaultInlineMax is the longest stream (stdout or stderr, in bytes) kept
// in a job's row by default: most programs print far less, and a row stays
// small enough to read in a few pages.
const DefaultInlineMax = 32 << 10

// Output keeps job output in the object store for the store (store.Output),
// under tenants/<t>/jobs/<j>/output/<attempt>/<stream>.
type Output struct {
	blobs Blobs
	log   *slog.Logger
}

// NewOutput keeps output in blobs.
func NewOutput(blobs Blobs, log *slog.Logger) *Output { return &Output{blobs: blobs, log: log} }

// outputContentType is the type of moved output: bytes as the program
// wrote them, which need not be text.
const outputContentType = "application/octet-stream"

// Put stores one stream of one attempt.
func (o *Output) Put(ctx context.Context, ref store.OutputRef, data []byte) (string, error) {
	key := blob.OutputKey(ref.TenantID, ref.JobID, ref.Attempt, ref.Stream)
	return key, o.blobs.Put(ctx, key, bytes.NewReader(data), int64(len(data)), outputContentType)
}

// Get reads a stream back; store.ErrNotFound when it is gone. What it reads
// is charged to the call's memory budget in ctx (package membudget) twice,
// as it is read: the text the job carries, and the answer that encodes it
// (JSON is at least as long). A read past the budget fails with the
// budget's error.
func (o *Output) Get(ctx context.Context, key string) ([]byte, error) {
	rc, err := o.blobs.Get(ctx, key)
	if err == nil {
		defer rc.Close()
		var b []byte
		if b, err = io.ReadAll(membudget.Reader(ctx, rc, 2)); err == nil {
			return b, nil
		}
	}
	if errors.Is(err, blob.ErrNotFound) {
		return nil, store.ErrNotFound
	}
	return nil, err
}

// Delete deletes the output of a result that was not recorded; a failure
// is logged (nothing else will find those objects).
func (o *Output) Delete(ctx context.Context, keys []string) error {
	err := o.blobs.DeleteKeys(ctx, keys)
	if err != nil {
		o.log.Warn("delete output of a result that was not recorded", "keys", len(keys), "err", err)
	}
	return err
}

// Config says how long finished jobs are kept, and how the sweep goes.
type Config struct {
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

func (c Config) withDefaults() Config {
	if c.Batch <= 0 {
		c.Batch = 500
	}
	if c.SweepBudget <= 0 {
		c.SweepBudget = 10 * time.Second
	}
	return c
}

// Jobs is what retention needs of the store.
type Jobs interface {
	DeleteFinishedBefore(ctx context.Context, cutoff time.Time, limit int, drop func(ctx context.Context, batch []store.ExpiredJob) error) (int, error)
}

// Retention deletes finished jobs past the history's TTL with what they
// stored in the object store.
type Retention struct {
	jobs  Jobs
	blobs Blobs
	cfg   Config
}

// NewRetention sweeps the jobs of st and their objects in blobs.
func NewRetention(st Jobs, blobs Blobs, cfg Config) *Retention {
	return &Retention{jobs: st, blobs: blobs, cfg: cfg.withDefaults()}
}

// TTL is how long finished jobs are kept (0: forever).
func (r *Retention) TTL() time.Duration { return r.cfg.TTL }

// Sweep deletes finished jobs older than the TTL with their objects, a
// batch per transaction, until none is left or the sweep's budget is
// spent, and returns how many it deleted. Replicas may sweep at once: each
// batch skips the jobs another holds.
func (r *Retention) Sweep(ctx context.Context) (int, error) {
	if r.cfg.TTL <= 0 {
		return 0, nil
	}
	cutoff := time.Now().Add(-r.cfg.TTL)
	stop := time.Now().Add(r.cfg.SweepBudget)
	total := 0
	for {
		n, err := r.jobs.DeleteFinishedBefore(ctx, cutoff, r.cfg.Batch, r.dropObjects)
		total += n
		if err != nil || n < r.cfg.Batch || time.Now().After(stop) {
			return total, err
		}
	}
}

// dropObjects deletes what a batch of expired jobs left in the object
// store: their artifacts and their output, including any an earlier
// attempt of a redelivered job left.
func (r *Retention) dropObjects(ctx context.Context, batch []store.ExpiredJob) error {
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
	return r.blobs.DeleteKeys(ctx, keys)
}
