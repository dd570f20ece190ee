package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// JavaScript and TypeScript code contexts: a kernel each (jskernel.js, run
// by the sandbox's Node), a live process of the sandbox found by its tag
// (contextTag), started when first used. Cells are sent on its stdin and
// read back from its output between markers that name them. Unlike
// Python's, these cells are not jobs: they are not in the history, and
// their kernel lives as the sandbox's processes do.

//go:embed jskernel.js
var jsKernel string

// The default contexts besides Python's, as E2B's interpreter makes them.
const (
	javascriptContext = "javascript"
	typescriptContext = "typescript"
)

// contextTagPrefix starts the tag of a context's kernel process.
const contextTagPrefix = "e2b-context:"

func contextTag(id, language string) string { return contextTagPrefix + id + ":" + language }

// parseContextTag reads a kernel's tag: its context and language.
func parseContextTag(tag string) (id, language string, ok bool) {
	rest, ok := strings.CutPrefix(tag, contextTagPrefix)
	if !ok {
		return "", "", false
	}
	id, language, ok = strings.Cut(rest, ":")
	return id, language, ok && id != "" && (language == "javascript" || language == "typescript")
}

// kernel is a running context's process.
type kernel struct {
	pid      int
	id       string
	language string
	cwd      string
}

// kernels lists the sandbox's running JavaScript and TypeScript contexts.
func (s *Server) kernels(ctx context.Context, c caller) ([]kernel, error) {
	list, err := s.processes(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []kernel
	for _, p := range list {
		if id, lang, ok := parseContextTag(p.Tag); ok {
			out = append(out, kernel{pid: p.Pid, id: id, language: lang, cwd: fromSandbox(p.Cwd)})
		}
	}
	return out, nil
}

// findKernel is the context's kernel, if it runs.
func (s *Server) findKernel(ctx context.Context, c caller, id string) (kernel, bool, error) {
	list, err := s.kernels(ctx, c)
	if err != nil {
		return kernel{}, false, err
	}
	for _, k := range list {
		if k.id == id {
			return k, true, nil
		}
	}
	return kernel{}, false, nil
}

// startKernel starts a context's kernel in cwd (an E2B path).
func (s *Server) startKernel(ctx context.Context, c caller, id, language, cwd string) (kernel, error) {
	argv := []string{"node", "-e", jsKernel, "--"}
	if language == "typescript" {
		argv = append(argv, "ts")
	}
	env := e2bEnv(nil)
	env["PWD"] = fromSandbox(toSandbox(cwd))
	live, err := s.live(ctx, c)
	if err != nil {
		return kernel{}, err
	}
	pid, err := live.Spawn(ctx, service.ProcessSpec{Argv: argv, Env: env, Cwd: toSandbox(cwd), Stdin: true, Tag: contextTag(id, language)})
	if err != nil {
		return kernel{}, err
	}
	return kernel{pid: pid, id: id, language: language, cwd: fromSandbox(toSandbox(cwd))}, nil
}

// kernelFor is the kernel of a context to run code in: a default one is
// started when it does not run yet, another must run.
func (s *Server) kernelFor(ctx context.Context, c caller, id string) (kernel, bool, error) {
	k, ok, err := s.findKernel(ctx, c, id)
	if err != nil || ok {
		return k, ok, err
	}
	if id != javascriptContext && id != typescriptContext {
		return k, false, nil
	}
	k, err = s.startKernel(ctx, c, id, id, home)
	return k, err == nil, err
}

// cellResult is what the kernel says of a cell at its end.
type cellResult struct {
	Value json.RawMessage `json:"value"`
	Error *struct {
		Name      string `json:"name"`
		Value     string `json:"value"`
		Traceback string `json:"traceback"`
	} `json:"error"`
}

// runJS runs code in a JavaScript or TypeScript context's kernel and
// streams it to out as the interpreter's events.
func (s *Server) runJS(ctx context.Context, c caller, out *ndjson, k kernel, code string, env map[string]string) {
	// Following first: nothing of the cell's output is missed.
	events, err := s.sandboxes.WatchProcesses(ctx, c.p, c.session)
	if err != nil {
		out.error("ContextError", s.rpcError(c, err).Message, "")
		return
	}
	defer events.Close()
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	cell := newJSCell(hex.EncodeToString(nonce[:]))
	line, _ := json.Marshal(map[string]any{"id": cell.id, "code": code, "env": env})
	live, err := s.live(ctx, c)
	if err == nil {
		err = live.Input(ctx, k.pid, append(line, '\n'))
	}
	if err != nil {
		out.error("ContextError", "the context's kernel did not take the code: "+s.rpcError(c, err).Message, "")
		return
	}
	events.Follow(live.Sandbox(), k.pid)
	defer giveUpWhenCutOff(events, out.rc)()
	lines := newLineBuffer(func(stream, text string) {
		out.event(map[string]string{"type": stream, "text": text, "timestamp": time.Now().UTC().Format(time.RFC3339Nano)})
	})
	for ticks := 0; !cell.done; {
		wait, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		ev, got := events.Next(wait)
		cancel()
		if !got {
			if ctx.Err() != nil {
				return // the client went away: the cell runs on in its kernel
			}
			lines.flush()
			if ticks++; ticks%25 == 0 {
				out.event(map[string]string{"type": "keepalive"})
			}
			continue
		}
		if ev.Err != nil {
			// Cut off for reading too slowly (the cell runs on in its
			// kernel), or the sandbox is gone.
			lines.flush()
			out.error("ContextError", s.rpcError(c, ev.Err).Message, "")
			return
		}
		if ev.Pid != k.pid {
			continue
		}
		switch ev.Stream {
		case service.StreamStdout:
			cell.stdout(ev.Data, func(text string) { lines.add("stdout", text) })
		case service.StreamStderr:
			if cell.started && !cell.done {
				lines.add("stderr", string(ev.Data))
			}
		default:
			lines.flush()
			out.error("ContextRestarting", fmt.Sprintf("the %s context's kernel ended (exit code %d) before the code did; the next call starts it again", k.language, ev.Exit.Code), "")
			return
		}
	}
	lines.flush()
	var res cellResult
	if err := json.Unmarshal(cell.result, &res); err != nil {
		out.error("ContextError", "the kernel answered something malformed", "")
		return
	}
	if len(res.Value) > 0 && string(res.Value) != "null" {
		if v, err := jobs.ParseValue(res.Value); err == nil {
			out.result(*v, true)
		}
	}
	if res.Error != nil {
		out.error(res.Error.Name, res.Error.Value, res.Error.Traceback)
	}
}

// jsCell reads one cell's part of a kernel's stdout: what follows its
// start marker is its output, up to its end marker, which carries its
// result.
type jsCell struct {
	id            string
	start, end    []byte
	buf           []byte
	started, done bool
	result        []byte
}

// maxCellResult bounds what an end marker may carry (untrusted: the
// cell's own code writes to the same stream).
const maxCellResult = 4 << 20

func newJSCell(id string) *jsCell {
	return &jsCell{id: id, start: []byte("\x1e" + id + ":start\n"), end: []byte("\x1e" + id + ":end:")}
}

// stdout takes a chunk of the kernel's stdout, passing the cell's own
// output to emit.
func (c *jsCell) stdout(data []byte, emit func(string)) {
	if c.done {
		return
	}
	c.buf = append(c.buf, data...)
	if !c.started {
		i := bytes.Index(c.buf, c.start)
		if i < 0 {
			// Another cell's output: keep only what could begin the marker.
			if keep := len(c.start) - 1; len(c.buf) > keep {
				c.buf = c.buf[len(c.buf)-keep:]
			}
			return
		}
		c.buf, c.started = c.buf[i+len(c.start):], true
	}
	if j := bytes.Index(c.buf, c.end); j >= 0 {
		if j > 0 {
			emit(string(c.buf[:j]))
		}
		rest := c.buf[j+len(c.end):]
		k := bytes.Index(rest, []byte("\x1e\n"))
		if k < 0 && len(rest) < maxCellResult {
			c.buf = c.buf[j:] // the rest of the marker is still to come
			return
		}
		if k < 0 {
			k = len(rest)
		}
		c.result, c.done = rest[:k], true
		return
	}
	// All but what could begin the end marker is the cell's.
	cut := len(c.buf)
	if i := bytes.LastIndexByte(c.buf, 0x1e); i >= 0 && len(c.buf)-i < len(c.end) {
		cut = i
	}
	if cut > 0 {
		emit(string(c.buf[:cut]))
	}
	c.buf = append([]byte(nil), c.buf[cut:]...)
}

// contexts as the interpreter lists them: Python's (the session's
// interpreter) and JavaScript's, always; the others that run.
func (s *Server) listContexts(w http.ResponseWriter, r *http.Request, c caller) error {
	list, err := s.kernels(r.Context(), c)
	if err != nil {
		return err
	}
	out := []codeContext{{ID: pythonContext, Language: "python", Cwd: home}}
	seenJS := false
	for _, k := range list {
		seenJS = seenJS || k.id == javascriptContext
		out = append(out, codeContext{ID: k.id, Language: k.language, Cwd: k.cwd})
	}
	if !seenJS {
		out = append(out, codeContext{ID: javascriptContext, Language: "javascript", Cwd: home})
	}
	compat.WriteJSON(w, http.StatusOK, out)
	return nil
}

const onePython = "a gantry sandbox has one Python context, its session's interpreter (id \"python\"): it cannot make, remove or restart another"

func (s *Server) createContext(w http.ResponseWriter, r *http.Request, c caller) error {
	var req struct {
		Language string `json:"language"`
		Cwd      string `json:"cwd"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
		http.Error(w, "the request is not a CreateContext: "+err.Error(), http.StatusUnprocessableEntity)
		return nil
	}
	language := normalizeLanguage(req.Language)
	switch language {
	case "python":
		http.Error(w, onePython, http.StatusNotImplemented)
		return nil
	case "javascript", "typescript":
	default:
		http.Error(w, fmt.Sprintf("language %q: gantry's code interpreter runs Python, JavaScript and TypeScript", language), http.StatusNotImplemented)
		return nil
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = home
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	k, err := s.startKernel(r.Context(), c, hex.EncodeToString(id[:]), language, cwd)
	if err != nil {
		return err
	}
	compat.WriteJSON(w, http.StatusOK, codeContext{ID: k.id, Language: k.language, Cwd: k.cwd})
	return nil
}

func (s *Server) removeContext(w http.ResponseWriter, r *http.Request, c caller) error {
	return s.stopContext(w, r, c, false)
}

func (s *Server) restartContext(w http.ResponseWriter, r *http.Request, c caller) error {
	return s.stopContext(w, r, c, true)
}

// killKernel kills a kernel and waits (a while) for its end: until then
// it is listed still.
func (s *Server) killKernel(ctx context.Context, c caller, k kernel) error {
	events, err := s.sandboxes.WatchProcesses(ctx, c.p, c.session)
	if err != nil {
		return err
	}
	defer events.Close()
	live, err := s.live(ctx, c)
	if err != nil {
		return err
	}
	if err := live.Signal(ctx, k.pid, 9); err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		ev, ok := events.Next(wait)
		if !ok || ev.Err != nil || ev.Pid == k.pid && ev.Exit != nil {
			return nil
		}
	}
}

// stopContext kills a context's kernel; with restart a new one takes its
// place.
func (s *Server) stopContext(w http.ResponseWriter, r *http.Request, c caller, restart bool) error {
	id := r.PathValue("id")
	if id == pythonContext {
		http.Error(w, onePython, http.StatusNotImplemented)
		return nil
	}
	ctx := r.Context()
	k, ok, err := s.findKernel(ctx, c, id)
	if err != nil {
		return err
	}
	if !ok && !(restart && (id == javascriptContext || id == typescriptContext)) {
		http.Error(w, "Context "+id+" not found", http.StatusNotFound)
		return nil
	}
	if ok {
		if err := s.killKernel(ctx, c, k); err != nil {
			return err
		}
	} else {
		k = kernel{id: id, language: id, cwd: home}
	}
	if restart {
		if _, err := s.startKernel(ctx, c, k.id, k.language, k.cwd); err != nil {
			return err
		}
	}
	compat.WriteJSON(w, http.StatusOK, nil)
	return nil
}
