package judge0

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path"
	"strconv"
	"strings"
	"unicode"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/jobs"
)

// Judge0 CE 1.13.1's defaults and bounds (app/helpers/config.rb, as
// judge0.conf ships them).
const (
	defCPUTimeLimit  = 5.0
	maxCPUTimeLimit  = 15.0
	defCPUExtraTime  = 1.0
	maxCPUExtraTime  = 5.0
	defWallTimeLimit = 10.0
	maxWallTimeLimit = 20.0
	defMemoryLimit   = 128000 // KB
	minMemoryLimit   = 2048
	maxMemoryLimit   = 512000
	defStackLimit    = 64000
	maxStackLimit    = 128000
	defMaxProcesses  = 60
	maxMaxProcesses  = 120
	defMaxFileSize   = 1024
	maxMaxFileSize   = 4096
	defNumberOfRuns  = 1
	maxNumberOfRuns  = 20
	maxBatchSize     = 20
	maxExtractSize   = 10240 << 10 // bytes extracted from additional_files
	callbackTries    = 3
)

// stored is what a submission keeps with its gantry job (the job's Compat
// data): its attributes that the job does not hold itself.
type stored struct {
	LanguageID     int     `json:"language_id"`
	ExpectedOutput []byte  `json:"expected_output,omitempty"`
	HasExpected    bool    `json:"has_expected,omitempty"`
	HasStdin       bool    `json:"has_stdin,omitempty"`
	NumberOfRuns   int64   `json:"number_of_runs"`
	CPUTimeLimit   float64 `json:"cpu_time_limit"`
	CPUExtraTime   float64 `json:"cpu_extra_time"`
	WallTimeLimit  float64 `json:"wall_time_limit"`
	MemoryLimit    int64   `json:"memory_limit"`
	StackLimit     int64   `json:"stack_limit"`
	MaxProcesses   int64   `json:"max_processes_and_or_threads"`
	PerProcessTime bool    `json:"enable_per_process_and_thread_time_limit"`
	PerProcessMem  bool    `json:"enable_per_process_and_thread_memory_limit"`
	MaxFileSize    int64   `json:"max_file_size"`
	CompilerOpts   *string `json:"compiler_options,omitempty"`
	CommandLine    *string `json:"command_line_arguments,omitempty"`
	RedirectStderr bool    `json:"redirect_stderr_to_stdout"`
	CallbackURL    *string `json:"callback_url,omitempty"`
	Additional     []byte  `json:"additional_files,omitempty"`
	EnableNetwork  bool    `json:"enable_network"`
}

// submission is a decoded, validated submission: the job to run and what it
// keeps.
type submission struct {
	Source  []byte
	Stdin   []byte
	Stored  stored
	Lang    language
	Gantry  string
	Files   []jobs.File
	ArgList []string
}

// fieldErrors are Rails' validation errors: attribute → messages (422).
type fieldErrors map[string][]string

func (e fieldErrors) add(field, msg string) { e[field] = append(e[field], msg) }

func (e fieldErrors) Error() string {
	for k, v := range e {
		return k + " " + strings.Join(v, ", ")
	}
	return "invalid submission"
}

