package service

import (
	"context"
	"net/http"

	"github.com/gantryhq/gantry/egress"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/webhook"
)

// Settings are a tenant's own switches.
type Settings struct {
	// PIITokens: privacy tokens are on.
	PIITokens bool
	// WebhookURL is the default webhook ("": none).
	WebhookURL string
	// EgressAllow lists the hosts the tenant's jobs may reach through the
	// egress proxy (empty: no network at all).
	EgressAllow []string
}

// SettingsChange changes the settings that are set.
type SettingsChange struct {
	PIITokens   *bool
	WebhookURL  *string   // "" removes the default webhook
	EgressAllow *[]string // empty removes every host
}

// EgressPolicy is the operator's word on egress.
type EgressPolicy struct {
	// Off: no tenant may have an allow-list (GANTRY_EGRESS=false).
	Off bool
	// MaxHosts caps a tenant's allow-list (GANTRY_EGRESS_MAX_HOSTS).
	MaxHosts int
}

// Settings returns the tenant's settings.
func (s *Service) Settings(ctx context.Context, p Principal) (Settings, error) {
	on, err := s.store.TenantPII(ctx, p.TenantID)
	if err != nil {
		return Settings{}, err
	}
	hook, err := s.store.TenantWebhookURL(ctx, p.TenantID)
	if err != nil {
		return Settings{}, err
	}
	allow, err := s.store.TenantEgress(ctx, p.TenantID)
	if err != nil {
		return Settings{}, err
	}
	if allow == nil {
		allow = []string{}
	}
	return Settings{PIITokens: on, WebhookURL: hook, EgressAllow: allow}, nil
}

// UpdateSettings changes the tenant's settings and returns them as they
// then are. Privacy tokens need GANTRY_SECRET_KEY (turning them off always
// works); a webhook URL is checked as a job's is.
func (s *Service) UpdateSettings(ctx context.Context, p Principal, c SettingsChange) (Settings, error) {
	if c.PIITokens != nil {
		if *c.PIITokens && !s.cfg.Privacy {
			return Settings{}, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "privacy tokens need GANTRY_SECRET_KEY, which this gantry does not have"}
		}
		if err := s.store.SetTenantPII(ctx, p.TenantID, *c.PIITokens); err != nil {
			return Settings{}, err
		}
	}
	if c.WebhookURL != nil {
		if err := s.checkWebhookURL("webhook_url", *c.WebhookURL); err != nil {
			return Settings{}, err
		}
		if err := s.store.SetTenantWebhookURL(ctx, p.TenantID, *c.WebhookURL); err != nil {
			return Settings{}, err
		}
	}
	if c.EgressAllow != nil {
		if err := s.checkEgress(*c.EgressAllow); err != nil {
			return Settings{}, err
		}
		if err := s.store.SetTenantEgress(ctx, p.TenantID, *c.EgressAllow); err != nil {
			return Settings{}, err
		}
	}
	return s.Settings(ctx, p)
}

// checkEgress checks an allow-list against its form and the operator's
// policy; an error names egress.allow.
func (s *Service) checkEgress(allow []string) error {
	if len(allow) == 0 {
		return nil
	}
	if s.cfg.Egress.Off {
		return BadRequest("egress.allow", "egress is off on this gantry (GANTRY_EGRESS=false): jobs have no network")
	}
	if max := s.cfg.Egress.MaxHosts; max > 0 && len(allow) > max {
		return BadRequest("egress.allow", "has %d entries; this gantry allows at most %d (GANTRY_EGRESS_MAX_HOSTS)", len(allow), max)
	}
	if _, err := egress.ParseAllowList(allow); err != nil {
		return BadRequest("egress.allow", "%v", err)
	}
	return nil
}

// Webhooks: a job's request may name a webhook_url, and a tenant may set a
// default in its settings; the service checks them and keeps the tenant's
// signing secret. Deliveries are made by the webhook package's dispatcher,
// which the Maintenance runs.

// checkWebhookURL checks a webhook URL a tenant gives ("" is none), the one
// check of it on a request: with the sender that would deliver to it when
// webhooks are on; when they are off, its form, then that they are off.
func (s *Service) checkWebhookURL(field, u string) error {
	if u == "" {
		return nil
	}
	if s.webhooks != nil {
		return s.sender.CheckURL(field, u)
	}
	if _, err := jobs.ValidateWebhookURL(field, u); err != nil {
		return err
	}
	return BadRequest(field, "webhooks are off on this gantry: they need GANTRY_SECRET_KEY, to keep the secrets that sign them")
}

// WebhookSecret returns the tenant's signing secret, made on first use.
func (s *Service) WebhookSecret(ctx context.Context, p Principal) (webhook.Secrets, error) {
	if s.webhooks == nil {
		return webhook.Secrets{}, errWebhooksOff
	}
	return s.webhooks.Secret(ctx, p.TenantID)
}

// RotateWebhookSecret gives the tenant a new signing secret; the old one
// goes on signing alongside for a day.
func (s *Service) RotateWebhookSecret(ctx context.Context, p Principal) (webhook.Secrets, error) {
	if s.webhooks == nil {
		return webhook.Secrets{}, errWebhooksOff
	}
	return s.webhooks.Rotate(ctx, p.TenantID)
}

// errWebhooksOff answers for the webhook secrets without a secret key.
var errWebhooksOff = &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "webhooks are off on this gantry: they need GANTRY_SECRET_KEY"}
