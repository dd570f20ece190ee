package webhook_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/webhook"
)

// TestSender: the one sender of webhooks and callbacks. It sends what it is
// given, tries again only while it gets no answer, never follows a
// redirect, bounds each try, refuses a private address on the address
// dialled, and keeps the URL (and the token in it) out of its errors.
func TestSender(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var tries int
	var got struct {
		method, path, header, body string
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		tries++
		n := tries
		got.method, got.path, got.header, got.body = r.Method, r.URL.Path, r.Header.Get("X-Test"), string(body)
		mu.Unlock()
		switch r.URL.Path {
		case "/flaky":
			if n < 3 { // no answer: the connection ends without one
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.Close()
				return
			}
		case "/fails":
			http.Error(w, "  try later  ", http.StatusServiceUnavailable)
			return
		case "/moved":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		case "/elsewhere":
			t.Error("a redirect was followed")
		case "/slow": // answers only once the client has gone
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	reset := func() {
		mu.Lock()
		defer mu.Unlock()
		tries = 0
	}
	triesMade := func() int {
		mu.Lock()
		defer mu.Unlock()
		return tries
	}
	ctx := context.Background()
	s := webhook.NewSender(true)
	msg := func(path string, tries int) webhook.Message {
		return webhook.Message{Method: http.MethodPut, URL: srv.URL + path + "?token=s3cret", Header: http.Header{"X-Test": {"yes"}},
			Body: []byte(`{"a":1}`), Timeout: 5 * time.Second, Tries: tries}
	}

	t.Run("no answer is tried again, up to Tries", func(t *testing.T) {
		reset()
		a, err := s.Send(ctx, msg("/flaky", 3))
		if err != nil || a.Status != http.StatusNoContent || a.Err() != nil || triesMade() != 3 {
			t.Fatalf("answer %+v, err %v, after %d tries", a, err, triesMade())
		}
		if got.method != "PUT" || got.header != "yes" || got.body != `{"a":1}` {
			t.Errorf("the receiver got %+v", got)
		}
		reset()
		if _, err := s.Send(ctx, msg("/flaky", 2)); err == nil || triesMade() != 2 || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("out of tries: err %v after %d tries", err, triesMade())
		}
	})
	t.Run("an answer ends the tries, whatever its status", func(t *testing.T) {
		reset()
		a, err := s.Send(ctx, msg("/fails", 3))
		if err != nil || a.Status != http.StatusServiceUnavailable || triesMade() != 1 {
			t.Fatalf("answer %+v, err %v, after %d tries", a, err, triesMade())
		}
		if e := a.Err(); e == nil || e.Error() != "HTTP 503: try later" {
			t.Errorf("Err() = %v", e)
		}
	})
	t.Run("a redirect is an answer, not followed", func(t *testing.T) {
		a, err := s.Send(ctx, msg("/moved", 1))
		if err != nil || a.Status != http.StatusFound || a.Err() == nil || !strings.Contains(a.Err().Error(), "redirects are not followed") {
			t.Errorf("answer %+v (%v), err %v", a, a.Err(), err)
		}
	})
	t.Run("each try is bounded", func(t *testing.T) {
		m := msg("/slow", 2)
		m.Timeout = 200 * time.Millisecond
		reset()
		_, err := s.Send(ctx, m)
		if err == nil || !strings.Contains(err.Error(), "Client.Timeout") || strings.Contains(err.Error(), "s3cret") || triesMade() != 2 {
			t.Errorf("err %v after %d tries", err, triesMade())
		}
	})
	t.Run("private addresses are refused when dialled", func(t *testing.T) {
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		strict := webhook.NewSender(false)
		reset()
		m := msg("/", 2)
		m.URL = "http://localhost:" + port + "/?token=s3cret"
		_, err := strict.Send(ctx, m)
		if err == nil || !strings.Contains(err.Error(), "GANTRY_WEBHOOK_ALLOW_PRIVATE") || strings.Contains(err.Error(), "s3cret") || triesMade() != 0 {
			t.Errorf("err %v, the receiver got %d", err, triesMade())
		}
		if err := strict.CheckURL("callback_url", m.URL); err == nil || !strings.Contains(err.Error(), "not public") {
			t.Errorf("CheckURL = %v", err)
		}
		if err := strict.CheckURL("callback_url", "ftp://example.com/"); err == nil || !strings.Contains(err.Error(), "http or https") {
			t.Errorf("CheckURL = %v", err)
		}
		if err := strict.CheckURL("callback_url", "https://hooks.example.com/x"); err != nil {
			t.Errorf("CheckURL = %v", err)
		}
	})
	t.Run("a context that ends stops the tries", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		reset()
		if _, err := s.Send(cctx, msg("/flaky", 3)); err == nil || triesMade() != 0 {
			t.Errorf("err %v after %d tries", err, triesMade())
		}
	})
}
