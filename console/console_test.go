package console

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
)

const goodKey = "gk_console_test_key"

// fakeAPI stands in for the ingress's handler, for the key goodKey.
func fakeAPI(t *testing.T) http.Handler {
	t.Helper()
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	apiErr := func(w http.ResponseWriter, status int, code, msg string) {
		writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+goodKey {
			apiErr(w, 401, "unauthenticated", "invalid or revoked API key")
			return
		}
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/languages":
			writeJSON(w, 200, map[string]any{"languages": []map[string]string{{"name": "python"}, {"name": "bash"}}})
		case "GET /v1/jobs":
			if r.URL.Query().Get("status") == "nope" {
				apiErr(w, 400, "invalid_argument", `unknown status "nope"`)
				return
			}
			writeJSON(w, 200, map[string]any{"jobs": []map[string]any{{"id": "job_a", "status": "succeeded", "language": "python", "created_at": "2026-01-01T00:00:00Z"}}, "next_cursor": nil})
		case "GET /v1/jobs/job_cpp":
			writeJSON(w, 200, map[string]any{"id": "job_cpp", "status": "failed", "language": "cpp", "created_at": "2026-01-01T00:00:00Z", "metadata": map[string]string{},
				"error":          map[string]string{"code": "compile_error", "message": "the program did not compile"},
				"compile":        map[string]any{"status": "failed", "exit_code": 1, "duration_ms": 812, "cpu_time_ms": 790, "peak_memory_kb": 66000, "output_truncated": false},
				"compile_output": "main.cpp:1: error: <expected> ';'\n", "cpu_time_ms": nil, "peak_memory_kb": nil})
		case "GET /v1/jobs/job_code", "GET /v1/jobs/job_cmd":
			// What ran is shown only with include=spec, as the API does.
			j := map[string]any{"id": strings.TrimPrefix(r.URL.Path, "/v1/jobs/"), "status": "succeeded", "language": "python", "created_at": "2026-01-01T00:00:00Z", "metadata": map[string]string{},
				"cpu_time_ms": 12, "peak_memory_kb": 8800}
			if r.URL.Query().Get("include") == "spec" {
				spec := map[string]any{"code": "print('<b>6*7</b>' if 1 < 2 else '')\n", "files": []map[string]any{{"path": "data.csv", "size": 8}},
					"env_names": []string{"API_TOKEN", "SEED"}, "stdin": "", "stdin_encoding": "utf8", "timeout_ms": 30000, "artifacts": []string{"out/**"}}
				if strings.HasSuffix(r.URL.Path, "job_cmd") {
					spec["code"], spec["command"], spec["files"], spec["env_names"] = nil, []string{"python3", "-c", "print('a b')"}, []any{}, []string{}
				}
				j["spec"] = spec
			}
			writeJSON(w, 200, j)
		case "GET /v1/sessions":
			writeJSON(w, 200, map[string]any{"sessions": []any{}, "next_cursor": nil})
		case "GET /v1/snapshots":
			writeJSON(w, 200, map[string]any{"snapshots": []map[string]any{{"id": "snp_1", "name": "<at 42>", "session_id": "ses_live",
				"language": "python", "environment": "default", "disk_mb": 512, "bytes": 7 << 20, "created_at": "2026-01-01T00:00:00Z"}}, "next_cursor": nil})
		case "DELETE /v1/snapshots/snp_1":
			w.WriteHeader(204)
		case "GET /v1/sessions/ses_live":
			writeJSON(w, 200, map[string]any{"id": "ses_live", "status": "idle", "language": "python", "stateful": true, "state": "paused", "on_timeout": "pause"})
		case "GET /v1/sessions/ses_live/files":
			writeJSON(w, 200, map[string]any{"files": []any{}})
		case "POST /v1/sessions":
			var req map[string]any
			_ = json.NewDecoder(r.Body).Decode(&req)
			if req["snapshot"] == "snp_1" {
				writeJSON(w, 201, map[string]any{"id": "ses_2", "status": "idle", "language": "python", "stateful": true})
				return
			}
			if req["language"] != "python" {
				apiErr(w, 400, "invalid_argument", "language: unknown language")
				return
			}
			writeJSON(w, 201, map[string]any{"id": "ses_1", "status": "idle", "language": "python"})
		case "GET /v1/sessions/ses_1/files/site/evil.html":
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = io.WriteString(w, "<script>alert(1)</script>")
		default:
			apiErr(w, 404, "not_found", "route "+r.Method+" "+r.URL.Path+" not found")
		}
	})
}

type bundle struct {
	h      http.Handler
	cookie *http.Cookie
	csrf   string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	c, err := New(Config{SessionKey: make([]byte, 32), ImageOrigins: []string{"http://127.0.0.1:7070"}, Version: "test"}, slog.New(slog.DiscardHandler), fakeAPI(t))
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{h: c.Handler()}
}

