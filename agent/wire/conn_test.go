package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func rawFrame(kind Kind, payload string) []byte {
	b := []byte{byte(kind), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

func frames(fs ...[]byte) []byte { return bytes.Join(fs, nil) }

// scripted is a Conn whose agent answers with a fixed stream and whose
// requests are recorded.
func scripted(stream []byte) (*Conn, *bytes.Buffer) {
	var sent bytes.Buffer
	return NewConn(&sent, bytes.NewReader(stream), func() {}, nil), &sent
}

func TestRunFrames(t *testing.T) {
	c, sent := scripted(frames(
		rawFrame(KindStarted, ""),
		rawFrame(KindStdout, "hello "),
		rawFrame(KindStderr, "warn"),
		rawFrame(KindStdout, "world"),
		rawFrame(KindExit, `{"started":true,"code":137,"signal":9,"oom_kills":1}`),
		rawFrame(KindListing, "5 out/a.txt\x00"),
	))
	var out, errb bytes.Buffer
	res, err := c.Run(context.Background(), Request{Argv: []string{"true"}}, RunIO{Stdout: &out, Stderr: &errb})
	if err != nil || !res.Started || out.String() != "hello world" || errb.String() != "warn" ||
		res.Exit.Code != 137 || res.Exit.OOMKills != 1 || string(res.Listing) != "5 out/a.txt\x00" {
		t.Fatalf("run: %+v %v %q %q", res, err, out.String(), errb.String())
	}
	// The request went out as one frame with op run.
	kind, payload, err := NewFrameReader(sent, MaxFrame).Next()
	var req Request
	if err != nil || kind != KindRequest || json.Unmarshal(payload, &req) != nil || req.Op != "run" || req.Argv[0] != "true" {
		t.Fatalf("request %q %s %v", kind, payload, err)
	}
}

func TestRunFramesCompile(t *testing.T) {
	// A failed compile ends the run: its report, then nothing.
	c, _ := scripted(frames(
		rawFrame(KindStarted, ""),
		rawFrame(KindCompileOutput, "main.c:1: error"),
		rawFrame(KindCompileOutput, ": expected ';'\n"),
		rawFrame(KindCompiled, `{"started":true,"code":1,"usage":{"cpu_time_us":41000,"peak_memory_kb":28000}}`),
	))
	var told *CompileReport
	req := Request{Argv: []string{"/tmp/gantry/build/main"}, Compile: &Compile{Argv: []string{"gcc"}, OutputCap: 20}}
	res, err := c.Run(context.Background(), req, RunIO{Stdout: io.Discard, Stderr: io.Discard, Compiled: func(r CompileReport) { told = &r }})
	if err != nil || res.Compile == nil || told == nil || !res.Started || res.Exit.Started {
		t.Fatalf("run: %+v %v", res, err)
	}
	if got := res.Compile; string(got.Output) != "main.c:1: error: exp" || !got.Truncated || got.Exit.Code != 1 ||
		got.Exit.Usage == nil || got.Exit.Usage.CPUTimeUS != 41000 || got.Exit.Usage.PeakMemoryKB == nil || *got.Exit.Usage.PeakMemoryKB != 28000 {
		t.Errorf("compile report %+v (output %q)", got, got.Output)
	}

	// A compile that succeeded is followed by the program's run.
	c, _ = scripted(frames(
		rawFrame(KindStarted, ""),
		rawFrame(KindCompiled, `{"started":true,"code":0}`),
		rawFrame(KindStarted, ""),
		rawFrame(KindStdout, "42\n"),
		rawFrame(KindExit, `{"started":true,"code":0,"usage":{"cpu_time_us":900,"peak_memory_kb":1400}}`),
		rawFrame(KindListing, ""),
	))
	var out bytes.Buffer
	res, err = c.Run(context.Background(), req, RunIO{Stdout: &out, Stderr: io.Discard})
	if err != nil || res.Compile == nil || !res.Compile.Exit.Succeeded() || out.String() != "42\n" || res.Exit.Usage.PeakMemoryKB == nil || *res.Exit.Usage.PeakMemoryKB != 1400 {
		t.Fatalf("run: %+v %v %q", res, err, out.String())
	}

	// A build asked for comes before the report; one not asked for has no
	// place.
	stream := frames(
		rawFrame(KindStarted, ""),
		rawFrame(KindBuild, "tar bytes"),
		rawFrame(KindCompiled, `{"started":true,"code":0}`),
		rawFrame(KindStarted, ""),
		rawFrame(KindExit, `{"started":true,"code":0}`),
		rawFrame(KindListing, ""),
	)
	c, _ = scripted(stream)
	send := req
	send.Compile = &Compile{Argv: []string{"gcc"}, SendBuild: true}
	if res, err := c.Run(context.Background(), send, RunIO{Stdout: io.Discard, Stderr: io.Discard}); err != nil || string(res.Build) != "tar bytes" {
		t.Errorf("build: %q %v", res.Build, err)
	}
	c, _ = scripted(stream)
	if _, err := c.Run(context.Background(), req, RunIO{Stdout: io.Discard, Stderr: io.Discard}); err == nil || c.Err() == nil {
		t.Errorf("a build not asked for: %v", err)
	}

	// Compile output after the report has no place.
	c, _ = scripted(frames(
		rawFrame(KindCompiled, `{"started":true,"code":0}`),
		rawFrame(KindCompileOutput, "late"),
	))
	if _, err := c.Run(context.Background(), req, RunIO{Stdout: io.Discard, Stderr: io.Discard}); err == nil || c.Err() == nil {
		t.Errorf("late compile output: %v", err)
	}
}

func TestRunRefusesWhatIsOutOfPlace(t *testing.T) {
	for name, stream := range map[string][]byte{
		"listing before exit": frames(rawFrame(KindListing, "")),
		"output after exit":   frames(rawFrame(KindExit, `{"started":true}`), rawFrame(KindStdout, "late")),
		"bridge without one":  frames(rawFrame(KindBridge, `{"id":1,"req":{}}`)),
		"unknown kind":        frames(rawFrame('Z', "")),
		"oversized frame":     {byte(KindStdout), 0xff, 0xff, 0xff, 0xff},
		"cut stream":          rawFrame(KindStdout, "abc")[:6],
		"malformed exit":      frames(rawFrame(KindExit, `{`)),
	} {
		c, _ := scripted(stream)
		if _, err := c.Run(context.Background(), Request{Argv: []string{"x"}}, RunIO{Stdout: io.Discard, Stderr: io.Discard}); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if c.Err() == nil {
			t.Errorf("%s: connection not marked broken", name)
		}
		if err := c.Clean(context.Background()); err == nil {
			t.Errorf("%s: a broken connection took another request", name)
		}
	}
}

func TestStartedSurvivesABreak(t *testing.T) {
	c, _ := scripted(frames(rawFrame(KindStarted, ""), rawFrame(KindStdout, "partial")))
	res, err := c.Run(context.Background(), Request{Argv: []string{"x"}}, RunIO{Stdout: io.Discard, Stderr: io.Discard})
	if err == nil || !res.Started {
		t.Fatalf("res %+v err %v", res, err)
	}
}

func TestTarDrainsTheRest(t *testing.T) {
	c, _ := scripted(frames(
		rawFrame(KindData, "first"),
		rawFrame(KindData, "second"),
		rawFrame(KindDataEnd, ""),
		rawFrame(KindOK, ""),
	))
	r, wait, err := c.Tar(context.Background(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "first" {
		t.Fatalf("read %q %v", buf, err)
	}
	if err := wait(); err != nil { // stopped early: the rest is drained
		t.Fatal(err)
	}
	if err := c.Clean(context.Background()); err != nil {
		t.Fatalf("the next answer was not in step: %v", err)
	}
}

func TestDoneReportsTheAgentsError(t *testing.T) {
	c, _ := scripted(rawFrame(KindError, "disk full"))
	err := c.Skills(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "disk full") || c.Err() != nil {
		t.Fatalf("err %v, broken %v", err, c.Err())
	}
}

func TestContextClosesTheConnection(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	closed := make(chan struct{})
	c := NewConn(io.Discard, pr, func() { pr.CloseWithError(errors.New("closed")); close(closed) }, nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("timed out")
	go cancel(cause)
	_, err := c.Run(ctx, Request{Argv: []string{"sleep"}}, RunIO{Stdout: io.Discard, Stderr: io.Discard})
	<-closed
	if err == nil || !errors.Is(c.Err(), cause) {
		t.Fatalf("err %v, broken %v", err, c.Err())
	}
}

// FuzzConnFrames feeds arbitrary bytes as the agent's answers (a program
// can take the agent over): no panic, no more output than input, and a
// stream either accepted whole or refused.
func FuzzConnFrames(f *testing.F) {
	f.Add(frames(rawFrame(KindExit, `{"started":true}`), rawFrame(KindListing, "")))
	f.Add(rawFrame(KindStdout, "partial"))
	f.Add(frames(rawFrame(KindData, "abc"), rawFrame(KindDataEnd, "")))
	f.Add([]byte{byte(KindListing), 0, 0, 0})
	f.Fuzz(func(t *testing.T, stream []byte) {
		var out bytes.Buffer
		c, _ := scripted(stream)
		res, err := c.Run(context.Background(), Request{Argv: []string{"true"}}, RunIO{Stdout: &out, Stderr: &out})
		if err == nil && len(res.Listing) > len(stream) {
			t.Fatal("listing larger than the input")
		}
		if out.Len() > len(stream) {
			t.Fatal("more output than input")
		}
		c, _ = scripted(stream)
		if r, wait, err := c.Tar(context.Background(), nil, true); err == nil {
			n, _ := io.Copy(io.Discard, r)
			_ = wait()
			if n > int64(len(stream)) {
				t.Fatal("more tar than input")
			}
		}
	})
}

// TestDockerfileProtocol keeps the protocol label of the Dockerfile (for
// hosts that can pull) in step with the code; build.sh reads it from here.
func TestDockerfileProtocol(t *testing.T) {
	b, err := os.ReadFile("../../images/sandbox/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("LABEL dev.gantry.agent-protocol=%d\n", Protocol)
	if !strings.Contains(string(b), want) {
		t.Errorf("images/sandbox/Dockerfile lacks %q", want)
	}
}

// TestLive: live operations are answered by id, beside the request in
// progress, and process events reach their handler whenever they come.
func TestLive(t *testing.T) {
	pr, pw := io.Pipe()
	reqR, reqW := io.Pipe()
	c := NewConn(reqW, pr, func() { pr.Close(); reqW.Close() }, nil)
	var events [][]byte
	got := make(chan struct{}, 4)
	c.OnProcessEvent(func(kind Kind, payload []byte) {
		events = append(events, append([]byte{byte(kind)}, payload...))
		got <- struct{}{}
	})
	done := make(chan LiveReply, 1)
	go func() {
		r, err := c.Live(context.Background(), LiveOp{Op: OpList})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	// The agent's side: it reads the operation, then sends an event, a
	// reply to another id (dropped) and the reply.
	kind, payload, err := NewFrameReader(reqR, MaxFrame).Next()
	var op LiveOp
	if err != nil || kind != KindLive || json.Unmarshal(payload, &op) != nil || op.Op != OpList || op.ID == 0 {
		t.Fatalf("sent %q %q %v", kind, payload, err)
	}
	go func() {
		_, _ = pw.Write(frames(
			rawFrame(KindProcessOutput, string(EncodeProcessOutput(7, KindStdout, []byte("hi")))),
			rawFrame(KindLive, fmt.Sprintf(`{"id":%d,"pid":1}`, op.ID+100)),
			rawFrame(KindLive, fmt.Sprintf(`{"id":%d,"processes":[{"pid":7,"argv":["sleep"],"cwd":"/"}]}`, op.ID)),
		))
	}()
	r := <-done
	<-got
	if len(r.Processes) != 1 || r.Processes[0].Pid != 7 {
		t.Errorf("reply %+v", r)
	}
	pid, stream, data, err := ParseProcessOutput(events[0][1:])
	if err != nil || pid != 7 || stream != KindStdout || string(data) != "hi" {
		t.Errorf("event %q", events[0])
	}
	// A stream that ends fails the operations waiting, and those after.
	waiting := make(chan error, 1)
	go func() {
		_, err := c.Live(context.Background(), LiveOp{Op: OpList})
		waiting <- err
	}()
	if _, _, err := NewFrameReader(reqR, MaxFrame).Next(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	<-c.Done()
	if err := <-waiting; err == nil {
		t.Error("an operation waiting on an ended stream succeeded")
	}
	if _, err := c.Live(context.Background(), LiveOp{Op: OpList}); err == nil {
		t.Error("an operation on an ended stream")
	}
}

// FuzzLiveFrames feeds arbitrary bytes as the agent's answers to a live
// operation and its events: no panic, no more event bytes than input.
func FuzzLiveFrames(f *testing.F) {
	f.Add(rawFrame(KindLive, `{"id":1,"pid":3}`))
	f.Add(frames(rawFrame(KindProcessOutput, "\x00\x00\x00\x07ohi"), rawFrame(KindProcessExit, `{"pid":7,"code":1}`), rawFrame(KindLive, `{"id":1}`)))
	f.Add(rawFrame(KindLive, `{"id":1,"entries":[{"name":"a","path":"/a","type":"file","size":1,"modified":"2026-01-01T00:00:00Z"}]}`))
	f.Fuzz(func(t *testing.T, stream []byte) {
		c, _ := scripted(stream)
		n := 0
		c.OnProcessEvent(func(kind Kind, payload []byte) {
			n += len(payload)
			if kind == KindProcessOutput {
				_, _, _, _ = ParseProcessOutput(payload)
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, _ = c.Live(ctx, LiveOp{Op: OpStat, Path: "/"})
		<-c.Done()
		if n > len(stream) {
			t.Fatal("more event bytes than input")
		}
	})
}
