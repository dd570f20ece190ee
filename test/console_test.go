package test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/gantryhq/gantry/codemode/codemodetest"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// The web console in a real browser: headless Chromium, driven over the
// DevTools protocol (chromedp), against `gantry dev`. With
// GANTRY_CONSOLE_SCREENSHOTS=<dir> (make screenshots) it saves a PNG of
// each page there.

// chromium finds the browser, or skips (fails under GANTRY_TEST_REQUIRE=1).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("GANTRY_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	storetest.Unavailable(t, "chromium is not installed (scripts/ensure-chromium.sh installs Debian's chromium; or set GANTRY_CHROMIUM)")
	return ""
}

// browser starts a headless Chromium that ends with the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	// The profile is removed once the browser is gone (t.TempDir's cleanup
	// could race its last writes).
	profile, err := os.MkdirTemp("", "gantry-chromium")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in CI; the pages are our own
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // kills the browser and waits for it
		// A child process may still be writing into it.
		eventually.Within(10*time.Second, func() bool { return os.RemoveAll(profile) == nil })
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs actions with a deadline, failing the test with what step failed.
func run(t *testing.T, ctx context.Context, what string, within time.Duration, actions ...chromedp.Action) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if err := chromedp.Run(tctx, actions...); err != nil {
		var loc, body string
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		_ = chromedp.Run(lctx, chromedp.Location(&loc), chromedp.Text("body", &body, chromedp.ByQuery))
		lcancel()
		t.Fatalf("%s: %v\nat %s:\n%s", what, err, loc, body)
	}
}

// shot saves a screenshot of the whole page as name.png when asked to.
func shot(t *testing.T, name string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		dir := os.Getenv("GANTRY_CONSOLE_SCREENSHOTS")
		if dir == "" {
			return nil
		}
		var png []byte
		if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil { // quality 100: PNG
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	})
}

