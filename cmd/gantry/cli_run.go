package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gantryhq/gantry/jobs"
)

const runUsage = `Usage: gantry run [flags] FILE|- [-- ARG...]

Runs the program in FILE (or read from stdin with -) on gantry, with the
ARGs after -- as its arguments, streams its output as it runs and exits
with its exit code (124: timed out, 130: cancelled, 125: gantry could not
run it or could not be reached; a program that did not compile prints the
compiler's output and exits 1).

Flags:
  --lang LANG        python, bash, node, typescript, or with the compilers image c, cpp, go,
                     java, rust (default: from FILE's extension)
  -f PATH[:DEST]     add a file or directory to the workspace (as DEST; default its name); repeatable
  -e NAME=VALUE      set an environment variable (-e NAME takes it from here); repeatable
  --session ID       run in a session's workspace
  --env NAME         run in an environment (a sandbox image the operator registered; see
                     GET /v1/environments); not to be confused with -e
  --timeout DUR      wall-clock limit, such as 30s or 5m (default: the server's, 30s)
  -o DIR             download the files the job made (its artifacts) into DIR
  --webhook URL      call URL when the job finishes (Standard Webhooks)
  --detach           queue the job, print its id and exit
  --json             print the finished job as JSON instead of streaming its output
`

// languageByExt maps file extensions to languages.
var languageByExt = map[string]string{
	".py": "python", ".sh": "bash", ".bash": "bash", ".js": "node", ".mjs": "node", ".cjs": "node",
	".ts": "typescript", ".mts": "typescript",
	".c": "c", ".cpp": "cpp", ".cc": "cpp", ".cxx": "cpp", ".c++": "cpp", ".go": "go", ".java": "java", ".rs": "rust",
}

func cmdRun(ctx context.Context, args []string) error {
	c := newCommand("run", runUsage)
	var files, env stringList
	lang := c.fs.String("lang", "", "")
	c.fs.Var(&files, "f", "")
	c.fs.Var(&env, "e", "")
	session := c.fs.String("session", "", "")
	environment := c.fs.String("env", "", "")
	timeout := c.fs.String("timeout", "", "")
	outDir := c.fs.String("o", "", "")
	hook := c.fs.String("webhook", "", "")
	detach := c.fs.Bool("detach", false, "")
	c.fs.BoolVar(&c.json, "json", false, "")
	var progArgs []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, progArgs = args[:i], args[i+1:]
	}
	pos, err := c.parse(args, 1, 1)
	if err != nil {
		return err
	}
	req, err := buildRequest(pos[0], *lang, files, env, *session, *timeout, *hook)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	req.Args = progArgs
	req.Environment = *environment
	a, err := newAPI()
	if err != nil {
		return &exitError{code: 125, msg: err.Error()}
	}
	var job jobs.Job
	// The key makes the submission safe to retry after a lost answer.
	if err := a.json(ctx, request{method: "POST", path: "/v1/jobs", idempotent: true}, req, &job); err != nil {
		return &exitError{code: 125, msg: err.Error()}
	}
	if *detach {
		if c.json {
			return printJSON(job)
		}
		fmt.Println(job.ID)
		return nil
	}
	r := &jobRun{api: a, job: job, outDir: *outDir, asJSON: c.json}
	return r.run(ctx)
}

