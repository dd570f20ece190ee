package service

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/gantryhq/gantry/jobs"
)

// Follow says what FollowJob hands its caller.
type Follow struct {
	// OnText gets the next piece of a stream (jobs' "stdout" or "stderr")
	// as text: in order, each byte once, never ending inside a UTF-8
	// sequence (invalid bytes elsewhere are passed as they are).
	OnText func(stream, text string)
	// Every, with OnTick, calls OnTick that often (a keep-alive).
	Every  time.Duration
	OnTick func()
	// Until ends the following at that moment (zero: when the job ends):
	// FollowJob then returns the job unfinished.
	Until time.Time
}

// FollowJob streams the tenant's job's output to f.OnText until the job
// finishes, and returns the finished job: the output so far first (asked
// of the job's runner when it is seen running, and when a live chunk
// shows a gap), then live chunks as they come, and at the end whatever of
// the stored output was not passed yet. When ctx ends first it returns
// the job unfinished (and a nil error: the caller asks ctx why). A failed
// read of the job (the database restarting) is waited out.
func (s *Service) FollowJob(ctx context.Context, p Principal, job jobs.Job, f Follow) (jobs.Job, error) {
	live, err := s.FollowOutput(job.ID, 1024)
	if err != nil {
		return job, err
	}
	defer live.Close()
	streams := map[string]*textStream{"stdout": {}, "stderr": {}}
	pass := func(name string, off int, data []byte) {
		if text := streams[name].next(off, data); text != "" {
			f.OnText(name, text)
		}
	}
	backlogDone := false
	backlog := func() {
		b, ok := s.Backlog(ctx, job.ID)
		if !ok {
			return // finished meanwhile, or its runner is gone: the end reads the store
		}
		pass("stdout", 0, b.Stdout)
		pass("stderr", 0, b.Stderr)
		backlogDone = true
	}
	// The runner is asked for the output so far once per attempt seen
	// running (its runner is silent before), and when a chunk shows a gap.
	askedAttempt := 0
	final, err := s.WaitJob(ctx, p, job, Watch{
		Output: live,
		OnOutput: func(c Chunk) {
			st, ok := streams[c.Stream]
			if !ok || c.Offset < 0 {
				return
			}
			if c.Offset > st.sent && !backlogDone {
				backlog() // joined mid-stream: fetch what came before
			}
			pass(c.Stream, c.Offset, c.Data)
		},
		Every:  f.Every,
		OnTick: f.OnTick,
		Until:  f.Until,
		OnRead: func(j jobs.Job) {
			if j.Status == jobs.StatusRunning && !backlogDone && j.Attempt != askedAttempt {
				askedAttempt = j.Attempt
				backlog()
			}
		},
		KeepOnError: true,
	})
	if err != nil || !final.Status.Terminal() {
		return final, err
	}
	for _, name := range []string{"stdout", "stderr"} {
		out := final.Stdout
		if name == "stderr" {
			out = final.Stderr
		}
		pass(name, 0, []byte(out))
		if tail := streams[name].flush(); tail != "" {
			f.OnText(name, tail)
		}
	}
	return final, nil
}

// textStream tracks how much of one output stream was passed on.
type textStream struct {
	sent int    // bytes of the raw stream passed (including tail)
	tail []byte // an incomplete UTF-8 sequence held back for the next piece
}

// next is the text of data (which starts at byte offset off of the
// stream) not passed yet, up to its last whole UTF-8 sequence.
func (st *textStream) next(off int, data []byte) string {
	end := off + len(data)
	if end <= st.sent || off > st.sent {
		return "" // already passed, or a gap that cannot be filled in order
	}
	buf := append(st.tail, data[st.sent-off:]...)
	st.sent = end
	cut := validPrefix(buf)
	st.tail = append([]byte(nil), buf[cut:]...)
	return string(buf[:cut])
}

// flush is what was held back.
func (st *textStream) flush() string {
	tail := string(st.tail)
	st.tail = nil
	return tail
}

// validPrefix is the length of the longest prefix of b that does not end
// in the middle of a UTF-8 sequence. Invalid bytes elsewhere are left to
// the caller (JSON encoding replaces them with U+FFFD).
func validPrefix(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
