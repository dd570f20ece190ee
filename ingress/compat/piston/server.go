// Package piston is Piston v2's API (engineer-man/piston: api/src/api/v2.js,
// api/src/job.js) at /compat/piston, an adapter over gantry's service:
// GET /api/v2/runtimes lists the languages gantry runs as Piston's
// runtimes, and each POST /api/v2/execute is a gantry job of the caller's
// tenant, answered with Piston's compile and run stages (stdout, stderr,
// output, code, signal — SIGKILL on a timeout —, message, status, memory,
// cpu_time, wall_time), quirks included: a newline is added to stdin that
// lacks one, and a failed compile is reported as the run stage too.
//
// Its clients (npm's piston-client, open-r1's) can send no key but in the
// URL: /compat/key/KEY/piston is their base URL. What differs from Piston
// is said in the README's section on Piston.
package piston

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// runtime is a Piston runtime gantry can offer.
type runtime struct {
	Language string
	Aliases  []string
	// Runtime names the package that provides it (node for javascript,
	// gcc for c and c++), as Piston lists it.
	Runtime string
	// Gantry are the gantry language names it may run as, in order.
	Gantry []string
}

// runtimes are Piston's packages' languages and aliases (packages/*/
// metadata.json) for the languages gantry runs.
var runtimes = []runtime{
	{Language: "python", Aliases: []string{"py", "py3", "python3", "python3.11"}, Gantry: []string{"python"}},
	{Language: "javascript", Aliases: []string{"node-javascript", "node-js", "javascript", "js"}, Runtime: "node", Gantry: []string{"node", "javascript"}},
	{Language: "typescript", Aliases: []string{"ts", "node-ts", "tsc", "typescript5", "ts5"}, Gantry: []string{"typescript"}},
	{Language: "bash", Aliases: []string{"sh"}, Gantry: []string{"bash"}},
	{Language: "c", Aliases: []string{"gcc"}, Runtime: "gcc", Gantry: []string{"c"}},
	{Language: "c++", Aliases: []string{"cpp", "g++"}, Runtime: "gcc", Gantry: []string{"cpp", "c++"}},
	{Language: "go", Aliases: []string{"go", "golang"}, Gantry: []string{"go"}},
	{Language: "java", Aliases: []string{}, Gantry: []string{"java"}},
	{Language: "rust", Aliases: []string{"rs"}, Gantry: []string{"rust"}},
}

// runtimeInfo is a runtime as GET /api/v2/runtimes lists it.
type runtimeInfo struct {
	Language string   `json:"language"`
	Version  string   `json:"version"`
	Aliases  []string `json:"aliases"`
	Runtime  string   `json:"runtime,omitempty"`
}

// available lists the runtimes gantry runs now, with the gantry language
// of each.
func available(p jobs.Policy) ([]runtimeInfo, []string) {
	var out []runtimeInfo
	var names []string
	for _, rt := range runtimes {
		if g, ok := compat.Language(p, rt.Gantry...); ok {
			out = append(out, runtimeInfo{Language: rt.Language, Version: compat.Version(g), Aliases: rt.Aliases, Runtime: rt.Runtime})
			names = append(names, g)
		}
	}
	return out, names
}

// Piston's defaults (api/src/config.js).
const (
	defCompileTimeout = 10000 // ms
	defRunTimeout     = 3000
)

// Server serves Piston's API over the service.
type Server struct {
	cfg compat.Config
	log *slog.Logger
	svc *service.Service
	mux *http.ServeMux
}

// New makes the adapter.
func New(cfg compat.Config, log *slog.Logger, svc *service.Service) *Server {
	s := &Server{cfg: cfg.WithDefaults(), log: log.With("api", "piston"), svc: svc, mux: http.NewServeMux()}
	s.mux.Handle("GET /api/v2/runtimes", compat.Authenticated(svc, s.handleRuntimes, s.writeError))
	s.mux.Handle("POST /api/v2/execute", compat.Authenticated(svc, s.handleExecute, s.writeError))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		compat.WriteJSON(w, http.StatusNotFound, message{Message: "Not Found"})
	})
	return s
}

// Handler serves the API's paths (/api/v2/...), relative to its base URL.
func (s *Server) Handler() http.Handler { return s.mux }

// message is Piston's error body.
type message struct {
	Message string `json:"message"`
}

// writeError answers an error as Piston's clients read one: a message,
// with 400 for a bad request, 401 for a bad key and 503 (which open-r1's
// client retries) when gantry cannot take the job now.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	var bad badRequest
	if errors.As(err, &bad) {
		compat.WriteJSON(w, http.StatusBadRequest, message{Message: string(bad)})
		return
	}
	e := compat.ServiceError(w, s.log, err)
	if e == nil {
		return
	}
	status := e.Status
	if e.Code == service.CodeRateLimited {
		status = http.StatusServiceUnavailable
	}
	compat.WriteJSON(w, status, message{Message: e.Message})
}

