package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// handleLogs streams a job's output as server-sent events: "stdout" and
// "stderr" events with {"data": "..."} while it runs (the output so far
// first, fetched from the runner, then live chunks), the stored output for a
// finished job, and a closing "status" event.
func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	ctx := r.Context()
	job, err := s.svc.Job(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	live, err := s.svc.FollowOutput(job.ID, 1024)
	if err != nil {
		return err
	}
	defer live.Close()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sse := &sseWriter{w: w, rc: http.NewResponseController(w)}
	streams := map[string]*streamState{"stdout": {}, "stderr": {}}

	backlogDone := false
	backlog := func() {
		b, ok := s.svc.Backlog(ctx, job.ID)
		if !ok {
			return // finished meanwhile, or its runner is gone: the end reads the store
		}
		sse.chunk("stdout", streams["stdout"], 0, b.Stdout)
		sse.chunk("stderr", streams["stderr"], 0, b.Stderr)
		backlogDone = true
	}
	// The runner is asked for the output so far once per attempt seen
	// running (its runner is silent before), and when a chunk shows a gap.
	askedAttempt := 0
	final, err := s.svc.WaitJob(ctx, p, job, service.Watch{
		Output: live,
		OnOutput: func(c service.Chunk) {
			st, ok := streams[c.Stream]
			if !ok || c.Offset < 0 {
				return
			}
			if c.Offset > st.sent && !backlogDone {
				backlog() // we joined mid-stream: fetch what came before
			}
			sse.chunk(c.Stream, st, c.Offset, c.Data)
		},
		Every:  15 * time.Second,
		OnTick: func() { sse.comment("keep-alive") },
		OnRead: func(j jobs.Job) {
			if j.Status == jobs.StatusRunning && !backlogDone && j.Attempt != askedAttempt {
				askedAttempt = j.Attempt
				backlog()
			}
		},
		// The headers are out: a failed read (the database restarting)
		// is waited out, the client sees keep-alives meanwhile.
		KeepOnError: true,
	})
	if err != nil || !final.Status.Terminal() {
		return nil // the client went away
	}
	sse.chunk("stdout", streams["stdout"], 0, []byte(final.Stdout))
	sse.chunk("stderr", streams["stderr"], 0, []byte(final.Stderr))
	sse.flushTail("stdout", streams["stdout"])
	sse.flushTail("stderr", streams["stderr"])
	sse.event("status", statusSummary(final))
	return nil
}

// streamState tracks how much of one output stream a client has been sent.
type streamState struct {
	sent int    // bytes of the raw stream delivered (including tail)
	tail []byte // an incomplete UTF-8 sequence held back for the next chunk
}

type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// chunk sends the part of data (which starts at byte offset off of the
// stream) that the client has not had yet.
func (s *sseWriter) chunk(name string, st *streamState, off int, data []byte) {
	end := off + len(data)
	if end <= st.sent || off > st.sent {
		return // already sent, or a gap we cannot fill in order
	}
	buf := append(st.tail, data[st.sent-off:]...)
	st.sent = end
	cut := validPrefix(buf)
	st.tail = append([]byte(nil), buf[cut:]...)
	if cut > 0 {
		s.event(name, logChunk{Data: string(buf[:cut])})
	}
}

func (s *sseWriter) flushTail(name string, st *streamState) {
	if len(st.tail) > 0 {
		s.event(name, logChunk{Data: string(st.tail)})
		st.tail = nil
	}
}

// validPrefix is the length of the longest prefix of b that does not end in
// the middle of a UTF-8 sequence. Invalid bytes elsewhere are left to JSON
// encoding, which replaces them with U+FFFD.
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

func (s *sseWriter) event(name string, v any) {
	data, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, data)
	_ = s.rc.Flush()
}

func (s *sseWriter) comment(text string) {
	fmt.Fprintf(s.w, ": %s\n\n", text)
	_ = s.rc.Flush()
}

// statusSummary is the closing event of a log stream: the job without its
// (already streamed) output.
func statusSummary(j jobs.Job) logStatus {
	return logStatus{ID: j.ID, Status: j.Status, ExitCode: j.ExitCode, DurationMS: j.DurationMS,
		StdoutTruncated: j.StdoutTruncated, StderrTruncated: j.StderrTruncated, Error: j.Error, Attempt: j.Attempt}
}
