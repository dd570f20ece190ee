package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is the runner's end of an agent's stream: requests go out, frames
// come back. Everything read is untrusted (the program shares the
// container with the agent and might have taken it over): frames are
// size-capped and a frame out of place breaks the connection rather than
// being believed. One request at a time, as the agent serves them.
//
// A Conn that failed mid-request is broken for good: every later request
// fails at once, and the container should be retired.
//
// Live operations (Live) are the exception: any number may be in progress
// at once, beside a request, and the live processes' output and ends
// (KindProcessOutput, KindProcessExit) may come at any time; a goroutine
// reads every frame and routes those, so they are read even while nothing
// else is asked of the agent.
type Conn struct {
	fw    *FrameWriter
	close func()
	// diag, when set, returns what the agent printed on its stderr, to
	// explain a stream that ended.
	diag func() string

	// frames carries every other frame to the request in progress; it is
	// closed when the stream ends, with readErr set.
	frames  chan Frame
	readErr error
	// ended is closed when the stream has ended.
	ended chan struct{}

	liveMu   sync.Mutex
	liveID   int64
	waiting  map[int64]chan LiveReply
	onEvent  func(kind Kind, payload []byte)
	liveOpen bool
	// kept carries a stateful session's egress between runs (see
	// RunIO.KeepEgress): its streams go to keptTo, under liveMu.
	kept   *NetMux
	keptTo Egress

	broken atomic.Pointer[error]
	once   sync.Once
}

// NewConn speaks to an agent that reads w and writes r; closeFn ends the
// stream (the agent then exits). diag may be nil.
func NewConn(w io.Writer, r io.Reader, closeFn func(), diag func() string) *Conn {
	c := &Conn{fw: NewFrameWriter(w), close: closeFn, diag: diag, frames: make(chan Frame, 16), ended: make(chan struct{}),
		waiting: map[int64]chan LiveReply{}, liveOpen: true}
	go c.read(NewFrameReader(r, MaxFrame))
	return c
}

// read reads every frame the agent sends: live replies and process events
// are routed at once, the rest go to the request in progress.
func (c *Conn) read(fr *FrameReader) {
	defer close(c.ended)
	for {
		kind, payload, err := fr.Next()
		if err != nil {
			c.readErr = err
			close(c.frames)
			c.liveMu.Lock()
			c.liveOpen = false
			for id, ch := range c.waiting {
				close(ch)
				delete(c.waiting, id)
			}
			c.liveMu.Unlock()
			return
		}
		switch kind {
		case KindLive:
			var r LiveReply
			if len(payload) > maxLiveReply {
				// Not decoded: only its id, to answer its caller.
				var id struct {
					ID int64 `json:"id"`
				}
				if json.Unmarshal(payload, &id) != nil {
					_ = c.fail(errors.New("the sandbox agent sent a malformed live reply"))
					continue
				}
				r = LiveReply{ID: id.ID, Error: &LiveError{Code: LiveErrFailed, Message: fmt.Sprintf("the answer of %d bytes is over %d", len(payload), maxLiveReply)}}
			} else if json.Unmarshal(payload, &r) != nil {
				_ = c.fail(errors.New("the sandbox agent sent a malformed live reply"))
				continue
			}
			c.liveMu.Lock()
			ch := c.waiting[r.ID]
			delete(c.waiting, r.ID)
			c.liveMu.Unlock()
			if ch != nil {
				ch <- r
			}
		case KindProcessOutput, KindProcessExit:
			c.liveMu.Lock()
			on := c.onEvent
			c.liveMu.Unlock()
			if on != nil {
				on(kind, payload)
			}
		case KindNetOpen, KindNetData, KindNetEOF, KindNetAck, KindNetReset:
			c.liveMu.Lock()
			m := c.kept
			c.liveMu.Unlock()
			if m == nil {
				c.frames <- Frame{kind, payload}
				continue
			}
			m.Handle(kind, payload)
		default:
			c.frames <- Frame{kind, payload}
		}
	}
}

// Done is closed once the agent's stream has ended.
func (c *Conn) Done() <-chan struct{} { return c.ended }

