package service

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
)

// hub wakes requests waiting on a job (long polls, execute) when the job's
// status changes. One NATS subscription serves every waiter of this ingress.
// Its waiters also read their job every recheck interval (see await).
type hub struct {
	mu      sync.Mutex
	waiters map[string]map[chan jobs.Status]struct{}
	sub     *nats.Subscription
	recheck time.Duration
}

func newHub() *hub {
	return &hub{waiters: map[string]map[chan jobs.Status]struct{}{}, recheck: recheckEvery}
}

func (h *hub) start(nc *nats.Conn) error {
	sub, err := nc.Subscribe(queue.StatusSubjectAll, func(m *nats.Msg) {
		var ev queue.StatusEvent
		if json.Unmarshal(m.Data, &ev) != nil {
			return
		}
		h.notify(queue.JobIDFromSubject(m.Subject), ev.Status)
	})
	if err != nil {
		return err
	}
	h.sub = sub
	return nil
}

func (h *hub) stop() {
	if h.sub != nil {
		_ = h.sub.Unsubscribe()
	}
}

// watch registers interest in a job's status changes. Call it before
// reading the job, so that no change between the read and the wait is lost.
func (h *hub) watch(jobID string) (<-chan jobs.Status, func()) {
	ch := make(chan jobs.Status, 1)
	h.mu.Lock()
	if h.waiters[jobID] == nil {
		h.waiters[jobID] = map[chan jobs.Status]struct{}{}
	}
	h.waiters[jobID][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.waiters[jobID], ch)
		if len(h.waiters[jobID]) == 0 {
			delete(h.waiters, jobID)
		}
		h.mu.Unlock()
	}
}

func (h *hub) notify(jobID string, s jobs.Status) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.waiters[jobID] {
		select {
		case ch <- s:
		default: // a wake-up is already pending; the waiter re-reads the job
		}
	}
}
