package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/gantryhq/gantry/jobs"
)

// Output keeps job output that is longer than a row should hold somewhere
// else: history.Output keeps it in the object store. With one set
// (Store.KeepOutput), a stream longer than the inline maximum is put there
// when a result is recorded, and the row keeps only its key; every job the
// store returns has it read back, so callers never see where output lives.
type Output interface {
	// Put stores one stream of one attempt of a job and returns its key.
	Put(ctx context.Context, ref OutputRef, data []byte) (key string, err error)
	// Get reads a stream back; ErrNotFound when it is gone (the
	// retention sweep is deleting its job).
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete deletes streams; a missing one is no error.
	Delete(ctx context.Context, keys []string) error
}

// OutputRef names one stream of one attempt of a job.
type OutputRef struct {
	TenantID, JobID string
	Attempt         int
	Stream          string // stdout or stderr
}

// KeepOutput moves output longer than inlineMax bytes per stream to o. It
// is set once, before the store is used.
func (s *Store) KeepOutput(o Output, inlineMax int) {
	s.output, s.inlineMax = o, inlineMax
}

// row is a job as its row holds it: output moved elsewhere is only a key.
// Every method that returns jobs makes them from rows with load, so none
// can hand out a job without its output.
type row struct {
	job                  jobs.Job
	stdoutKey, stderrKey string
}

// load reads the moved output of the rows back into their jobs, a few at
// a time. A job whose output is gone (the retention sweep is deleting it)
// is left out of a listing of several; loading it alone is ErrNotFound.
func (s *Store) load(ctx context.Context, rows ...row) ([]jobs.Job, error) {
	out := make([]jobs.Job, len(rows))
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
		errs = make([]error, len(rows))
	)
	for i := range rows {
		out[i] = rows[i].job
		if rows[i].stdoutKey == "" && rows[i].stderrKey == "" {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = s.readOutput(ctx, &out[i], rows[i])
		}()
	}
	wg.Wait()
	if len(rows) == 1 {
		return out, errs[0]
	}
	kept := out[:0]
	for i, j := range out {
		switch err := errs[i]; {
		case errors.Is(err, ErrNotFound):
			// The sweep is deleting it: leave it out of the page.
		case err != nil:
			return nil, err
		default:
			kept = append(kept, j)
		}
	}
	return kept, nil
}

// loadOne is load of one row.
func (s *Store) loadOne(ctx context.Context, r row) (jobs.Job, error) {
	out, err := s.load(ctx, r)
	if err != nil {
		return jobs.Job{}, err
	}
	return out[0], nil
}

func (s *Store) readOutput(ctx context.Context, j *jobs.Job, r row) error {
	for _, st := range []struct {
		key string
		out *string
	}{{r.stdoutKey, &j.Stdout}, {r.stderrKey, &j.Stderr}} {
		if st.key == "" {
			continue
		}
		if s.output == nil {
			return fmt.Errorf("output of job %s is in the object store, and the store was given none", j.ID)
		}
		b, err := s.output.Get(ctx, st.key)
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("output of job %s is gone: %w", j.ID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read output of job %s: %w", j.ID, err)
		}
		// As for output kept in the row: invalid UTF-8 becomes U+FFFD,
		// the stored bytes stay as written.
		*st.out = strings.ToValidUTF8(string(b), "\uFFFD")
	}
	return nil
}

// movedResult is a result whose long streams were put in the output
// store: the row keeps their keys instead of their bytes.
type movedResult struct {
	jobs.Result
	stdoutKey, stderrKey string
	keys                 []string // every key written
}

// moveOutput puts each stream of r longer than the inline maximum in the
// output store. The attempt is in the key, so an attempt that lost its
// job cannot overwrite the recorded output.
func (s *Store) moveOutput(ctx context.Context, id string, attempt int, r jobs.Result) (movedResult, error) {
	m := movedResult{Result: r}
	if s.output == nil || len(r.Stdout) <= s.inlineMax && len(r.Stderr) <= s.inlineMax {
		return m, nil
	}
	tenantID, err := s.JobTenant(ctx, id)
	if err != nil {
		return m, fmt.Errorf("move output of job %s: %w", id, err)
	}
	for _, st := range []struct {
		name  string
		bytes *[]byte
		key   *string
	}{{"stdout", &m.Stdout, &m.stdoutKey}, {"stderr", &m.Stderr, &m.stderrKey}} {
		if len(*st.bytes) <= s.inlineMax {
			continue
		}
		key, err := s.output.Put(ctx, OutputRef{TenantID: tenantID, JobID: id, Attempt: attempt, Stream: st.name}, *st.bytes)
		if err != nil {
			s.forget(ctx, m.keys)
			return m, fmt.Errorf("move %s of job %s: %w", st.name, id, err)
		}
		m.keys = append(m.keys, key)
		*st.key, *st.bytes = key, nil
	}
	return m, nil
}

// forget deletes the output of a result that was not recorded. After an
// error of the recording it is left alone: the result may have been
// recorded all the same, and the retention sweep finds it.
func (s *Store) forget(ctx context.Context, keys []string) {
	if len(keys) == 0 {
		return
	}
	_ = s.output.Delete(context.WithoutCancel(ctx), keys)
}