// OnProcessEvent sets what receives the live processes' output and ends
// (KindProcessOutput, KindProcessExit frames, untrusted); nil drops them.
// It is called on the connection's reading goroutine: it must not block
// for long.
func (c *Conn) OnProcessEvent(fn func(kind Kind, payload []byte)) {
	c.liveMu.Lock()
	c.onEvent = fn
	c.liveMu.Unlock()
}

// Live sends a live operation and waits for its reply (any number may be
// in progress at once). The reply is untrusted. When ctx ends first, Live
// returns ctx's error and the reply is dropped when it comes; the
// connection stays usable.
func (c *Conn) Live(ctx context.Context, op LiveOp) (LiveReply, error) {
	if err := c.Err(); err != nil {
		return LiveReply{}, err
	}
	ch := make(chan LiveReply, 1)
	c.liveMu.Lock()
	if !c.liveOpen {
		c.liveMu.Unlock()
		return LiveReply{}, errors.New("the sandbox agent stopped")
	}
	c.liveID++
	op.ID = c.liveID
	c.waiting[op.ID] = ch
	c.liveMu.Unlock()
	drop := func() {
		c.liveMu.Lock()
		delete(c.waiting, op.ID)
		c.liveMu.Unlock()
	}
	if err := c.fw.JSON(KindLive, op); err != nil {
		drop()
		return LiveReply{}, c.fail(fmt.Errorf("send to the sandbox agent: %w", err))
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return LiveReply{}, errors.New("the sandbox agent stopped")
		}
		return r, nil
	case <-ctx.Done():
		drop()
		return LiveReply{}, ctx.Err()
	}
}

// Close ends the stream: the agent sees it end and exits, which stops the
// container. It is idempotent and safe to call concurrently with a
// request, which then fails.
func (c *Conn) Close() { c.once.Do(c.close) }

// Err is why the connection is broken, or nil.
func (c *Conn) Err() error {
	if p := c.broken.Load(); p != nil {
		return *p
	}
	return nil
}

func (c *Conn) fail(err error) error {
	if d := c.diag; d != nil {
		if msg := strings.TrimSpace(d()); msg != "" {
			err = fmt.Errorf("%w (the agent said: %s)", err, msg)
		}
	}
	c.broken.CompareAndSwap(nil, &err)
	c.Close()
	return *c.broken.Load()
}

func (c *Conn) send(req Request) error {
	if err := c.Err(); err != nil {
		return err
	}
	if err := c.fw.JSON(KindRequest, req); err != nil {
		return c.fail(fmt.Errorf("send to the sandbox agent: %w", err))
	}
	return nil
}

func (c *Conn) next() (Kind, []byte, error) {
	f, ok := <-c.frames
	if !ok {
		return 0, nil, c.fail(fmt.Errorf("the sandbox agent stopped: %w", c.readErr))
	}
	return f.Kind, f.Payload, nil
}

// unexpected breaks the connection over a frame that has no place here.
func (c *Conn) unexpected(kind Kind, during string) error {
	return c.fail(fmt.Errorf("the sandbox agent sent frame %q during %s", kind, during))
}

// watch closes the connection when ctx ends, so that a request blocked on
// the agent returns; the caller reads the context's cause.
func (c *Conn) watch(ctx context.Context) func() bool {
	return context.AfterFunc(ctx, func() { _ = c.fail(context.Cause(ctx)) })
}

// Hello reads the agent's first frame.
func (c *Conn) Hello(ctx context.Context) (Hello, error) {
	defer c.watch(ctx)()
	kind, payload, err := c.next()
	if err != nil {
		return Hello{}, err
	}
	var h Hello
	if kind != KindHello || json.Unmarshal(payload, &h) != nil {
		return Hello{}, c.fail(errors.New("the sandbox agent did not start with a hello"))
	}
	return h, nil
}

// Bridge answers the code-mode requests of a running program.
type Bridge interface {
	// Handle answers one request; it never fails (an error is an answer).
	Handle(ctx context.Context, req []byte) []byte
}

// Egress serves a running program's egress connections (egress.Proxy is
// one): each is a net.Conn whose other end is the program's proxy client.
type Egress interface {
	// ServeConn serves one connection until it or ctx ends, and closes it.
	ServeConn(ctx context.Context, c net.Conn)
}