func (b *bundle) do(t *testing.T, method, target string, form url.Values, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, "http://gantry.test"+target, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.cookie != nil {
		r.AddCookie(b.cookie)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	b.h.ServeHTTP(w, r)
	return w
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

func (b *bundle) signIn(t *testing.T) {
	t.Helper()
	w := b.do(t, "POST", "/console/signin", url.Values{"key": {goodKey}}, nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/jobs" {
		t.Fatalf("sign in: %d %s", w.Code, w.Body)
	}
	b.cookie = w.Result().Cookies()[0]
	page := b.do(t, "GET", "/console/jobs", nil, nil)
	m := csrfMeta.FindStringSubmatch(page.Body.String())
	if page.Code != 200 || m == nil {
		t.Fatalf("jobs page: %d %s", page.Code, page.Body)
	}
	b.csrf = m[1]
}

func TestSignIn(t *testing.T) {
	b := setup(t)
	if w := b.do(t, "GET", "/", nil, nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/" {
		t.Fatalf("/: %d %v", w.Code, w.Header())
	}
	if w := b.do(t, "GET", "/console/jobs", nil, nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/signin" {
		t.Fatalf("signed out: %d %v", w.Code, w.Header())
	}
	w := b.do(t, "POST", "/console/signin", url.Values{"key": {"gk_wrong"}}, nil)
	if w.Code != 401 || !strings.Contains(w.Body.String(), "invalid or revoked API key") || len(w.Result().Cookies()) != 0 {
		t.Fatalf("wrong key: %d %v %s", w.Code, w.Result().Cookies(), w.Body)
	}
	if strings.Contains(w.Body.String(), "gk_wrong") {
		t.Error("the page shows the key that was typed")
	}
	if w := b.do(t, "POST", "/console/signin", url.Values{"key": {""}}, nil); w.Code != 400 {
		t.Errorf("empty key: %d", w.Code)
	}

	w = b.do(t, "POST", "/console/signin", url.Values{"key": {goodKey}}, nil)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("good key: %d %s", w.Code, w.Body)
	}
	ck := w.Result().Cookies()[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console/" || ck.Secure {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/console/, not Secure over http", ck)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(ck.Value)
	if strings.Contains(ck.Value, goodKey) || strings.Contains(string(raw), goodKey) || strings.Contains(w.Header().Get("Location"), goodKey) {
		t.Error("the key is readable in the cookie or the redirect")
	}
	// Over TLS (here: behind a proxy that says so) the cookie is Secure.
	w = b.do(t, "POST", "/console/signin", url.Values{"key": {goodKey}}, map[string]string{"X-Forwarded-Proto": "https"})
	if !w.Result().Cookies()[0].Secure {
		t.Error("cookie not Secure over https")
	}

	b.cookie = ck
	if w := b.do(t, "GET", "/console/jobs", nil, nil); w.Code != 200 || !strings.Contains(w.Body.String(), "job_a") {
		t.Fatalf("jobs: %d %s", w.Code, w.Body)
	}
	// A tampered cookie is no sign-in.
	bad := []byte(ck.Value)
	bad[len(bad)/2] ^= 1
	b.cookie = &http.Cookie{Name: ck.Name, Value: string(bad)}
	if w := b.do(t, "GET", "/console/jobs", nil, nil); w.Code != http.StatusSeeOther {
		t.Errorf("tampered cookie: %d", w.Code)
	}
	// Another console's key does not open it.
	other, _ := New(Config{SessionKey: []byte(strings.Repeat("k", 32))}, slog.New(slog.DiscardHandler), fakeAPI(t))
	r := httptest.NewRequest("GET", "/console/jobs", nil)
	r.AddCookie(ck)
	w = httptest.NewRecorder()
	other.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusSeeOther {
		t.Errorf("cookie of another key: %d", w.Code)
	}
}

func TestFormsNeedTheSessionToken(t *testing.T) {
	b := setup(t)
	b.signIn(t)
	form := url.Values{"language": {"python"}}
	if w := b.do(t, "POST", "/console/sessions", form, nil); w.Code != 403 || !strings.Contains(w.Body.String(), "security token") {
		t.Errorf("no token: %d", w.Code)
	}
	form.Set("csrf", "forged")
	if w := b.do(t, "POST", "/console/sessions", form, nil); w.Code != 403 {
		t.Errorf("forged token: %d", w.Code)
	}
	form.Set("csrf", b.csrf)
	// Cross-site requests are refused even with the token.
	if w := b.do(t, "POST", "/console/sessions", form, map[string]string{"Sec-Fetch-Site": "cross-site"}); w.Code != 403 {
		t.Errorf("cross-site: %d", w.Code)
	}
	if w := b.do(t, "POST", "/console/sessions", form, map[string]string{"Sec-Fetch-Site": "same-origin"}); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/sessions/ses_1" {
		t.Errorf("good form: %d %v %s", w.Code, w.Header(), w.Body)
	}
	// A form too large is refused as such, not as a missing token.
	big := url.Values{"language": {strings.Repeat("x", maxForm)}, "csrf": {b.csrf}}
	if w := b.do(t, "POST", "/console/sessions", big, nil); w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "larger than") {
		t.Errorf("a form too large: %d", w.Code)
	}
	// Signing out needs the token too.
	if w := b.do(t, "POST", "/console/signout", url.Values{}, nil); w.Code != 403 {
		t.Errorf("sign out without token: %d", w.Code)
	}
}

