// Package sandboxfusion is SandboxFusion's API (bytedance/SandboxFusion:
// POST /run_code, GET /v1/ping) at /compat/sandboxfusion, an adapter over
// gantry's service: each /run_code is a gantry job of the caller's tenant,
// answered field for field as sandbox/server/sandbox_api.py and
// sandbox/runners/types.py define the answer, quirks included (a sandbox
// error is HTTP 200 with status SandboxError; a failed compile leaves
// run_result null; return_code is null on a timeout).
//
// verl calls it one test case at a time, 64 to 256 at once, and retries
// only 504 (its requests time out after compile_timeout + run_timeout +
// 10 s). So a burst waits for the tenant's request rate instead of being
// refused, and what a gateway in front of SandboxFusion would answer
// under load — 504 — is what gantry answers when it cannot take or start
// the job in time: the tenant's queue is full, or the job waited in the
// queue so long that the client would give up before it could finish (the
// job is withdrawn, and the client's retry runs it again).
//
// A 504 means the job will never run: it was refused, or withdrawn before
// a runner took it (service.WithdrawJob). While that cannot be made sure —
// the database is down, so the job can be neither read nor withdrawn — the
// answer is held, until the client would give up; a job that may still run
// is answered as a SandboxError, which verl does not retry, never 504.
//
// fetch_files are read once per distinct file (names are cleaned: big.bin
// and ./big.bin are one file), and a call may fetch at most MaxFetchBytes,
// counting a file once per name (the answer holds a copy per name): past
// that, 413 in FastAPI's shape, {"detail": ...}. What the answer holds —
// the files, their base64, the JSON — counts against the ingress's memory
// budget for the tenant (service.Hold).
package sandboxfusion

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gantryhq/gantry/glob"
	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/internal/clock"
	"github.com/gantryhq/gantry/jobs"
)

// Config is the adapter's configuration.
type Config struct {
	compat.Config
	// ClientSlack is how long beyond compile_timeout + run_timeout a
	// client waits for its answer (verl: 10 s), and Margin what a job
	// needs beyond its run_timeout once started (a container, collecting
	// its output). A job that has not started when the client could no
	// longer get its answer in time is withdrawn and the call answered
	// 504, which verl retries.
	ClientSlack, Margin time.Duration
	// MaxFetchBytes caps the bytes one call fetches (fetch_files), each
	// file counted once per name it is fetched by.
	MaxFetchBytes int64
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	c.Config = c.Config.WithDefaults()
	if c.ClientSlack == 0 {
		c.ClientSlack = 10 * time.Second
	}
	if c.Margin == 0 {
		c.Margin = 3 * time.Second
	}
	if c.MaxFetchBytes == 0 {
		c.MaxFetchBytes = 16 << 20
	}
	return c
}

// Server serves SandboxFusion's API over the service.
type Server struct {
	cfg Config
	log *slog.Logger
	svc *service.Service
	mux *http.ServeMux
}

// New makes the adapter.
func New(cfg Config, log *slog.Logger, svc *service.Service) *Server {
	s := &Server{cfg: cfg.WithDefaults(), log: log.With("api", "sandboxfusion"), svc: svc, mux: http.NewServeMux()}
	s.mux.Handle("POST /run_code", compat.Authenticated(svc, s.handleRunCode, s.writeServiceError))
	s.mux.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, _ *http.Request) { compat.WriteJSON(w, http.StatusOK, "pong") })
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		compat.WriteJSON(w, http.StatusNotFound, detail{Detail: "Not Found"})
	})
	return s
}

// Handler serves the API's paths (/run_code, /v1/ping), relative to its
// base URL.
func (s *Server) Handler() http.Handler { return s.mux }

// detail is FastAPI's error body.
type detail struct {
	Detail string `json:"detail"`
}

