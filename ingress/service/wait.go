package service

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
)

// Watch says what WaitJob does besides waiting. The zero value waits until
// the job is finished or ctx ends.
type Watch struct {
	// Until ends the wait at that moment (zero: no bound). A moment
	// already past still reads the job once.
	Until time.Time
	// Output, with OnOutput, is the job's live output (FollowOutput),
	// each chunk handed to OnOutput as it comes.
	Output   *Output
	OnOutput func(Chunk)
	// Every, with OnTick, calls OnTick that often (a keep-alive).
	Every  time.Duration
	OnTick func()
	// OnRead sees each read of the job that found it not finished yet.
	OnRead func(jobs.Job)
	// KeepOnError waits on through a failed read (the job as last read
	// stands) where otherwise the wait ends with the read's error.
	KeepOnError bool
}

// WaitJob waits until the tenant's job is finished, w.Until comes or ctx
// ends, and returns the job as it then is (with a nil error when ctx
// ended: the caller asks ctx why). Every wait for a job is this one loop:
// long polls, waits after submitting, the MCP tools and tasks, the log
// stream.
func (s *Service) WaitJob(ctx context.Context, p Principal, job jobs.Job, w Watch) (jobs.Job, error) {
	read := func(ctx context.Context) (jobs.Job, error) { return s.store.GetJob(ctx, p.TenantID, job.ID) }
	return s.hub.await(ctx, job, read, w)
}

// Chunk is a piece of a running job's output.
type Chunk struct {
	// Stream is stdout or stderr.
	Stream string
	// Offset is where Data starts in its stream (-1: not known).
	Offset int
	Data   []byte
}

func chunkOf(m *nats.Msg) Chunk {
	off, err := strconv.Atoi(m.Header.Get(queue.HeaderOffset))
	if err != nil {
		off = -1
	}
	return Chunk{Stream: m.Header.Get(queue.HeaderStream), Offset: off, Data: m.Data}
}

// Output is a subscription to a job's live output, as its runner
// publishes it (chunks published before it was made are not in it: see
// Backlog). Hand it to WaitJob; Close ends it.
type Output struct {
	msgs chan *nats.Msg
	sub  *nats.Subscription
}

// FollowOutput subscribes to the job's live output, holding up to buffer
// chunks the waiter has not taken yet (later ones are dropped).
func (s *Service) FollowOutput(jobID string, buffer int) (*Output, error) {
	o := &Output{msgs: make(chan *nats.Msg, buffer)}
	sub, err := s.nc.ChanSubscribe(queue.LogSubject(jobID), o.msgs)
	if err != nil {
		return nil, err
	}
	o.sub = sub
	return o, nil
}

// Close ends the subscription.
func (o *Output) Close() { _ = o.sub.Unsubscribe() }

// Backlog asks the runner running a job for its output so far, waiting up
// to a second; ok is false when no runner answered (the job is not
// running, or its runner is gone, or its tenant's output is private).
func (s *Service) Backlog(ctx context.Context, jobID string) (b queue.Backlog, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	reply, err := s.nc.RequestWithContext(ctx, queue.BacklogSubject(jobID), nil)
	if err != nil {
		return b, false
	}
	return b, json.Unmarshal(reply.Data, &b) == nil
}

// recheckEvery is how often a wait reads its job again although no status
// event came: an event can be lost (a NATS reconnect, or a runner that
// could not publish after recording the result).
const recheckEvery = 5 * time.Second

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
func (h *hub) await(ctx context.Context, job jobs.Job, read func(context.Context) (jobs.Job, error), w Watch) (jobs.Job, error) {
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
	var logs <-chan *nats.Msg
	if w.Output != nil && w.OnOutput != nil {
		logs = w.Output.msgs
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
				w.OnOutput(chunkOf(m))
			}
		}
	}
}