// decodeSubmission reads a submission's attributes as Rails reads params
// (numbers may come as strings; unknown attributes are ignored), decodes
// the texts when base64 is set, fills in the defaults and validates as
// Judge0's Submission model does. A bad attribute is a fieldErrors.
func decodeSubmission(raw map[string]json.RawMessage, base64Encoded bool, policy jobs.Policy) (submission, error) {
	errs := fieldErrors{}
	var sub submission
	st := &sub.Stored
	text := func(name string) (*string, bool) {
		v, ok := raw[name]
		if !ok || isNull(v) {
			return nil, false
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = strings.TrimSpace(string(v)) // a number or a boolean, as Rails casts it
		}
		return &s, true
	}
	decoded := func(name string) ([]byte, bool) {
		s, ok := text(name)
		if !ok {
			return nil, false
		}
		if !base64Encoded {
			return []byte(*s), true
		}
		b, _ := compat.LaxBase64(*s)
		return b, true
	}
	number := func(name string, def float64) (float64, bool) {
		s, ok := text(name)
		if !ok || strings.TrimSpace(*s) == "" {
			return def, true
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(*s), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			errs.add(name, "is not a number")
			return def, false
		}
		return f, true
	}
	boolean := func(name string, def bool) bool {
		s, ok := text(name)
		if !ok || *s == "" {
			return def
		}
		switch strings.ToLower(*s) {
		case "false", "0", "f", "off":
			return false
		}
		return true
	}
	between := func(name string, v, lo, hi float64, loStrict bool) {
		switch {
		case loStrict && v <= lo:
			errs.add(name, "must be greater than "+num(lo))
		case !loStrict && v < lo:
			errs.add(name, "must be greater than or equal to "+num(lo))
		case v > hi:
			errs.add(name, "must be less than or equal to "+num(hi))
		}
	}

	var hasSource bool
	sub.Source, hasSource = decoded("source_code")
	if !hasSource || isBlank(sub.Source) {
		errs.add("source_code", "can't be blank")
	}
	langID, hasLang := text("language_id")
	if !hasLang || strings.TrimSpace(*langID) == "" {
		errs.add("language_id", "can't be blank")
	}
	sub.Stdin, st.HasStdin = decoded("stdin")
	st.ExpectedOutput, st.HasExpected = decoded("expected_output")

	runs, ok := number("number_of_runs", defNumberOfRuns)
	if ok {
		between("number_of_runs", runs, 0, maxNumberOfRuns, true)
	}
	st.NumberOfRuns = int64(runs)
	if st.CPUTimeLimit, ok = number("cpu_time_limit", defCPUTimeLimit); ok {
		between("cpu_time_limit", st.CPUTimeLimit, 0, maxCPUTimeLimit, false)
	}
	if st.CPUExtraTime, ok = number("cpu_extra_time", defCPUExtraTime); ok {
		between("cpu_extra_time", st.CPUExtraTime, 0, maxCPUExtraTime, false)
	}
	if st.WallTimeLimit, ok = number("wall_time_limit", defWallTimeLimit); ok {
		between("wall_time_limit", st.WallTimeLimit, 1, maxWallTimeLimit, false)
	}
	for _, f := range []struct {
		name        string
		to          *int64
		def, lo, hi float64
		strict      bool
	}{
		{"memory_limit", &st.MemoryLimit, defMemoryLimit, minMemoryLimit, maxMemoryLimit, false},
		{"stack_limit", &st.StackLimit, defStackLimit, 0, maxStackLimit, false},
		{"max_processes_and_or_threads", &st.MaxProcesses, defMaxProcesses, 0, maxMaxProcesses, true},
		{"max_file_size", &st.MaxFileSize, defMaxFileSize, 0, maxMaxFileSize, false},
	} {
		v, ok := number(f.name, f.def)
		if ok {
			between(f.name, math.Trunc(v), f.lo, f.hi, f.strict)
		}
		*f.to = int64(v)
	}
	st.PerProcessTime = boolean("enable_per_process_and_thread_time_limit", false)
	st.PerProcessMem = boolean("enable_per_process_and_thread_memory_limit", false)
	st.RedirectStderr = boolean("redirect_stderr_to_stdout", false)
	st.EnableNetwork = boolean("enable_network", false)
	st.CompilerOpts, _ = text("compiler_options")
	st.CommandLine, _ = text("command_line_arguments")
	for name, v := range map[string]*string{"compiler_options": st.CompilerOpts, "command_line_arguments": st.CommandLine} {
		if v != nil && len([]rune(*v)) > 512 {
			errs.add(name, "is too long (maximum is 512 characters)")
		}
	}
	st.CallbackURL, _ = text("callback_url")
	if st.CallbackURL != nil && strings.TrimSpace(*st.CallbackURL) == "" {
		st.CallbackURL = nil
	}
	if files, ok := text("additional_files"); ok && *files != "" {
		st.Additional, _ = compat.LaxBase64(*files)
	}

	if hasLang && strings.TrimSpace(*langID) != "" {
		id := leadingInt(*langID)
		st.LanguageID = id
		if sub.Lang, sub.Gantry, ok = lookup(policy, id); !ok {
			errs.add("language_id", fmt.Sprintf("language with id %d doesn't exist", id))
		}
	}
	if st.CompilerOpts != nil && strings.TrimSpace(*st.CompilerOpts) != "" {
		if sub.Gantry != "" && !sub.Lang.Compiled {
			errs.add("compiler_options", "setting compiler options is only allowed for compiled languages")
		} else {
			errs.add("compiler_options", "setting compiler options is not allowed")
		}
	}
	if st.EnableNetwork {
		errs.add("enable_network", "enabling network is not allowed")
	}
	if st.CommandLine != nil {
		sub.ArgList = shellWords(stripShell(*st.CommandLine))
	}
	if len(st.Additional) > 0 {
		files, err := unzip(st.Additional, maxExtractSize)
		if err != nil {
			errs.add("additional_files", err.Error())
		}
		sub.Files = files
	}
	if len(errs) > 0 {
		return sub, errs
	}
	return sub, nil
}

