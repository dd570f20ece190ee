package runner

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gantryhq/gantry/queue"
)

// Fair scheduling. Each tenant has a queue of its own (a subject and a
// durable consumer on the job stream, queue.TenantSubject). When a slot is
// free, the runner takes one message from the next tenant, in turn, whose
// queue has a message it may take: a tenant with a backlog of hundreds gets
// one slot in turn like a tenant with one job, so no backlog holds back
// another tenant's job for longer than a slot takes to free. A queue's max
// ack pending is its tenant's cap on running jobs; JetStream enforces it
// across all runners, and a capped queue is skipped.
//
// What each queue holds comes from its consumer's info, listed every
// second, and from announcements on queue.ReadySubject: an ingress
// announces each message it publishes, and a runner that hands a message
// back (Nak with a delay) announces it when the delay is over. A message
// whose runner was lost is redelivered without an announcement and does
// not show in the consumer's count of undelivered messages: a queue with
// messages out is tried every probeEvery as well.

// The pace of the picker.
const (
	listEvery    = time.Second      // relist the queues at least this often while fetching
	probeEvery   = 10 * time.Second // try a queue whose messages are all out at most this often
	subjectsEvry = 10 * time.Second // look for messages whose tenant has no queue
	fetchWait    = 50 * time.Millisecond
)

// picker chooses the runner's next message across the tenants' queues.
type picker struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	cfg    queue.Config
	log    *slog.Logger
	// maxRunning is the cap of a tenant whose queue this runner creates.
	maxRunning func(ctx context.Context, tenantID string) int
	wake       chan struct{}

	mu         sync.Mutex
	queues     map[string]*tenantQueue // by consumer name
	last       string                  // the queue served last
	listedAt   time.Time
	subjectsAt time.Time
}

// tenantQueue is what the picker knows of one consumer.
type tenantQueue struct {
	name       string
	cons       jetstream.Consumer
	pending    uint64 // undelivered messages, at the last listing less those taken since
	ackPending int    // messages out (running, or waiting to be redelivered)
	maxAck     int    // its cap (< 1: none)
	hinted     bool   // announced since it was last found empty
	probedAt   time.Time
}

func newPicker(js jetstream.JetStream, stream jetstream.Stream, cfg queue.Config, log *slog.Logger,
	maxRunning func(ctx context.Context, tenantID string) int) *picker {
	return &picker{js: js, stream: stream, cfg: cfg, log: log, maxRunning: maxRunning,
		wake: make(chan struct{}, 1), queues: map[string]*tenantQueue{}}
}

