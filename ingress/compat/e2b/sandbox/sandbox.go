// Package sandbox is E2B's in-sandbox API over gantry's service, served
// at /compat/e2b/sandbox (what E2B_SANDBOX_URL points at): envd's process
// and filesystem services (Connect RPC, JSON codec) and its /files
// uploads and downloads (port 49983), and the code interpreter's /execute
// and /contexts (port 49999). E2B's SDKs send every call here with the
// sandbox in the E2b-Sandbox-Id header and the service in
// E2b-Sandbox-Port.
//
// An E2B sandbox is a gantry stateful session: code runs as the session's
// jobs (cells of its interpreter, in its history); commands and files are
// the session's live operations (service.Live), which act on its live
// sandbox beside its jobs. E2B's home directory, /home/user, is the
// session's /workspace.
//
// Every call carries the sandbox's access token (X-Access-Token, or
// E2B-Traffic-Access-Token, which the code interpreter's calls send): a
// session token (service.Sandboxes.SessionToken) for that sandbox, checked before
// anything else: it dies with the API key that asked for it (401) and at
// the sandbox's timeout. A sandbox that was killed or expired, or whose
// timeout ran out for its token, answers 502, as E2B's proxy does for a
// sandbox that is gone. A paused sandbox (its session paused) is resumed
// by a call when its lifecycle says autoResume, and its tokens then open
// it until its new timeout; otherwise the call answers 409, as E2B's
// proxy does, until the sandbox is resumed (connect).
package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// AutoResumeKey is the session metadata key that keeps an E2B sandbox's
// lifecycle.autoResume ("true": a call to it, or traffic to its ports,
// while it is paused resumes it). The service defines it: its ports
// resume a sandbox by it too.
const AutoResumeKey = service.AutoResumeKey

// DurableKey is the metadata key by which an E2B sandbox asks to be
// durable ("true"; jobs.SessionRequest.Durable): its live state can then
// be paused, snapshotted and forked. A sandbox that pauses at its timeout
// (lifecycle.onTimeout "pause", autoPause) is durable without it.
const DurableKey = "gantry.durable"

// The ports E2B's SDKs name in E2b-Sandbox-Port.
const (
	envdPort        = "49983"
	interpreterPort = "49999"
)

// Server serves E2B's in-sandbox API.
type Server struct {
	log *slog.Logger
	svc *service.Service
	// sandboxes are the sessions' live sandboxes (svc.Sandboxes()).
	sandboxes *service.Sandboxes
	envd      *http.ServeMux
	// interpreter serves the code interpreter's port.
	interpreter *http.ServeMux
}

// New makes the in-sandbox API over svc.
func New(log *slog.Logger, svc *service.Service) *Server {
	s := &Server{log: log, svc: svc, sandboxes: svc.Sandboxes(), envd: http.NewServeMux(), interpreter: http.NewServeMux()}
	rpc := func(name string, h rpcHandler) { s.envd.Handle("POST /"+name, s.rpc(h)) }
	rpc("process.Process/Start", s.processStart)
	rpc("process.Process/Connect", s.processConnect)
	rpc("process.Process/List", s.processList)
	rpc("process.Process/SendInput", s.processSendInput)
	rpc("process.Process/SendSignal", s.processSendSignal)
	rpc("process.Process/CloseStdin", s.processCloseStdin)
	rpc("process.Process/Update", unimplemented("resizing a PTY: gantry's commands have no terminal"))
	rpc("process.Process/StreamInput", unimplemented("streaming stdin: send it with SendInput"))
	rpc("filesystem.Filesystem/Stat", s.fsStat)
	rpc("filesystem.Filesystem/ListDir", s.fsListDir)
	rpc("filesystem.Filesystem/MakeDir", s.fsMakeDir)
	rpc("filesystem.Filesystem/Move", s.fsMove)
	rpc("filesystem.Filesystem/Remove", s.fsRemove)
	for _, m := range []string{"WatchDir", "CreateWatcher", "GetWatcherEvents", "RemoveWatcher"} {
		rpc("filesystem.Filesystem/"+m, unimplemented("watching directories is not offered by gantry"))
	}
	s.envd.Handle("GET /health", s.plain(s.health))
	s.envd.Handle("GET /files", s.plain(s.download))
	s.envd.Handle("POST /files", s.plain(s.upload))
	s.envd.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "gantry does not serve envd's "+r.Method+" "+r.URL.Path)
	})
	s.interpreter.Handle("GET /health", s.plain(func(w http.ResponseWriter, r *http.Request, _ caller) error {
		_, _ = w.Write([]byte(`"OK"`))
		return nil
	}))
	s.interpreter.Handle("POST /execute", s.plain(s.execute))
	s.interpreter.Handle("GET /contexts", s.plain(s.listContexts))
	s.interpreter.Handle("POST /contexts", s.plain(s.createContext))
	s.interpreter.Handle("DELETE /contexts/{id}", s.plain(s.removeContext))
	s.interpreter.Handle("POST /contexts/{id}/restart", s.plain(s.restartContext))
	s.interpreter.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "gantry does not serve the code interpreter's "+r.Method+" "+r.URL.Path)
	})
	return s
}

