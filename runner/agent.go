package runner

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/jobs"
)

// agentSource is the program pooled containers run as their main process
// (see agent.py): it serves one job over the container's attached
// stdin/stdout, so the job costs no `docker exec` round trips.
//
//go:embed agent.py
var agentSource string

// agentConn speaks to a container's agent over its attach stream.
type agentConn struct {
	wmu    sync.Mutex // bridge replies are written from their own goroutines
	w      io.Writer  // requests to the agent
	closer func()
	frames *bufio.Reader
	stderr bytes.Buffer // the agent's own complaints, for error messages
}

// maxFrame bounds one frame from the (untrusted) sandbox.
const maxFrame = 32 << 20

func newAgentConn(att client.HijackedResponse) *agentConn {
	a := &agentConn{w: att.Conn, closer: att.Close}
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, &limitedBuffer{buf: &a.stderr, max: 4096}, att.Reader)
		pw.CloseWithError(err)
	}()
	a.frames = bufio.NewReaderSize(pr, 64<<10)
	return a
}

func (a *agentConn) close() { a.closer() }

func (a *agentConn) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var head [4]byte
	binary.BigEndian.PutUint32(head[:], uint32(len(data)))
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if _, err := a.w.Write(append(head[:], data...)); err != nil {
		return fmt.Errorf("send to sandbox agent: %w", err)
	}
	return nil
}

func (a *agentConn) next() (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(a.frames, head[:]); err != nil {
		return 0, nil, a.broken(err)
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("sandbox agent sent a %d-byte frame", n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(a.frames, payload); err != nil {
		return 0, nil, a.broken(err)
	}
	if head[0] == 'E' {
		return 0, nil, fmt.Errorf("sandbox agent: %s", payload)
	}
	return head[0], payload, nil
}

func (a *agentConn) broken(err error) error {
	if msg := strings.TrimSpace(a.stderr.String()); msg != "" {
		return fmt.Errorf("sandbox agent stopped (%v): %s", err, msg)
	}
	return fmt.Errorf("sandbox agent stopped: %w", err)
}

type agentFile struct {
	Path string `json:"path"`
	Data string `json:"data"`
}

type agentExit struct {
	Code     int `json:"code"`
	Signal   int `json:"signal"`
	OOMKills int `json:"oom_kills"`
}

// BridgeHandler answers the code-mode requests of a job's program (see
// codemode.Bridge).
type BridgeHandler interface {
	Handle(ctx context.Context, req []byte) []byte
}

// bridgeRequest is a 'c' frame: a request the program made on the bridge
// socket, numbered by the agent.
type bridgeRequest struct {
	ID  int64           `json:"id"`
	Req json.RawMessage `json:"req"`
}

// maxBridgeWaiting caps the bridge requests a job has in progress on the
// runner; more are refused at once (the agent caps them too, but the
// agent is not trusted).
const maxBridgeWaiting = 64

// run runs the program and returns its exit and the workspace listing
// ("size path\0" records, as find prints them). With a bridge, the
// program's tool requests are answered while it runs.
func (a *agentConn) run(ctx context.Context, files []FileEntry, argv []string, env map[string]string, stdin *string, outCap int, stdout, stderr io.Writer, bridge BridgeHandler) (agentExit, []byte, error) {
	req := map[string]any{"op": "run", "argv": argv, "env": env, "cap": outCap}
	if bridge != nil {
		req["bridge"] = codemode.SocketPath
		req["clean"] = []string{codemode.GenDir}
	}
	// When the run ends, requests still in progress are cancelled and
	// waited for, so that every call is in the record the caller reads.
	bctx, stopBridge := context.WithCancel(ctx)
	var inFlight sync.WaitGroup
	defer func() { stopBridge(); inFlight.Wait() }()
	waiting := make(chan struct{}, maxBridgeWaiting)
	fs := make([]agentFile, 0, len(files))
	for _, f := range files {
		fs = append(fs, agentFile{Path: f.Path, Data: base64.StdEncoding.EncodeToString(f.Content)})
	}
	req["files"] = fs
	if stdin != nil {
		req["stdin"] = base64.StdEncoding.EncodeToString([]byte(*stdin))
	}
	if err := a.send(req); err != nil {
		return agentExit{}, nil, err
	}
	var exit agentExit
	for {
		kind, payload, err := a.next()
		if err != nil {
			return agentExit{}, nil, err
		}
		switch kind {
		case 'o':
			_, _ = stdout.Write(payload)
		case 'e':
			_, _ = stderr.Write(payload)
		case 'c':
			var br bridgeRequest
			if bridge == nil || json.Unmarshal(payload, &br) != nil {
				return agentExit{}, nil, errors.New("sandbox agent sent a malformed bridge request")
			}
			select {
			case waiting <- struct{}{}:
				inFlight.Add(1)
				go func() {
					defer func() { <-waiting; inFlight.Done() }()
					body := bridge.Handle(bctx, br.Req)
					if bctx.Err() == nil {
						_ = a.send(map[string]any{"op": "reply", "id": br.ID, "body": json.RawMessage(body)})
					}
				}()
			default:
				_ = a.send(map[string]any{"op": "reply", "id": br.ID, "body": json.RawMessage(
					`{"ok":false,"error":{"code":"busy","message":"too many tool requests in progress"}}`)})
			}
		case 'x':
			if err := json.Unmarshal(payload, &exit); err != nil {
				return agentExit{}, nil, fmt.Errorf("sandbox agent exit report: %w", err)
			}
		case 'l':
			return exit, payload, nil
		default:
			return agentExit{}, nil, fmt.Errorf("sandbox agent sent frame %q during a run", kind)
		}
	}
}

// tar streams a tar of the given workspace paths (nil: the whole
// workspace). The caller closes the reader when done with it, then waits
// on finished before sending the agent anything else.
func (a *agentConn) tar(paths []string) (r *io.PipeReader, finished <-chan struct{}, err error) {
	if err := a.send(map[string]any{"op": "tar", "paths": paths}); err != nil {
		return nil, nil, err
	}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Read every frame up to 'd' even if the reader stopped early:
		// what is left of this tar must not be taken for the next answer.
		reading := true
		for {
			kind, payload, err := a.next()
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			switch kind {
			case 't':
				if reading {
					if _, err := pw.Write(payload); err != nil {
						reading = false
					}
				}
			case 'd':
				pw.Close()
				return
			default:
				pw.CloseWithError(errors.New("sandbox agent sent an unexpected frame in a tar"))
				return
			}
		}
	}()
	return pr, done, nil
}

// runAgent runs the job's program through the container's agent. When ctx
// ends first the whole container is killed (timeout, cancel) and ctx's
// error returned, as Exec does.
func (c *Container) runAgent(ctx context.Context, files []FileEntry, argv []string, env map[string]string, spec jobs.Spec, stdout, stderr io.Writer, bridge BridgeHandler) (agentExit, []byte, error) {
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			c.Kill(context.WithoutCancel(ctx))
			c.agent.close()
		case <-done:
		}
	}()
	var stdin *string
	if spec.Stdin != "" {
		stdin = &spec.Stdin
	}
	exit, listing, err := c.agent.run(ctx, files, argv, env, stdin, spec.Limits.OutputBytes, stdout, stderr, bridge)
	if ctx.Err() != nil {
		return agentExit{}, nil, ctx.Err()
	}
	return exit, listing, err
}
