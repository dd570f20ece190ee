package service

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/webhook"
)

// Callback is a request a compatible API makes when a job finishes, in its
// original's own form (Judge0's PUT of the submission to callback_url), as
// opposed to gantry's signed webhooks. It is best effort, as the originals'
// are: tried Tries times, each within Timeout, by the ingress that took the
// submission; an ingress that stops before the job ends does not make it.
type Callback struct {
	URL    string
	Method string
	// Render makes the body from the finished job.
	Render      func(ctx context.Context, job jobs.Job) ([]byte, error)
	ContentType string
	Tries       int
	Timeout     time.Duration
}

// callbacks are the compatible APIs' callbacks waiting for their jobs,
// sent by the webhooks' sender.
type callbacks struct {
	sender *webhook.Sender
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newCallbacks(sender *webhook.Sender) *callbacks {
	ctx, cancel := context.WithCancel(context.Background())
	return &callbacks{sender: sender, ctx: ctx, cancel: cancel}
}

// stop abandons the callbacks still waiting and waits for them to return.
func (c *callbacks) stop() {
	c.cancel()
	c.wg.Wait()
}

// CheckCallbackURL checks a callback URL a caller gives, as webhook URLs are
// checked (http or https, no credentials, not plainly private unless the
// operator allows private webhooks), without needing webhooks to be on.
func (s *Service) CheckCallbackURL(field, u string) error {
	return s.callbacks.sender.CheckURL(field, u)
}

// CallWhenFinished makes cb once the tenant's job has finished (at once if
// it has). It returns at once; the call is made in the background and its
// failures are logged only.
func (s *Service) CallWhenFinished(p Principal, job jobs.Job, cb Callback) {
	c := s.callbacks
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx := c.ctx
		log := s.log.With("job_id", job.ID, "component", "callbacks")
		done, err := s.WaitJob(ctx, p, job, Watch{KeepOnError: true})
		if err != nil || !done.Status.Terminal() {
			if ctx.Err() == nil {
				log.Warn("callback dropped: the job could not be read", "err", err)
			}
			return
		}
		body, err := cb.Render(ctx, done)
		if err != nil {
			log.Warn("callback dropped: its body could not be made", "err", err)
			return
		}
		// Any answer counts as delivered, as Judge0's does: only a failure
		// to get one is tried again.
		_, err = c.sender.Send(ctx, webhook.Message{Method: cb.Method, URL: cb.URL, Body: body,
			Header: http.Header{"Content-Type": {cb.ContentType}}, Timeout: cb.Timeout, Tries: cb.Tries})
		if err != nil && ctx.Err() == nil {
			log.Info("callback failed", "tries", cb.Tries, "err", fmt.Errorf("%s callback: %w", cb.Method, err))
		}
	}()
}