// buildRequest makes the job request from the command line.
func buildRequest(file, lang string, files, env stringList, session, timeout, hook string) (jobs.Request, error) {
	var code []byte
	var err error
	if file == "-" {
		code, err = io.ReadAll(os.Stdin)
		if err == nil && lang == "" {
			err = errors.New("give --lang when the program comes from stdin")
		}
	} else {
		code, err = os.ReadFile(file)
		if lang == "" {
			if lang = languageByExt[strings.ToLower(filepath.Ext(file))]; lang == "" && err == nil {
				err = fmt.Errorf("cannot tell the language of %s from its extension: give --lang (python, bash, node, typescript, c, cpp, go, java or rust)", file)
			}
		}
	}
	if err != nil {
		return jobs.Request{}, err
	}
	if !utf8.Valid(code) {
		return jobs.Request{}, fmt.Errorf("%s is not UTF-8 text", file)
	}
	req := jobs.Request{Language: lang, Code: string(code), WebhookURL: hook, IdempotencyKey: "cli-" + randomHex(12)}
	if session != "" {
		req.SessionID = &session
	}
	for _, f := range files {
		add, err := inputFiles(f)
		if err != nil {
			return jobs.Request{}, err
		}
		req.Files = append(req.Files, add...)
	}
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			if value, ok = os.LookupEnv(name); !ok {
				return jobs.Request{}, fmt.Errorf("-e %s: no such variable here (give -e %s=VALUE)", name, name)
			}
		}
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		req.Env[name] = value
	}
	if timeout != "" {
		d, err := time.ParseDuration(timeout)
		if err != nil {
			secs, err2 := strconv.ParseFloat(timeout, 64)
			if err2 != nil {
				return jobs.Request{}, fmt.Errorf("--timeout %q: want a duration such as 30s or 5m", timeout)
			}
			d = time.Duration(secs * float64(time.Second))
		}
		if d < time.Millisecond {
			return jobs.Request{}, fmt.Errorf("--timeout %q: want at least 1ms", timeout)
		}
		req.TimeoutMS = int(d.Milliseconds())
	}
	return req, nil
}

// inputFiles reads -f PATH[:DEST]: one file, or a directory's regular
// files under DEST.
func inputFiles(spec string) ([]jobs.File, error) {
	src, dest, ok := strings.Cut(spec, ":")
	if !ok || dest == "" {
		dest = filepath.Base(src)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", spec, err)
	}
	if !fi.IsDir() {
		f, err := inputFile(src, dest)
		return []jobs.File{f}, err
	}
	var out []jobs.File
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		f, err := inputFile(p, path.Join(dest, filepath.ToSlash(rel)))
		out = append(out, f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", spec, err)
	}
	return out, nil
}

func inputFile(src, dest string) (jobs.File, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return jobs.File{}, err
	}
	if utf8.Valid(data) && !strings.ContainsRune(string(data), 0) {
		return jobs.File{Path: dest, Content: string(data)}, nil
	}
	return jobs.File{Path: dest, Content: base64.StdEncoding.EncodeToString(data), Encoding: "base64"}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// jobRun follows one job from submission to its exit code.
type jobRun struct {
	api    *api
	job    jobs.Job
	outDir string
	asJSON bool
}

func (r *jobRun) run(ctx context.Context) error {
	var err error
	if r.asJSON {
		r.job, err = r.api.wait(ctx, r.job.ID)
	} else {
		var sp *spinner
		if isTerminal(os.Stdout) && isTerminal(os.Stderr) {
			sp = startSpinner(ctx, r.api, r.job.ID)
		}
		err = r.api.follow(ctx, r.job.ID, sp)
		sp.stop()
		if err == nil {
			r.job, err = r.api.getJob(ctx, r.job.ID)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return r.interrupted()
		}
		return &exitError{code: 125, msg: err.Error()}
	}
	if r.asJSON {
		if err := printJSON(r.job); err != nil {
			return err
		}
	} else {
		if c := r.job.Compile; c != nil && c.Status != jobs.CompileSucceeded {
			// The program never ran: what the compiler said is its output.
			fmt.Fprint(os.Stderr, r.job.CompileOutput)
		}
		// A stateful session's Python job: its last expression's value,
		// as a REPL prints it.
		if r.job.Value != nil {
			fmt.Println(r.job.Value.Text)
		}
		if r.job.LiveState == jobs.LiveLost {
			fmt.Fprintf(os.Stderr, "gantry: the session's live state was lost (%s); this job ran in a fresh interpreter\n", r.job.LiveStateReason)
		}
	}
	if r.outDir != "" {
		if err := r.api.downloadArtifacts(ctx, r.job, r.outDir, !r.asJSON); err != nil {
			return &exitError{code: 125, msg: err.Error()}
		}
	} else if len(r.job.Artifacts) > 0 && !r.asJSON && isTerminal(os.Stderr) {
		fmt.Fprintf(os.Stderr, "gantry: the job made %d file(s); -o DIR downloads them\n", len(r.job.Artifacts))
	}
	return jobOutcome(r.job, !r.asJSON)
}