// badRequest is a 400 with Piston's words.
type badRequest string

func (b badRequest) Error() string { return string(b) }

func (s *Server) handleRuntimes(w http.ResponseWriter, _ *http.Request, _ service.Principal) error {
	list, _ := available(s.svc.Policy())
	compat.WriteJSON(w, http.StatusOK, list)
	return nil
}

// file is one of an execute request's files.
type file struct {
	Name     string  `json:"name"`
	Content  *string `json:"content"`
	Encoding string  `json:"encoding"`
}

// execute is an execute request, as v2.js's get_job reads it. Numbers are
// kept raw: Piston checks their types itself.
type execute struct {
	Language        any             `json:"language"`
	Version         any             `json:"version"`
	Args            []any           `json:"args"`
	Stdin           any             `json:"stdin"`
	Files           json.RawMessage `json:"files"`
	CompileTimeout  any             `json:"compile_timeout"`
	RunTimeout      any             `json:"run_timeout"`
	CompileCPUTime  any             `json:"compile_cpu_time"`
	RunCPUTime      any             `json:"run_cpu_time"`
	CompileMemLimit any             `json:"compile_memory_limit"`
	RunMemLimit     any             `json:"run_memory_limit"`
}

// parsed is a checked execute request.
type parsed struct {
	rt             runtimeInfo
	gantry         string
	main           []byte
	files          []jobs.File
	args           []string
	stdin          string
	runTimeout     int     // ms
	compileTimeout int     // ms
	runCPU         int     // ms
	runMemory      float64 // bytes, -1 for none
	compileMemory  float64 // bytes, -1 for none
}

// decodeExecute checks a request body as Piston's get_job does, in its
// order and words.
func decodeExecute(body []byte, policy jobs.Policy) (parsed, error) {
	maxMS := policy.MaxTimeoutMS
	var req execute
	var out parsed
	if err := json.Unmarshal(body, &req); err != nil {
		return out, badRequest("request body is not valid JSON: " + err.Error())
	}
	lang, ok := req.Language.(string)
	if !ok || lang == "" {
		return out, badRequest("language is required as a string")
	}
	ver, ok := req.Version.(string)
	if !ok || ver == "" {
		return out, badRequest("version is required as a string")
	}
	var rawFiles []json.RawMessage
	if json.Unmarshal(req.Files, &rawFiles) != nil || rawFiles == nil {
		return out, badRequest("files is required as an array")
	}
	files := make([]file, len(rawFiles))
	for i, raw := range rawFiles {
		if json.Unmarshal(raw, &files[i]) != nil || files[i].Content == nil {
			return out, badRequest(fmt.Sprintf("files[%d].content is required as a string", i))
		}
	}
	var found bool
	list, names := available(policy)
	for i, rt := range list {
		if (rt.Language == lang || contains(runtimes[indexOf(rt.Language)].Aliases, lang)) && satisfies(rt.Version, ver) {
			out.rt, out.gantry, found = rt, names[i], true
			break
		}
	}
	if !found {
		return out, badRequest(lang + "-" + ver + " runtime is unknown")
	}
	mainAt := -1
	for i, f := range files {
		if f.Encoding == "" || f.Encoding == "utf8" {
			mainAt = i
			break
		}
	}
	if mainAt < 0 {
		return out, badRequest("files must include at least one utf8 encoded file")
	}
	limits := map[string]float64{"run_timeout": float64(maxMS), "compile_timeout": float64(maxMS),
		"run_cpu_time": float64(maxMS), "compile_cpu_time": float64(maxMS), "run_memory_limit": -1, "compile_memory_limit": -1}
	values := map[string]any{}
	for _, c := range []struct {
		name string
		v    any
	}{
		{"compile_memory_limit", req.CompileMemLimit}, {"run_memory_limit", req.RunMemLimit},
		{"compile_timeout", req.CompileTimeout}, {"run_timeout", req.RunTimeout},
		{"compile_cpu_time", req.CompileCPUTime}, {"run_cpu_time", req.RunCPUTime},
	} {
		if !truthy(c.v) {
			continue
		}
		n, ok := c.v.(float64)
		if !ok {
			return out, badRequest("If specified, " + c.name + " must be a number")
		}
		if limit := limits[c.name]; limit > 0 {
			if n > limit {
				return out, badRequest(fmt.Sprintf("%s cannot exceed the configured limit of %g", c.name, limit))
			}
			if n < 0 {
				return out, badRequest(c.name + " must be non-negative")
			}
		}
		values[c.name] = n
	}
	msOr := func(name string, def int) int {
		if n, ok := values[name].(float64); ok {
			return int(n)
		}
		return def
	}
	out.runTimeout = msOr("run_timeout", defRunTimeout)
	// compile_cpu_time is a CPU limit, which gantry holds as a wall-clock
	// one (the stricter reading) only when the client sets it: its default
	// would otherwise cut a longer compile_timeout on a busy host.
	out.compileTimeout = msOr("compile_timeout", defCompileTimeout)
	if _, ok := values["compile_cpu_time"].(float64); ok {
		out.compileTimeout = min(out.compileTimeout, msOr("compile_cpu_time", defCompileTimeout))
	}
	// run_cpu_time likewise: sent, it also bounds the run's wall clock;
	// its default only judges the CPU time the run used (a program past it
	// is reported as Piston reports it), so that a longer run_timeout holds
	// for a program that waits (node starting on a busy host).
	out.runCPU = msOr("run_cpu_time", defRunTimeout)
	if _, ok := values["run_cpu_time"].(float64); ok {
		out.runTimeout = min(out.runTimeout, out.runCPU)
	}
	out.runMemory, out.compileMemory = -1, -1
	if n, ok := values["run_memory_limit"].(float64); ok {
		out.runMemory = n
	}
	if n, ok := values["compile_memory_limit"].(float64); ok {
		out.compileMemory = n
	}
	for i, f := range files {
		content, err := decodeContent(*f.Content, f.Encoding)
		if err != nil {
			return out, badRequest(fmt.Sprintf("files[%d].content is not valid %s: %v", i, f.Encoding, err))
		}
		if i == mainAt {
			out.main = content
			continue
		}
		name := f.Name
		if name == "" {
			name = fmt.Sprintf("file%d.code", i)
		}
		out.files = append(out.files, jobs.File{Path: name, Content: base64.StdEncoding.EncodeToString(content), Encoding: jobs.EncodingBase64})
	}
	for _, a := range req.Args {
		out.args = append(out.args, jsString(a))
	}
	if req.Stdin != nil {
		out.stdin = jsString(req.Stdin)
	}
	if len(out.stdin) == 0 || out.stdin[len(out.stdin)-1] != '\n' {
		out.stdin += "\n" // Piston adds a newline to stdin that lacks one
	}
	return out, nil
}

