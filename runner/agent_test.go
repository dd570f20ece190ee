package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"testing"
)

func agentFrame(kind byte, payload string) []byte {
	b := []byte{kind, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

func fakeAgent(stream []byte) *agentConn {
	return &agentConn{w: io.Discard, closer: func() {}, frames: bufio.NewReader(bytes.NewReader(stream))}
}

func TestAgentRunFrames(t *testing.T) {
	var stream []byte
	stream = append(stream, agentFrame('o', "hello ")...)
	stream = append(stream, agentFrame('e', "warn")...)
	stream = append(stream, agentFrame('o', "world")...)
	stream = append(stream, agentFrame('x', `{"code":137,"signal":9,"oom_kills":1}`)...)
	stream = append(stream, agentFrame('l', "5 out/a.txt\x00")...)
	var out, errb bytes.Buffer
	exit, listing, err := fakeAgent(stream).run(context.Background(), nil, []string{"true"}, nil, nil, 100, &out, &errb, nil)
	if err != nil || out.String() != "hello world" || errb.String() != "warn" || exit.Code != 137 || exit.OOMKills != 1 || string(listing) != "5 out/a.txt\x00" {
		t.Fatalf("run: %+v %q %v %q %q", exit, listing, err, out.String(), errb.String())
	}
	if _, _, err := fakeAgent(agentFrame('E', "boom")).run(context.Background(), nil, []string{"true"}, nil, nil, 100, io.Discard, io.Discard, nil); err == nil {
		t.Error("agent error frame not reported")
	}
	huge := []byte{'o', 0xff, 0xff, 0xff, 0xff}
	if _, _, err := fakeAgent(huge).run(context.Background(), nil, []string{"true"}, nil, nil, 100, io.Discard, io.Discard, nil); err == nil {
		t.Error("oversized frame accepted")
	}
}

func TestAgentTarDrainsTheRest(t *testing.T) {
	var stream []byte
	stream = append(stream, agentFrame('t', "first")...)
	stream = append(stream, agentFrame('t', "second")...)
	stream = append(stream, agentFrame('d', "")...)
	stream = append(stream, agentFrame('o', "next answer")...)
	a := fakeAgent(stream)
	r, finished, err := a.tar(nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "first" {
		t.Fatalf("read %q %v", buf, err)
	}
	r.CloseWithError(io.ErrClosedPipe) // stop early
	<-finished
	kind, payload, err := a.next()
	if err != nil || kind != 'o' || string(payload) != "next answer" {
		t.Fatalf("after an early stop the next frame is %q %q %v", kind, payload, err)
	}
}

// FuzzAgentFrames feeds arbitrary bytes as the agent's answer (the program
// in the sandbox can take the agent over): no panic, no unbounded read.
func FuzzAgentFrames(f *testing.F) {
	f.Add(append(agentFrame('x', `{"code":0}`), agentFrame('l', "")...))
	f.Add(agentFrame('o', "partial"))
	f.Add([]byte{'l', 0, 0, 0})
	f.Fuzz(func(t *testing.T, stream []byte) {
		var out bytes.Buffer
		_, listing, err := fakeAgent(stream).run(context.Background(), nil, []string{"true"}, nil, nil, 100, &out, io.Discard, nil)
		if err == nil && len(listing) > len(stream) {
			t.Fatal("listing larger than the input")
		}
		if out.Len() > len(stream) {
			t.Fatal("more output than input")
		}
		parseListing(listing)
	})
}
