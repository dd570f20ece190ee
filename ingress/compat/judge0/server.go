// Package judge0 is Judge0 CE 1.13.1's API (judge0/judge0: config/routes.rb,
// app/controllers, docs/api) at /compat/judge0, an adapter over gantry's
// service: a submission is a gantry job of the caller's tenant, and its
// token is the job's id written as a UUID (the same 128 bits), so another
// tenant's token is not found.
//
// It answers field for field as Judge0 does: submissions with
// base64_encoded, wait and fields; batches of up to 20 (tokens=a,b,c);
// Judge0's language ids (and the hosted instance's newer ids as aliases)
// and its 14 statuses; time and limits as decimal strings, memory in KB;
// expected_output judged after Judge0's whitespace stripping; callbacks as
// a PUT of the submission; its error answers (422 per attribute, 400 for
// bad fields, 401 without a valid X-Auth-Token, 503 "queue is full").
// What differs is said in the README's section on Judge0.
package judge0

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// Server serves Judge0's API over the service.
type Server struct {
	cfg compat.Config
	log *slog.Logger
	svc *service.Service
	mux *http.ServeMux
}

// New makes the adapter.
func New(cfg compat.Config, log *slog.Logger, svc *service.Service) *Server {
	s := &Server{cfg: cfg.WithDefaults(), log: log.With("api", "judge0"), svc: svc, mux: http.NewServeMux()}
	routes := map[string]compat.Handler{
		"POST /submissions":         s.handleCreate,
		"GET /submissions/{token}":  s.handleShow,
		"POST /submissions/batch":   s.handleBatchCreate,
		"GET /submissions/batch":    s.handleBatchShow,
		"GET /submissions":          forbidden, // needs X-Auth-User (authorization), which gantry has none of
		"DELETE /submissions/{tok}": forbidden,
		"GET /languages":            s.handleLanguages,
		"GET /languages/all":        s.handleLanguages,
		"GET /languages/{id}":       s.handleLanguage,
		"GET /statuses":             s.handleStatuses,
		"GET /about":                s.handleAbout,
		"GET /version":              s.handleVersion,
		"GET /config_info":          s.handleConfigInfo,
		"POST /authenticate": func(w http.ResponseWriter, _ *http.Request, _ service.Principal) error {
			w.WriteHeader(http.StatusOK)
			return nil
		},
		"POST /authorize": forbidden,
	}
	for pattern, h := range routes {
		s.mux.Handle(pattern, compat.Authenticated(svc, h, s.writeError))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { notFound(w) })
	return s
}

// Handler serves the API's paths, relative to its base URL.
func (s *Server) Handler() http.Handler { return s.mux }

func forbidden(w http.ResponseWriter, _ *http.Request, _ service.Principal) error {
	w.WriteHeader(http.StatusForbidden)
	return nil
}

func notFound(w http.ResponseWriter) {
	compat.WriteJSON(w, http.StatusNotFound, map[string]any{"status": 404, "error": "Not Found"})
}

// errorBody is Judge0's {"error": "..."}.
type errorBody struct {
	Error string `json:"error"`
}

// writeError answers err as Judge0 would: 401 with no body for a bad key,
// 503 "queue is full" when gantry cannot take the job now, 422 for
// attributes, 404 for what is not found.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	var fe fieldErrors
	if errors.As(err, &fe) {
		compat.WriteJSON(w, http.StatusUnprocessableEntity, fe)
		return
	}
	e := compat.ServiceError(w, s.log, err)
	if e == nil {
		return
	}
	switch e.Code {
	case service.CodeUnauthenticated:
		w.WriteHeader(http.StatusUnauthorized)
	case service.CodeRateLimited, service.CodeUnavailable:
		compat.WriteJSON(w, http.StatusServiceUnavailable, errorBody{Error: "queue is full"})
	case service.CodeNotFound:
		notFound(w)
	case service.CodeInvalidArgument:
		compat.WriteJSON(w, http.StatusUnprocessableEntity, fieldErrors{attribute(e.Field): {e.Message}})
	default:
		compat.WriteJSON(w, e.Status, errorBody{Error: e.Message})
	}
}

