package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// JavaScript and TypeScript code contexts: the session's kernels
// (jobs.Request.Kernel), found among the sandbox's live processes by their
// tags (service.ParseKernelTag). Each cell is a job of the session, run in the
// context's kernel; the default contexts' kernels start with their first
// cell, one made here with a first job that moves it to its directory.

// The default contexts besides Python's, as E2B's interpreter makes them.
const (
	javascriptContext = "javascript"
	typescriptContext = "typescript"
)

// kernel is a running context's kernel.
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
		if id, lang, ok := service.ParseKernelTag(p.Tag); ok {
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

// startKernel starts a context's kernel in cwd (an E2B path): its first
// cell, a job of the session, moves it there.
func (s *Server) startKernel(ctx context.Context, c caller, id, language, cwd string) (kernel, error) {
	dir, _ := json.Marshal(toSandbox(cwd))
	job, err := s.submitCell(ctx, c, kernel{id: id, language: language}, "process.chdir("+string(dir)+");", nil)
	if err != nil {
		return kernel{}, err
	}
	final, err := s.svc.FollowJob(ctx, c.p, job, service.Follow{})
	switch {
	case err != nil:
		return kernel{}, err
	case !final.Status.Terminal():
		return kernel{}, ctx.Err()
	case final.Status != jobs.StatusSucceeded:
		msg := "the kernel did not start"
		if final.Exception != nil {
			msg = final.Exception.Name + ": " + final.Exception.Value
		} else if final.Error != nil {
			msg = final.Error.Message
		}
		return kernel{}, fmt.Errorf("context %s: %s", id, msg)
	}
	return kernel{id: id, language: language, cwd: fromSandbox(toSandbox(cwd))}, nil
}

// submitCell submits code as a cell of a context's kernel.
func (s *Server) submitCell(ctx context.Context, c caller, k kernel, code string, env map[string]string) (jobs.Job, error) {
	job, _, err := s.svc.SubmitJob(ctx, c.p, jobs.Request{Language: k.language, Kernel: k.id, Code: code, SessionID: &c.session, Env: env,
		TimeoutMS: s.svc.Policy().MaxTimeoutMS, Metadata: map[string]string{"e2b": "run_code"}})
	return job, err
}

// kernelFor is the kernel of a context to run code in: a default one
// starts with the code if it does not run yet, another must run.
func (s *Server) kernelFor(ctx context.Context, c caller, id string) (kernel, bool, error) {
	k, ok, err := s.findKernel(ctx, c, id)
	if err != nil || ok {
		return k, ok, err
	}
	if id != javascriptContext && id != typescriptContext {
		return k, false, nil
	}
	return kernel{id: id, language: id, cwd: home}, true, nil
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