// commandResult is a CommandRunResult.
type commandResult struct {
	Status        string   `json:"status"`
	ExecutionTime *float64 `json:"execution_time"`
	ReturnCode    *int     `json:"return_code"`
	Stdout        *string  `json:"stdout"`
	Stderr        *string  `json:"stderr"`
}

// runCodeResponse is a RunCodeResponse.
type runCodeResponse struct {
	Status          string            `json:"status"`
	Message         string            `json:"message"`
	CompileResult   *commandResult    `json:"compile_result"`
	RunResult       *commandResult    `json:"run_result"`
	ExecutorPodName *string           `json:"executor_pod_name"`
	Files           map[string]string `json:"files"`
}

// The statuses of a RunCodeResponse and a CommandRunResult.
const (
	statusSuccess      = "Success"
	statusFailed       = "Failed"
	statusSandboxError = "SandboxError"

	runFinished = "Finished"
	runError    = "Error"
	runTLE      = "TimeLimitExceeded"
)

func sandboxError(msg string) runCodeResponse {
	return runCodeResponse{Status: statusSandboxError, Message: msg, Files: map[string]string{}}
}

func (s *Server) handleRunCode(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		return err
	}
	req, err := decodeRunCode(body)
	if err != nil {
		compat.WriteJSON(w, http.StatusUnprocessableEntity, err)
		return nil
	}
	names, ok := gantryNames[req.Language]
	lang, ok2 := compat.Language(s.svc.Policy(), names...)
	if !ok || !ok2 {
		compat.WriteJSON(w, http.StatusOK, sandboxError("language "+req.Language+" is not available on this gantry (it runs "+strings.Join(jobs.LanguageNames(), ", ")+")"))
		return nil
	}
	ctx := r.Context()
	d := s.deadlines(compat.ArrivedAt(ctx), req, lang)
	job, _, err := s.svc.SubmitJob(ctx, p, s.jobRequest(req, lang))
	var uncertain *service.UncertainJob
	switch {
	case errors.As(err, &uncertain):
		// Recording it failed after it was queued: it may run. Find out
		// before answering anything a client retries.
		job = jobs.Job{ID: uncertain.JobID, Status: jobs.StatusQueued}
	case err != nil:
		return err // refused: nothing runs, and a 504 is safe
	}
	w.Header().Set("X-Gantry-Job-Id", job.ID)
	job, v := s.await(ctx, p, job, d, uncertain != nil)
	switch v {
	case gone:
		return nil
	case withdrawn:
		compat.WriteJSON(w, http.StatusGatewayTimeout, detail{Detail: "the job " + job.ID + " could not start in time and will not run; retry"})
		return nil
	case unsettled:
		compat.WriteJSON(w, http.StatusOK, sandboxError("gantry could not learn in time how the job "+job.ID+
			" ends (its database may be unavailable); it may still run, so this call is not answered retry"))
		return nil
	}
	out, err := s.answer(ctx, p, job, req.FetchFiles, d.answerBy)
	var tooLarge *fetchTooLarge
	switch {
	case errors.As(err, &tooLarge):
		compat.WriteJSON(w, http.StatusRequestEntityTooLarge, detail{Detail: tooLarge.Error()})
		return nil
	case err != nil && ctx.Err() != nil:
		return nil // the client went away
	case err != nil:
		e, internal := service.ToError(err)
		if internal {
			s.log.Error("answer a finished job", "job_id", job.ID, "err", err)
		}
		if e.Code == service.CodePayloadTooLarge {
			compat.WriteJSON(w, http.StatusRequestEntityTooLarge, detail{Detail: "the job " + job.ID + " finished, but " + e.Message})
			return nil
		}
		compat.WriteJSON(w, http.StatusOK, sandboxError("the job "+job.ID+" finished, but its answer could not be made in time: "+e.Message))
		return nil
	}
	compat.WriteJSON(w, http.StatusOK, out)
	return nil
}