// A job's page shows what ran (the API's include=spec), escaped: its code
// or command, its input files and its env names.
// TestSnapshots: the snapshots page lists the tenant's snapshots
// (escaped), starts a session from one and deletes one; a stateful
// session's page shows its state.
func TestSnapshots(t *testing.T) {
	b := setup(t)
	b.signIn(t)
	w := b.do(t, "GET", "/console/snapshots", nil, nil)
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, "<code>snp_1</code>") || !strings.Contains(body, "&lt;at 42&gt;") || !strings.Contains(body, "7.0 MiB") ||
		!strings.Contains(body, `href="/console/sessions/ses_live"`) || !strings.Contains(body, `href="/console/snapshots" aria-current="page"`) {
		t.Errorf("snapshots: %d %s", w.Code, body)
	}
	w = b.do(t, "POST", "/console/sessions", url.Values{"snapshot": {"snp_1"}, "csrf": {b.csrf}}, nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/sessions/ses_2" {
		t.Errorf("a session from the snapshot: %d %s", w.Code, w.Body)
	}
	w = b.do(t, "POST", "/console/snapshots/snp_1/delete", url.Values{"csrf": {b.csrf}}, nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/snapshots" {
		t.Errorf("delete: %d %s", w.Code, w.Body)
	}
	w = b.do(t, "GET", "/console/sessions/ses_live", nil, nil)
	if body := w.Body.String(); w.Code != 200 || !strings.Contains(body, "<dt>State</dt><dd>paused (its live state is saved") || !strings.Contains(body, "<dt>At its timeout</dt><dd>paused</dd>") {
		t.Errorf("a paused session's page: %d %s", w.Code, body)
	}
}

func TestJobPageShowsWhatRan(t *testing.T) {
	b := setup(t)
	b.signIn(t)
	w := b.do(t, "GET", "/console/jobs/job_code", nil, nil)
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, `<pre id="job-code" tabindex="0" aria-label="code">print(&#39;&lt;b&gt;6*7&lt;/b&gt;&#39; if 1 &lt; 2 else &#39;&#39;)`+"\n</pre>") {
		t.Errorf("code: %d %s", w.Code, body)
	}
	if strings.Contains(body, "<b>6*7") {
		t.Error("the code is not escaped")
	}
	if !strings.Contains(body, "<code>data.csv</code> <span class=\"muted\">8 B</span>") || !strings.Contains(body, "<code>API_TOKEN</code>, <code>SEED</code>") {
		t.Errorf("files and env names: %s", body)
	}
	w = b.do(t, "GET", "/console/jobs/job_cmd", nil, nil)
	if body := w.Body.String(); w.Code != 200 || !strings.Contains(body, `aria-label="command">python3 -c &#34;print(&#39;a b&#39;)&#34;</pre>`) || strings.Contains(body, "job-files") {
		t.Errorf("command: %d %s", w.Code, body)
	}
}

// A job's page shows what its program used and, for a compiled language,
// the compile step with the compiler's output, escaped.
func TestJobPageShowsUsageAndCompile(t *testing.T) {
	b := setup(t)
	b.signIn(t)
	body := b.do(t, "GET", "/console/jobs/job_code", nil, nil).Body.String()
	if !strings.Contains(body, `<dd id="cpu-time">12 ms</dd>`) || !strings.Contains(body, `<dd id="peak-memory">8.6 MiB</dd>`) || strings.Contains(body, "compile-output") {
		t.Errorf("usage: %s", body)
	}
	body = b.do(t, "GET", "/console/jobs/job_cpp", nil, nil).Body.String()
	if !strings.Contains(body, `<dd id="compile-status">failed</dd>`) || !strings.Contains(body, `aria-label="compiler output">main.cpp:1: error: &lt;expected&gt; &#39;;&#39;`) ||
		!strings.Contains(body, `<dd id="cpu-time">–</dd>`) || !strings.Contains(body, "64.5 MiB") {
		t.Errorf("compile: %s", body)
	}
}

