package jobs

import (
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// The states of a webhook delivery.
const (
	WebhookPending   = "pending"
	WebhookDelivered = "delivered"
	WebhookFailed    = "failed"
)

// WebhookDelivery is the call gantry makes to a job's webhook URL when the
// job finishes, with every attempt so far.
type WebhookDelivery struct {
	// ID is the message id (the webhook-id header), the same on every
	// attempt, so receivers can drop duplicates.
	ID       string           `json:"id"`
	URL      string           `json:"url"`
	Status   string           `json:"status"`
	Attempts []WebhookAttempt `json:"attempts"`
	// NextAttemptAt is when it is tried next (pending only).
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	CreatedAt     time.Time  `json:"created_at"`
	// FinishedAt is when it was delivered or given up.
	FinishedAt *time.Time `json:"finished_at"`
}

// Settled reports whether the delivery will not change again.
func (d *WebhookDelivery) Settled() bool { return d.Status != WebhookPending }

// WebhookAttempt is one try at delivering a webhook.
type WebhookAttempt struct {
	At time.Time `json:"at"`
	// StatusCode is the receiver's HTTP status (0: it did not answer).
	StatusCode int    `json:"status_code"`
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// MaxWebhookURL bounds a webhook URL's length.
const MaxWebhookURL = 2048

// ValidateWebhookURL checks that u is an absolute http or https URL gantry
// can call: a host, no credentials, no fragment. field names it in errors.
// Whether its address is public is checked by the caller, which knows the
// operator's policy.
func ValidateWebhookURL(field, u string) (*url.URL, error) {
	switch {
	case len(u) > MaxWebhookURL:
		return nil, fieldErr(field, "is %d bytes; at most %d", len(u), MaxWebhookURL)
	case !utf8.ValidString(u) || strings.ContainsAny(u, "\x00 \t\r\n"):
		return nil, fieldErr(field, "must be a URL without spaces or control characters")
	}
	p, err := url.Parse(u)
	if err != nil {
		return nil, fieldErr(field, "is not a URL: %v", err)
	}
	switch {
	case p.Scheme != "http" && p.Scheme != "https":
		return nil, fieldErr(field, "must be an http or https URL, not %q", u)
	case p.Host == "" || p.Hostname() == "":
		return nil, fieldErr(field, "must name a host")
	case p.User != nil:
		return nil, fieldErr(field, "must not carry credentials (user:password@); the signature authenticates gantry")
	case p.Fragment != "" || strings.Contains(u, "#"):
		return nil, fieldErr(field, "must not have a #fragment")
	}
	return p, nil
}