// jobRequest is the gantry job that runs a /run_code request.
func (s *Server) jobRequest(req runCode, lang string) jobs.Request {
	policy := s.svc.Policy()
	jr := jobs.Request{
		Language:  lang,
		Code:      req.Code,
		TimeoutMS: compat.TimeoutMS(req.RunTimeout, policy),
		Metadata:  map[string]string{"compat": "sandboxfusion", "sandboxfusion.language": req.Language},
	}
	if req.Stdin != nil {
		// Base64, so that any text (NUL bytes included) reaches the program.
		jr.Stdin, jr.StdinEncoding = base64.StdEncoding.EncodeToString([]byte(*req.Stdin)), jobs.EncodingBase64
	}
	if req.MemoryLimitMB > 0 {
		jr.Limits = &jobs.Limits{MemoryMB: compat.MemoryMB(req.MemoryLimitMB, policy)}
	}
	for name, content := range req.Files {
		jr.Files = append(jr.Files, jobs.File{Path: name, Content: base64.StdEncoding.EncodeToString(content), Encoding: jobs.EncodingBase64})
	}
	for _, f := range req.FetchFiles {
		if g, ok := literalGlob(f); ok {
			jr.Artifacts = append(jr.Artifacts, g)
		}
	}
	return compat.WithCompileTimeout(jr, compat.TimeoutMS(req.CompileTimeout, policy))
}