func indexOf(lang string) int {
	for i, rt := range runtimes {
		if rt.Language == lang {
			return i
		}
	}
	return 0
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// truthy is JavaScript's truthiness of a JSON value.
func truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case float64:
		return t != 0
	case string:
		return t != ""
	}
	return true
}

// jsString is a JSON value as JavaScript's String() writes it.
func jsString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return "null"
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(t)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// decodeContent reads a file's content in its encoding (Piston:
// Buffer.from(content, encoding); an unknown encoding is utf8).
func decodeContent(content, encoding string) ([]byte, error) {
	switch encoding {
	case "base64":
		return compat.LaxBase64(content)
	case "hex":
		return hex.DecodeString(content)
	}
	return []byte(content), nil
}

func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		return err
	}
	// Piston refuses a body that is not sent as application/json (415);
	// npm's piston-client sends its JSON as text/plain, so gantry reads
	// any body as JSON.
	policy := s.svc.Policy()
	req, err := decodeExecute(body, policy)
	if err != nil {
		return err
	}
	jr := jobs.Request{
		Language:      req.gantry,
		Code:          string(req.main),
		Args:          req.args,
		Files:         req.files,
		Stdin:         base64.StdEncoding.EncodeToString([]byte(req.stdin)),
		StdinEncoding: jobs.EncodingBase64,
		TimeoutMS:     compat.TimeoutMS(float64(req.runTimeout)/1000, policy),
		Metadata:      map[string]string{"compat": "piston", "piston.language": req.rt.Language},
	}
	if jr.TimeoutMS < 1 {
		jr.TimeoutMS = defRunTimeout
	}
	compiled := false
	if lang, ok := jobs.LookupLanguage(req.gantry); ok {
		compiled = lang.Compiled()
	}
	if req.runMemory > 0 {
		mb := int64(req.runMemory) >> 20
		if compiled {
			// The compiler and the program share the job's memory: the
			// job gets the compile's limit (none: gantry's largest), and
			// the program is held to its own by its measured peak.
			mb = int64(policy.MaxLimits.MemoryMB)
			if req.compileMemory > 0 {
				mb = max(int64(req.runMemory), int64(req.compileMemory)) >> 20
			}
		}
		jr.Limits = &jobs.Limits{MemoryMB: compat.MemoryMB(mb, policy)}
	}
	jr = compat.WithCompileTimeout(jr, compat.TimeoutMS(float64(req.compileTimeout)/1000, policy))
	job, _, err := s.svc.SubmitJob(r.Context(), p, jr)
	if err != nil {
		return err
	}
	w.Header().Set("X-Gantry-Job-Id", job.ID)
	job, err = s.svc.WaitJob(r.Context(), p, job, service.Watch{Until: time.Now().Add(s.svc.MaxWait())})
	if err != nil || r.Context().Err() != nil {
		return err
	}
	if !job.Status.Terminal() {
		compat.WriteJSON(w, http.StatusGatewayTimeout, message{Message: "the job " + job.ID + " did not finish in time"})
		return nil
	}
	// Each stage's output is answered twice: stdout and stderr, and
	// output, the two together.
	if err := compat.HoldOutput(r.Context(), 2, job); err != nil {
		return err
	}
	st := compat.StagesOf(job)
	if run := st.Run; compiled && run != nil && run.Signal == 0 && run.Outcome != compat.TimedOut && req.runMemory > 0 &&
		run.MemoryKB != nil && float64(*run.MemoryKB)*1024 > req.runMemory {
		run.Signal = 9 // past run_memory_limit, as isolate would have killed it
	}
	if st.Run != nil && st.Run.Outcome == compat.Failed {
		// Piston answers 500 when it cannot run a job.
		compat.WriteJSON(w, http.StatusInternalServerError, message{Message: st.Run.Message})
		return nil
	}
	res := result{Language: req.rt.Language, Version: req.rt.Version, Compile: stage(st.Compile), Run: stage(st.Run)}
	if run := res.Run; run != nil && run.Status == nil && run.CPUTime != nil && *run.CPUTime > float64(req.runCPU) {
		// Past run_cpu_time, which isolate would have stopped it at.
		kill, status, msg := "SIGKILL", "TO", "Time limit exceeded"
		run.Signal, run.Code, run.Status, run.Message = &kill, nil, &status, &msg
	}
	if res.Run == nil {
		res.Run = res.Compile // as Piston does when the run stage did not start
	}
	compat.WriteJSON(w, http.StatusOK, res)
	return nil
}