// RunResult is what a run yields.
type RunResult struct {
	// Started: the agent reported that the program's sandbox (or its
	// compile step's) existed. It is set even when Run fails: after it,
	// what went wrong may be the program's doing.
	Started bool
	// StartedAt is when the runner learnt that the program's sandbox
	// existed (zero when it never did): before it the sandbox was being
	// made (and, with a compile step, the program built), after it the
	// program ran.
	StartedAt time.Time
	// Compile reports the compile step, once it ended (Request.Compile).
	// When its Exit is not a success the run ended there: Exit and
	// Listing are empty.
	Compile *CompileReport
	// Exit and Listing are set when Run returned no error.
	Exit    Exit
	Listing []byte
	// Build is what the compile step built, when the request asked for it
	// (Compile.SendBuild) and the step succeeded: a tar to send back as
	// Request.Build. Untrusted (the compiler ran the program's source);
	// empty when it was larger than MaxBuild.
	Build []byte
}

// CompileReport is how a compile step ended, with what it printed.
type CompileReport struct {
	Exit   Exit
	Output []byte
	// Truncated: it printed more than its OutputCap; the rest was dropped.
	Truncated bool
	// StartedAt and EndedAt are when the runner learnt that the compile
	// step's sandbox existed (zero if it never did) and that it ended.
	StartedAt, EndedAt time.Time
}

// RunIO is where a run's output and requests go.
type RunIO struct {
	Stdout, Stderr io.Writer
	// Bridge answers the program's code-mode requests (nil: none).
	Bridge Bridge
	// Egress serves the program's egress connections (nil: none).
	Egress Egress
	// KeepEgress (a stateful run with Egress) keeps the egress after the
	// run: connections the live sandbox's processes open later go to the
	// handler SetEgress names (Egress until then). A run without it ends
	// a kept egress.
	KeepEgress bool
	// Compiled, when set, is called as soon as the compile step ended,
	// before the program starts.
	Compiled func(CompileReport)
}

// maxLiveReply bounds a live operation's answer the runner decodes: a
// chunk of a file (MaxLiveChunk, base64) or a listing fits well within it.
const maxLiveReply = 2 << 20

// maxBridgeWaiting caps the bridge requests of a run in progress on the
// runner; more are refused at once (the agent caps them too, but the agent
// is not trusted).
const maxBridgeWaiting = 64