// num words a bound as Rails' messages do (integers without a fraction).
func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// isBlank is Rails' blank? for text: empty or only whitespace.
func isBlank(b []byte) bool { return len(bytes.TrimFunc(b, unicode.IsSpace)) == 0 }

// leadingInt casts a string to an integer as Ruby's to_i does: the
// leading digits (0 for none).
func leadingInt(s string) int {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > math.MinInt32 && f < math.MaxInt32 {
		return int(f)
	}
	n, i := 0, 0
	neg := strings.HasPrefix(s, "-")
	if neg || strings.HasPrefix(s, "+") {
		i = 1
	}
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9' && n < math.MaxInt32/10; i++ {
		n = n*10 + int(s[i]-'0')
	}
	if neg {
		return -n
	}
	return n
}

// stripShell removes the characters Judge0 strips from command line
// arguments before putting them on its run script's command line.
func stripShell(s string) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune("$&;<>|`", r) {
			return -1
		}
		return r
	}, strings.TrimSpace(s))
}

// shellWords splits arguments as bash splits the rest of Judge0's run
// script's line: on blanks, with single and double quotes and backslashes
// (expansions cannot occur: their characters were stripped).
func shellWords(s string) []string {
	var (
		words []string
		cur   strings.Builder
		in    bool // inside a word
		quote rune
	)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case quote == '"':
			switch {
			case r == '"':
				quote = 0
			case r == '\\' && i+1 < len(rs) && strings.ContainsRune(`"\`+"\n", rs[i+1]):
				i++
				if rs[i] != '\n' {
					cur.WriteRune(rs[i])
				}
			default:
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == '\\':
			in = true
			if i+1 < len(rs) {
				i++
				if rs[i] != '\n' {
					cur.WriteRune(rs[i])
				}
			}
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// unzip reads additional_files, a zip archive, into job files: regular
// files only, at clean relative paths, at most limit bytes in all (read,
// not as the archive claims).
func unzip(data []byte, limit int64) ([]jobs.File, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("is not a zip archive: %v", err)
	}
	if len(zr.File) > 1000 {
		return nil, fmt.Errorf("holds %d files; at most 1000", len(zr.File))
	}
	var out []jobs.File
	total := int64(0)
	for _, f := range zr.File {
		if f.FileInfo().IsDir() || strings.HasSuffix(f.Name, "/") {
			continue
		}
		if !f.Mode().IsRegular() {
			return nil, fmt.Errorf("holds %q, which is not a regular file", f.Name)
		}
		clean, err := jobs.CleanPath(f.Name)
		if err != nil || path.IsAbs(f.Name) {
			return nil, fmt.Errorf("holds %q: %v", f.Name, err)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("holds %q, which cannot be read: %v", f.Name, err)
		}
		b, err := io.ReadAll(io.LimitReader(rc, limit-total+1))
		_ = rc.Close()
		if err != nil {
			return nil, fmt.Errorf("holds %q, which cannot be read: %v", f.Name, err)
		}
		total += int64(len(b))
		if total > limit {
			return nil, fmt.Errorf("extracts to more than %d bytes", limit)
		}
		out = append(out, jobs.File{Path: clean, Content: b64(b), Encoding: jobs.EncodingBase64})
	}
	return out, nil
}
