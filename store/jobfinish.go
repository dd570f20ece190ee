package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gantryhq/gantry/jobs"
)

// FinishJob records the result of an attempt. It applies only if the job is
// still running this attempt, so a runner that lost its job to a
// redelivery cannot overwrite the newer attempt; applied says whether it did.
//
// Output longer than the inline maximum is put in the output store first
// (KeepOutput); if the result does not apply, it is deleted again.
func (s *Store) FinishJob(ctx context.Context, id string, attempt int, r jobs.Result) (applied bool, err error) {
	m, err := s.moveOutput(ctx, id, attempt, r)
	if err != nil {
		return false, err
	}
	applied, err = finishJob(ctx, s.pool, id, attempt, m)
	if err == nil && !applied {
		s.forget(ctx, m.keys)
	}
	return applied, err
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func finishJob(ctx context.Context, db execer, id string, attempt int, r movedResult) (bool, error) {
	arts, err := json.Marshal(storedArtifacts(r.Artifacts, r.ArtifactsOmitted))
	if err != nil {
		return false, err
	}
	calls := r.ToolCalls
	if calls == nil {
		calls = []jobs.ToolCall{}
	}
	callsJSON, err := json.Marshal(calls)
	if err != nil {
		return false, err
	}
	var code, msg *string
	if r.Error != nil {
		c := string(r.Error.Code)
		code, msg = &c, &r.Error.Message
	}
	var cpuMS, peakKB *int64
	if r.Usage != nil {
		ms := r.Usage.CPUTimeMS()
		cpuMS, peakKB = &ms, r.Usage.PeakMemoryKB
	}
	var compile []byte
	if r.Compile != nil {
		if compile, err = json.Marshal(r.Compile); err != nil {
			return false, err
		}
	}
	var value, displays, exception []byte
	if r.Value != nil {
		if value, err = json.Marshal(r.Value); err != nil {
			return false, err
		}
	}
	if len(r.Displays) > 0 {
		if displays, err = json.Marshal(r.Displays); err != nil {
			return false, err
		}
	}
	if r.Exception != nil {
		if exception, err = json.Marshal(r.Exception); err != nil {
			return false, err
		}
	}
	var egress []byte
	if r.Egress != nil || r.EgressOmitted > 0 {
		if egress, err = json.Marshal(storedEgress{Connections: r.Egress, Omitted: r.EgressOmitted}); err != nil {
			return false, err
		}
	}
	var tests []byte
	if r.Tests != nil {
		if tests, err = json.Marshal(r.Tests); err != nil {
			return false, err
		}
	}
	tag, err := db.Exec(ctx, `
		UPDATE jobs SET status = $3, finished_at = now(), exit_code = $4, duration_ms = $5,
			stdout = $6, stderr = $7, stdout_truncated = $8, stderr_truncated = $9,
			artifacts = $10, error_code = $11, error_message = $12, tool_calls = $13,
			stdout_key = $14, stderr_key = $15,
			cpu_time_ms = $16, peak_memory_kb = $17, compile = $18, compile_output = $19,
			value = $20, live_state = $21, live_state_reason = $22, displays = $23, exception = $24, egress = $25,
			tests = $26
		WHERE id = $1 AND attempt = $2 AND status = 'running'`,
		id, attempt, string(r.Status), r.ExitCode, r.Duration.Milliseconds(),
		nonNil(r.Stdout), nonNil(r.Stderr), r.StdoutTruncated, r.StderrTruncated,
		arts, code, msg, callsJSON, nilIfEmpty(r.stdoutKey), nilIfEmpty(r.stderrKey),
		cpuMS, peakKB, compile, nonNil(r.CompileOutput),
		value, nilIfEmpty(string(r.LiveState)), nilIfEmpty(r.LiveStateReason), displays, exception, egress, tests)
	if err != nil {
		return false, fmt.Errorf("record result: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// RequeueJob puts a running attempt back to queued when the runner gives the
// job back (shutdown, Docker failure) so it shows as waiting for redelivery.
func (s *Store) RequeueJob(ctx context.Context, id string, attempt int) error {
	_, err := s.pool.Exec(ctx,
		`UPDATE jobs SET status = 'queued' WHERE id = $1 AND attempt = $2 AND status = 'running'`, id, attempt)
	return err
}

// ReleaseJob gives a running job back to the queue without spending the
// attempt its runner claimed: the runner held it through an outage of
// gantry's own (the object store) and stopped before it could finish it.
// It applies only while the job is still running that attempt.
func (s *Store) ReleaseJob(ctx context.Context, id string, attempt int) error {
	_, err := s.pool.Exec(ctx,
		`UPDATE jobs SET status = 'queued', attempt = attempt - 1 WHERE id = $1 AND attempt = $2 AND status = 'running'`, id, attempt)
	return err
}

// FailJob ends an unfinished job as status error with the given message:
// used when gantry gives up on it. applied is false if it had finished.
func (s *Store) FailJob(ctx context.Context, id string, attempt int, message string) (applied bool, err error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE jobs SET status = 'error', finished_at = now(), attempt = GREATEST(attempt, $2),
			error_code = 'infrastructure', error_message = $3
		WHERE id = $1 AND status IN ('queued', 'running')`, id, attempt, message)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}
