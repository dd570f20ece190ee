package service

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/jobs"
)

// fakeJob is a job whose status the test sets, read by await through read.
type fakeJob struct {
	status atomic.Value // jobs.Status
	reads  atomic.Int32
	read1  chan struct{} // closed at the first read, once it has read the status
}

func newFakeJob() *fakeJob {
	f := &fakeJob{read1: make(chan struct{})}
	f.status.Store(jobs.StatusRunning)
	return f
}

func (f *fakeJob) read(context.Context) (jobs.Job, error) {
	// The status is read before read1 closes: a test that changes it once
	// read1 is closed changes it for the next read.
	j := jobs.Job{ID: "job_1", Status: f.status.Load().(jobs.Status)}
	if f.reads.Add(1) == 1 {
		close(f.read1)
	}
	return j, nil
}

type awaited struct {
	job jobs.Job
	err error
	at  time.Time
}

func goAwait(ctx context.Context, h *hub, read func(context.Context) (jobs.Job, error), w Watch) <-chan awaited {
	out := make(chan awaited, 1)
	go func() {
		j, err := h.await(ctx, jobs.Job{ID: "job_1", Status: jobs.StatusQueued}, read, w)
		out <- awaited{j, err, time.Now()}
	}()
	return out
}

func result(t *testing.T, c <-chan awaited, what string) awaited {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the wait did not end", what)
		return awaited{}
	}
}

// The wait wakes on the hub's status event: with the recheck and the
// deadline an hour away, nothing else could end it.
func TestAwaitWakesOnFinish(t *testing.T) {
	h := newHub()
	h.recheck = time.Hour
	f := newFakeJob()
	c := goAwait(t.Context(), h, f.read, Watch{Until: time.Now().Add(time.Hour)})
	<-f.read1 // await watches before its first read: the event is not lost
	f.status.Store(jobs.StatusSucceeded)
	h.notify("job_1", jobs.StatusSucceeded)
	r := result(t, c, "finish announced")
	if r.err != nil || r.job.Status != jobs.StatusSucceeded || f.reads.Load() != 2 {
		t.Fatalf("got %s, %v after %d reads; want succeeded after 2", r.job.Status, r.err, f.reads.Load())
	}
}

// The wait ends at its deadline with the job as last read, not before.
func TestAwaitHonoursDeadline(t *testing.T) {
	h := newHub()
	h.recheck = time.Hour
	f := newFakeJob()
	start := time.Now()
	r := result(t, goAwait(t.Context(), h, f.read, Watch{Until: start.Add(50 * time.Millisecond)}), "deadline")
	if r.err != nil || r.job.Status != jobs.StatusRunning {
		t.Fatalf("got %s, %v; want the running job", r.job.Status, r.err)
	}
	if d := r.at.Sub(start); d < 50*time.Millisecond {
		t.Fatalf("the wait ended after %s, before its deadline", d)
	}
	// A deadline already past still reads the job once.
	f = newFakeJob()
	r = result(t, goAwait(t.Context(), h, f.read, Watch{Until: time.Now()}), "past deadline")
	if r.job.Status != jobs.StatusRunning || f.reads.Load() != 1 {
		t.Fatalf("past deadline: %s after %d reads", r.job.Status, f.reads.Load())
	}
}

// A lost status event is made up for by the recheck.
func TestAwaitRechecksWhenEventsAreLost(t *testing.T) {
	h := newHub()
	h.recheck = 10 * time.Millisecond
	f := newFakeJob()
	c := goAwait(t.Context(), h, f.read, Watch{})
	<-f.read1
	f.status.Store(jobs.StatusFailed) // and no event
	if r := result(t, c, "lost event"); r.err != nil || r.job.Status != jobs.StatusFailed {
		t.Fatalf("got %s, %v; want failed", r.job.Status, r.err)
	}
}

// The client going away ends the wait without an error, with the job as
// last read.
func TestAwaitEndsWithContext(t *testing.T) {
	h := newHub()
	h.recheck = time.Hour
	f := newFakeJob()
	ctx, cancel := context.WithCancel(t.Context())
	c := goAwait(ctx, h, f.read, Watch{})
	<-f.read1
	cancel()
	if r := result(t, c, "cancelled"); r.err != nil || r.job.Status != jobs.StatusRunning {
		t.Fatalf("got %s, %v; want the running job and no error", r.job.Status, r.err)
	}
}

// A failed read ends the wait with its error, or with KeepOnError is
// waited out.
func TestAwaitReadErrors(t *testing.T) {
	h := newHub()
	h.recheck = 10 * time.Millisecond
	down := errors.New("database down")
	failing := func(context.Context) (jobs.Job, error) { return jobs.Job{}, down }
	r := result(t, goAwait(t.Context(), h, failing, Watch{}), "failed read")
	if !errors.Is(r.err, down) || r.job.ID != "job_1" || r.job.Status != jobs.StatusQueued {
		t.Fatalf("got %+v, %v; want the job as given and the read's error", r.job, r.err)
	}

	var n atomic.Int32
	flaky := func(context.Context) (jobs.Job, error) {
		if n.Add(1) < 3 {
			return jobs.Job{}, down
		}
		return jobs.Job{ID: "job_1", Status: jobs.StatusSucceeded}, nil
	}
	r = result(t, goAwait(t.Context(), h, flaky, Watch{KeepOnError: true}), "flaky read")
	if r.err != nil || r.job.Status != jobs.StatusSucceeded {
		t.Fatalf("got %s, %v; want succeeded once the reads work", r.job.Status, r.err)
	}
}

// While it waits, the wait hands on log chunks and ticks, and tells of
// each read of the unfinished job.
func TestAwaitServesLogsAndTicks(t *testing.T) {
	h := newHub()
	h.recheck = time.Hour
	f := newFakeJob()
	logs := make(chan *nats.Msg, 1)
	got := make(chan string, 1)
	ticked := make(chan struct{}, 1)
	var seen atomic.Int32
	c := goAwait(t.Context(), h, f.read, Watch{
		Output:   &Output{msgs: logs},
		OnOutput: func(c Chunk) { got <- string(c.Data) },
		Every:    5 * time.Millisecond,
		OnTick: func() {
			select {
			case ticked <- struct{}{}:
			default:
			}
		},
		OnRead: func(j jobs.Job) { seen.Add(1) },
	})
	logs <- &nats.Msg{Data: []byte("hello")}
	select {
	case s := <-got:
		if s != "hello" {
			t.Fatalf("log chunk %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the log chunk was not handed on")
	}
	select {
	case <-ticked:
	case <-time.After(10 * time.Second):
		t.Fatal("no tick")
	}
	f.status.Store(jobs.StatusSucceeded)
	h.notify("job_1", jobs.StatusSucceeded)
	if r := result(t, c, "finish after logs"); r.job.Status != jobs.StatusSucceeded {
		t.Fatalf("got %s", r.job.Status)
	}
	if seen.Load() != 1 {
		t.Errorf("OnRead saw %d reads of the unfinished job; want 1", seen.Load())
	}
}
