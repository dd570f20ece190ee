package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/internal/clock"
)

// errS3Held marks work given up because the object store stayed
// unavailable until the runner stopped: nothing about the job was at fault
// and its attempt is not spent (see Store.ReleaseJob).
var errS3Held = errors.New("the object store stayed unavailable until the runner stopped")

// throughS3Outage runs op, and while it fails because the object store is
// unavailable (unreachable, or answering 5xx, which a full disk does) runs
// it again once the store answers, with backoff, until ctx ends: a
// program's files, a session's workspace and the output of a job that ran
// survive an outage of S3 as a result survives one of Postgres, held in the
// runner with the job's message. What stops early returns op's error;
// ctx ending returns it wrapped in errS3Held. op must be safe to repeat.
func (r *Runner) throughS3Outage(ctx context.Context, log *slog.Logger, what string, op func() error) error {
	retry := newBackoff()
	var since time.Time
	for {
		err := op()
		if err == nil || !blob.Unavailable(err) {
			if err == nil && !since.IsZero() {
				log.Info("object store back", "what", what, "held", time.Since(since).Round(time.Millisecond))
			}
			return err
		}
		if since.IsZero() {
			log.Warn("object store unavailable; holding "+what+" until it is back", "err", err)
			since = time.Now()
			r.metrics.s3Hold()
		}
		// Paced, and only again once the store answers (a full disk
		// answers: then each try is the probe).
		for ok := false; !ok; {
			if !clock.Sleep(ctx, retry.next()) {
				return fmt.Errorf("%w (%s, held %s): %w", errS3Held, what, time.Since(since).Round(time.Second), err)
			}
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ok = r.blobs.Ping(pctx) == nil
			cancel()
		}
	}
}