// attribute names, in Judge0's words, the attribute behind a field of a
// gantry job request that gantry refused.
func attribute(field string) string {
	switch {
	case field == "code":
		return "source_code"
	case field == "stdin":
		return "stdin"
	case field == "args" || strings.HasPrefix(field, "args["):
		return "command_line_arguments"
	case strings.HasPrefix(field, "files"):
		return "additional_files"
	case field == "webhook_url":
		return "callback_url"
	}
	return "base"
}

// options are a request's query options.
type options struct {
	base64 bool
	wait   bool
	fields []string
}

// readOptions reads base64_encoded, wait and fields; bad fields are a 400.
func readOptions(r *http.Request) (options, error) {
	q := r.URL.Query()
	o := options{base64: q.Get("base64_encoded") == "true", wait: q.Get("wait") == "true"}
	var err error
	o.fields, err = requestedFields(q.Get("fields"))
	return o, err
}

// badRequest is a 400 with Judge0's error body.
type badRequest string

func (b badRequest) Error() string { return string(b) }

func (s *Server) readBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return badRequest("the request body is not a JSON object: " + err.Error())
	}
	return nil
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	o, err := readOptions(r)
	if err != nil {
		return s.answerBad(w, err)
	}
	var raw map[string]json.RawMessage
	if err := s.readBody(w, r, &raw); err != nil {
		return s.answerBad(w, err)
	}
	sub, err := decodeSubmission(raw, o.base64, s.svc.Policy())
	if err != nil {
		return err
	}
	if sub.Stored.CallbackURL != nil {
		if err := s.svc.CheckCallbackURL("callback_url", *sub.Stored.CallbackURL); err != nil {
			return fieldErrors{"callback_url": {strings.TrimPrefix(err.Error(), "callback_url ")}}
		}
	}
	req, err := s.jobRequest(sub)
	if err != nil {
		return err
	}
	job, _, err := s.svc.SubmitJob(r.Context(), p, req)
	if err != nil {
		return err
	}
	w.Header().Set("X-Gantry-Job-Id", job.ID)
	s.callback(p, job, sub.Stored)
	if !o.wait {
		compat.WriteJSON(w, http.StatusCreated, map[string]string{"token": token(job.ID)})
		return nil
	}
	job, err = s.svc.WaitJob(r.Context(), p, job, service.Watch{Until: time.Now().Add(s.svc.MaxWait())})
	if err != nil || r.Context().Err() != nil {
		return err
	}
	v, err := s.views(r.Context(), p, []jobs.Job{job})
	if err != nil {
		return err
	}
	return s.writeSubmission(r.Context(), w, http.StatusCreated, v[0], o)
}

// answerBad answers a malformed request or bad options with a 400.
func (s *Server) answerBad(w http.ResponseWriter, err error) error {
	var b badRequest
	if errors.As(err, &b) {
		compat.WriteJSON(w, http.StatusBadRequest, errorBody{Error: string(b)})
		return nil
	}
	return err
}

// callback has the submission PUT to its callback URL once it finished.
func (s *Server) callback(p service.Principal, job jobs.Job, st stored) {
	if st.CallbackURL == nil {
		return
	}
	s.svc.CallWhenFinished(p, job, service.Callback{
		URL: *st.CallbackURL, Method: http.MethodPut, ContentType: "application/json",
		Tries: callbackTries, Timeout: 5 * time.Second,
		Render: func(ctx context.Context, done jobs.Job) ([]byte, error) {
			v, err := s.views(ctx, p, []jobs.Job{done})
			if err != nil {
				return nil, err
			}
			return marshalSubmission(v[0], options{base64: true, fields: defaultFields}, s.svc.Policy())
		},
	})
}