// ServeHTTP routes a call to the service its E2b-Sandbox-Port names.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch port := r.Header.Get("E2b-Sandbox-Port"); port {
	case interpreterPort:
		s.interpreter.ServeHTTP(w, r)
	case envdPort, "":
		s.envd.ServeHTTP(w, r)
	default:
		writeError(w, http.StatusBadGateway, "port "+port+" of a gantry sandbox is not reachable: it serves only E2B's envd (49983) and code interpreter (49999)")
	}
}

// caller is an authenticated in-sandbox call: the tenant and its session.
type caller struct {
	p       service.Principal
	session string
}

// authenticate checks the call's access token for the sandbox it names,
// and that the sandbox is running (resumed, if it is paused and resumes
// on calls).
func (s *Server) authenticate(r *http.Request) (caller, error) {
	c, err := s.checkToken(r)
	if err != nil {
		return c, err
	}
	return c, s.awake(r.Context(), c)
}

// errPaused: the sandbox is paused and does not resume on calls.
var errPaused = errors.New("the sandbox is paused")

// awake makes sure the caller's sandbox is not paused: a paused one is
// resumed if it resumes on calls (and its tokens opened until its new
// timeout), errPaused otherwise.
func (s *Server) awake(ctx context.Context, c caller) error {
	sess, err := s.svc.Session(ctx, c.p, c.session)
	if err != nil || sess.State != jobs.SessionPaused {
		return err
	}
	if sess.Metadata[AutoResumeKey] != "true" {
		return errPaused
	}
	if _, err := s.sandboxes.Resume(ctx, c.p, c.session); err != nil {
		return err
	}
	_, err = s.sandboxes.SessionToken(ctx, c.p, c.session)
	return err
}

// writePaused answers a call to a paused sandbox as E2B's proxy does.
func writePaused(w http.ResponseWriter, sid string) {
	compat.WriteJSON(w, http.StatusConflict, struct {
		SandboxID     string `json:"sandboxId"`
		Message       string `json:"message"`
		Code          int    `json:"code"`
		CanAutoResume bool   `json:"canAutoResume"`
	}{sid, "The sandbox is paused: resume it (Sandbox.connect), or create it with lifecycle.autoResume", http.StatusConflict, false})
}

// checkToken checks the call's access token for the sandbox it names.
func (s *Server) checkToken(r *http.Request) (caller, error) {
	sid := strings.TrimSpace(r.Header.Get("E2b-Sandbox-Id"))
	token := r.Header.Get("X-Access-Token")
	if token == "" {
		token = r.Header.Get("E2B-Traffic-Access-Token")
	}
	if sid == "" {
		return caller{}, &service.Error{Status: http.StatusBadRequest, Code: service.CodeInvalidArgument,
			Message: "no E2b-Sandbox-Id header: set E2B_SANDBOX_URL to this URL (the SDKs then send it)"}
	}
	p, err := s.sandboxes.AuthenticateSessionToken(r.Context(), strings.TrimSpace(token), sid, compat.Source(r.Context()))
	return caller{p: p, session: sid}, err
}

// live opens the caller's sandbox for live operations.
func (s *Server) live(ctx context.Context, c caller) (*service.Live, error) {
	return s.sandboxes.OpenLive(ctx, c.p, c.session)
}

// sandboxGone is the answer for a sandbox that was killed, expired, or is
// not the caller's: E2B's proxy answers 502 for a sandbox it cannot reach,
// which E2B's SDKs report as the sandbox's end.
func sandboxGone(sid string) string {
	return "sandbox " + sid + " was not found: it was killed, or its timeout ran out"
}

// plainHandler serves an authenticated call of the HTTP (non-RPC) routes.
type plainHandler func(w http.ResponseWriter, r *http.Request, c caller) error

// plain authenticates and answers errors as envd's HTTP API does:
// {"code": status, "message": …}.
func (s *Server) plain(h plainHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := s.authenticate(r)
		if err == nil {
			err = h(w, r, c)
		}
		if err != nil {
			s.answerPlain(w, c, err)
		}
	})
}

