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
package sandboxfusion

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/gantryhq/gantry/glob"
	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/service"
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
	// MaxFetchBytes caps the bytes of one fetched file.
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
	job, _, err := s.svc.SubmitJob(r.Context(), p, s.jobRequest(req, lang))
	if err != nil {
		return err
	}
	w.Header().Set("X-Gantry-Job-Id", job.ID)
	job, err = s.await(r.Context(), p, job, s.startBy(compat.ArrivedAt(r.Context()), req, lang))
	if err != nil || r.Context().Err() != nil {
		return err // or the client went away
	}
	if !job.Status.Terminal() {
		compat.WriteJSON(w, http.StatusGatewayTimeout, detail{Detail: "the job " + job.ID + " did not finish in time; retry"})
		return nil
	}
	compat.WriteJSON(w, http.StatusOK, s.response(r.Context(), p, job, req.FetchFiles))
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

// startBy is when a job must have started for its answer to reach a client
// that waits compile_timeout + run_timeout + ClientSlack from the request's
// arrival: its run_timeout and Margin before that, and its compile_timeout
// too for a language with a compile step.
func (s *Server) startBy(arrived time.Time, req runCode, lang string) time.Time {
	budget := s.cfg.ClientSlack - s.cfg.Margin
	if !compat.Compiled(lang) {
		budget += seconds(req.CompileTimeout) // the client allows for a compile that does not happen
	}
	return arrived.Add(max(budget, s.cfg.Margin))
}

func seconds(f float64) time.Duration {
	if f <= 0 || f > 3600 {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

// await waits for the job to finish. A job that has not started by
// startBy is withdrawn (cancelled), and returned unfinished for a 504,
// unless it finished meanwhile.
func (s *Server) await(ctx context.Context, p service.Principal, job jobs.Job, startBy time.Time) (jobs.Job, error) {
	job, err := s.svc.WaitJob(ctx, p, job, service.Watch{Until: startBy})
	if err != nil || job.Status.Terminal() || ctx.Err() != nil {
		return job, err
	}
	if compat.Waiting(job) {
		cancelled, err := s.svc.CancelJob(context.WithoutCancel(ctx), p, job.ID)
		if err != nil {
			return job, err
		}
		if cancelled.Status != jobs.StatusCancelled {
			return cancelled, nil // it ran and finished meanwhile
		}
		return job, nil
	}
	return s.svc.WaitJob(ctx, p, job, service.Watch{Until: time.Now().Add(s.svc.MaxWait())})
}

// response is the RunCodeResponse of a finished job.
func (s *Server) response(ctx context.Context, p service.Principal, job jobs.Job, fetch []string) runCodeResponse {
	st := compat.StagesOf(job)
	out := runCodeResponse{Status: statusSuccess, Files: map[string]string{}}
	out.CompileResult = result(st.Compile)
	out.RunResult = result(st.Run)
	for _, r := range []*commandResult{out.CompileResult, out.RunResult} {
		switch {
		case r == nil:
		case r.Status == runError:
			out.Status, out.Message = statusSandboxError, *r.Stderr
			return out
		case r.Status == runTLE || (r.ReturnCode != nil && *r.ReturnCode != 0):
			out.Status = statusFailed
		}
	}
	out.Files = s.fetch(ctx, p, job, fetch)
	return out
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

// fetch reads the files the request asked for that the job left (as
// artifacts), base64-encoded, by the names the request gave.
func (s *Server) fetch(ctx context.Context, p service.Principal, job jobs.Job, fetch []string) map[string]string {
	files := map[string]string{}
	for _, name := range fetch {
		clean, err := jobs.CleanPath(name)
		if err != nil {
			continue
		}
		for _, a := range job.Artifacts {
			if a.Path != clean {
				continue
			}
			b, err := s.svc.ReadArtifact(ctx, p, job, a.Path, min(a.Size, s.cfg.MaxFetchBytes))
			if err != nil {
				s.log.Warn("fetch a file of a job", "job_id", job.ID, "path", path.Clean(a.Path), "err", err)
				continue
			}
			files[name] = base64.StdEncoding.EncodeToString(b)
		}
	}
	return files
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
