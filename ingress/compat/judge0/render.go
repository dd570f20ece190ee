package judge0

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/jobs"
)

// allFields are a submission's attributes in Judge0's order (its
// submissions table's columns, then status and language).
var allFields = []string{
	"source_code", "language_id", "stdin", "expected_output", "stdout", "status_id", "created_at", "finished_at",
	"time", "memory", "stderr", "token", "number_of_runs", "cpu_time_limit", "cpu_extra_time", "wall_time_limit",
	"memory_limit", "stack_limit", "max_processes_and_or_threads", "enable_per_process_and_thread_time_limit",
	"enable_per_process_and_thread_memory_limit", "max_file_size", "compile_output", "exit_code", "exit_signal",
	"message", "wall_time", "compiler_options", "command_line_arguments", "redirect_stderr_to_stdout",
	"callback_url", "additional_files", "enable_network", "status", "language",
}

// defaultFields are what a submission shows unless fields says otherwise.
var defaultFields = []string{"token", "time", "memory", "stdout", "stderr", "compile_output", "message", "status"}

// requestedFields reads ?fields= as Judge0 does: a comma-separated list,
// "*" for all; unknown names are a 400 listing them.
func requestedFields(q string) ([]string, error) {
	if q == "" {
		return defaultFields, nil
	}
	var want, bad []string
	all := false
	for _, f := range strings.Split(q, ",") {
		switch {
		case f == "*":
			all = true
		case known(f):
			want = append(want, f)
		default:
			bad = append(bad, f)
		}
	}
	switch {
	case len(bad) > 0:
		return nil, badRequest("invalid fields: [" + strings.Join(bad, ", ") + "]")
	case all:
		return allFields, nil
	case len(want) == 0:
		return defaultFields, nil
	}
	// Attributes come in the serializer's order, whatever the request's.
	var out []string
	for _, f := range allFields {
		for _, w := range want {
			if w == f {
				out = append(out, f)
				break
			}
		}
	}
	return out, nil
}

func known(f string) bool {
	for _, a := range allFields {
		if a == f {
			return true
		}
	}
	return false
}

// token is a job's id written as a UUID: the same 128 bits.
func token(jobID string) string {
	b, ok := jobs.IDBits("job", jobID)
	if !ok {
		return jobID
	}
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// jobID is the job id a token names (false: not a token).
func jobID(tok string) (string, bool) {
	if len(tok) != 36 || tok[8] != '-' || tok[13] != '-' || tok[18] != '-' || tok[23] != '-' {
		return "", false
	}
	raw, err := hex.DecodeString(strings.ReplaceAll(tok, "-", ""))
	if err != nil || len(raw) != 16 {
		return "", false
	}
	return jobs.IDOf("job", [16]byte(raw)), true
}

// view is a job with what its submission shows of its spec.
type view struct {
	job  jobs.Job
	spec *jobs.JobSpec
}

// outcome is a finished submission's status and the attributes that
// depend on it.
type outcome struct {
	status         int
	stdout, stderr []byte
	compileOutput  []byte
	message        *string
	exitCode       *int
	exitSignal     *int
	time, wallTime *float64
	memory         *int64
	finished       bool
}

// judge decides a submission's status as Judge0's IsolateJob does, from
// the job's stages and the submission's limits and expected output.
func judge(j jobs.Job, st stored) outcome {
	switch j.Status {
	case jobs.StatusQueued:
		return outcome{status: statusInQueue}
	case jobs.StatusRunning:
		return outcome{status: statusProcessing}
	}
	out := outcome{finished: true}
	stages := compat.StagesOf(j)
	if c := stages.Compile; c != nil {
		out.compileOutput = []byte(c.Stdout + c.Stderr)
		if stages.Run == nil {
			out.status = statusCE
			if c.Outcome == compat.TimedOut {
				out.compileOutput = []byte("Compilation time limit exceeded.")
			}
			return out
		}
	}
	run := stages.Run
	if run.Outcome == compat.Failed {
		out.status, out.message = statusInternal, &run.Message
		return out
	}
	out.stdout, out.stderr = []byte(run.Stdout), []byte(run.Stderr)
	if st.RedirectStderr {
		out.stdout, out.stderr = append(out.stdout, out.stderr...), nil
	}
	wall := run.Wall.Seconds()
	cpu := wall
	if run.CPU != nil {
		cpu = run.CPU.Seconds()
	}
	out.time, out.wallTime, out.memory = &cpu, &wall, run.MemoryKB
	zero := 0
	// A compiled program ran with the compiler's memory (jobRequest): past
	// its own limit it ends as the kernel would have ended it, killed.
	if stages.Compile != nil && run.Signal == 0 && run.MemoryKB != nil && *run.MemoryKB > st.MemoryLimit {
		run.Signal = 9
	}
	switch {
	case run.Outcome == compat.TimedOut || (st.CPUTimeLimit > 0 && cpu > st.CPUTimeLimit):
		out.status, out.exitCode = statusTLE, &zero
		msg := "Time limit exceeded"
		if run.Outcome == compat.TimedOut && st.WallTimeLimit < st.CPUTimeLimit+st.CPUExtraTime {
			msg = "Time limit exceeded (wall clock)"
		}
		out.message = &msg
	case run.Signal != 0:
		out.status, out.exitCode, out.exitSignal = signalStatus(run.Signal), &zero, &run.Signal
		msg := "Caught fatal signal " + strconv.Itoa(run.Signal)
		out.message = &msg
	case *run.ExitCode != 0:
		out.status, out.exitCode = statusNZEC, run.ExitCode
		msg := "Exited with error status " + strconv.Itoa(*run.ExitCode)
		out.message = &msg
	default:
		out.exitCode = run.ExitCode
		out.status = statusAccepted
		if st.HasExpected && !sameOutput(st.ExpectedOutput, out.stdout) {
			out.status = statusWrong
		}
	}
	return out
}

// sameOutput compares as Judge0 does: each line's trailing whitespace and
// the text's trailing whitespace stripped; an empty stdout (which Judge0
// stores as null) matches no expected output, not even an empty one.
func sameOutput(expected, stdout []byte) bool {
	if len(stdout) == 0 {
		return false
	}
	return stripOutput(expected) == stripOutput(stdout)
}

func stripOutput(b []byte) string {
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, rubySpace)
	}
	return strings.TrimRight(strings.Join(lines, "\n"), rubySpace)
}