// awaitJS evaluates a JavaScript expression until it is true. It outlives
// page loads (a job's page reloads itself when the job ends), which a
// single evaluation does not.
func awaitJS(expr string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		for {
			var ok bool
			err := chromedp.Evaluate(expr, &ok).Do(ctx)
			if err == nil && ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w (last evaluation: %v, %v)", expr, ctx.Err(), ok, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// present waits until the page has an element matching the CSS selector.
func present(sel string) chromedp.Action {
	return awaitJS("!!document.querySelector(" + strconv.Quote(sel) + ")")
}

func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	var s string
	run(t, ctx, "read "+sel, 10*time.Second, chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

// scriptedModel is an OpenAI-compatible server whose model asks to run a
// plotting program, then answers with what the program printed. It counts
// its calls.
type scriptedModel struct {
	mu    sync.Mutex
	calls int
}

func (m *scriptedModel) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

const consolePlotCode = "import matplotlib.pyplot as plt\nimport numpy as np\nx = np.linspace(0, 6.3, 200)\nplt.plot(x, np.sin(x))\nplt.title('sin(x)')\nprint('peak', round(float(np.sin(x).max()), 2))\n"

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Stream bool  `json:"stream"`
		Tools  []any `json:"tools"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Tools) == 0 {
		http.Error(w, `{"error": {"message": "bad request to the scripted model"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	var delta map[string]any
	finish := "stop"
	if last.Role == "user" {
		args, _ := json.Marshal(map[string]string{"language": "python", "code": consolePlotCode})
		delta = map[string]any{"role": "assistant", "tool_calls": []map[string]any{{"index": 0, "id": "call_plot", "type": "function",
			"function": map[string]string{"name": "execute_code", "arguments": string(args)}}}}
		finish = "tool_calls"
	} else {
		var res struct {
			Stdout string `json:"stdout"`
		}
		_ = json.Unmarshal([]byte(last.Content), &res)
		delta = map[string]any{"role": "assistant", "content": "Here is sin(x); the program printed: " + strings.TrimSpace(res.Stdout)}
	}
	if !req.Stream {
		delta["content"], _ = delta["content"].(string)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "m1", "object": "chat.completion", "model": "scripted",
			"choices": []map[string]any{{"index": 0, "message": delta, "finish_reason": finish}}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	if c, ok := delta["content"].(string); ok { // word by word, as models stream
		for _, word := range strings.SplitAfter(c, " ") {
			b, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"index": 0, "delta": map[string]string{"content": word}}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
	} else {
		b, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"index": 0, "delta": delta}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	b, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}})
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
}

func skillZip(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	files := map[string]string{
		"tidy-notes/SKILL.md":   "---\nname: tidy-notes\ndescription: Tidy meeting notes into a dated list of decisions. Use when the user has raw notes.\nlicense: MIT\n---\n# Tidy notes\n\n```python\nfrom skills.tidy_notes import helpers\n```\n",
		"tidy-notes/helpers.py": "def tidy(text):\n    return [l.strip() for l in text.splitlines() if l.strip()]\n",
	}
	for name, body := range files {
		w, _ := zw.Create(name)
		_, _ = io.WriteString(w, body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tidy-notes.zip")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConsoleInBrowser(t *testing.T) {
	ctx := browser(t)
	model := &scriptedModel{}
	llm := httptest.NewServer(model)
	t.Cleanup(llm.Close)
	d := startDev(t, "GANTRY_LLM_URL="+llm.URL+"/v1", "GANTRY_LLM_MODEL=scripted")
	base := d.url + "/console/"

	// A wrong key is refused with the API's message; the right one, typed
	// and sent with Enter, signs in.
	run(t, ctx, "wrong key", 30*time.Second,
		chromedp.Navigate(d.url+"/"),
		present("#key"),
		shot(t, "signin"),
		chromedp.SendKeys("#key", "gk_not_a_key"+kb.Enter, chromedp.ByQuery),
		present("#error"),
	)
	if msg := textOf(t, ctx, "#error"); !strings.Contains(msg, "invalid or revoked API key") {
		t.Fatalf("wrong key: %q", msg)
	}
	var loc string
	run(t, ctx, "sign in", 30*time.Second,
		chromedp.SendKeys("#key", d.key+kb.Enter, chromedp.ByQuery),
		present(`nav a[aria-current="page"][href="/console/jobs"]`),
		chromedp.Location(&loc),
	)
	if loc != base+"jobs" || strings.Contains(loc, d.key) {
		t.Fatalf("after sign-in at %s", loc)
	}
	// The cookie is out of the page's reach.
	var cookie string
	run(t, ctx, "document.cookie", 5*time.Second, chromedp.Evaluate(`document.cookie`, &cookie))
	if cookie != "" {
		t.Errorf("document.cookie = %q: the sign-in cookie must be HttpOnly", cookie)
	}

	// Keyboard: the first Tab reaches the skip link.
	var focused string
	run(t, ctx, "tab", 5*time.Second, chromedp.KeyEvent(kb.Tab), chromedp.Evaluate(`document.activeElement.textContent`, &focused))
	if focused != "Skip to content" {
		t.Errorf("first Tab focuses %q", focused)
	}

	// Run a plotting job and see its figure.
	run(t, ctx, "run a plot", 120*time.Second,
		chromedp.Navigate(base+"run"),
		present("#code"),
		chromedp.SetValue("#code", consolePlotCode, chromedp.ByQuery),
		shot(t, "run"),
		chromedp.Click(`#run-form button[type=submit]`, chromedp.ByQuery),
		present(`.artifacts img`),
		awaitJS(`(() => { const i = document.querySelector('.artifacts img'); return i && i.complete && i.naturalWidth > 100; })()`),
		chromedp.Location(&loc),
		shot(t, "job"),
	)
	jobID := regexp.MustCompile(`/console/jobs/(job_\w+)$`).FindStringSubmatch(loc)
	if jobID == nil {
		t.Fatalf("job page at %s", loc)
	}
	if s := textOf(t, ctx, "#stdout"); !strings.Contains(s, "peak 1.0") {
		t.Errorf("stdout %q", s)
	}
	if s := textOf(t, ctx, "#status"); s != "succeeded" {
		t.Errorf("status %q", s)
	}
	// The page shows what ran (the API's include=spec).
	if s := textOf(t, ctx, "#job-code"); strings.TrimSpace(s) != strings.TrimSpace(consolePlotCode) {
		t.Errorf("the job page shows the code as %q", s)
	}
	var alt string
	var hasAlt bool
	run(t, ctx, "figure", 5*time.Second, chromedp.AttributeValue(".artifacts img", "alt", &alt, &hasAlt, chromedp.ByQuery))
	if !strings.HasPrefix(alt, "out/figure-1.png") {
		t.Errorf("image alt %q", alt)
	}
	run(t, ctx, "jobs list", 30*time.Second,
		chromedp.Navigate(base+"jobs"),
		present(`a[href="/console/jobs/`+jobID[1]+`"]`),
		shot(t, "jobs"),
		chromedp.Navigate(base+"jobs?status=succeeded&session_id=ses_nope"),
		present(".empty"),
	)
	// The overview charts the tenant's usage (GET /v1/usage): the job that
	// ran is in today's bar, green, and its CPU time in the CPU chart.
	run(t, ctx, "overview", 30*time.Second,
		chromedp.Navigate(base),
		present(`nav a[aria-current="page"][href="/console/overview"]`),
		present(`svg rect.s-succeeded`),
		present(`svg rect.cpu`),
		shot(t, "overview"),
	)
	if n := textOf(t, ctx, "#total-jobs"); n == "" || n == "0" {
		t.Errorf("the overview counts %q jobs", n)
	}
	var title string
	run(t, ctx, "overview bar", 5*time.Second, chromedp.Evaluate(`document.querySelector('svg rect.s-succeeded').parentNode.querySelector('title').textContent`, &title))
	if !strings.Contains(title, "succeeded") || !strings.Contains(title, time.Now().UTC().Format("2006-01-02")) {
		t.Errorf("today's bar says %q", title)
	}

	csv := filepath.Join(t.TempDir(), "data.csv")
	if err := os.WriteFile(csv, []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Live: a running job's output arrives before it ends, and the jobs
	// list refreshes itself (htmx) until the job is done. The job reads a
	// file attached to the form.
	run(t, ctx, "live output", 90*time.Second,
		chromedp.Navigate(base+"run"),
		present("#code"),
		chromedp.SetValue("#language", "bash", chromedp.ByQuery),
		chromedp.SetValue("#code", "echo first; sleep 4; echo second; cat data.csv", chromedp.ByQuery),
		chromedp.SetUploadFiles("#files", []string{csv}, chromedp.ByQuery),
		chromedp.Click(`#run-form button[type=submit]`, chromedp.ByQuery),
		awaitJS(`(() => { const o = document.querySelector('#stdout'); return !!o && o.textContent.includes('first') && !o.textContent.includes('second'); })()`),
		awaitJS(`document.querySelector('#status') && document.querySelector('#status').textContent === 'succeeded' && document.querySelector('#stdout').textContent === 'first\nsecond\na,b\n1,2\n'`),
	)
	if s := textOf(t, ctx, "#job-code"); s != "echo first; sleep 4; echo second; cat data.csv" {
		t.Errorf("the job page shows the code as %q", s)
	}
	if s := textOf(t, ctx, "#job-files"); !strings.Contains(s, "data.csv") || !strings.Contains(s, "8 B") {
		t.Errorf("the job page shows the input files as %q", s)
	}
	slow := d.submit(t, map[string]any{"language": "bash", "code": "sleep 4; echo done"})
	run(t, ctx, "live list", 90*time.Second,
		chromedp.Navigate(base+"jobs"),
		present(`a[href="/console/jobs/`+slow.ID+`"]`),
		chromedp.Evaluate(`window.notReloaded = true`, nil),
		awaitJS(`window.notReloaded === true && [...document.querySelectorAll('#jobs tr')].some(r => r.textContent.includes('`+slow.ID+`') && r.textContent.includes('succeeded'))`),
	)

	// A session: upload a file, see it, run code that reads it, download it.
	run(t, ctx, "session upload", 90*time.Second,
		chromedp.Navigate(base+"sessions"),
		chromedp.Click(`form[aria-label="New session"] button`, chromedp.ByQuery),
		present(`form[aria-label="Upload files"]`),
		chromedp.SetUploadFiles(`input[name=file]`, []string{csv}, chromedp.ByQuery),
		chromedp.SetValue(`input[name=dir]`, "inputs", chromedp.ByQuery),
		chromedp.Click(`form[aria-label="Upload files"] button`, chromedp.ByQuery),
		present(`#files a[download]`),
		chromedp.Location(&loc),
	)
	if s := textOf(t, ctx, "#files"); !strings.Contains(s, "inputs/data.csv") {
		t.Fatalf("files: %q", s)
	}
	var downloaded string
	run(t, ctx, "download", 30*time.Second, chromedp.Evaluate(`fetch(document.querySelector('#files a[download]').href).then(r => r.text())`, &downloaded,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if downloaded != "a,b\n1,2\n" {
		t.Errorf("downloaded %q", downloaded)
	}
	sessionPage := loc
	run(t, ctx, "run in session", 90*time.Second,
		chromedp.SetValue(`form[aria-label="Run in this session"] textarea`, "print(open('inputs/data.csv').read().upper())", chromedp.ByQuery),
		chromedp.Click(`form[aria-label="Run in this session"] button`, chromedp.ByQuery),
		awaitJS(`document.querySelector('#status') && document.querySelector('#status').textContent === 'succeeded'`),
	)
	if s := textOf(t, ctx, "#stdout"); !strings.Contains(s, "A,B\n1,2") {
		t.Errorf("session job stdout %q", s)
	}
	run(t, ctx, "delete file", 30*time.Second,
		chromedp.Navigate(sessionPage),
		present(`#files`),
		shot(t, "session"),
		chromedp.Click(`#files button[aria-label="Delete inputs/data.csv"]`, chromedp.ByQuery),
		awaitJS(`document.querySelector('main') && !document.querySelector('main').textContent.includes('inputs/data.csv')`),
	)
	sessionID := regexp.MustCompile(`ses_\w+$`).FindString(sessionPage)
	run(t, ctx, "close session", 30*time.Second,
		chromedp.Click(`form[action$="/close"] button`, chromedp.ByQuery),
		present(`form[aria-label="New session"]`),
	)
	if r := d.call(t, "GET", "/v1/sessions/"+sessionID, ""); r.status != 404 && !strings.Contains(string(r.body), `"closing"`) {
		t.Errorf("closed session: %d %s", r.status, r.body)
	}

	// Upload a skill folder as a zip, then find it.
	run(t, ctx, "skill upload", 30*time.Second,
		chromedp.Navigate(base+"skills"),
		present("#archive"),
		shot(t, "skills"),
		chromedp.SetUploadFiles("#archive", []string{skillZip(t)}, chromedp.ByQuery),
		chromedp.Click(`form[aria-label="Upload a skill"] button`, chromedp.ByQuery),
		present("pre.doc"),
		shot(t, "skill"),
	)
	if h := textOf(t, ctx, "h1"); h != "Skill tidy-notes" {
		t.Errorf("skill page %q", h)
	}
	if s := textOf(t, ctx, "main"); !strings.Contains(s, "helpers.py") || !strings.Contains(s, "version 1") {
		t.Errorf("skill page lacks its file or version: %q", s)
	}
	run(t, ctx, "skill search", 30*time.Second,
		chromedp.Navigate(base+"skills?q=meeting+notes"),
		present(`#skills a[href="/console/skills/tidy-notes"]`),
	)
	// A bad archive shows the API's refusal.
	bad := filepath.Join(t.TempDir(), "broken.zip")
	_ = os.WriteFile(bad, []byte("not a zip"), 0o644)
	run(t, ctx, "bad skill", 30*time.Second,
		chromedp.SetUploadFiles("#archive", []string{bad}, chromedp.ByQuery),
		chromedp.Click(`form[aria-label="Upload a skill"] button`, chromedp.ByQuery),
		present("#error"),
	)
	run(t, ctx, "delete skill", 30*time.Second,
		chromedp.Navigate(base+"skills/tidy-notes"),
		chromedp.Click(`form[action$="/delete"] button`, chromedp.ByQuery),
		present(`form[aria-label="Upload a skill"]`),
		awaitJS(`!document.querySelector('a[href="/console/skills/tidy-notes"]')`),
	)
	if r := d.call(t, "GET", "/v1/skills/tidy-notes", ""); r.status != 404 {
		t.Errorf("deleted skill: %d %s", r.status, r.body)
	}

	// MCP servers: a wrong URL is refused with the API's message; a real
	// server is registered and its tools listed; privacy tokens turned on.
	crm := codemodetest.ServeHTTP(t, codemodetest.CRM(codemodetest.CredentialOK))
	run(t, ctx, "mcp wrong", 60*time.Second,
		chromedp.Navigate(base+"mcp"),
		chromedp.SetValue(`input[name=name]`, "crm", chromedp.ByQuery),
		chromedp.SetValue(`input[name=url]`, crm, chromedp.ByQuery),
		chromedp.Click(`form[aria-label="Register a server"] button`, chromedp.ByQuery),
		present("#error"),
	)
	if s := textOf(t, ctx, "#error"); !strings.Contains(s, "authorization required") {
		t.Errorf("register without the token: %q", s)
	}
	run(t, ctx, "mcp register", 60*time.Second,
		chromedp.SetValue(`input[name=url]`, crm, chromedp.ByQuery),
		chromedp.SetValue(`textarea[name=headers]`, "Authorization: Bearer "+codemodetest.Token, chromedp.ByQuery),
		chromedp.Click(`form[aria-label="Register a server"] button`, chromedp.ByQuery),
		present("#tools"),
		shot(t, "mcp-server"),
	)
	if s := textOf(t, ctx, "main"); !strings.Contains(s, "find_customer") || strings.Contains(s, codemodetest.Token) {
		t.Errorf("server page: %q", s)
	}
	run(t, ctx, "settings", 30*time.Second,
		chromedp.Navigate(base+"mcp"),
		chromedp.Click(`input[name=pii_tokens]`, chromedp.ByQuery),
		awaitJS(`document.querySelector('input[name=pii_tokens]').checked`),
		chromedp.Click(`form[aria-label="Settings"] button`, chromedp.ByQuery),
		// The form is saved: the API says so, and the page shows it.
		chromedp.ActionFunc(func(ctx context.Context) error {
			for !strings.Contains(string(d.call(t, "GET", "/v1/settings", "").body), `"pii_tokens":true`) {
				select {
				case <-ctx.Done():
					return fmt.Errorf("privacy tokens are still off: %w", ctx.Err())
				case <-time.After(100 * time.Millisecond):
				}
			}
			return nil
		}),
		chromedp.Navigate(base+"mcp"),
		present(`input[name=pii_tokens]:checked`),
		shot(t, "mcp"),
	)
	run(t, ctx, "mcp refresh and remove", 60*time.Second,
		chromedp.Navigate(base+"mcp/crm"),
		chromedp.Evaluate(`window.before = true`, nil),
		chromedp.Click(`form[action$="/refresh"] button`, chromedp.ByQuery),
		awaitJS(`window.before === undefined && !!document.querySelector('#tools')`),
		chromedp.Click(`form[action$="/delete"] button`, chromedp.ByQuery),
		awaitJS(`location.pathname === '/console/mcp' && !document.querySelector('#servers')`),
	)
	if r := d.call(t, "GET", "/v1/mcp-servers/crm", ""); r.status != 404 {
		t.Errorf("removed server: %d %s", r.status, r.body)
	}
	d.call(t, "PATCH", "/v1/settings", `{"pii_tokens": false}`)

	// The playground: the scripted model asks for a plot, the loop runs it
	// in gantry, the page shows the tool call, the figure and the answer.
	run(t, ctx, "playground", 120*time.Second,
		chromedp.Navigate(base+"playground"),
		present("#prompt"),
		chromedp.SendKeys("#prompt", "Plot sin(x) please", chromedp.ByQuery),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(2)), // Ctrl+Enter sends (modifier 2: Ctrl)
		awaitJS(`[...document.querySelectorAll('.msg.assistant .text')].some(e => e.textContent.includes('the program printed: peak 1.0'))`),
		awaitJS(`(() => { const i = document.querySelector('.chat img'); return i && i.complete && i.naturalWidth > 100; })()`),
		shot(t, "playground"),
	)
	if s := textOf(t, ctx, ".tool summary"); s != "✓ execute_code (succeeded)" {
		t.Errorf("tool call shown as %q", s)
	}
	if n := model.count(); n != 2 {
		t.Errorf("the model was called %d times, want 2", n)
	}

	// Phone width, and dark mode: nothing wider than the screen, dark colours.
	var overflow bool
	var bg string
	run(t, ctx, "phone", 30*time.Second,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)),
		emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}),
		chromedp.Navigate(d.url+"/console/jobs/"+jobID[1]),
		present(`.artifacts img`),
		awaitJS(`document.querySelector('.artifacts img').complete`),
		chromedp.Evaluate(`document.documentElement.scrollWidth > window.innerWidth`, &overflow),
		chromedp.Evaluate(`getComputedStyle(document.body).backgroundColor`, &bg),
		shot(t, "job-phone-dark"),
	)
	if overflow {
		t.Error("the job page is wider than a phone's screen")
	}
	if bg != "rgb(21, 23, 26)" {
		t.Errorf("dark mode background %q", bg)
	}
	run(t, ctx, "desktop", 10*time.Second,
		chromedp.EmulateViewport(1280, 900),
		emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}),
	)

	// Another tenant, signed in, sees none of this tenant's work.
	d.cli(t, "tenants", "create", "console-other")
	other := regexp.MustCompile(`gk_\S+`).FindString(d.cli(t, "keys", "create", "console-other", "browser test"))
	if other == "" {
		t.Fatal("no key created")
	}
	run(t, ctx, "other tenant", 30*time.Second,
		chromedp.Click(`.signout button`, chromedp.ByQuery),
		present("#key"),
		chromedp.SendKeys("#key", other+kb.Enter, chromedp.ByQuery),
		present(`nav`),
		chromedp.Navigate(d.url+"/console/jobs/"+jobID[1]),
		present("#error"),
	)
	if s := textOf(t, ctx, "#error"); !strings.Contains(s, "not_found") {
		t.Errorf("another tenant's job: %q", s)
	}
	if s := textOf(t, ctx, "body"); strings.Contains(s, "peak") {
		t.Error("another tenant sees the job's output")
	}
}

