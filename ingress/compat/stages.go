package compat

import (
	"encoding/json"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// Outcome is how a stage (a compile or a run) ended, in the terms all three
// originals share.
type Outcome int

// The outcomes of a stage.
const (
	// Exited: the program exited by itself (ExitCode, Signal say how).
	Exited Outcome = iota
	// TimedOut: it was killed at its time limit.
	TimedOut
	// Failed: gantry could not run it (Message says why), or it was
	// cancelled.
	Failed
)

// Stage is one step of a finished job as the compatible APIs report it.
type Stage struct {
	Outcome Outcome
	// ExitCode is the exit status (nil unless Exited); Signal the signal
	// that killed the program (0: none). gantry reports a death by signal n
	// as exit status 128+n, so a program that exits with such a status
	// reads as killed by that signal.
	ExitCode *int
	Signal   int
	Stdout   string
	Stderr   string
	// Wall is how long the stage ran.
	Wall time.Duration
	// CPU and MemoryKB are what the stage's program used (nil: not
	// measured).
	CPU      *time.Duration
	MemoryKB *int64
	// OOMKilled: the program ran out of memory.
	OOMKilled bool
	// Message says why gantry could not run it (Failed).
	Message string
}

// Stages are the steps of a finished job: Compile is nil for a language
// without a compile step, Run nil when the compile failed.
type Stages struct {
	Compile *Stage
	Run     *Stage
}

// measured is what a job reports, by its JSON names, of a compile step and
// of what its program used (see runtimes.go).
type measured struct {
	CPUTimeMS    *int64 `json:"cpu_time_ms"`
	PeakMemoryKB *int64 `json:"peak_memory_kb"`
	Compile      *struct {
		Status       string `json:"status"` // succeeded, failed, timed_out
		ExitCode     *int   `json:"exit_code"`
		DurationMS   int64  `json:"duration_ms"`
		CPUTimeMS    *int64 `json:"cpu_time_ms"`
		PeakMemoryKB *int64 `json:"peak_memory_kb"`
	} `json:"compile"`
	CompileOutput string `json:"compile_output"`
}

func ms(p *int64) *time.Duration {
	if p == nil {
		return nil
	}
	d := time.Duration(*p) * time.Millisecond
	return &d
}

// StagesOf reads a finished job's stages.
func StagesOf(j jobs.Job) Stages {
	var m measured
	// The measures, read through their JSON names; the output, which can
	// be megabytes, is not copied into that JSON.
	bare := j
	bare.Stdout, bare.Stderr = "", ""
	if b, err := json.Marshal(bare); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return stagesOf(j, m)
}

func stagesOf(j jobs.Job, m measured) Stages {
	var st Stages
	if c := m.Compile; c != nil {
		st.Compile = &Stage{Stderr: m.CompileOutput, // compilers write their diagnostics to stderr
			Wall: time.Duration(c.DurationMS) * time.Millisecond,
			CPU:  ms(c.CPUTimeMS), MemoryKB: c.PeakMemoryKB}
		switch c.Status {
		case "timed_out":
			st.Compile.Outcome = TimedOut
		default:
			code := 0
			if c.ExitCode != nil {
				code = *c.ExitCode
			} else if c.Status != "succeeded" {
				code = 1
			}
			st.Compile.ExitCode = &code
			if code > 128 && code < 128+65 {
				st.Compile.Signal = code - 128
			}
		}
		if c.Status != "succeeded" {
			return st // the program never ran
		}
	}
	st.Run = runStage(j, m)
	return st
}

// runStage is the program's run.
func runStage(j jobs.Job, m measured) *Stage {
	run := &Stage{Stdout: j.Stdout, Stderr: j.Stderr, CPU: ms(m.CPUTimeMS), MemoryKB: m.PeakMemoryKB}
	if j.DurationMS != nil {
		run.Wall = time.Duration(*j.DurationMS) * time.Millisecond
	}
	switch j.Status {
	case jobs.StatusSucceeded, jobs.StatusFailed:
		run.Outcome = Exited
		code := 0
		if j.ExitCode != nil {
			code = *j.ExitCode
		}
		run.ExitCode = &code
		if code > 128 && code < 128+65 {
			run.Signal = code - 128
		}
		run.OOMKilled = j.Error != nil && j.Error.Code == jobs.ErrCodeOOMKilled
	case jobs.StatusTimedOut:
		run.Outcome = TimedOut
	default:
		run.Outcome = Failed
		run.Message = "the job was " + string(j.Status)
		if j.Error != nil && j.Error.Message != "" {
			run.Message = j.Error.Message
		}
	}
	return run
}

// Waiting says whether a job has not started yet.
func Waiting(j jobs.Job) bool { return j.Status == jobs.StatusQueued }
