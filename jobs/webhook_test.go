package jobs

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateWebhookURL(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"https://hooks.example.com/gantry?x=1", "http://10.0.0.1:8080/h", "https://[::1]/"} {
		if _, err := ValidateWebhookURL("webhook_url", ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for u, want := range map[string]string{
		"ftp://example.com/":                               "http or https",
		"example.com/hook":                                 "http or https",
		"https:///nohost":                                  "host",
		"https://user:pw@example.com/":                     "credentials",
		"https://example.com/#frag":                        "fragment",
		"https://example.com/a b":                          "spaces",
		"https://example.com/" + strings.Repeat("a", 2100): "at most 2048",
	} {
		_, err := ValidateWebhookURL("webhook_url", u)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "webhook_url" || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40s: %v, want a webhook_url error saying %q", u, err, want)
		}
	}
	// The URL is no part of the spec: the service checks it, once, with the
	// sender that would call it (ingress's TestWebhookURLChecks).
	if _, err := DefaultPolicy().Normalize(Request{Language: "python", Code: "x", WebhookURL: "mailto:a@b"}); err != nil {
		t.Errorf("Normalize checked webhook_url: %v", err)
	}
}
