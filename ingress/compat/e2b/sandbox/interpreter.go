package sandbox

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// The code interpreter's /execute over the session's jobs: each call is a
// Python job of the session, a cell of its interpreter (so state is kept
// from call to call, and the call is in the session's history), streamed
// back as the interpreter's NDJSON events: stdout and stderr as they come,
// then the cell's displays and value as results, its exception as an
// error, and end_of_execution.

// executeRequest is the interpreter's ExecutionRequest.
type executeRequest struct {
	Code      string            `json:"code"`
	ContextID *string           `json:"context_id"`
	Language  *string           `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// The default Python context: the session's interpreter.
const pythonContext = "python"

// maxCode bounds a cell's code (the job policy bounds it again).
const maxCode = 4 << 20

// normalizeLanguage is the interpreter's normalize_language.
func normalizeLanguage(l string) string {
	l = strings.ToLower(strings.TrimSpace(l))
	switch l {
	case "":
		return "python"
	case "js":
		return "javascript"
	case "ts":
		return "typescript"
	}
	return l
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request, c caller) error {
	var req executeRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCode+64<<10))
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "the request is not an ExecutionRequest: "+err.Error(), http.StatusUnprocessableEntity)
		return nil
	}
	if req.ContextID != nil && req.Language != nil {
		http.Error(w, "Only one of context_id or language can be provided", http.StatusBadRequest)
		return nil
	}
	// The context the code runs in: Python's is the session's
	// interpreter; the others are the session's kernels (jscontexts.go).
	contextID := pythonContext
	switch {
	case req.ContextID != nil:
		contextID = *req.ContextID
	case req.Language != nil:
		switch language := normalizeLanguage(*req.Language); language {
		case "python", javascriptContext, typescriptContext:
			contextID = language
		default:
			http.Error(w, fmt.Sprintf("language %q: gantry's code interpreter runs Python, JavaScript and TypeScript; run other code with commands.run", language), http.StatusNotImplemented)
			return nil
		}
	}
	ctx := r.Context()
	var k kernel
	if contextID != pythonContext {
		var ok bool
		var err error
		if k, ok, err = s.kernelFor(ctx, c, contextID); err != nil {
			return err
		} else if !ok {
			http.Error(w, "Context "+contextID+" not found", http.StatusNotFound)
			return nil
		}
	}
	// As a notebook shows them: figures as results, not files. The
	// variables an interpreter reads at its start would run the code
	// in a new one (see jobs.StartupVariable): those are set by the
	// code itself, as E2B's interpreter sets them all.
	env := map[string]string{"GANTRY_FIGURES": "display"}
	startup := map[string]string{}
	for k, v := range req.EnvVars {
		if jobs.StartupVariable(k) {
			startup[k] = v
		} else {
			env[k] = v
		}
	}
	code := req.Code
	if len(startup) > 0 {
		literal, _ := json.Marshal(startup)
		code = "__import__('os').environ.update(" + string(literal) + ")\n" + code
	}
	var job jobs.Job
	if contextID == pythonContext {
		var err error
		job, _, err = s.svc.SubmitJob(ctx, c.p, jobs.Request{Language: "python", Code: code, SessionID: &c.session, Env: env,
			TimeoutMS: s.svc.Policy().MaxTimeoutMS, Metadata: map[string]string{"e2b": "run_code"}})
		if err != nil {
			return err
		}
	} else {
		// A cell of the context's kernel: the variables are the
		// environment's while it runs.
		var err error
		if job, err = s.submitCell(ctx, c, k, req.Code, req.EnvVars); err != nil {
			return err
		}
	}

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	out := &ndjson{w: w, rc: http.NewResponseController(w)}
	_ = out.rc.Flush()
	defer out.event(map[string]string{"type": "end_of_execution"})
	// Output goes out a line at a time, as a notebook's kernel sends it
	// (a partial line after a moment's wait).
	lines := newLineBuffer(func(stream, text string) {
		out.event(map[string]string{"type": stream, "text": text, "timestamp": time.Now().UTC().Format(time.RFC3339Nano)})
	})
	ticks := 0
	final, err := s.svc.FollowJob(ctx, c.p, job, service.Follow{
		OnText: lines.add,
		Every:  200 * time.Millisecond,
		OnTick: func() {
			lines.flush()
			if ticks++; ticks%25 == 0 {
				out.event(map[string]string{"type": "keepalive"})
			}
		},
	})
	lines.flush()
	if err != nil || !final.Status.Terminal() {
		// The client went away: the cell runs on, as the session's job.
		return nil
	}
	if final.LiveState == jobs.LiveLost {
		out.event(map[string]string{"type": "stderr", "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
			"text": "gantry: the sandbox's earlier state was lost (" + final.LiveStateReason + "); this code ran in a new interpreter, with the files as they were\n"})
	}
	for _, d := range final.Displays {
		out.result(d, false)
	}
	if final.Value != nil {
		out.result(*final.Value, true)
	}
	switch {
	case final.Exception != nil:
		out.error(final.Exception.Name, final.Exception.Value, final.Exception.Traceback)
	case final.Status == jobs.StatusFailed && final.ExitCode != nil && *final.ExitCode != 0 && contextID != pythonContext:
		out.error("ContextRestarting", fmt.Sprintf("the code ended with exit code %d; if it ended the %s context's kernel, the next call starts it again", *final.ExitCode, k.language), "")
	case final.Status == jobs.StatusFailed && final.ExitCode != nil && *final.ExitCode != 0:
		msg := fmt.Sprint(*final.ExitCode)
		if final.Error != nil {
			msg = final.Error.Message
		}
		out.error("SystemExit", msg, "")
	case final.Status == jobs.StatusTimedOut:
		out.error("TimeoutError", "the code ran past gantry's time limit; its "+restarted(contextID)+" was restarted", "")
	case final.Status == jobs.StatusCancelled:
		out.error("ExecutionCancelled", "the code was cancelled; its "+restarted(contextID)+" was restarted", "")
	case final.Status == jobs.StatusError:
		msg := "gantry could not run the code"
		if final.Error != nil {
			msg = final.Error.Message
		}
		out.error("ExecutionError", msg, "")
	}
	return nil
}

// restarted names what a cell cut short restarts.
func restarted(contextID string) string {
	if contextID == pythonContext {
		return "sandbox's interpreter"
	}
	return "context's kernel"
}

// lineBuffer passes on whole lines of each stream, and what is left when
// flushed.
type lineBuffer struct {
	emit    func(stream, text string)
	pending map[string]string
}

func newLineBuffer(emit func(stream, text string)) *lineBuffer {
	return &lineBuffer{emit: emit, pending: map[string]string{}}
}

func (b *lineBuffer) add(stream, text string) {
	text = b.pending[stream] + text
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		b.emit(stream, text[:i+1])
		text = text[i+1:]
	}
	b.pending[stream] = text
}

func (b *lineBuffer) flush() {
	for _, stream := range []string{"stdout", "stderr"} {
		if text := b.pending[stream]; text != "" {
			b.emit(stream, text)
			b.pending[stream] = ""
		}
	}
}

// ndjson writes the interpreter's events, one JSON object a line.
type ndjson struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (n *ndjson) event(v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	_, _ = n.w.Write(append(data, '\n'))
	_ = n.rc.Flush()
}

func (n *ndjson) error(name, value, traceback string) {
	n.event(map[string]string{"type": "error", "name": name, "value": value, "traceback": traceback})
}

// result is the interpreter's Result of a MIME bundle: a string around
// quotes loses them, as the interpreter's does.
func (n *ndjson) result(v jobs.Value, main bool) {
	text := v.Text
	if len(text) >= 2 && (text[0] == '\'' && text[len(text)-1] == '\'' || text[0] == '"' && text[len(text)-1] == '"') {
		text = text[1 : len(text)-1]
	}
	r := struct {
		Type       string          `json:"type"`
		Text       string          `json:"text,omitempty"`
		HTML       string          `json:"html,omitempty"`
		Markdown   string          `json:"markdown,omitempty"`
		SVG        string          `json:"svg,omitempty"`
		PNG        string          `json:"png,omitempty"`
		JPEG       string          `json:"jpeg,omitempty"`
		LaTeX      string          `json:"latex,omitempty"`
		JSON       json.RawMessage `json:"json,omitempty"`
		MainResult bool            `json:"is_main_result"`
	}{"result", text, v.HTML, v.Markdown, v.SVG, v.PNG, v.JPEG, v.LaTeX, v.JSON, main}
	n.event(r)
}

// codeContext is the interpreter's Context.
type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}
