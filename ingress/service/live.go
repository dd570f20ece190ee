package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
)

// Live operations act on a stateful session's live sandbox beside its
// jobs: start processes that outlive jobs and follow their output, write
// to their stdin, signal and list them; read and change files as the
// sandbox sees them. They are not jobs: they are not in the history and
// do not extend the session; the sandbox's limits hold them. The runner
// holding the sandbox's container answers them (see queue.LiveSubject). A
// session whose live state is not held anywhere (never made, or lost with
// its container) is given a new live sandbox first by a job of its own, as
// its next job would.
//
// The service speaks its own types here (ProcessSpec, Process,
// ProcessExit, FileEntry, FileChunk, LiveError), one method of Live per
// operation; the agent's protocol beneath them is spoken in livewire.go
// alone.

// liveWait bounds one live operation's round trip.
const liveWait = 50 * time.Second

// Sandboxes is the service's stateful sessions' live sandboxes: their live
// operations and process streams, and the session tokens that let a
// caller use one session's sandbox and nothing else (sessiontoken.go).
// The E2B adapter is its user; Service.Sandboxes returns it.
type Sandboxes struct {
	s *Service
	// streams are the streams of live processes on this ingress
	// (processevents.go).
	streams *processStreams
	// ports routes and dials the sandboxes' ports (ports.go).
	ports *ports
}

// Sandboxes is the service's live sandboxes.
func (s *Service) Sandboxes() *Sandboxes { return s.sandboxes }

// ProcessSpec is a live process to start.
type ProcessSpec struct {
	// Argv is the program and its arguments (Argv[0] is looked up in the
	// process's PATH).
	Argv []string
	// Env is the process's variables, over the session's own (which it
	// gets, and a listing never shows).
	Env map[string]string
	// Cwd is its directory, absolute as the sandbox sees it ("": the
	// sandbox's working directory).
	Cwd string
	// Stdin keeps its stdin open for Live.Input (else it reads nothing).
	Stdin bool
	// Timeout kills it (0: it runs until it ends, or the sandbox does).
	Timeout time.Duration
	// Tag names it in Live.Processes.
	Tag string
}

// Process is a running live process, as it was started (without the
// session's own variables).
type Process struct {
	Pid  int
	Argv []string
	Env  map[string]string
	Cwd  string
	Tag  string
}

// ProcessExit is how a live process ended: its exit code, or -1 and the
// signal that killed it.
type ProcessExit struct {
	Pid    int
	Code   int
	Signal int
}

// FileType is what kind of file a FileEntry is.
type FileType string

// The types of file.
const (
	FileRegular FileType = "file"
	FileDir     FileType = "dir"
	FileSymlink FileType = "symlink"
	FileOther   FileType = "other"
)

// FileEntry describes a file as the live sandbox sees it.
type FileEntry struct {
	Name string
	// Path is absolute, as the sandbox sees it.
	Path     string
	Type     FileType
	Size     int64
	Mode     uint32 // permission bits
	Owner    string
	Group    string
	Modified time.Time
	// Target is a symbolic link's target.
	Target string
}

// FileChunk is what Live.Read read of a file.
type FileChunk struct {
	Data []byte
	// Size is the file's size when read; EOF says Data reaches its end.
	Size int64
	EOF  bool
}

// LiveError is why a live operation failed in the sandbox. The session
// not found, not stateful, or its sandbox not reachable are *Error
// instead.
type LiveError struct {
	Code    LiveErrorCode
	Message string
}

func (e *LiveError) Error() string { return e.Message }

// LiveErrorCode says what kind of failure a LiveError is.
type LiveErrorCode string

// The codes of LiveError.
const (
	// LiveNoSandbox: the session's live sandbox is gone (a job of the
	// session makes a new one: a Live operation has tried once already).
	LiveNoSandbox LiveErrorCode = "no_sandbox"
	// LiveNotFound: no such file or process.
	LiveNotFound LiveErrorCode = "not_found"
	// LiveExists: the file is there already.
	LiveExists  LiveErrorCode = "exists"
	LiveInvalid LiveErrorCode = "invalid"
	// LivePermission: the sandbox's user may not (a read-only path, a
	// file it does not own).
	LivePermission LiveErrorCode = "permission"
	LiveNotDir     LiveErrorCode = "not_dir"
	LiveIsDir      LiveErrorCode = "is_dir"
	// LiveNoSpace: the sandbox's filesystem is full.
	LiveNoSpace LiveErrorCode = "no_space"
	// LiveBusy: the sandbox has too many operations at once.
	LiveBusy LiveErrorCode = "busy"
	// LiveFailed: anything else.
	LiveFailed LiveErrorCode = "failed"
)

// Live is a tenant's stateful session looked up once for a series of live
// operations (a file's chunks): each then costs no database query. Its
// methods (livewire.go) each carry out one operation: a failure of the
// operation itself is a *LiveError; the session not found, not stateful,
// or its sandbox not reachable are *Error.
type Live struct {
	sb   *Sandboxes
	p    Principal
	sess jobs.Session
}

