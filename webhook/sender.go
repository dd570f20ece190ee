package webhook

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gantryhq/gantry/egress"
	"github.com/gantryhq/gantry/jobs"
)

// Sender makes the HTTP requests gantry sends to URLs its tenants give:
// the Dispatcher's signed webhooks, and the callbacks of the compatible
// APIs (Judge0's PUT to a submission's callback_url). One sender keeps the
// rules every such request follows:
//
//   - the URL is checked when it is given (CheckURL), and every connection
//     again on the address dialled (egress.Policy), so that a name that
//     resolves to a private address is refused as surely as a literal one;
//   - each try is bounded by the message's Timeout, the answer's body
//     included;
//   - a redirect is an answer like any other, never followed: following it
//     would send the request somewhere the tenant did not name;
//   - a try that gets no answer is tried again, up to the message's Tries;
//   - errors leave the URL out: it may hold the receiver's token.
//
// It is safe for concurrent use.
type Sender struct {
	policy egress.Policy
	client *http.Client
}

// NewSender returns a sender whose requests reach only public addresses
// unless allowPrivate (GANTRY_WEBHOOK_ALLOW_PRIVATE).
func NewSender(allowPrivate bool) *Sender {
	policy := egress.Policy{AllowPrivate: allowPrivate, Setting: "GANTRY_WEBHOOK_ALLOW_PRIVATE"}
	return &Sender{policy: policy, client: &http.Client{
		Transport:     policy.Transport(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// CheckURL checks a URL a tenant gives, field naming it in the error: its
// form (jobs.ValidateWebhookURL: http or https, a host, no credentials),
// and that its host is not plainly private when the operator allows only
// public addresses (names are checked again on the address dialled).
func (s *Sender) CheckURL(field, u string) error {
	p, err := jobs.ValidateWebhookURL(field, u)
	if err != nil {
		return err
	}
	if err := s.policy.CheckHost(p.Hostname()); err != nil {
		return &jobs.FieldError{Field: field, Message: err.Error()}
	}
	return nil
}

// Message is a request to send.
type Message struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
	// Timeout bounds each try, from the dial to the answer's body.
	Timeout time.Duration
	// Tries is how many tries a message that gets no answer has (at least
	// one). An answer, whatever its status, ends the tries: whether to
	// send again after it is the caller's to say.
	Tries int
}

// Answer is what a receiver answered.
type Answer struct {
	Status int
	// Snippet is the start of the answer's body, for the record.
	Snippet string
}

// Err is nil for a 2xx answer and says what the receiver answered
// otherwise.
func (a Answer) Err() error {
	if a.Status/100 == 2 {
		return nil
	}
	msg := "HTTP " + strconv.Itoa(a.Status)
	if a.Status/100 == 3 {
		msg += " (redirects are not followed)"
	}
	if a.Snippet != "" {
		msg += ": " + a.Snippet
	}
	return errors.New(msg)
}

// Send sends m and returns the receiver's answer, trying again while it
// gets none, up to m.Tries, and not after ctx ends. The error, when no try
// got an answer, is the last try's, without the URL.
func (s *Sender) Send(ctx context.Context, m Message) (Answer, error) {
	var err error
	for try := 1; try <= max(1, m.Tries); try++ {
		var a Answer
		if a, err = s.try(ctx, m); err == nil {
			return a, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return Answer{}, err
}

// try makes one try.
func (s *Sender) try(ctx context.Context, m Message) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, m.Method, m.URL, bytes.NewReader(m.Body))
	if err != nil {
		return Answer{}, withoutURL(err)
	}
	for k, vs := range m.Header {
		req.Header[k] = vs
	}
	// A copy of the client, on the same transport (its connections), with
	// this message's timeout.
	client := *s.client
	client.Timeout = m.Timeout
	resp, err := client.Do(req)
	if err != nil {
		return Answer{}, withoutURL(err)
	}
	defer resp.Body.Close()
	// The body is read for the record and to let the connection be reused;
	// failing to read it does not undo the answer.
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return Answer{Status: resp.StatusCode, Snippet: strings.TrimSpace(strings.ToValidUTF8(string(snippet), "\uFFFD"))}, nil
}

// withoutURL is err without the URL a *url.Error names, which may hold the
// receiver's secrets.
func withoutURL(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}
