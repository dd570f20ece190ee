package agent

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Frame kinds. A frame is one kind byte, a 4-byte big-endian payload
// length, then the payload; both directions use the same framing.
const (
	// Runner to agent.
	KindRequest = 'q' // a Request, JSON

	// Both directions: a tar stream (a restore going in, a tar coming out),
	// in chunks, closed by KindDataEnd.
	KindData    = 't'
	KindDataEnd = 'd'

	// Agent to runner.
	KindHello   = 'h' // Hello, JSON, once when the agent starts
	KindStarted = 's' // the program's sandbox exists; from here on the program can act
	KindStdout  = 'o' // output bytes
	KindStderr  = 'e'
	KindBridge  = 'c' // BridgeRequest, JSON: a code-mode request of the program
	KindExit    = 'x' // Exit, JSON
	// A run's compile step (Request.Compile): its output, then its Exit.
	KindCompileOutput = 'b'
	KindCompiled      = 'B'
	// KindBuild carries what a compile step built (Compile.SendBuild).
	KindBuild   = 'u'
	KindListing = 'l' // the workspace's regular files, "size path\x00" records; ends a run
	KindOK      = 'k' // a request other than run or tar succeeded
	KindError   = 'E' // a request failed; the payload says why
)

// MaxFrame bounds one frame's payload. The runner reads frames from a
// sandbox it does not trust, so it must never allocate more than this.
const MaxFrame = 32 << 20

// chunk is how much output or tar a single frame carries.
const chunk = 64 << 10

// frameWriter writes whole frames; it is safe for concurrent use (bridge
// replies and output come from their own goroutines).
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func newFrameWriter(w io.Writer) *frameWriter { return &frameWriter{w: w} }

func (f *frameWriter) frame(kind byte, payload []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("frame of %d bytes is over the %d-byte limit", len(payload), MaxFrame)
	}
	buf := make([]byte, 5+len(payload))
	buf[0] = kind
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(payload)))
	copy(buf[5:], payload)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.w.Write(buf)
	return err
}

func (f *frameWriter) json(kind byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return f.frame(kind, data)
}

// frameReader reads frames, refusing any larger than max.
type frameReader struct {
	r   *bufio.Reader
	max int
}

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, chunk), max: max}
}

// next returns the next frame. io.EOF means the stream ended cleanly
// between frames; a stream cut inside a frame is io.ErrUnexpectedEOF.
func (f *frameReader) next() (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(f.r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > uint32(f.max) {
		return 0, nil, fmt.Errorf("a %d-byte frame is over the %d-byte limit", n, f.max)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(f.r, payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return head[0], payload, nil
}

// dataWriter turns a byte stream into KindData frames of at most chunk
// bytes (a tar written with archive/tar makes many small writes).
type dataWriter struct {
	fw  *frameWriter
	buf []byte
}

func (d *dataWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		room := chunk - len(d.buf)
		take := min(room, len(p))
		d.buf = append(d.buf, p[:take]...)
		p = p[take:]
		if len(d.buf) == chunk {
			if err := d.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (d *dataWriter) flush() error {
	if len(d.buf) == 0 {
		return nil
	}
	err := d.fw.frame(KindData, d.buf)
	d.buf = d.buf[:0]
	return err
}

// close flushes and ends the stream.
func (d *dataWriter) close() error {
	if err := d.flush(); err != nil {
		return err
	}
	return d.fw.frame(KindDataEnd, nil)
}
