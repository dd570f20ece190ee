package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/egress"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// Secrets are a tenant's values that egress rules set on requests at the
// runner's proxy: sealed here under GANTRY_SECRET_KEY (bound to the tenant
// and the name), opened only by the runner serving the request, and never
// answered, logged or put in a sandbox.

// needBox refuses what needs GANTRY_SECRET_KEY on a server without it.
func (s *Service) needBox(what string) error {
	if !s.cfg.Box.Enabled() {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: what + " need GANTRY_SECRET_KEY, to keep them sealed: this gantry was started without it"}
	}
	return nil
}

func checkSecretName(name string) error {
	if !jobs.SecretNameRE.MatchString(name) {
		return BadRequest("name", "must be a letter then letters, digits and _, at most 128 (like an environment variable)")
	}
	return nil
}

func checkSecretValue(field, v string) error {
	switch {
	case v == "":
		return BadRequest(field, "must not be empty")
	case len(v) > jobs.MaxSecretBytes:
		return BadRequest(field, "is %d bytes; at most %d", len(v), jobs.MaxSecretBytes)
	case strings.ContainsAny(v, "\r\n\x00"):
		return BadRequest(field, "must not contain CR, LF or NUL (it goes into a header)")
	}
	return CheckText(field, v)
}

// PutSecret sets the tenant's secret name to value; created says whether
// it is new. The value is never given back.
func (s *Service) PutSecret(ctx context.Context, p Principal, name, value string) (jobs.Secret, bool, error) {
	if err := checkSecretName(name); err != nil {
		return jobs.Secret{}, false, err
	}
	if err := checkSecretValue("value", value); err != nil {
		return jobs.Secret{}, false, err
	}
	if err := s.needBox("secrets"); err != nil {
		return jobs.Secret{}, false, err
	}
	sealed, err := s.cfg.Box.Seal([]byte(value), jobs.SecretSealContext(p.TenantID, name))
	if err != nil {
		return jobs.Secret{}, false, err
	}
	return s.store.PutSecret(ctx, p.TenantID, name, "", sealed)
}

// Secret returns the tenant's secret's dates (never its value).
func (s *Service) Secret(ctx context.Context, p Principal, name string) (jobs.Secret, error) {
	if !jobs.SecretNameRE.MatchString(name) {
		return jobs.Secret{}, NotFound("secret " + strconv.Quote(name))
	}
	sec, err := s.store.GetSecret(ctx, p.TenantID, name)
	if errors.Is(err, store.ErrNotFound) {
		return sec, NotFound("secret " + strconv.Quote(name))
	}
	return sec, err
}

// ListSecrets lists the tenant's secrets by name.
func (s *Service) ListSecrets(ctx context.Context, p Principal) ([]jobs.Secret, error) {
	list, err := s.store.ListSecrets(ctx, p.TenantID)
	if list == nil {
		list = []jobs.Secret{}
	}
	return list, err
}

// DeleteSecret deletes the tenant's secret. Jobs and sessions whose rules
// name it can no longer reach the rule's host (the proxy refuses rather
// than send the request without it).
func (s *Service) DeleteSecret(ctx context.Context, p Principal, name string) error {
	if !jobs.SecretNameRE.MatchString(name) {
		return NotFound("secret " + strconv.Quote(name))
	}
	err := s.store.DeleteSecret(ctx, p.TenantID, name)
	if errors.Is(err, store.ErrNotFound) {
		return NotFound("secret " + strconv.Quote(name))
	}
	return err
}

// checkNetwork checks a job's or a session's network (field names it in
// errors): its destinations, and that every secret its rules name is the
// tenant's (or, with sessionID, the session's own; the names in own are
// about to be). Rules need GANTRY_SECRET_KEY (the tenant's CA key is
// sealed under it).
func (s *Service) checkNetwork(ctx context.Context, p Principal, field string, n *jobs.Network, sessionID string, own map[string]string) error {
	if n.Empty() {
		return nil
	}
	for _, v := range own {
		if err := checkSecretValue(field+".rules", v); err != nil {
			return err
		}
	}
	if _, err := egress.ParseNarrowing(n.AllowOut, n.DenyOut); err != nil {
		list, msg, _ := strings.Cut(err.Error(), ": ")
		return BadRequest(field+"."+list, "%s", msg)
	}
	if len(n.Rules) == 0 {
		return nil
	}
	if err := s.needBox("egress rules"); err != nil {
		return err
	}
	var names []string
	for _, name := range n.Secrets() {
		if _, ok := own[name]; !ok {
			names = append(names, name)
		}
	}
	missing, err := s.store.MissingSecrets(ctx, p.TenantID, sessionID, names)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return BadRequest(field+".rules", "names secret %q, which this tenant does not have (PUT /v1/secrets/%s sets it)", missing[0], missing[0])
	}
	return nil
}

// SessionSecretName is a fresh name for a session's own secret (a
// compatible API's literal header value): it cannot be a tenant's name.
func SessionSecretName(prefix string) string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "_" + prefix + "_" + hex.EncodeToString(b)
}

// putSessionSecrets seals and keeps a session's own secrets.
func (s *Service) putSessionSecrets(ctx context.Context, p Principal, sessionID string, values map[string]string) error {
	for name, v := range values {
		if err := checkSecretValue("network.rules", v); err != nil {
			return err
		}
		sealed, err := s.cfg.Box.Seal([]byte(v), jobs.SecretSealContext(p.TenantID, name))
		if err != nil {
			return err
		}
		if _, _, err := s.store.PutSecret(ctx, p.TenantID, name, sessionID, sealed); err != nil {
			return err
		}
	}
	return nil
}

// SetSessionNetwork replaces the tenant's session's network (nil or empty:
// none); values are the session's own secrets its rules name (a compatible
// API's literal header values), replacing those it had. The runner holding
// a stateful session's live sandbox applies it to the connections its
// processes open from then on.
func (s *Service) SetSessionNetwork(ctx context.Context, p Principal, id string, n *jobs.Network, values map[string]string) (jobs.Session, error) {
	sess, err := s.Session(ctx, p, id)
	if err != nil {
		return sess, err
	}
	if n.Empty() {
		n = nil
	} else {
		n = jobs.NormalizeNetwork(n)
		if err := n.Check("network"); err != nil {
			return sess, err
		}
	}
	if err := s.checkNetwork(ctx, p, "network", n, id, values); err != nil {
		return sess, err
	}
	if err := s.putSessionSecrets(ctx, p, id, values); err != nil {
		return sess, err
	}
	if sess, err = s.store.SetSessionNetwork(ctx, p.TenantID, id, n); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return sess, NotFound("session " + strconv.Quote(id) + " (it may have expired or been closed)")
		}
		return sess, err
	}
	keep := make([]string, 0, len(values))
	for name := range values {
		keep = append(keep, name)
	}
	if err := s.store.DeleteSessionSecrets(ctx, p.TenantID, id, keep); err != nil {
		s.log.Warn("delete a session's replaced secrets", "session_id", id, "err", err)
	}
	if sess.Live != "" {
		// Best effort: a runner that is gone holds no live sandbox, and
		// the session's next job reads the network with its claim.
		tell, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := s.sandboxes.networkChanged(tell, sess); err != nil && !errors.Is(err, nats.ErrNoResponders) {
			s.log.Warn("tell a live sandbox's runner of its session's new network", "session_id", id, "err", err)
		}
	}
	return sess, nil
}