// The agent API as an OpenAI client uses it, against gantry dev and the
// scripted model: a real job runs, and its figure is an artifact.
func TestAgentChatCompletions(t *testing.T) {
	model := &scriptedModel{}
	llm := httptest.NewServer(model)
	t.Cleanup(llm.Close)
	d := startDev(t, "GANTRY_LLM_URL="+llm.URL+"/v1", "GANTRY_LLM_MODEL=scripted", "GANTRY_LLM_MAX_STEPS=4")

	r := d.call(t, "POST", "/v1/agent/chat/completions", `{"model": "gpt-4o", "messages": [{"role": "user", "content": "Plot sin(x)"}]}`)
	var c struct {
		Model   string `json:"model"`
		Choices []struct {
			Message      struct{ Content string } `json:"message"`
			FinishReason string                   `json:"finish_reason"`
		} `json:"choices"`
		Gantry struct {
			Steps     int `json:"steps"`
			ToolCalls []struct {
				Name   string `json:"name"`
				JobID  string `json:"job_id"`
				Status string `json:"status"`
			} `json:"tool_calls"`
		} `json:"gantry"`
	}
	if err := json.Unmarshal(r.body, &c); err != nil || r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if c.Model != "scripted" || c.Choices[0].FinishReason != "stop" || c.Choices[0].Message.Content != "Here is sin(x); the program printed: peak 1.0" ||
		c.Gantry.Steps != 2 || len(c.Gantry.ToolCalls) != 1 {
		t.Fatalf("completion %s", r.body)
	}
	// The tool call was a job of this tenant, with the figure as artifact.
	j := d.job(t, "GET", "/v1/jobs/"+c.Gantry.ToolCalls[0].JobID, "")
	if j.Status != jobs.StatusSucceeded || indexOf(j.Artifacts, "out/figure-1.png") < 0 || j.Metadata["agent"] != "gantry-chat" {
		t.Fatalf("job %+v", j)
	}

	// Streamed: chunks, the tool's progress, [DONE].
	req, _ := http.NewRequest("POST", d.url+"/v1/agent/chat/completions", strings.NewReader(`{"stream": true, "messages": [{"role": "user", "content": "Plot sin(x)"}]}`))
	req.Header.Set("Authorization", "Bearer "+d.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := string(body)
	if resp.StatusCode != 200 || !strings.Contains(s, `"object":"chat.completion.chunk"`) || !strings.Contains(s, `"type":"tool_result"`) ||
		!strings.Contains(s, `"content":"peak "`) || !strings.HasSuffix(s, "data: [DONE]\n\n") {
		t.Fatalf("stream: %d\n%s", resp.StatusCode, s)
	}

	// Without a key, or with a bad request, the API's errors.
	req, _ = http.NewRequest("POST", d.url+"/v1/agent/chat/completions", strings.NewReader(`{}`))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("no key: %d", resp.StatusCode)
	}
	if r := d.call(t, "POST", "/v1/agent/chat/completions", `{"messages": []}`); r.status != 400 || !strings.Contains(string(r.body), `"field":"messages"`) {
		t.Errorf("no messages: %d %s", r.status, r.body)
	}
}