func (s *Server) answerPlain(w http.ResponseWriter, c caller, err error) {
	if errors.Is(err, errPaused) {
		writePaused(w, c.session)
		return
	}
	var le *service.LiveError
	if errors.As(err, &le) {
		status := http.StatusInternalServerError
		switch le.Code {
		case service.LiveNotFound:
			status = http.StatusNotFound
		case service.LiveInvalid, service.LiveIsDir, service.LiveNotDir, service.LiveExists:
			status = http.StatusBadRequest
		case service.LivePermission:
			status = http.StatusForbidden
		case service.LiveNoSpace:
			status = http.StatusInsufficientStorage
		case service.LiveBusy:
			status = http.StatusTooManyRequests
		case service.LiveNoSandbox:
			status = http.StatusBadGateway
		}
		writeError(w, status, le.Message)
		return
	}
	e := compat.ServiceError(w, s.log, err)
	if e == nil {
		return
	}
	status := e.Status
	if e.Code == service.CodeNotFound && c.session != "" {
		status, e.Message = http.StatusBadGateway, sandboxGone(c.session)
	}
	writeError(w, status, e.Message)
}

// writeError answers envd's error body.
func writeError(w http.ResponseWriter, status int, msg string) {
	compat.WriteJSON(w, status, struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{status, msg})
}

// rpcHandler serves an authenticated Connect call; it answers the call
// itself (unary or streaming), or returns the error to answer with.
type rpcHandler func(w http.ResponseWriter, r *http.Request, c caller) *rpcError

// rpc authenticates a Connect call. A call the token does not open
// answers 401, one for a sandbox that is gone 502 (E2B's proxy's): both
// before any of the stream, so that the SDKs see them as HTTP errors.
func (s *Server) rpc(h rpcHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := s.authenticate(r)
		if errors.Is(err, errPaused) {
			writePaused(w, c.session)
			return
		}
		if err != nil {
			s.answerRPC(w, r, c, s.rpcError(c, err))
			return
		}
		if e := h(w, r, c); e != nil {
			s.answerRPC(w, r, c, e)
		}
	})
}

// answerRPC answers a call that has not started answering with e.
func (s *Server) answerRPC(w http.ResponseWriter, r *http.Request, c caller, e *rpcError) {
	switch {
	case e.gone:
		writeError(w, http.StatusBadGateway, e.Message)
	case e.Code == codeUnauthenticated:
		writeUnary(w, nil, e)
	case mediaType(r.Header.Get("Content-Type")) == contentStream:
		newStream(w).end(e)
	default:
		writeUnary(w, nil, e)
	}
}

// rpcError words an error of the service or of a live operation as a
// Connect error.
func (s *Server) rpcError(c caller, err error) *rpcError {
	var le *service.LiveError
	if errors.As(err, &le) {
		switch le.Code {
		case service.LiveNotFound:
			return errorf(codeNotFound, "%s", le.Message)
		case service.LiveExists:
			return errorf(codeAlreadyExists, "%s", le.Message)
		case service.LiveInvalid, service.LiveIsDir, service.LiveNotDir:
			return errorf(codeInvalidArgument, "%s", le.Message)
		case service.LivePermission:
			return errorf(codePermissionDenied, "%s", le.Message)
		case service.LiveNoSpace, service.LiveBusy:
			return errorf(codeResourceExhausted, "%s", le.Message)
		case service.LiveNoSandbox:
			return errorf(codeUnavailable, "%s", le.Message)
		}
		return errorf(codeInternal, "%s", le.Message)
	}
	if errors.Is(err, context.Canceled) {
		return errorf(codeCanceled, "the call was cancelled")
	}
	e, internal := service.ToError(err)
	if internal {
		s.log.Error("e2b sandbox call failed", "err", err)
	}
	switch e.Code {
	case service.CodeNotFound:
		if c.session != "" {
			return &rpcError{Code: codeUnavailable, Message: sandboxGone(c.session), gone: true}
		}
		return errorf(codeNotFound, "%s", e.Message)
	case service.CodeUnauthenticated:
		return errorf(codeUnauthenticated, "%s", e.Message)
	case service.CodeInvalidArgument:
		return errorf(codeFailedPrecondition, "%s", e.Message)
	case service.CodeRateLimited:
		return errorf(codeResourceExhausted, "%s", e.Message)
	case service.CodeUnavailable, service.CodeUpstream:
		return errorf(codeUnavailable, "%s", e.Message)
	case service.CodePayloadTooLarge:
		return errorf(codeResourceExhausted, "%s", e.Message)
	case service.CodeConflict:
		return errorf(codeFailedPrecondition, "%s", e.Message)
	case service.CodeRequestTimeout:
		return errorf(codeDeadlineExceeded, "%s", e.Message)
	}
	return errorf(codeInternal, "%s", e.Message)
}

func unimplemented(what string) rpcHandler {
	return func(http.ResponseWriter, *http.Request, caller) *rpcError {
		return errorf(codeUnimplemented, "%s", what)
	}
}

// health answers 204 while the sandbox lives.
func (s *Server) health(w http.ResponseWriter, r *http.Request, c caller) error {
	if _, err := s.svc.Session(r.Context(), c.p, c.session); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