// interrupted cancels the job after Ctrl-C.
func (r *jobRun) interrupted() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg := "interrupted: cancelled job " + r.job.ID
	if err := r.api.json(ctx, request{method: "POST", path: "/v1/jobs/" + r.job.ID + "/cancel", idempotent: true}, nil, nil); err != nil {
		msg = fmt.Sprintf("interrupted; cancelling job %s failed: %v", r.job.ID, err)
	}
	return &exitError{code: 130, msg: msg}
}

// jobOutcome is the exit code for a finished job, with a message saying
// what went wrong when something did.
func jobOutcome(j jobs.Job, explain bool) error {
	var notes []string
	if j.StdoutTruncated {
		notes = append(notes, "stdout was cut at limits.output_bytes")
	}
	if j.StderrTruncated {
		notes = append(notes, "stderr was cut at limits.output_bytes")
	}
	why := ""
	if j.Error != nil {
		why = ": " + j.Error.Message
	}
	e := &exitError{}
	switch j.Status {
	case jobs.StatusSucceeded:
	case jobs.StatusFailed:
		e.code = 1
		if j.ExitCode != nil && *j.ExitCode > 0 && *j.ExitCode < 256 {
			e.code = *j.ExitCode
		}
		e.msg = fmt.Sprintf("job %s failed", j.ID)
		if j.ExitCode != nil {
			e.msg += fmt.Sprintf(" with exit code %d", *j.ExitCode)
		}
		e.msg += why
	case jobs.StatusTimedOut:
		e.code, e.msg = 124, fmt.Sprintf("job %s timed out%s", j.ID, why)
	case jobs.StatusCancelled:
		e.code, e.msg = 130, fmt.Sprintf("job %s was cancelled%s", j.ID, why)
	default:
		e.code, e.msg = 125, fmt.Sprintf("gantry could not run job %s%s", j.ID, why)
	}
	if !explain {
		e.msg = ""
	}
	if len(notes) > 0 && explain {
		fmt.Fprintln(os.Stderr, "gantry: "+strings.Join(notes, "; "))
	}
	if e.code == 0 {
		return nil
	}
	return e
}

func (a *api) getJob(ctx context.Context, id string) (jobs.Job, error) {
	var j jobs.Job
	err := a.json(ctx, request{method: "GET", path: "/v1/jobs/" + url.PathEscape(id), idempotent: true}, nil, &j)
	return j, err
}

// wait long-polls the job until it finishes.
func (a *api) wait(ctx context.Context, id string) (jobs.Job, error) {
	for {
		var j jobs.Job
		err := a.json(ctx, request{method: "GET", path: "/v1/jobs/" + url.PathEscape(id),
			query: url.Values{"wait": {"50s"}}, idempotent: true}, nil, &j)
		if err != nil || j.Status.Terminal() {
			return j, err
		}
	}
}

// follow streams the job's output to stdout and stderr until it ends. A
// stream that breaks is opened again; each stream restarts at its first
// byte, so what was written already is skipped.
func (a *api) follow(ctx context.Context, id string, sp *spinner) error {
	written := map[string]int{"stdout": 0, "stderr": 0}
	outs := map[string]io.Writer{"stdout": os.Stdout, "stderr": os.Stderr}
	for try := 0; ; try++ {
		seen := map[string]int{"stdout": 0, "stderr": 0}
		done := false
		err := a.stream(ctx, id, func(ev sseEvent) error {
			switch ev.name {
			case "stdout", "stderr":
				var chunk struct{ Data string }
				if err := json.Unmarshal(ev.data, &chunk); err != nil {
					return fmt.Errorf("unexpected log event: %v", err)
				}
				start := seen[ev.name]
				seen[ev.name] += len(chunk.Data)
				if skip := written[ev.name] - start; skip < len(chunk.Data) {
					sp.stop()
					data := chunk.Data[max(skip, 0):]
					if _, err := io.WriteString(outs[ev.name], data); err != nil {
						return err
					}
					written[ev.name] += len(data)
				}
			case "status":
				done = true
			}
			return nil
		})
		if done || ctx.Err() != nil {
			return ctx.Err()
		}
		var apiErr *apiError
		if errors.As(err, &apiErr) || try >= 20 {
			return err
		}
		if err := sleep(ctx, backoff(min(try, 3), 0)); err != nil {
			return err
		}
	}
}