// hint records that a message was just published for the tenant and
// wakes the picker.
func (p *picker) hint(tenantID string) {
	p.mu.Lock()
	if q := p.queues[queue.TenantConsumer(tenantID)]; q != nil {
		q.hinted = true
	} else {
		p.listedAt = time.Time{} // a new queue: list again
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// done records that the runner is through with a message it took (acked
// it, or handed it back): its queue has one fewer out, so a queue at its
// cap is tried again without waiting for the next listing.
func (p *picker) done(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		return
	}
	p.mu.Lock()
	if q := p.queues[meta.Consumer]; q != nil && q.ackPending > 0 {
		q.ackPending--
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// next returns the next message to run, waiting until there is one or ctx
// ends.
func (p *picker) next(ctx context.Context) (jetstream.Msg, error) {
	for {
		if p.stale() {
			p.list(ctx)
		}
		for _, q := range p.candidates() {
			if msg := p.fetch(ctx, q); msg != nil {
				return msg, nil
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		select {
		case <-p.wake:
		case <-time.After(listEvery):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (p *picker) stale() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Since(p.listedAt) >= listEvery
}

// candidates are the queues that may have a message for this runner: in
// turn (those after the queue served last first) the queues known to have
// one, then the queues due for a probe.
func (p *picker) candidates() []*tenantQueue {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ready, probe []*tenantQueue
	for _, q := range p.queues {
		switch {
		case q.maxAck > 0 && q.ackPending >= q.maxAck:
			// at its cap
		case q.pending > 0 || q.hinted:
			ready = append(ready, q)
		case q.ackPending > 0 && time.Since(q.probedAt) >= probeEvery:
			probe = append(probe, q)
		}
	}
	for _, list := range [][]*tenantQueue{ready, probe} {
		sort.Slice(list, func(i, j int) bool {
			ai, aj := list[i].name > p.last, list[j].name > p.last
			if ai != aj {
				return ai
			}
			return list[i].name < list[j].name
		})
	}
	return append(ready, probe...)
}

// fetch takes one message from q, if it has one now.
func (p *picker) fetch(ctx context.Context, q *tenantQueue) jetstream.Msg {
	batch, err := q.cons.Fetch(1, jetstream.FetchMaxWait(fetchWait))
	var msg jetstream.Msg
	if err == nil {
		for m := range batch.Messages() {
			msg = m
		}
		err = batch.Error()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case msg != nil:
		p.last = q.name
		if q.pending > 0 {
			q.pending--
		}
		q.ackPending++
		return msg
	case errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted):
		delete(p.queues, q.name) // removed while idle; the next listing sees
	case err != nil && ctx.Err() == nil:
		p.log.Warn("fetch job", "queue", q.name, "err", err)
	}
	q.pending, q.hinted, q.probedAt = 0, false, time.Now()
	return nil
}

// list refreshes what the picker knows of every queue, and now and then
// makes the queue of a tenant that has messages but no queue (its
// consumer was removed while idle, or never made).
func (p *picker) list(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lister := p.stream.ListConsumers(lctx)
	seen := map[string]*jetstream.ConsumerInfo{}
	for info := range lister.Info() {
		if strings.HasPrefix(info.Name, queue.TenantConsumerPrefix) {
			seen[info.Name] = info
		}
	}
	if err := lister.Err(); err != nil {
		if ctx.Err() == nil {
			p.log.Warn("list job queues", "err", err)
		}
		p.mu.Lock()
		p.listedAt = time.Now() // try again in a second
		p.mu.Unlock()
		return
	}
	// Handles for queues new to this runner (one info request each).
	p.mu.Lock()
	var fresh []string
	for name := range seen {
		if p.queues[name] == nil {
			fresh = append(fresh, name)
		}
	}
	p.mu.Unlock()
	handles := map[string]jetstream.Consumer{}
	for _, name := range fresh {
		if c, err := p.stream.Consumer(lctx, name); err == nil {
			handles[name] = c
		}
	}
	p.mu.Lock()
	for name := range p.queues {
		if seen[name] == nil {
			delete(p.queues, name)
		}
	}
	for name, info := range seen {
		q := p.queues[name]
		if q == nil {
			if handles[name] == nil {
				continue
			}
			q = &tenantQueue{name: name, cons: handles[name]}
			p.queues[name] = q
		}
		q.pending, q.ackPending, q.maxAck = info.NumPending, info.NumAckPending, info.Config.MaxAckPending
	}
	p.listedAt = time.Now()
	checkSubjects := time.Since(p.subjectsAt) >= subjectsEvry
	if checkSubjects {
		p.subjectsAt = time.Now()
	}
	p.mu.Unlock()
	if checkSubjects {
		p.adoptOrphans(lctx, seen)
	}
}

// adoptOrphans makes a queue for each tenant with messages in the stream
// and no consumer.
func (p *picker) adoptOrphans(ctx context.Context, have map[string]*jetstream.ConsumerInfo) {
	info, err := p.stream.Info(ctx, jetstream.WithSubjectFilter(queue.SubjectTenantAll))
	if err != nil {
		p.log.Warn("look for job queues without a consumer", "err", err)
		return
	}
	for subject, n := range info.State.Subjects {
		tenant := queue.TenantOfSubject(subject)
		if n == 0 || tenant == "" || have[queue.TenantConsumer(tenant)] != nil {
			continue
		}
		if _, err := queue.EnsureTenant(ctx, p.js, p.cfg, tenant, p.maxRunning(ctx, tenant)); err != nil {
			p.log.Warn("make a tenant's job queue", "tenant_id", tenant, "err", err)
			continue
		}
		p.log.Info("made the job queue of a tenant with waiting jobs", "tenant_id", tenant, "messages", n)
		p.mu.Lock()
		p.listedAt = time.Time{}
		p.mu.Unlock()
	}
}
