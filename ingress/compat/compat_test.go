package compat

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPathKeysTakesTheKeyOutOfThePath(t *testing.T) {
	var gotPath, gotURI, gotKey string
	h := PathKeys(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotURI, gotKey = r.URL.Path, r.RequestURI, Key(r)
	}))
	r := httptest.NewRequest("POST", "/compat/key/gk_secret_123/piston/api/v2/execute?x=1", nil)
	h.ServeHTTP(httptest.NewRecorder(), r)
	if gotPath != "/compat/piston/api/v2/execute" || gotKey != "gk_secret_123" || strings.Contains(gotURI, "gk_secret") {
		t.Errorf("path %q, uri %q, key %q", gotPath, gotURI, gotKey)
	}
	for _, bad := range []string{"/compat/key/gk_secret_123", "/compat/key/gk_secret_123/", "/compat/key//piston/x"} {
		w := httptest.NewRecorder()
		gotPath = ""
		h.ServeHTTP(w, httptest.NewRequest("GET", bad, nil))
		if w.Code != 404 || gotPath != "" || strings.Contains(w.Body.String(), "gk_secret") {
			t.Errorf("%s: %d %q (passed on: %q)", bad, w.Code, w.Body, gotPath)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/jobs", nil))
	if gotPath != "/v1/jobs" || gotKey != "" {
		t.Errorf("other paths pass as they are: %q %q", gotPath, gotKey)
	}
}

func TestKeyForms(t *testing.T) {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("verl:gk_basic"))
	for _, c := range []struct {
		header, value, want string
	}{
		{"Authorization", "Bearer gk_bearer", "gk_bearer"},
		{"Authorization", "bearer  gk_bearer ", "gk_bearer"},
		{"Authorization", basic, "gk_basic"},
		{"Authorization", "Basic !!!", ""},
		{"Authorization", "Token gk_x", ""},
		{"X-Auth-Token", "gk_judge0", "gk_judge0"},
		{"X-Other", "gk_x", ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set(c.header, c.value)
		if got := Key(r); got != c.want {
			t.Errorf("%s: %s → %q, want %q", c.header, c.value, got, c.want)
		}
	}
}

func TestBase64AsRubyAndPython(t *testing.T) {
	long := strings.Repeat("x", 100)
	enc := Encode64([]byte(long))
	lines := strings.Split(strings.TrimSuffix(enc, "\n"), "\n")
	if len(lines) != 3 || len(lines[0]) != 60 || !strings.HasSuffix(enc, "\n") {
		t.Errorf("Encode64 = %q", enc)
	}
	if Encode64(nil) != "" {
		t.Error("Encode64 of nothing is empty")
	}
	for _, in := range []string{enc, "aGk=", "aGk", "a G\nk=", "aGk=\n"} {
		b, err := LaxBase64(in)
		want := "hi"
		if in == enc {
			want = long
		}
		if err != nil || string(b) != want {
			t.Errorf("LaxBase64(%q) = %q, %v", in, b, err)
		}
	}
}