func TestPagesShowTheAPIsErrors(t *testing.T) {
	b := setup(t)
	b.signIn(t)
	w := b.do(t, "GET", "/console/jobs/job_missing", nil, nil)
	if w.Code != 404 || !strings.Contains(w.Body.String(), "route GET /v1/jobs/job_missing not found") {
		t.Errorf("missing job: %d %s", w.Code, w.Body)
	}
	w = b.do(t, "GET", "/console/jobs?status=nope", nil, nil)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "unknown status &#34;nope&#34;") {
		t.Errorf("bad filter: %d %s", w.Code, w.Body)
	}
	w = b.do(t, "POST", "/console/sessions", url.Values{"language": {"cobol"}, "csrf": {b.csrf}}, nil)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "language: unknown language") {
		t.Errorf("bad session: %d %s", w.Code, w.Body)
	}
}

func TestHeaders(t *testing.T) {
	b := setup(t)
	b.signIn(t)
	w := b.do(t, "GET", "/console/jobs", nil, nil)
	csp := w.Header().Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "style-src 'self'", "img-src 'self' data: http://127.0.0.1:7070", "frame-ancestors 'none'", "form-action 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q allows unsafe sources", csp)
	}
	if w.Header().Get("X-Frame-Options") != "DENY" || w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers: %v", w.Header())
	}
	// No inline script or style anywhere in the templates.
	entries, _ := files.ReadDir("templates")
	for _, e := range entries {
		b, _ := files.ReadFile("templates/" + e.Name())
		s := string(b)
		if regexp.MustCompile(`<script>|<script [^>]*>[^<]|<style|style="| on[a-z]+="`).MatchString(s) {
			t.Errorf("%s has inline script or style", e.Name())
		}
	}
	// A workspace file is an attachment, sandboxed: never a page of the console's origin.
	w = b.do(t, "GET", "/console/sessions/ses_1/files/site/evil.html", nil, nil)
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Disposition"), "attachment") ||
		!strings.HasPrefix(w.Header().Get("Content-Security-Policy"), "sandbox") || w.Header().Get("Content-Type") != "application/octet-stream" {
		t.Errorf("download: %d %v", w.Code, w.Header())
	}
	// A failed download is a page with the API's message, not a file.
	w = b.do(t, "GET", "/console/sessions/ses_1/files/nope.txt", nil, nil)
	if w.Code != 404 || w.Header().Get("Content-Disposition") != "" || !strings.Contains(w.Body.String(), "not found") {
		t.Errorf("failed download: %d %v %s", w.Code, w.Header(), w.Body)
	}
	// Everything outside /console/ is the API's.
	w = b.do(t, "GET", "/v1/languages", nil, nil)
	if w.Code != 401 {
		t.Errorf("/v1 with a cookie only: %d (the cookie must not authenticate the API)", w.Code)
	}
}

func TestPlaygroundWithoutModel(t *testing.T) {
	b := setup(t)
	b.signIn(t)
	w := b.do(t, "GET", "/console/playground", nil, nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "GANTRY_LLM_URL") {
		t.Errorf("playground: %d %s", w.Code, w.Body)
	}
}

func TestVendoredHTMX(t *testing.T) {
	doc, err := os.ReadFile("static/VENDORED.md")
	if err != nil {
		t.Fatal(err)
	}
	js, err := files.ReadFile("static/htmx.min.js")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(js)
	if !strings.Contains(string(doc), hex.EncodeToString(sum[:])) {
		t.Errorf("static/htmx.min.js has sha256 %x, not the one VENDORED.md records", sum)
	}
	if _, err := files.ReadFile("static/htmx.LICENSE"); err != nil {
		t.Error("htmx's licence is not vendored with it")
	}
}

// FuzzSignInCookie: whatever a browser sends as the cookie, the console
// either finds no sign-in or the one it sealed itself; it never panics.
func FuzzSignInCookie(f *testing.F) {
	c, err := New(Config{SessionKey: make([]byte, 32)}, slog.New(slog.DiscardHandler), http.NotFoundHandler())
	if err != nil {
		f.Fatal(err)
	}
	pt, _ := json.Marshal(sealed{Key: goodKey, ID: []byte("0123456789abcdef"), Expires: 1 << 40})
	ct, _ := c.box.Seal(pt, sealContext)
	good := base64.RawURLEncoding.EncodeToString(ct)
	f.Add(good)
	f.Add("")
	f.Add("not base64!")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"k":"gk_x","i":"AA==","e":99999999999}`)))
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest("GET", "/console/jobs", nil)
		r.Header.Set("Cookie", cookieName+"="+v)
		s, ok := c.open(r)
		// Only a value sealed under the console's key opens (the seed
		// above is resealed in each fuzzing process, with a fresh nonce).
		if ok && s.csrf != c.csrfToken([]byte("0123456789abcdef")) {
			t.Fatalf("cookie %q opened a sign-in", v)
		}
	})
}
