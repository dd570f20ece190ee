package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gantryhq/gantry/egress"
	"github.com/gantryhq/gantry/jobs"
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

// callbacks are the compatible APIs' callbacks waiting for their jobs.
type callbacks struct {
	policy egress.Policy
	client *http.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newCallbacks(allowPrivate bool) *callbacks {
	policy := egress.Policy{AllowPrivate: allowPrivate, Setting: "GANTRY_WEBHOOK_ALLOW_PRIVATE"}
	ctx, cancel := context.WithCancel(context.Background())
	return &callbacks{policy: policy, ctx: ctx, cancel: cancel, client: &http.Client{
		Transport:     policy.Transport(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
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
	p, err := jobs.ValidateWebhookURL(field, u)
	if err != nil {
		return err
	}
	if err := s.callbacks.policy.CheckHost(p.Hostname()); err != nil {
		return &jobs.FieldError{Field: field, Message: err.Error()}
	}
	return nil
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
		for try := 1; try <= max(1, cb.Tries); try++ {
			err = c.call(ctx, cb, body)
			if err == nil || ctx.Err() != nil {
				return
			}
		}
		log.Info("callback failed", "tries", cb.Tries, "err", err)
	}()
}

// call makes one attempt. Any answer counts as delivered, as Judge0's does:
// only a failure to get one is tried again.
func (c *callbacks) call(ctx context.Context, cb Callback, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, cb.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, cb.Method, cb.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", cb.ContentType)
	resp, err := c.client.Do(req)
	if uerr := (*url.Error)(nil); errors.As(err, &uerr) {
		err = uerr.Err // without the URL, which may hold the receiver's secrets
	}
	if err != nil {
		return fmt.Errorf("%s callback: %w", cb.Method, err)
	}
	return resp.Body.Close()
}
