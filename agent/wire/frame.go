package wire

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Kind is a frame's kind. A frame is one kind Kind, a 4-byte big-endian
// payload length, then the payload; both directions use the same framing.
type Kind byte

// Frame kinds.
const (
	// Runner to agent.
	KindRequest Kind = 'q' // a Request, JSON

	// Both directions: a tar stream (a restore going in, a tar coming out),
	// in chunks, closed by KindDataEnd.
	KindData    Kind = 't'
	KindDataEnd Kind = 'd'

	// Agent to runner.
	KindHello   Kind = 'h' // Hello, JSON, once when the agent starts
	KindStarted Kind = 's' // the program's sandbox exists; from here on the program can act
	KindStdout  Kind = 'o' // output bytes
	KindStderr  Kind = 'e'
	KindBridge  Kind = 'c' // BridgeRequest, JSON: a code-mode request of the program
	KindExit    Kind = 'x' // Exit, JSON
	// A run's compile step (Request.Compile): its output, then its Exit.
	KindCompileOutput Kind = 'b'
	KindCompiled      Kind = 'B'
	// KindBuild carries what a compile step built (Compile.SendBuild).
	KindBuild   Kind = 'u'
	KindListing Kind = 'l' // the workspace's regular files, "size path\x00" records; ends a run
	KindOK      Kind = 'k' // a request other than run or tar succeeded
	KindError   Kind = 'E' // a request failed; the payload says why
)

// MaxFrame bounds one frame's payload. The runner reads frames from a
// sandbox it does not trust, so it must never allocate more than this.
const MaxFrame = 32 << 20

// Chunk is how much output or tar a single frame carries.
const Chunk = 64 << 10

// FrameWriter writes whole frames; it is safe for concurrent use (bridge
// replies and output come from their own goroutines).
type FrameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w} }

func (f *FrameWriter) Frame(kind Kind, payload []byte) error {
	buf, err := frameBytes(kind, payload)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err = f.w.Write(buf)
	return err
}

// FrameAndHold writes a frame and holds the writer: no other frame is
// written, nor begun, until Release. The agent answers a quiesce request
// so, before its sandbox is checkpointed: the stream is then at a frame's
// end, and stays there.
func (f *FrameWriter) FrameAndHold(kind Kind, payload []byte) error {
	buf, err := frameBytes(kind, payload)
	if err != nil {
		return err
	}
	f.mu.Lock()
	_, err = f.w.Write(buf)
	return err
}

// Release lets a writer FrameAndHold held write again.
func (f *FrameWriter) Release() { f.mu.Unlock() }

// frameBytes is a frame as it goes on the stream.
func frameBytes(kind Kind, payload []byte) ([]byte, error) {
	if len(payload) > MaxFrame {
		return nil, fmt.Errorf("frame of %d bytes is over the %d-byte limit", len(payload), MaxFrame)
	}
	buf := make([]byte, 5+len(payload))
	buf[0] = byte(kind)
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(payload)))
	copy(buf[5:], payload)
	return buf, nil
}

func (f *FrameWriter) JSON(kind Kind, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return f.Frame(kind, data)
}

// FrameReader reads frames, refusing any larger than max.
type FrameReader struct {
	r   *bufio.Reader
	max int
}

func NewFrameReader(r io.Reader, max int) *FrameReader {
	return &FrameReader{r: bufio.NewReaderSize(r, Chunk), max: max}
}

// Next returns the Next frame. io.EOF means the stream ended cleanly
// between frames; a stream cut inside a frame is io.ErrUnexpectedEOF.
func (f *FrameReader) Next() (Kind, []byte, error) {
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
	return Kind(head[0]), payload, nil
}

// DataWriter turns a byte stream into KindData frames of at most chunk
// bytes (a tar written with archive/tar makes many small writes).
type DataWriter struct {
	fw  *FrameWriter
	buf []byte
}

// NewDataWriter writes KindData frames to fw; Close ends them with
// KindDataEnd.
func NewDataWriter(fw *FrameWriter) *DataWriter { return &DataWriter{fw: fw} }

func (d *DataWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		room := Chunk - len(d.buf)
		take := min(room, len(p))
		d.buf = append(d.buf, p[:take]...)
		p = p[take:]
		if len(d.buf) == Chunk {
			if err := d.Flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (d *DataWriter) Flush() error {
	if len(d.buf) == 0 {
		return nil
	}
	err := d.fw.Frame(KindData, d.buf)
	d.buf = d.buf[:0]
	return err
}

// Close flushes and ends the stream.
func (d *DataWriter) Close() error {
	if err := d.Flush(); err != nil {
		return err
	}
	return d.fw.Frame(KindDataEnd, nil)
}

type Frame struct {
	Kind    Kind
	Payload []byte
}