// OpenLive looks up the tenant's stateful session for live operations.
func (sb *Sandboxes) OpenLive(ctx context.Context, p Principal, sessionID string) (*Live, error) {
	sess, err := sb.s.Session(ctx, p, sessionID)
	if err != nil {
		return nil, err
	}
	if !sess.Stateful {
		return nil, BadRequest("session_id", "session %s is not stateful: only a stateful session keeps a live sandbox", sess.ID)
	}
	return &Live{sb: sb, p: p, sess: sess}, nil
}

// Sandbox is the live sandbox (Session.Live) the last operation reached:
// after a wake, the new one.
func (l *Live) Sandbox() string { return l.sess.Live }

// call sends an operation to the session's live sandbox with send, giving
// the session one first if it holds none. When the sandbox turns out to be
// gone (its runner does not answer, or it answers LiveNoSandbox), a job
// makes the session a new one and the operation is sent once more.
func (l *Live) call(ctx context.Context, send func(sess jobs.Session) error) error {
	sb, p, sess := l.sb, l.p, l.sess
	defer func() { l.sess = sess }() // as a wake left it
	var err error
	for woke := false; ; woke = true {
		if sess.Live == "" {
			if woke {
				return Unavailable("the session's live sandbox could not be started; see its last job")
			}
			if sess, err = sb.wakeLive(ctx, p, sess); err != nil {
				return err
			}
			continue
		}
		err := send(sess)
		if !sandboxGone(err) || woke {
			return err
		}
		// The runner that held it is gone, or the sandbox ended: a job
		// makes the session a new one.
		if sess, err = sb.wakeLive(ctx, p, sess); err != nil {
			return err
		}
	}
}

// sandboxGone reports whether err says the live sandbox asked is gone: no
// runner answers for it, or it holds no live sandbox.
func sandboxGone(err error) bool {
	var le *LiveError
	return errors.Is(err, nats.ErrNoResponders) || errors.As(err, &le) && le.Code == LiveNoSandbox
}

// liveRequest sends an operation, as the agent's protocol words it, to the
// runner holding the session's live sandbox and returns its answer, as
// sent. No runner answering is nats.ErrNoResponders.
func (sb *Sandboxes) liveRequest(ctx context.Context, sess jobs.Session, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, liveWait)
	defer cancel()
	msg, err := sb.s.nc.RequestWithContext(ctx, queue.LiveSubject(sess.ID, sess.Live), body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, err
	case errors.Is(err, nats.ErrMaxPayload):
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge,
			Message: fmt.Sprintf("the operation is over the %d bytes a message between gantry's parts may hold", sb.s.nc.MaxPayload())}
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return nil, &Error{Status: http.StatusGatewayTimeout, Code: CodeUnavailable,
			Message: "the session's live sandbox did not answer within " + liveWait.String()}
	case err != nil:
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, Unavailable("the session's live sandbox cannot be reached: %v", err)
	}
	return msg.Data, nil
}

// wakeLive runs a job of the session that makes its live sandbox (an
// empty cell) and returns the session as it then is.
func (sb *Sandboxes) wakeLive(ctx context.Context, p Principal, sess jobs.Session) (jobs.Session, error) {
	s := sb.s
	job, _, err := s.SubmitJob(ctx, p, jobs.Request{Language: "python", Code: "pass", SessionID: &sess.ID,
		Metadata: map[string]string{"gantry": "starts the session's live sandbox"}})
	if err != nil {
		return sess, err
	}
	job, err = s.WaitJob(ctx, p, job, Watch{Until: time.Now().Add(s.cfg.MaxExecuteWait)})
	if err != nil {
		return sess, err
	}
	if !job.Status.Terminal() {
		if ctx.Err() != nil {
			return sess, ctx.Err()
		}
		return sess, Unavailable("the session's live sandbox is still starting (job %s); retry", job.ID)
	}
	if job.Status != jobs.StatusSucceeded {
		msg := "the session's live sandbox could not be started: job " + job.ID + " ended " + string(job.Status)
		if job.Error != nil {
			msg += ": " + job.Error.Message
		}
		return sess, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: msg}
	}
	return s.Session(ctx, p, sess.ID)
}

// StartLive makes sure the tenant's stateful session holds a live
// sandbox, running a job of the session that makes one when it does not
// (as its next job would).
func (sb *Sandboxes) StartLive(ctx context.Context, p Principal, sessionID string) error {
	sess, err := sb.s.Session(ctx, p, sessionID)
	if err != nil {
		return err
	}
	if !sess.Stateful {
		return BadRequest("session_id", "session %s is not stateful: only a stateful session keeps a live sandbox", sess.ID)
	}
	if sess.Live != "" {
		return nil
	}
	_, err = sb.wakeLive(ctx, p, sess)
	return err
}