// stream reads the job's log events until the stream ends.
func (a *api) stream(ctx context.Context, id string, fn func(sseEvent) error) error {
	resp, err := a.do(ctx, request{method: "GET", path: "/v1/jobs/" + url.PathEscape(id) + "/logs", accept: "text/event-stream", idempotent: true})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return events(resp.Body, fn)
}

// downloadArtifacts saves the job's artifacts under dir, checking each
// against its sha256.
func (a *api) downloadArtifacts(ctx context.Context, j jobs.Job, dir string, report bool) error {
	for _, art := range j.Artifacts {
		clean, err := jobs.CleanPath(art.Path)
		if err != nil {
			return fmt.Errorf("artifact %q: %v", art.Path, err)
		}
		var link struct{ URL string }
		// art.URL is the API path that presigns it (escaped by the server).
		err = a.json(ctx, request{method: "GET", path: art.URL, query: url.Values{"redirect": {"false"}}, idempotent: true}, nil, &link)
		if err != nil {
			return fmt.Errorf("artifact %s: %w", clean, err)
		}
		dest := filepath.Join(dir, filepath.FromSlash(clean))
		if err := fetchTo(ctx, a.http, link.URL, dest, art.SHA256); err != nil {
			return fmt.Errorf("artifact %s: %w", clean, err)
		}
		if report {
			fmt.Fprintf(os.Stderr, "gantry: saved %s (%s)\n", dest, size(art.Size))
		}
	}
	return nil
}

// fetchTo downloads a presigned URL (no credentials) into dest, which it
// writes only once the bytes match sha256.
func fetchTo(ctx context.Context, hc *http.Client, link, dest, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("download: %w", rootCause(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download: HTTP %s", resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".gantry-download-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), resp.Body); err != nil {
		tmp.Close()
		return fmt.Errorf("download: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); want != "" && got != want {
		return fmt.Errorf("download: sha256 %s, the manifest says %s", got, want)
	}
	return os.Rename(tmp.Name(), dest)
}

// spinner shows, on a terminal, that the job waits or runs, until its
// first output.
type spinner struct {
	mu      sync.Mutex
	stopped bool
	done    chan struct{}
	exited  chan struct{}
}

func startSpinner(ctx context.Context, a *api, id string) *spinner {
	sp := &spinner{done: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(sp.exited)
		frames := []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
		status, since := jobs.StatusQueued, time.Now()
		statuses := make(chan jobs.Status, 1)
		go func() { // the status, polled once a second
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-sp.done:
					return
				case <-t.C:
					if j, err := a.getJob(ctx, id); err == nil {
						select {
						case statuses <- j.Status:
						default:
						}
					}
				}
			}
		}()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			sp.mu.Lock()
			if !sp.stopped {
				fmt.Fprintf(os.Stderr, "\r\033[K%c %s %s %s", frames[i%len(frames)], id, status, time.Since(since).Truncate(time.Second))
			}
			sp.mu.Unlock()
			select {
			case <-sp.done:
				return
			case s := <-statuses:
				if s != status && !s.Terminal() {
					status, since = s, time.Now()
				}
			case <-tick.C:
			}
		}
	}()
	return sp
}

// stop clears the spinner's line; it is safe to call more than once and on
// a nil spinner.
func (sp *spinner) stop() {
	if sp == nil {
		return
	}
	sp.mu.Lock()
	if sp.stopped {
		sp.mu.Unlock()
		return
	}
	sp.stopped = true
	close(sp.done)
	fmt.Fprint(os.Stderr, "\r\033[K")
	sp.mu.Unlock()
	<-sp.exited
}