// rubySpace is what Ruby's rstrip removes.
const rubySpace = " \t\n\v\f\r\x00"

// marshalSubmission writes the submission's requested attributes, in
// Judge0's order and forms: texts null when empty (base64 as Ruby's
// encode64 writes it with base64_encoded), decimals as strings.
func marshalSubmission(v view, o options, policy jobs.Policy) ([]byte, error) {
	var st stored
	spec := v.spec
	if spec == nil {
		spec = &jobs.JobSpec{}
	}
	if len(spec.Compat) > 0 {
		if err := json.Unmarshal(spec.Compat, &st); err != nil {
			return nil, fmt.Errorf("read the submission's attributes of job %s: %w", v.job.ID, err)
		}
	}
	out := judge(v.job, st)
	text := func(b []byte, set bool) any {
		switch {
		case !set || b == nil || (len(b) == 0 && !set):
			return nil
		case o.base64:
			return compat.Encode64(b)
		}
		return string(b)
	}
	nonEmpty := func(b []byte) any { return text(b, len(b) > 0) }
	stdin := []byte(spec.Stdin)
	if spec.StdinEncoding == jobs.EncodingBase64 {
		stdin, _ = base64.StdEncoding.DecodeString(spec.Stdin)
	}
	lang, gantry, _ := lookup(policy, st.LanguageID)
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range o.fields {
		var val any
		switch f {
		case "source_code":
			val = text([]byte(spec.Code), true)
		case "language_id":
			val = st.LanguageID
		case "stdin":
			val = text(stdin, st.HasStdin || len(stdin) > 0)
		case "expected_output":
			val = text(st.ExpectedOutput, st.HasExpected)
		case "stdout":
			val = nonEmpty(out.stdout)
		case "stderr":
			val = nonEmpty(out.stderr)
		case "compile_output":
			val = nonEmpty(out.compileOutput)
		case "status_id":
			val = out.status
		case "status":
			val = statusOf(out.status)
		case "created_at":
			val = railsTime(&v.job.CreatedAt)
		case "finished_at":
			val = railsTime(v.job.FinishedAt)
		case "time":
			val = decimal(out.time)
		case "wall_time":
			val = decimal(out.wallTime)
		case "memory":
			val = out.memory
		case "token":
			val = token(v.job.ID)
		case "number_of_runs":
			val = st.NumberOfRuns
		case "cpu_time_limit":
			val = decimal(&st.CPUTimeLimit)
		case "cpu_extra_time":
			val = decimal(&st.CPUExtraTime)
		case "wall_time_limit":
			val = decimal(&st.WallTimeLimit)
		case "memory_limit":
			val = st.MemoryLimit
		case "stack_limit":
			val = st.StackLimit
		case "max_processes_and_or_threads":
			val = st.MaxProcesses
		case "enable_per_process_and_thread_time_limit":
			val = st.PerProcessTime
		case "enable_per_process_and_thread_memory_limit":
			val = st.PerProcessMem
		case "max_file_size":
			val = st.MaxFileSize
		case "exit_code":
			val = out.exitCode
		case "exit_signal":
			val = out.exitSignal
		case "message":
			if out.message != nil {
				val = text([]byte(*out.message), true)
			}
		case "compiler_options":
			val = st.CompilerOpts
		case "command_line_arguments":
			val = st.CommandLine
		case "redirect_stderr_to_stdout":
			val = st.RedirectStderr
		case "callback_url":
			val = st.CallbackURL
		case "additional_files":
			if len(st.Additional) > 0 {
				val = compat.Encode64(st.Additional)
			}
		case "enable_network":
			val = st.EnableNetwork
		case "language":
			val = languageRef{ID: st.LanguageID, Name: lang.name(gantry)}
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(f)
		buf.Write(k)
		buf.WriteByte(':')
		enc, err := marshalValue(val)
		if err != nil {
			return nil, err
		}
		buf.Write(enc)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func marshalValue(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// decimal writes a number as Rails writes a decimal column: a string with
// at least one decimal ("5.0", "0.012"), to the millisecond.
func decimal(f *float64) *string {
	if f == nil {
		return nil
	}
	s := strconv.FormatFloat(float64(int64(*f*1000+0.5))/1000, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return &s
}

// railsTime writes a time as Rails' JSON does, to the millisecond in UTC.
func railsTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format("2006-01-02T15:04:05.000Z")
	return &s
}
