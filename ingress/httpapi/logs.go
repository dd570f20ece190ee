package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

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
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sse := &sseWriter{w: w, rc: http.NewResponseController(w)}
	final, err := s.svc.FollowJob(ctx, p, job, service.Follow{
		OnText: func(stream, text string) { sse.event(stream, logChunk{Data: text}) },
		Every:  15 * time.Second,
		OnTick: func() { sse.comment("keep-alive") },
	})
	if err != nil || !final.Status.Terminal() {
		return nil // the client went away
	}
	sse.event("status", statusSummary(final))
	return nil
}

type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
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