// result is an execute answer.
type result struct {
	Compile  *stageResult `json:"compile,omitempty"`
	Run      *stageResult `json:"run"`
	Language string       `json:"language"`
	Version  string       `json:"version"`
}

// stageResult is what job.js's safe_call returns of a stage.
type stageResult struct {
	Signal   *string  `json:"signal"`
	Stdout   string   `json:"stdout"`
	Stderr   string   `json:"stderr"`
	Code     *int     `json:"code"`
	Output   string   `json:"output"`
	Memory   *int64   `json:"memory"`
	Message  *string  `json:"message"`
	Status   *string  `json:"status"`
	CPUTime  *float64 `json:"cpu_time"`
	WallTime *float64 `json:"wall_time"`
}

// stage is a gantry stage as Piston reports it (isolate's status and
// message words).
func stage(st *compat.Stage) *stageResult {
	if st == nil {
		return nil
	}
	wall := float64(st.Wall.Milliseconds())
	out := &stageResult{Stdout: st.Stdout, Stderr: st.Stderr, Output: st.Stdout + st.Stderr, WallTime: &wall}
	if st.CPU != nil {
		cpu := float64(st.CPU.Milliseconds())
		out.CPUTime = &cpu
	}
	if st.MemoryKB != nil {
		b := *st.MemoryKB * 1000 // Piston reports isolate's KB times 1000
		out.Memory = &b
	}
	set := func(status, msg string) { out.Status, out.Message = &status, &msg }
	switch {
	case st.Outcome == compat.TimedOut:
		kill := "SIGKILL"
		out.Signal = &kill
		set("TO", "Time limit exceeded (wall clock)")
	case st.Signal != 0:
		name := signalName(st.Signal)
		out.Signal = &name
		set("SG", "Caught fatal signal "+strconv.Itoa(st.Signal))
	case st.ExitCode != nil && *st.ExitCode != 0:
		out.Code = st.ExitCode
		set("RE", "Exited with error status "+strconv.Itoa(*st.ExitCode))
	default:
		out.Code = st.ExitCode
	}
	return out
}

// signalName is a signal's name, as Piston's globals.SIGNALS has it.
func signalName(n int) string {
	names := map[int]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS",
		8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM",
		16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG",
		24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS"}
	if s, ok := names[n]; ok {
		return s
	}
	return "SIG" + strconv.Itoa(n)
}