// Run runs a program (req.Op is set to "run"), building it first when
// req.Compile says how, copying its output to rio's writers, answering its
// code-mode requests with rio.Bridge and serving its egress connections
// with rio.Egress, until it exits (or its compile step failed). When ctx
// ends first the connection is closed (which stops the container) and Run
// returns an error; the caller knows why from ctx. Every bridge request
// started is finished before Run returns, so the caller's record of them
// is complete; every egress connection is closed.
func (c *Conn) Run(ctx context.Context, req Request, rio RunIO) (RunResult, error) {
	defer c.watch(ctx)()
	req.Op = "run"
	bridge, egress, stdout, stderr := rio.Bridge, rio.Egress, rio.Stdout, rio.Stderr
	req.Bridge = bridge != nil
	req.Egress = egress != nil
	req.KeepEgress = rio.KeepEgress && egress != nil && req.Stateful
	if req.KeepEgress {
		c.keepEgress(egress)
		egress = nil // the kept streams are routed as they come
	} else {
		c.endKeptEgress()
	}
	var res RunResult
	var compileOut []byte
	var compileStarted time.Time
	compiling := req.Compile != nil
	compileCap := 1 << 20
	if compiling && req.Compile.OutputCap > 0 {
		compileCap = req.Compile.OutputCap
	}
	bctx, stopBridge := context.WithCancel(ctx)
	var inFlight sync.WaitGroup
	defer func() { stopBridge(); inFlight.Wait() }()
	var mux *NetMux
	if egress != nil {
		mux = NewNetMux(c.fw.Frame, func(s *NetStream) {
			inFlight.Add(1)
			go func() { defer inFlight.Done(); egress.ServeConn(bctx, s) }()
		})
		defer mux.Close() // runs before the wait above: the proxies end
	}
	waiting := make(chan struct{}, maxBridgeWaiting)
	if err := c.send(req); err != nil {
		return res, err
	}
	exited := false
	for {
		kind, payload, err := c.next()
		if err != nil {
			return res, err
		}
		switch {
		case kind == KindStarted && !exited:
			res.Started = true
			switch {
			case compiling && compileStarted.IsZero():
				compileStarted = time.Now()
			case !compiling && res.StartedAt.IsZero():
				res.StartedAt = time.Now()
			}
		case kind == KindCompileOutput && compiling:
			// The agent caps it too, but is not trusted.
			if room := compileCap + 1 - len(compileOut); room > 0 {
				compileOut = append(compileOut, payload[:min(room, len(payload))]...)
			}
		case kind == KindBuild && compiling && req.Compile.SendBuild && res.Build == nil:
			res.Build = payload
			if len(payload) > MaxBuild {
				res.Build = []byte{}
			}
		case kind == KindCompiled && compiling:
			compiling = false
			rep := CompileReport{Output: compileOut, Truncated: len(compileOut) > compileCap, StartedAt: compileStarted, EndedAt: time.Now()}
			if rep.Truncated {
				rep.Output = compileOut[:compileCap]
			}
			if err := json.Unmarshal(payload, &rep.Exit); err != nil {
				return res, c.fail(fmt.Errorf("the sandbox agent's compile report: %w", err))
			}
			if rep.Exit.Started {
				res.Started = true
				if rep.StartedAt.IsZero() {
					rep.StartedAt = rep.EndedAt
				}
			}
			res.Compile = &rep
			if rio.Compiled != nil {
				rio.Compiled(rep)
			}
			if !rep.Exit.Succeeded() {
				return res, nil
			}
		case (kind == KindStdout || kind == KindStderr) && !exited:
			w := stdout
			if kind == KindStderr {
				w = stderr
			}
			_, _ = w.Write(payload)
		case kind == KindBridge && !exited:
			var br BridgeRequest
			if bridge == nil || json.Unmarshal(payload, &br) != nil {
				return res, c.fail(errors.New("the sandbox agent sent a malformed bridge request"))
			}
			select {
			case waiting <- struct{}{}:
				inFlight.Add(1)
				go func() {
					defer func() { <-waiting; inFlight.Done() }()
					body := bridge.Handle(bctx, br.Req)
					if bctx.Err() == nil {
						_ = c.send(Request{Op: "reply", ID: br.ID, Body: body})
					}
				}()
			default:
				_ = c.send(Request{Op: "reply", ID: br.ID, Body: json.RawMessage(
					`{"ok":false,"error":{"code":"busy","message":"too many tool requests in progress"}}`)})
			}
		case IsNetFrame(kind) && mux != nil && !exited:
			mux.Handle(kind, payload)
		case kind == KindExit && !exited:
			if err := json.Unmarshal(payload, &res.Exit); err != nil {
				return res, c.fail(fmt.Errorf("the sandbox agent's exit report: %w", err))
			}
			if res.Exit.Started {
				res.Started = true
				if res.StartedAt.IsZero() {
					res.StartedAt = time.Now()
				}
			}
			exited = true
		case kind == KindListing && exited:
			res.Listing = payload
			return res, nil
		default:
			return res, c.unexpected(kind, "a run")
		}
	}
}

// keepEgress makes the kept egress, if there is none, and sends its new
// connections to e.
func (c *Conn) keepEgress(e Egress) {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	c.keptTo = e
	if c.kept != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-c.ended; cancel() }()
	c.kept = NewNetMux(c.fw.Frame, func(s *NetStream) {
		c.liveMu.Lock()
		to := c.keptTo
		c.liveMu.Unlock()
		if to == nil {
			_ = s.Close()
			return
		}
		go to.ServeConn(ctx, s)
	})
}

// SetEgress names what serves the kept egress's new connections (nil
// refuses them), as the session's network changes or a run ends.
// Connections open keep their handler.
func (c *Conn) SetEgress(e Egress) {
	c.liveMu.Lock()
	c.keptTo = e
	c.liveMu.Unlock()
}

// endKeptEgress closes the kept egress (the agent closes its end as the
// run without it starts).
func (c *Conn) endKeptEgress() {
	c.liveMu.Lock()
	m := c.kept
	c.kept, c.keptTo = nil, nil
	c.liveMu.Unlock()
	if m != nil {
		m.Close()
	}
}

