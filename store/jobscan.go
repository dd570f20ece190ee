package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/tracing"
)

// storedEgress is a job's egress record as the egress column holds it.
type storedEgress struct {
	Connections []jobs.EgressConnection `json:"connections"`
	Omitted     int                     `json:"omitted,omitempty"`
}

func scanJob(r pgx.Row) (row, error) { return scanJobWith(r) }

// scanJobWith reads a jobs row (jobColumns, after extra). The job's moved
// output is still to be read (Store.load).
func scanJobWith(r pgx.Row, extra ...any) (row, error) {
	var (
		j                jobs.Job
		status           string
		stdout, stderr   []byte
		arts, meta       []byte
		calls, webhook   []byte
		errCode, errMsg  *string
		outKey, errKey   *string
		compile, compOut []byte
		value, egress    []byte
		live, liveWhy    *string
		displays, exc    []byte
		tests            []byte
	)
	var traceParent *string
	dest := append(extra, &j.ID, &status, &j.Language, &j.SessionID, &j.Attempt, &traceParent, &j.CreatedAt, &j.StartedAt, &j.FinishedAt,
		&j.ExitCode, &j.DurationMS, &stdout, &stderr, &j.StdoutTruncated, &j.StderrTruncated, &arts,
		&errCode, &errMsg, &meta, &calls, &outKey, &errKey, &j.BatchID, &j.WebhookURL,
		&j.CPUTimeMS, &j.PeakMemoryKB, &compile, &compOut, &webhook,
		&value, &live, &liveWhy, &displays, &exc, &egress, &tests)
	if err := r.Scan(dest...); err != nil {
		return row{}, err
	}
	j.Status = jobs.Status(status)
	j.TraceID = tracing.SampledTraceID(deref(traceParent))
	j.Stdout, j.Stderr, j.CompileOutput = text(stdout), text(stderr), text(compOut)
	var err error
	if compile != nil {
		if err := json.Unmarshal(compile, &j.Compile); err != nil {
			return row{}, fmt.Errorf("decode compile: %w", err)
		}
	}
	if j.Artifacts, j.ArtifactsOmitted, err = loadArtifacts(arts); err != nil {
		return row{}, fmt.Errorf("decode artifacts: %w", err)
	}
	if err := json.Unmarshal(meta, &j.Metadata); err != nil {
		return row{}, fmt.Errorf("decode metadata: %w", err)
	}
	if err := json.Unmarshal(calls, &j.ToolCalls); err != nil {
		return row{}, fmt.Errorf("decode tool calls: %w", err)
	}
	if errCode != nil {
		j.Error = &jobs.ErrorInfo{Code: jobs.ErrorCode(*errCode), Message: deref(errMsg)}
	}
	if webhook != nil {
		if j.Webhook, err = decodeDelivery(webhook); err != nil {
			return row{}, err
		}
	}
	if value != nil {
		j.Value = new(jobs.Value)
		if err := json.Unmarshal(value, j.Value); err != nil {
			return row{}, fmt.Errorf("decode value: %w", err)
		}
	}
	if displays != nil {
		if err := json.Unmarshal(displays, &j.Displays); err != nil {
			return row{}, fmt.Errorf("decode displays: %w", err)
		}
	}
	if exc != nil {
		j.Exception = new(jobs.Exception)
		if err := json.Unmarshal(exc, j.Exception); err != nil {
			return row{}, fmt.Errorf("decode exception: %w", err)
		}
	}
	j.LiveState, j.LiveStateReason = jobs.LiveState(deref(live)), deref(liveWhy)
	if egress != nil {
		var e storedEgress
		if err := json.Unmarshal(egress, &e); err != nil {
			return row{}, fmt.Errorf("decode egress: %w", err)
		}
		j.Egress, j.EgressOmitted = e.Connections, e.Omitted
	}
	if tests != nil {
		if err := json.Unmarshal(tests, &j.Tests); err != nil {
			return row{}, fmt.Errorf("decode tests: %w", err)
		}
		passed := jobs.TestsPassed(j.Tests)
		j.TestsPassed = &passed
	}
	j.CreatedAt = j.CreatedAt.UTC()
	utc(j.StartedAt)
	utc(j.FinishedAt)
	return row{job: j, stdoutKey: deref(outKey), stderrKey: deref(errKey)}, nil
}

// text turns program output into a JSON-safe string: invalid UTF-8 becomes
// U+FFFD. The stored bytes are kept as the program wrote them.
func text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func utc(t *time.Time) {
	if t != nil {
		*t = t.UTC()
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// storedArtifact is one entry of a job's artifacts column: an artifact, or
// (with Omitted set) a matching file left out over a cap. One column keeps
// both, in the order the runner found them.
type storedArtifact struct {
	jobs.Artifact
	Omitted string `json:"omitted,omitempty"`
}

func storedArtifacts(kept []jobs.Artifact, omitted []jobs.OmittedArtifact) []storedArtifact {
	out := make([]storedArtifact, 0, len(kept)+len(omitted))
	for _, a := range kept {
		out = append(out, storedArtifact{Artifact: a})
	}
	for _, o := range omitted {
		out = append(out, storedArtifact{Artifact: jobs.Artifact{Path: o.Path, Size: o.Size}, Omitted: o.Reason})
	}
	return out
}

func loadArtifacts(data []byte) ([]jobs.Artifact, []jobs.OmittedArtifact, error) {
	var all []storedArtifact
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, nil, err
	}
	kept := make([]jobs.Artifact, 0, len(all))
	var omitted []jobs.OmittedArtifact
	for _, a := range all {
		if a.Omitted != "" {
			omitted = append(omitted, jobs.OmittedArtifact{Path: a.Path, Size: a.Size, Reason: a.Omitted})
		} else {
			kept = append(kept, a.Artifact)
		}
	}
	return kept, omitted, nil
}
