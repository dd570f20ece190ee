package ingress

import (
	"context"
	"net/http"

	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/webhook"
)

// Webhooks: a job's request may name a webhook_url, and a tenant may set a
// default in its settings; the ingress checks them here and serves the
// tenant's signing secret. Deliveries are made by the webhook package's
// dispatcher, which Start runs.

// checkWebhookURL checks a webhook URL a tenant gives ("" is none).
func (s *Server) checkWebhookURL(field, u string) error {
	if u == "" {
		return nil
	}
	if s.webhooks == nil {
		return badRequest(field, "webhooks are off on this gantry: they need GANTRY_SECRET_KEY, to keep the secrets that sign them")
	}
	return s.webhooks.CheckURL(field, u)
}

// setTenantWebhook sets or ("" ) removes the tenant's default webhook.
func (s *Server) setTenantWebhook(ctx context.Context, p store.Principal, u string) error {
	if err := s.checkWebhookURL("webhook_url", u); err != nil {
		return err
	}
	return s.store.SetTenantWebhookURL(ctx, p.TenantID, u)
}

// handleWebhookSecret answers the tenant's signing secret, made on first use.
func (s *Server) handleWebhookSecret(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	return s.serveSecret(w, r, p, s.webhooks.Secret)
}

// handleRotateWebhookSecret gives the tenant a new signing secret; the old
// one goes on signing alongside for a day.
func (s *Server) handleRotateWebhookSecret(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	return s.serveSecret(w, r, p, s.webhooks.Rotate)
}

// serveSecret answers what op gives (a method of s.webhooks, which is nil
// when webhooks are off: op is then not called).
func (s *Server) serveSecret(w http.ResponseWriter, r *http.Request, p store.Principal,
	op func(ctx context.Context, tenantID string) (webhook.Secrets, error)) error {
	if s.webhooks == nil {
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "webhooks are off on this gantry: they need GANTRY_SECRET_KEY"}
	}
	sec, err := op(r.Context(), p.TenantID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sec)
	return nil
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