// jobRequest is the gantry job that runs a submission.
func (s *Server) jobRequest(sub submission) (jobs.Request, error) {
	st := sub.Stored
	compatData, err := json.Marshal(st)
	if err != nil {
		return jobs.Request{}, err
	}
	policy := s.svc.Policy()
	limit := st.WallTimeLimit
	if st.CPUTimeLimit > 0 {
		// gantry's limit is wall-clock time: a program busy on the CPU is
		// killed when isolate would kill it; one that sleeps, sooner.
		limit = math.Min(limit, st.CPUTimeLimit+st.CPUExtraTime)
	}
	memoryKB := st.MemoryLimit
	if lang, ok := jobs.LookupLanguage(sub.Gantry); ok && lang.Compiled() {
		// Judge0 compiles within its largest limits (MAX_MEMORY_LIMIT):
		// g++ needs about 210 MB for a program that includes
		// <bits/stdc++.h>. The compiler and the program share the job's
		// memory, so the job gets that much and the program is held to
		// its own limit by its measured peak (judge).
		memoryKB = max(memoryKB, maxMemoryLimit)
	}
	req := jobs.Request{
		Language:  sub.Gantry,
		Code:      string(sub.Source),
		Args:      sub.ArgList,
		Files:     sub.Files,
		TimeoutMS: compat.TimeoutMS(limit, policy),
		Limits: &jobs.Limits{
			MemoryMB: compat.MemoryMB((memoryKB+1023)/1024, policy),
			Pids:     int(min(max(st.MaxProcesses, int64(policy.MinLimits.Pids)), int64(policy.MaxLimits.Pids))),
		},
		Metadata: map[string]string{"compat": "judge0", "judge0.language_id": strconv.Itoa(st.LanguageID)},
		Compat:   compatData,
	}
	if len(sub.Stdin) > 0 {
		req.Stdin, req.StdinEncoding = b64(sub.Stdin), jobs.EncodingBase64
	}
	// Judge0 compiles within its largest limits (MAX_WALL_TIME_LIMIT).
	return compat.WithCompileTimeout(req, compat.TimeoutMS(maxWallTimeLimit, policy)), nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func (s *Server) handleShow(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	o, err := readOptions(r)
	if err != nil {
		return s.answerBad(w, err)
	}
	id, ok := jobID(r.PathValue("token"))
	if !ok {
		notFound(w)
		return nil
	}
	job, err := s.svc.Job(r.Context(), p, id)
	if err != nil {
		return err
	}
	v, err := s.views(r.Context(), p, []jobs.Job{job})
	if err != nil {
		return err
	}
	return s.writeSubmission(r.Context(), w, http.StatusOK, v[0], o)
}

// views reads what the submissions of jobs need besides the jobs: their
// specs (the source, stdin and the stored attributes).
func (s *Server) views(ctx context.Context, p service.Principal, list []jobs.Job) ([]view, error) {
	if err := s.svc.WithSpecs(ctx, p, list); err != nil {
		return nil, err
	}
	out := make([]view, len(list))
	for i, j := range list {
		out[i] = view{job: j, spec: j.Spec}
	}
	return out, nil
}

func (s *Server) writeSubmission(ctx context.Context, w http.ResponseWriter, status int, v view, o options) error {
	if err := compat.HoldOutput(ctx, renderCopies(o), v.job); err != nil {
		return err
	}
	body, err := marshalSubmission(v, o, s.svc.Policy())
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
	return nil
}

// renderCopies is how many copies of a submission's output its answer
// makes besides the text and one JSON of it: the bytes judged, the text
// (with base64_encoded its base64, a third longer), its JSON value, and the
// answer it is written into.
func renderCopies(o options) float64 {
	if o.base64 {
		return 1 + 3*4.0/3 - 1 // a JSON of it is held already
	}
	return 4 - 1
}

// batch is the body of POST /submissions/batch.
type batch struct {
	Submissions []map[string]json.RawMessage `json:"submissions"`
}

func (s *Server) handleBatchCreate(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	o, err := readOptions(r)
	if err != nil {
		o.fields = nil // fields are ignored in batch_create, as Judge0 does
	}
	var b batch
	if err := s.readBody(w, r, &b); err != nil {
		return s.answerBad(w, err)
	}
	switch n := len(b.Submissions); {
	case n > maxBatchSize:
		compat.WriteJSON(w, http.StatusBadRequest, errorBody{Error: "number of submissions in a batch should be less than or equal to " + strconv.Itoa(maxBatchSize)})
		return nil
	case n == 0:
		compat.WriteJSON(w, http.StatusBadRequest, errorBody{Error: "there should be at least one submission in a batch"})
		return nil
	}
	out := make([]any, len(b.Submissions))
	var items []service.BatchItem
	var at []int      // where each item's answer goes
	var subs []stored // each item's stored attributes
	for i, raw := range b.Submissions {
		sub, err := decodeSubmission(raw, o.base64, s.svc.Policy())
		if err == nil && sub.Stored.CallbackURL != nil {
			if cerr := s.svc.CheckCallbackURL("callback_url", *sub.Stored.CallbackURL); cerr != nil {
				err = fieldErrors{"callback_url": {strings.TrimPrefix(cerr.Error(), "callback_url ")}}
			}
		}
		var req jobs.Request
		if err == nil {
			req, err = s.jobRequest(sub)
		}
		if err != nil {
			var fe fieldErrors
			if !errors.As(err, &fe) {
				return err
			}
			out[i] = fe
			continue
		}
		items = append(items, service.BatchItem{Request: req})
		at = append(at, i)
		subs = append(subs, sub.Stored)
	}
	created := false
	if len(items) > 0 {
		_, results, err := s.svc.SubmitBatch(r.Context(), p, items)
		if err != nil {
			return err
		}
		for k, res := range results {
			if res.Err != nil {
				if res.Err.Code == service.CodeRateLimited || res.Err.Code == service.CodeUnavailable {
					return res.Err // the queue is full: 503, as Judge0 refuses the whole batch
				}
				out[at[k]] = fieldErrors{attribute(res.Err.Field): {res.Err.Message}}
				continue
			}
			created = true
			out[at[k]] = map[string]string{"token": token(res.Job.ID)}
			s.callback(p, res.Job, subs[k])
		}
	}
	status := http.StatusUnprocessableEntity
	if created {
		status = http.StatusCreated
	}
	compat.WriteJSON(w, status, out)
	return nil
}

func (s *Server) handleBatchShow(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	o, err := readOptions(r)
	if err != nil {
		return s.answerBad(w, err)
	}
	raw := r.Header.Get("tokens")
	if raw == "" {
		raw = r.URL.Query().Get("tokens")
	}
	var tokens []string
	for _, t := range strings.Split(strings.TrimSpace(raw), ",") {
		if t != "" {
			tokens = append(tokens, t)
		}
	}
	switch {
	case len(tokens) > maxBatchSize:
		compat.WriteJSON(w, http.StatusBadRequest, errorBody{Error: "number of submissions in a batch should be less than or equal to " + strconv.Itoa(maxBatchSize)})
		return nil
	case len(tokens) == 0:
		compat.WriteJSON(w, http.StatusBadRequest, errorBody{Error: "there should be at least one submission in a batch"})
		return nil
	}
	var found []jobs.Job
	var at []int
	for i, t := range tokens {
		id, ok := jobID(strings.TrimSpace(t))
		if !ok {
			continue
		}
		job, err := s.svc.Job(r.Context(), p, id)
		var e *service.Error
		if errors.As(err, &e) && e.Code == service.CodeNotFound {
			continue
		}
		if err != nil {
			return err
		}
		found = append(found, job)
		at = append(at, i)
	}
	views, err := s.views(r.Context(), p, found)
	if err != nil {
		return err
	}
	if err := compat.HoldOutput(r.Context(), renderCopies(o), found...); err != nil {
		return err
	}
	out := make([]json.RawMessage, len(tokens))
	for i := range out {
		out[i] = json.RawMessage("null")
	}
	for k, v := range views {
		b, err := marshalSubmission(v, o, s.svc.Policy())
		if err != nil {
			return err
		}
		out[at[k]] = b
	}
	compat.WriteJSON(w, http.StatusOK, map[string]any{"submissions": out})
	return nil
}

func (s *Server) handleLanguages(w http.ResponseWriter, r *http.Request, _ service.Principal) error {
	list := available(s.svc.Policy())
	if strings.HasSuffix(r.URL.Path, "/all") {
		type withArchived struct {
			languageRef
			IsArchived bool `json:"is_archived"`
		}
		all := make([]withArchived, len(list))
		for i, l := range list {
			all[i] = withArchived{languageRef: l}
		}
		compat.WriteJSON(w, http.StatusOK, all)
		return nil
	}
	compat.WriteJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) handleLanguage(w http.ResponseWriter, r *http.Request, _ service.Principal) error {
	id, err := strconv.Atoi(r.PathValue("id"))
	l, gantry, ok := lookup(s.svc.Policy(), id)
	if err != nil || !ok {
		notFound(w)
		return nil
	}
	var compile *string
	if l.Compiled {
		c := "(compiled by gantry's " + gantry + " language)"
		compile = &c
	}
	compat.WriteJSON(w, http.StatusOK, map[string]any{
		"id": id, "name": l.name(gantry), "is_archived": false, "source_file": l.SourceFile,
		"compile_cmd": compile, "run_cmd": "(run by gantry's " + gantry + " language)",
	})
	return nil
}

func (s *Server) handleStatuses(w http.ResponseWriter, _ *http.Request, _ service.Principal) error {
	list := make([]statusRef, 0, len(statusNames))
	for id := statusInQueue; id <= statusExecFormat; id++ {
		list = append(list, statusOf(id))
	}
	compat.WriteJSON(w, http.StatusOK, list)
	return nil
}

// version is the Judge0 version this adapter answers as.
const version = "1.13.1"

func (s *Server) handleAbout(w http.ResponseWriter, _ *http.Request, _ service.Principal) error {
	compat.WriteJSON(w, http.StatusOK, map[string]any{
		"version": version, "homepage": "https://github.com/gantryhq/gantry",
		"source_code": "https://github.com/gantryhq/gantry", "maintainer": "gantry (Judge0-compatible API)",
	})
	return nil
}

func (s *Server) handleVersion(w http.ResponseWriter, _ *http.Request, _ service.Principal) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, version)
	return nil
}