// Tar asks for a tar of the given workspace files (or, with all, of the
// whole workspace) and returns it as a stream. The caller reads what it
// wants, then calls wait, which drains the rest (so that it is not taken
// for the next answer) and says whether the stream was whole. When ctx
// ends the connection is closed.
func (c *Conn) Tar(ctx context.Context, paths []string, all bool) (io.Reader, func() error, error) {
	stop := c.watch(ctx)
	if err := c.send(Request{Op: "tar", Paths: paths, All: all}); err != nil {
		stop()
		return nil, nil, err
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		reading := true
		for {
			kind, payload, err := c.next()
			if err != nil {
				pw.CloseWithError(err)
				done <- err
				return
			}
			switch kind {
			case KindData:
				if reading {
					if _, err := pw.Write(payload); err != nil {
						reading = false
					}
				}
			case KindDataEnd:
				pw.Close()
				done <- nil
				return
			default:
				err := c.unexpected(kind, "a tar")
				pw.CloseWithError(err)
				done <- err
				return
			}
		}
	}()
	return pr, func() error {
		pr.CloseWithError(io.ErrClosedPipe) // the goroutine drains the rest
		err := <-done
		stop()
		return err
	}, nil
}

// Restore empties the workspace and unpacks the tar r into it.
func (c *Conn) Restore(ctx context.Context, r io.Reader) error {
	defer c.watch(ctx)()
	if err := c.send(Request{Op: "restore"}); err != nil {
		return err
	}
	dw := &DataWriter{fw: c.fw}
	if _, err := io.Copy(dw, r); err != nil {
		// The agent waits for the end of the stream: a broken source
		// leaves it mid-tar, so the connection cannot be trusted again.
		return c.fail(fmt.Errorf("read the snapshot: %w", err))
	}
	if err := dw.Close(); err != nil {
		return c.fail(fmt.Errorf("send to the sandbox agent: %w", err))
	}
	return c.done("a restore")
}

// Skills replaces the sandbox's skills with files (paths under SkillsDir).
func (c *Conn) Skills(ctx context.Context, files []File) error {
	defer c.watch(ctx)()
	if err := c.send(Request{Op: "skills", Files: files}); err != nil {
		return err
	}
	return c.done("a skills update")
}

// Clean readies the container for its tenant's next job or session: it
// ends a stateful session's live sandbox (protocol 8) and empties the
// workspace.
func (c *Conn) Clean(ctx context.Context) error {
	defer c.watch(ctx)()
	if err := c.send(Request{Op: "clean"}); err != nil {
		return err
	}
	return c.done("a clean")
}

// Warm waits until the container's warm interpreter has loaded its
// libraries (if it has one), and fails if it cannot serve.
func (c *Conn) Warm(ctx context.Context) error {
	defer c.watch(ctx)()
	if err := c.send(Request{Op: "warm"}); err != nil {
		return err
	}
	return c.done("a warm wait")
}

// Quiesce has the agent stop writing (it answers, then holds its stream
// at a frame's end) until Resume, so that what is checkpointed then is at
// rest. Nothing else may be asked of the agent meanwhile but Resume.
func (c *Conn) Quiesce(ctx context.Context) error {
	defer c.watch(ctx)()
	if err := c.send(Request{Op: "quiesce"}); err != nil {
		return err
	}
	return c.done("a quiesce")
}

// Resume lets a quiesced agent write again: on this stream (its sandbox
// went on after a checkpoint), or on a restored copy's new stream.
func (c *Conn) Resume(ctx context.Context) error {
	defer c.watch(ctx)()
	if err := c.send(Request{Op: "resume"}); err != nil {
		return err
	}
	return c.done("a resume")
}

// done reads the answer to a request without a stream of its own.
func (c *Conn) done(during string) error {
	kind, payload, err := c.next()
	if err != nil {
		return err
	}
	switch kind {
	case KindOK:
		return nil
	case KindError:
		// The agent is fine but the request failed; the stream is still
		// in step.
		return fmt.Errorf("the sandbox agent: %s", payload)
	}
	return c.unexpected(kind, during)
}
