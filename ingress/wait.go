package ingress

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/jobs"
)

// recheckEvery is how often a wait reads its job again although no status
// event came: an event can be lost (a NATS reconnect, or a runner that
// could not publish after recording the result).
const recheckEvery = 5 * time.Second

// jobWait says what a wait for a job does besides waiting. The zero value
// waits until the job is finished or ctx ends.
type jobWait struct {
	// Until ends the wait at that moment (zero: no bound). A moment
	// already past still reads the job once.
	Until time.Time
	// Logs, with OnLog, are the job's live output chunks, each handed to
	// OnLog as it comes.
	Logs  <-chan *nats.Msg
	OnLog func(*nats.Msg)
	// Every, with OnTick, calls OnTick that often (an SSE keep-alive).
	Every  time.Duration
	OnTick func()
	// OnRead sees each read of the job that found it not finished yet.
	OnRead func(jobs.Job)
	// KeepOnError waits on through a failed read (the job as last read
	// stands) where otherwise the wait ends with the read's error.
	KeepOnError bool
}

// await is the one loop in which the ingress waits for a job to finish:
// long polls, POST /v1/execute, the MCP job tools and tasks, and the log
// stream. It registers with the hub before its first read, so that no
// status change between a read and the wait is missed, and reads the job
// (with read) at the start, on every status event of the job, and every
// recheck interval in case an event was lost. It returns the job as last
// read when it is finished, when w.Until comes, or when ctx ends (with a
// nil error: the caller asks ctx why); job is what it returns if no read
// succeeded. A failed read ends the wait with its error, unless
// w.KeepOnError.
func (h *hub) await(ctx context.Context, job jobs.Job, read func(context.Context) (jobs.Job, error), w jobWait) (jobs.Job, error) {
	events, unwatch := h.watch(job.ID)
	defer unwatch()
	var deadline, tick <-chan time.Time
	if !w.Until.IsZero() {
		t := time.NewTimer(time.Until(w.Until))
		defer t.Stop()
		deadline = t.C
	}
	if w.Every > 0 && w.OnTick != nil {
		t := time.NewTicker(w.Every)
		defer t.Stop()
		tick = t.C
	}
	logs := w.Logs
	if w.OnLog == nil {
		logs = nil
	}
	recheck := time.NewTicker(h.recheck)
	defer recheck.Stop()
	for {
		fresh, err := read(ctx)
		switch {
		case err == nil:
			job = fresh
			if job.Status.Terminal() {
				return job, nil
			}
			if w.OnRead != nil {
				w.OnRead(job)
			}
		case ctx.Err() != nil:
			return job, nil
		case !w.KeepOnError:
			return job, err
		}
	sleep:
		for {
			select {
			case <-events:
				break sleep
			case <-recheck.C:
				break sleep
			case <-deadline:
				return job, nil
			case <-ctx.Done():
				return job, nil
			case <-tick:
				w.OnTick()
			case m := <-logs:
				w.OnLog(m)
			}
		}
	}
}