func (s *Server) handleConfigInfo(w http.ResponseWriter, _ *http.Request, p service.Principal) error {
	compat.WriteJSON(w, http.StatusOK, map[string]any{
		"maintenance_mode": false, "enable_wait_result": true, "enable_compiler_options": false,
		"allowed_languages_for_compile_options": []string{}, "enable_command_line_arguments": true,
		"enable_submission_delete": false, "enable_callbacks": true, "callbacks_max_tries": callbackTries,
		"callbacks_timeout": 5.0, "enable_additional_files": true, "max_queue_size": s.svc.Limits(p).MaxQueued,
		"cpu_time_limit": defCPUTimeLimit, "max_cpu_time_limit": maxCPUTimeLimit,
		"cpu_extra_time": defCPUExtraTime, "max_cpu_extra_time": maxCPUExtraTime,
		"wall_time_limit": defWallTimeLimit, "max_wall_time_limit": maxWallTimeLimit,
		"memory_limit": defMemoryLimit, "max_memory_limit": maxMemoryLimit,
		"stack_limit": defStackLimit, "max_stack_limit": maxStackLimit,
		"max_processes_and_or_threads": defMaxProcesses, "max_max_processes_and_or_threads": maxMaxProcesses,
		"enable_per_process_and_thread_time_limit": false, "allow_enable_per_process_and_thread_time_limit": true,
		"enable_per_process_and_thread_memory_limit": false, "allow_enable_per_process_and_thread_memory_limit": true,
		"max_file_size": defMaxFileSize, "max_max_file_size": maxMaxFileSize,
		"number_of_runs": defNumberOfRuns, "max_number_of_runs": maxNumberOfRuns,
		"redirect_stderr_to_stdout": false, "max_extract_size": maxExtractSize >> 10,
		"enable_batched_submissions": true, "max_submission_batch_size": maxBatchSize,
		"submission_cache_duration": 1.0, "use_docs_as_homepage": false,
		"allow_enable_network": false, "enable_network": false,
	})
	return nil
}
