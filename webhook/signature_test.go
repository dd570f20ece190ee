package webhook

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The example of the Standard Webhooks reference libraries.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignMatchesTheSpec(t *testing.T) {
	t.Parallel()
	got, err := Sign(specSecret, specID, time.Unix(specTimestamp, 0), []byte(specBody))
	if err != nil || got != specSignature {
		t.Fatalf("Sign = %q, %v; want %q", got, err, specSignature)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(specTimestamp, 0)
	hdr := func(sig string) http.Header {
		h := http.Header{}
		h.Set(HeaderID, specID)
		h.Set(HeaderTimestamp, strconv.Itoa(specTimestamp))
		h.Set(HeaderSignature, sig)
		return h
	}
	if err := Verify(specSecret, hdr(specSignature), []byte(specBody), now); err != nil {
		t.Errorf("valid: %v", err)
	}
	// Several signatures (a rotation): one valid one is enough.
	if err := Verify(specSecret, hdr("v1,AAAA "+specSignature), []byte(specBody), now.Add(4*time.Minute)); err != nil {
		t.Errorf("multi: %v", err)
	}
	for name, c := range map[string]struct {
		h    http.Header
		body string
		now  time.Time
	}{
		"tampered body":   {hdr(specSignature), `{"test": 1}`, now},
		"wrong signature": {hdr("v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="), specBody, now},
		"other version":   {hdr("v2," + strings.TrimPrefix(specSignature, "v1,")), specBody, now},
		"old":             {hdr(specSignature), specBody, now.Add(6 * time.Minute)},
		"missing id":      {func() http.Header { h := hdr(specSignature); h.Del(HeaderID); return h }(), specBody, now},
	} {
		if err := Verify(specSecret, c.h, []byte(c.body), c.now); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
	s := NewSecret()
	sig, _ := Sign(s, "msg_x", now, []byte("{}"))
	h := hdr(sig)
	h.Set(HeaderID, "msg_x")
	if !strings.HasPrefix(s, "whsec_") || Verify(s, h, []byte("{}"), now) != nil {
		t.Errorf("a new secret %q does not round-trip", s)
	}
}

// FuzzVerify: headers and bodies from anyone never crash a receiver, and
// never verify without the secret's signature.
func FuzzVerify(f *testing.F) {
	f.Add(specID, strconv.Itoa(specTimestamp), specSignature, []byte(specBody))
	f.Add("", "x", "v1,", []byte{})
	f.Add(specID, "-99999999999999999999", "v1,AAAA v2,BBBB", []byte("{}"))
	f.Fuzz(func(t *testing.T, id, ts, sigs string, body []byte) {
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, sigs)
		err := Verify(specSecret, h, body, time.Unix(specTimestamp, 0))
		if err == nil {
			want, _ := Sign(specSecret, id, time.Unix(specTimestamp, 0), body)
			n, _ := strconv.ParseInt(ts, 10, 64)
			if n != specTimestamp || !strings.Contains(sigs, want) {
				t.Fatalf("verified %q %q %q without its signature", id, ts, sigs)
			}
		}
	})
}