// literalGlob is a glob that matches exactly the relative path p (false:
// p is not a clean relative path, and is not fetched).
func literalGlob(p string) (string, bool) {
	clean, err := jobs.CleanPath(p)
	if err != nil || len(clean) > 1000 {
		return "", false
	}
	var b strings.Builder
	for _, r := range clean {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String(), glob.Validate(b.String()) == nil
}

// deadlines are the moments a call's answer depends on.
type deadlines struct {
	// startBy is when the job must have started for its answer to reach
	// the client in time; a job still queued then is withdrawn.
	startBy time.Time
	// answerBy is when the client gives up (compile_timeout + run_timeout
	// + ClientSlack after the request arrived): an answer held for the
	// database or for memory is given up by then.
	answerBy time.Time
}

// deadlines are the call's: a job must start its run_timeout and Margin
// before the client gives up (and its compile_timeout before that, for a
// language with a compile step).
func (s *Server) deadlines(arrived time.Time, req runCode, lang string) deadlines {
	budget := s.cfg.ClientSlack - s.cfg.Margin
	if !compat.Compiled(lang) {
		budget += seconds(req.CompileTimeout) // the client allows for a compile that does not happen
	}
	return deadlines{
		startBy:  arrived.Add(max(budget, s.cfg.Margin)),
		answerBy: arrived.Add(seconds(req.CompileTimeout) + seconds(req.RunTimeout) + s.cfg.ClientSlack),
	}
}

func seconds(f float64) time.Duration {
	if f <= 0 || f > 3600 {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

// verdict is how a wait for a job ended.
type verdict int

const (
	// finished: the job is finished (the job returned is).
	finished verdict = iota
	// withdrawn: the job will never run (withdrawn, or never recorded):
	// the call may be answered retry.
	withdrawn
	// unsettled: the job may be running or may yet run, and was not seen
	// finished in time.
	unsettled
	// gone: the client went away.
	gone
)

// retryEvery is how often a held answer tries again what the database or
// the memory budget refused.
const retryEvery = 500 * time.Millisecond

// await waits for the job to finish. A job not started by startBy is
// withdrawn; reads and withdrawals the database fails are tried again
// until the client gives up, so that a job that may still run is never
// answered retry. uncertain: SubmitJob could not say whether the job was
// recorded; it is withdrawn (or found started) at once.
func (s *Server) await(ctx context.Context, p service.Principal, job jobs.Job, d deadlines, uncertain bool) (jobs.Job, verdict) {
	if !uncertain {
		job, _ = s.svc.WaitJob(ctx, p, job, service.Watch{Until: d.startBy, KeepOnError: true})
		switch {
		case ctx.Err() != nil:
			return job, gone
		case job.Status.Terminal():
			return job, finished
		}
	}
	if compat.Waiting(job) {
		// As last read, it has not started: withdraw it, unless a runner
		// took it meanwhile.
		for {
			now, ok, err := s.svc.WithdrawJob(ctx, p, job.ID)
			var e *service.Error
			switch {
			case err == nil && ok:
				return now, withdrawn
			case err == nil:
				job = now // it started, or finished
			case errors.As(err, &e) && e.Code == service.CodeNotFound:
				return job, withdrawn // never recorded: nothing runs
			case ctx.Err() != nil:
				return job, gone
			case !time.Now().Before(d.answerBy):
				s.log.Warn("a job could not be withdrawn before its client gives up", "job_id", job.ID, "err", err)
				return job, unsettled
			default:
				if !clock.Sleep(ctx, retryEvery) {
					return job, gone
				}
				continue
			}
			break
		}
		if job.Status.Terminal() {
			return job, finished
		}
	}
	job, _ = s.svc.WaitJob(ctx, p, job, service.Watch{Until: time.Now().Add(s.svc.MaxWait()), KeepOnError: true})
	switch {
	case ctx.Err() != nil:
		return job, gone
	case job.Status.Terminal():
		return job, finished
	}
	return job, unsettled
}

// answer is the RunCodeResponse of a finished job, made again while what
// it needs is refused for a while (the object store, the memory budget),
// until the client gives up.
func (s *Server) answer(ctx context.Context, p service.Principal, job jobs.Job, fetch []string, answerBy time.Time) (runCodeResponse, error) {
	for {
		out, err := s.response(ctx, p, job, fetch)
		if err == nil {
			return out, nil
		}
		if e, _ := service.ToError(err); !retriable(e) || !time.Now().Add(retryEvery).Before(answerBy) || !clock.Sleep(ctx, retryEvery) {
			return out, err
		}
	}
}

// retriable says whether a refusal may pass if tried again shortly.
func retriable(e *service.Error) bool {
	return e.Code == service.CodeRateLimited || e.Code == service.CodeUnavailable
}

// response is the RunCodeResponse of a finished job.
func (s *Server) response(ctx context.Context, p service.Principal, job jobs.Job, fetch []string) (runCodeResponse, error) {
	st := compat.StagesOf(job)
	out := runCodeResponse{Status: statusSuccess, Files: map[string]string{}}
	out.CompileResult = result(st.Compile)
	out.RunResult = result(st.Run)
	for _, r := range []*commandResult{out.CompileResult, out.RunResult} {
		switch {
		case r == nil:
		case r.Status == runError:
			out.Status, out.Message = statusSandboxError, *r.Stderr
			return out, nil
		case r.Status == runTLE || (r.ReturnCode != nil && *r.ReturnCode != 0):
			out.Status = statusFailed
		}
	}
	files, err := s.fetch(ctx, p, job, fetch)
	if err != nil {
		return out, err
	}
	out.Files = files
	return out, nil
}

// result is a stage as a CommandRunResult (nil for none).
func result(st *compat.Stage) *commandResult {
	if st == nil {
		return nil
	}
	secs := st.Wall.Seconds()
	r := &commandResult{Status: runFinished, ExecutionTime: &secs, Stdout: &st.Stdout, Stderr: &st.Stderr}
	switch st.Outcome {
	case compat.Exited:
		r.ReturnCode = st.ExitCode
	case compat.TimedOut:
		r.Status = runTLE
	case compat.Failed:
		msg := st.Message
		r = &commandResult{Status: runError, Stderr: &msg}
	}
	return r
}

// fetchTooLarge is a call whose fetch_files name more than it may fetch.
type fetchTooLarge struct {
	jobID       string
	bytes, most int64
}

func (e *fetchTooLarge) Error() string {
	return fmt.Sprintf("fetch_files name %d bytes of files (a file counts once per name: the answer holds a copy per name), "+
		"more than the %d one call may fetch; the job %s ran and finished (GET /v1/jobs/%s has its output): fetch fewer or smaller files",
		e.bytes, e.most, e.jobID, e.jobID)
}

// fetch reads the files the request asked for that the job left (as
// artifacts), base64-encoded, by the names the request gave: each distinct
// file once, however many names it is given by. A name that is not a
// clean relative path, or names no artifact, is left out, as SandboxFusion
// leaves out what is not a file.
func (s *Server) fetch(ctx context.Context, p service.Principal, job jobs.Job, fetch []string) (map[string]string, error) {
	files := map[string]string{}
	byPath := make(map[string]jobs.Artifact, len(job.Artifacts))
	for _, a := range job.Artifacts {
		byPath[a.Path] = a
	}
	pathOf := map[string]string{} // name → its artifact's path
	var answered, encoded int64   // raw bytes and base64 bytes the answer holds, per name
	distinct := map[string]bool{}
	var distinctEncoded int64
	for _, name := range fetch {
		clean, err := jobs.CleanPath(name)
		a, ok := byPath[clean]
		if err != nil || !ok {
			continue
		}
		if _, dup := pathOf[name]; dup {
			continue // the same name twice is one key of the answer
		}
		pathOf[name] = a.Path
		answered += a.Size
		encoded += int64(base64.StdEncoding.EncodedLen(int(a.Size)))
		if !distinct[a.Path] {
			distinct[a.Path] = true
			distinctEncoded += int64(base64.StdEncoding.EncodedLen(int(a.Size)))
		}
	}
	if answered > s.cfg.MaxFetchBytes {
		return nil, &fetchTooLarge{jobID: job.ID, bytes: answered, most: s.cfg.MaxFetchBytes}
	}
	if len(pathOf) == 0 {
		return files, nil
	}
	// The base64 of each file, and the answer's JSON, which holds it once
	// per name (the files themselves are held as they are read).
	release, err := service.Hold(ctx, distinctEncoded+encoded)
	if err != nil {
		return nil, err
	}
	encodedOf := make(map[string]string, len(distinct))
	for name, path := range pathOf {
		b64, ok := encodedOf[path]
		if !ok {
			data, err := s.svc.ReadArtifact(ctx, p, job, path, min(byPath[path].Size, s.cfg.MaxFetchBytes))
			if err != nil {
				release()
				return nil, fmt.Errorf("fetch %s of job %s: %w", path, job.ID, err)
			}
			b64 = base64.StdEncoding.EncodeToString(data)
			encodedOf[path] = b64
		}
		files[name] = b64
	}
	return files, nil
}

// writeServiceError answers an error of the service as SandboxFusion's
// clients understand it: a refusal for load (the tenant's queue or rate,
// the queue or database unavailable) is 504, which verl retries; a bad key
// is 401; a job gantry refuses is a SandboxError, as SandboxFusion reports
// any failure to run code.
func (s *Server) writeServiceError(w http.ResponseWriter, err error) {
	e := compat.ServiceError(w, s.log, err)
	if e == nil {
		return
	}
	switch e.Code {
	case service.CodeUnauthenticated:
		w.Header().Set("WWW-Authenticate", `Bearer realm="gantry"`)
		compat.WriteJSON(w, http.StatusUnauthorized, detail{Detail: e.Message})
	case service.CodeRateLimited, service.CodeUnavailable, service.CodeRequestTimeout:
		compat.WriteJSON(w, http.StatusGatewayTimeout, detail{Detail: e.Message})
	case service.CodePayloadTooLarge:
		compat.WriteJSON(w, http.StatusRequestEntityTooLarge, detail{Detail: e.Message})
	default:
		compat.WriteJSON(w, http.StatusOK, sandboxError(e.Message))
	}
}
