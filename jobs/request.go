package jobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/gantryhq/gantry/glob"
)

// Request is a job submission as clients send it.
type Request struct {
	Language string   `json:"language"`
	Code     string   `json:"code,omitempty"`
	Command  []string `json:"command,omitempty"`
	// Args are the program's arguments (with code; a command holds its
	// own).
	Args          []string          `json:"args,omitempty"`
	Files         []File            `json:"files,omitempty"`
	Stdin         string            `json:"stdin,omitempty"`
	StdinEncoding string            `json:"stdin_encoding,omitempty"` // one of Encodings (default utf8)
	Env           map[string]string `json:"env,omitempty"`
	TimeoutMS     int               `json:"timeout_ms,omitempty"`
	// CompileTimeoutMS bounds a compiled language's compile step (ignored
	// for the others).
	CompileTimeoutMS int               `json:"compile_timeout_ms,omitempty"`
	Limits           *Limits           `json:"limits,omitempty"`
	Artifacts        []string          `json:"artifacts,omitempty"`
	SessionID        *string           `json:"session_id,omitempty"`
	IdempotencyKey   string            `json:"idempotency_key,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	// WebhookURL is called when the job finishes (else the tenant's
	// default, if any).
	WebhookURL string `json:"webhook_url,omitempty"`
	// Compat is what a compatible API (Judge0, SandboxFusion, Piston)
	// keeps with the job for its own answers, such as Judge0's expected
	// output: stored with the spec, never given to the program, and not
	// part of the HTTP API (an adapter sets it in Go).
	Compat json.RawMessage `json:"-"`
	// Environment names the sandbox image the job runs in ("" or
	// "default": the runner's own). A session's jobs run in the session's.
	Environment string `json:"environment,omitempty"`
	// Tests are the job's test cases: the program is built once and run
	// once per test, each in a fresh sandbox (see Test).
	Tests []Test `json:"tests,omitempty"`
	// Compare is how a test's stdout is compared with what it expects:
	// one of Compares (default "lines").
	Compare Compare `json:"compare,omitempty"`
	// Tolerance is how far a number may be from the expected one with
	// "compare": "tokens" (absolute, or relative to the expected number).
	Tolerance float64 `json:"tolerance,omitempty"`
	// StopOnFailure ends the job at its first test that does not pass.
	StopOnFailure bool `json:"stop_on_failure,omitempty"`
	// Network narrows the job's egress below its tenant's allow-list (and
	// its session's network), and sets headers on requests to some hosts
	// at the egress proxy.
	Network *Network `json:"network,omitempty"`
	// Kernel, for JavaScript or TypeScript code in a stateful session,
	// names the session's kernel the code runs in as a cell: a Node
	// process of the live sandbox, started by its first cell, whose
	// globals persist from cell to cell. Each kernel has its own; the
	// default is the language's own ("javascript" or "typescript").
	Kernel string `json:"kernel,omitempty"`
}

// MaxCompatBytes caps Request.Compat.
const MaxCompatBytes = 4 << 20

// The encodings of a request's file contents and stdin: text, or base64
// of the bytes. "utf-8" is read as EncodingUTF8, the default.
const (
	EncodingUTF8   = "utf8"
	EncodingBase64 = "base64"
)

// Encodings lists the encodings a request may name, as the contract lists
// them.
var Encodings = []string{EncodingUTF8, EncodingBase64}

func encodingNames() string { return strings.Join(Encodings, " or ") }

// File is an input file placed in the job's workspace before it runs.
type File struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"` // one of Encodings (default utf8)
}

// Limits are the resources a job may use. A zero field means the default.
type Limits struct {
	MemoryMB    int     `json:"memory_mb,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
	Pids        int     `json:"pids,omitempty"`
	DiskMB      int     `json:"disk_mb,omitempty"`
	OutputBytes int     `json:"output_bytes,omitempty"`
	// ToolCalls is the job's budget of upstream MCP tool calls (code mode).
	ToolCalls int `json:"tool_calls,omitempty"`
}

// Container is the limits that shape a container (all but the tool-call
// budget): two jobs with equal Container limits can share a pooled one.
func (l Limits) Container() Limits {
	l.ToolCalls = 0
	return l
}

// FieldError is a request that fails validation, naming the field at fault.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + " " + e.Message
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Policy holds the defaults and bounds a server applies to requests.
type Policy struct {
	DefaultTimeoutMS int
	MaxTimeoutMS     int
	// DefaultCompileTimeoutMS bounds a compile step the request does not
	// bound itself (MaxTimeoutMS bounds both).
	DefaultCompileTimeoutMS int
	// Languages are the names of the languages offered (the sandbox
	// image's); nil offers every one of Languages.
	Languages     []string
	DefaultLimits Limits
	MinLimits     Limits
	MaxLimits     Limits
	MaxCodeBytes  int
	MaxFiles      int
	MaxFilesBytes int // decoded, all files together
	MaxStdinBytes int
}

// DefaultPolicy is the policy a server uses unless configured otherwise.
func DefaultPolicy() Policy {
	return Policy{
		DefaultTimeoutMS:        30_000,
		MaxTimeoutMS:            900_000,
		DefaultCompileTimeoutMS: 30_000,
		DefaultLimits:           Limits{MemoryMB: 512, CPUs: 1, Pids: 128, DiskMB: 512, OutputBytes: 1 << 20, ToolCalls: 100},
		MinLimits:               Limits{MemoryMB: 32, CPUs: 0.1, Pids: 16, DiskMB: 1, OutputBytes: 1 << 10, ToolCalls: 1},
		MaxLimits:               Limits{MemoryMB: 8192, CPUs: 8, Pids: 4096, DiskMB: 8192, OutputBytes: 16 << 20, ToolCalls: 10000},
		MaxCodeBytes:            1 << 20,
		MaxFiles:                1000,
		MaxFilesBytes:           8 << 20,
		MaxStdinBytes:           1 << 20,
	}
}

// DefaultArtifacts are the globs collected when a request names none.
var DefaultArtifacts = []string{"out/**"}

// DecodeRequest reads one JSON request object, refusing unknown fields,
// wrong types and trailing data with a FieldError.
func DecodeRequest(r io.Reader) (Request, error) {
	var req Request
	if err := DecodeStrict(r, &req); err != nil {
		return Request{}, err
	}
	return req, nil
}

// DecodeStrict decodes exactly one JSON value into v, refusing unknown
// fields and invalid UTF-8 (which encoding/json would silently replace with
// U+FFFD), and turns decoding failures into FieldErrors that name the field.
func DecodeStrict(r io.Reader, v any) error {
	data, err := io.ReadAll(r)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &FieldError{Message: "request body ended before its declared length"}
	}
	if err != nil {
		return err // too large, too slow: the caller maps it
	}
	if !utf8.Valid(data) {
		off := invalidUTF8At(data)
		return &FieldError{Field: fieldAt(data, int64(off)), Message: fmt.Sprintf("is not valid UTF-8 (byte %d of the body); send binary data base64-encoded", off)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonFieldError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &FieldError{Message: "request body must hold a single JSON object"}
	}
	return nil
}

// invalidUTF8At is the offset of the first byte of b that is not valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// fieldAt names the JSON field whose key or value holds byte off of data,
// as the API names fields ("files[2].content", "metadata"): a bad key names
// the object holding it. It returns "" when off is outside any field.
func fieldAt(data []byte, off int64) string {
	type frame struct {
		object  bool
		key     string // current key (objects)
		index   int    // current index (arrays)
		wantKey bool
	}
	var stack []*frame
	name := func(depth int) string {
		var b strings.Builder
		for _, f := range stack[:depth] {
			if f.object {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				fmt.Fprintf(&b, "[%d]", f.index)
			}
		}
		return b.String()
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return name(len(stack))
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		d, _ := tok.(json.Delim)
		if top != nil && top.object && top.wantKey && d != '}' {
			top.key, _ = tok.(string)
			top.wantKey = false
			if dec.InputOffset() > off {
				return name(len(stack) - 1)
			}
			continue
		}
		switch d {
		case '{', '[':
			stack = append(stack, &frame{object: d == '{', wantKey: d == '{'})
			continue
		case ']', '}':
			stack = stack[:len(stack)-1]
		default:
			if dec.InputOffset() > off {
				return name(len(stack))
			}
		}
		// A value ended: move on to the next key or element.
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.object {
				top.wantKey = true
			} else {
				top.index++
			}
		}
	}
}

func jsonFieldError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return &FieldError{Message: "request body must be a JSON object"}
		}
		return fieldErr(field, "must be of type %s, not %s", jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return &FieldError{Message: fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)}
	case errors.Is(err, io.EOF):
		return &FieldError{Message: "request body is empty"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &FieldError{Message: "malformed JSON: unexpected end of body"}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		f := strings.Trim(name, `"`)
		return fieldErr(f, "unknown field")
	}
	return &FieldError{Message: "malformed JSON: " + err.Error()}
}

func jsonTypeName(kind string) string {
	switch kind {
	case "int", "int64", "float64":
		return "number"
	case "map", "struct":
		return "object"
	case "slice":
		return "array"
	case "bool":
		return "boolean"
	}
	return kind
}

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	keyRE     = regexp.MustCompile(`^[\x21-\x7e]{1,255}$`)
	kernelRE  = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

// Normalize validates a request against the policy and returns the spec to
// run, with every default filled in. It returns a *FieldError naming the
// first bad field.
func (p Policy) Normalize(req Request) (Spec, error) {
	lang, err := p.language(req.Language, req.Environment != "")
	if err != nil {
		return Spec{}, err
	}
	spec := Spec{Language: lang.Name}
	if spec.Environment, err = normalizeEnvironment(req.Environment); err != nil {
		return Spec{}, err
	}

	switch {
	case req.Code != "" && len(req.Command) > 0:
		return Spec{}, fieldErr("command", "give either code or command, not both")
	case len(req.Command) > 0:
		if len(req.Args) > 0 {
			return Spec{}, fieldErr("args", "go with code; a command holds its own arguments")
		}
		if err := checkArgv("command", req.Command); err != nil {
			return Spec{}, err
		}
		if req.Command[0] == "" {
			return Spec{}, fieldErr("command", "first element (the program) must not be empty")
		}
		spec.Command = req.Command
	case strings.TrimSpace(req.Code) == "":
		return Spec{}, fieldErr("code", "is required and must not be empty (or give command)")
	default:
		if len(req.Code) > p.MaxCodeBytes {
			return Spec{}, fieldErr("code", "is %d bytes; at most %d", len(req.Code), p.MaxCodeBytes)
		}
		if strings.ContainsRune(req.Code, 0) {
			return Spec{}, fieldErr("code", "must not contain NUL bytes")
		}
		spec.Code = req.Code
	}
	if len(req.Args) > 0 { // with code: a command was refused them above
		if err := checkArgv("args", req.Args); err != nil {
			return Spec{}, err
		}
		n := 0
		for _, a := range req.Args {
			n += len(a)
		}
		if n > 64<<10 {
			return Spec{}, fieldErr("args", "is %d bytes; at most %d", n, 64<<10)
		}
		spec.Args = req.Args
	}
	if len(req.Compat) > MaxCompatBytes {
		return Spec{}, fieldErr("", "the compatible API's data is %d bytes; at most %d", len(req.Compat), MaxCompatBytes)
	}
	spec.Compat = req.Compat
	if spec.Stdin, err = p.normalizeStdin(req.Stdin, req.StdinEncoding); err != nil {
		return Spec{}, err
	}
	if err := p.normalizeTests(req, &spec); err != nil {
		return Spec{}, err
	}

	files, err := p.normalizeFiles(req.Files)
	if err != nil {
		return Spec{}, err
	}
	spec.Files = files

	if err := ValidateEnv(req.Env); err != nil {
		return Spec{}, err
	}
	spec.Env = req.Env

	spec.TimeoutMS = req.TimeoutMS
	if spec.TimeoutMS == 0 {
		spec.TimeoutMS = p.DefaultTimeoutMS
	}
	if spec.TimeoutMS < 1 || spec.TimeoutMS > p.MaxTimeoutMS {
		return Spec{}, fieldErr("timeout_ms", "must be between 1 and %d", p.MaxTimeoutMS)
	}
	if req.CompileTimeoutMS < 0 || req.CompileTimeoutMS > p.MaxTimeoutMS {
		return Spec{}, fieldErr("compile_timeout_ms", "must be between 1 and %d", p.MaxTimeoutMS)
	}
	if lang.Compiled() && spec.Code != "" {
		spec.CompileTimeoutMS = req.CompileTimeoutMS
		if spec.CompileTimeoutMS == 0 {
			spec.CompileTimeoutMS = min(p.DefaultCompileTimeoutMS, p.MaxTimeoutMS)
		}
	}

	if spec.Limits, err = p.normalizeLimits(req.Limits); err != nil {
		return Spec{}, err
	}

	spec.Artifacts = req.Artifacts
	if len(spec.Artifacts) == 0 {
		spec.Artifacts = DefaultArtifacts
	}
	if len(spec.Artifacts) > 32 {
		return Spec{}, fieldErr("artifacts", "has %d patterns; at most 32", len(spec.Artifacts))
	}
	for i, g := range spec.Artifacts {
		if err := glob.Validate(g); err != nil {
			return Spec{}, fieldErr(fmt.Sprintf("artifacts[%d]", i), "%v", err)
		}
	}

	if err := ValidateMetadata(req.Metadata); err != nil {
		return Spec{}, err
	}
	if req.IdempotencyKey != "" && !keyRE.MatchString(req.IdempotencyKey) {
		return Spec{}, fieldErr("idempotency_key", "must be 1-255 printable ASCII characters without spaces")
	}
	if err := normalizeKernel(req, lang, &spec); err != nil {
		return Spec{}, err
	}
	// WebhookURL is no part of the spec: the service checks it with the
	// sender that would call it (webhook.Sender.CheckURL).
	if !req.Network.Empty() {
		spec.Network = NormalizeNetwork(req.Network)
		if err := spec.Network.Check("network"); err != nil {
			return Spec{}, err
		}
	}
	return spec, nil
}

// normalizeKernel checks a request's kernel: JavaScript or TypeScript
// code, run as a cell, in a session (the service checks that it is a
// stateful one).
func normalizeKernel(req Request, lang Language, spec *Spec) error {
	if req.Kernel == "" {
		return nil
	}
	switch {
	case !kernelRE.MatchString(req.Kernel):
		return fieldErr("kernel", "must be 1-64 letters, digits, '_', '.' or '-'")
	case lang.Name != "node" && lang.Name != "typescript":
		return fieldErr("kernel", "goes with JavaScript or TypeScript code, not %s", lang.Name)
	case req.SessionID == nil:
		return fieldErr("kernel", "needs a stateful session (session_id): a kernel lives in its live sandbox")
	case spec.Code == "" || len(req.Args) > 0 || len(req.Tests) > 0:
		return fieldErr("kernel", "runs code as a cell, without command, args or tests")
	}
	spec.Kernel = req.Kernel
	return nil
}

// language is the language a request names, by name or alias; a
// *FieldError says why there is none. In the sandbox image it must be one
// the policy offers; an environment's image (inEnv) says for itself, and
// the runner refuses what it lacks.
func (p Policy) language(name string, inEnv bool) (Language, error) {
	lang, ok := LookupLanguage(name)
	switch {
	case name == "":
		return Language{}, fieldErr("language", "is required (one of %s)", p.offeredNames())
	case !ok:
		return Language{}, fieldErr("language", "unknown language %q (one of %s)", name, p.offeredNames())
	case !inEnv && !p.Offers(lang.Name):
		return Language{}, fieldErr("language", "%s is not offered by this gantry: its sandbox image has no %s (the compilers image has; offered: %s)",
			lang.Name, lang.Name, p.offeredNames())
	}
	return lang, nil
}

// Offers reports whether the policy offers the language named name (a
// language's Name, not an alias).
func (p Policy) Offers(name string) bool {
	return p.Languages == nil || slices.Contains(p.Languages, name)
}

// Offered lists the languages the policy offers, in the order of
// Languages.
func (p Policy) Offered() []Language {
	var out []Language
	for _, l := range Languages {
		if p.Offers(l.Name) {
			out = append(out, l)
		}
	}
	return out
}

func (p Policy) offeredNames() string {
	var names []string
	for _, l := range p.Offered() {
		names = append(names, l.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// checkArgv checks an argument list: at most 256 arguments, no NUL bytes.
func checkArgv(field string, argv []string) error {
	if len(argv) > 256 {
		return fieldErr(field, "has %d arguments; at most 256", len(argv))
	}
	for i, a := range argv {
		if strings.ContainsRune(a, 0) {
			return fieldErr(fmt.Sprintf("%s[%d]", field, i), "must not contain NUL bytes")
		}
	}
	return nil
}

// normalizeStdin decodes the request's stdin. Text must not hold NUL bytes
// (Postgres cannot store them in text); binary input comes base64-encoded.
func (p Policy) normalizeStdin(stdin, encoding string) (string, error) {
	switch encoding {
	case "", EncodingUTF8, "utf-8":
		if strings.ContainsRune(stdin, 0) {
			return "", fieldErr("stdin", "must not contain NUL bytes; send binary input base64-encoded with \"stdin_encoding\": \"base64\"")
		}
	case EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(stdin)
		if err != nil {
			return "", fieldErr("stdin", "is not valid base64: %v", err)
		}
		stdin = string(b)
	default:
		return "", fieldErr("stdin_encoding", "must be %s, not %q", encodingNames(), encoding)
	}
	if len(stdin) > p.MaxStdinBytes {
		return "", fieldErr("stdin", "is %d bytes; at most %d", len(stdin), p.MaxStdinBytes)
	}
	return stdin, nil
}

// ValidateEnv checks a job's (or a session's) environment variables: at
// most 128, names of letters, digits and _ not starting with a digit,
// values without NUL bytes, 64 KiB in all.
func ValidateEnv(env map[string]string) error {
	if err := checkEnvCount(env); err != nil {
		return err
	}
	for k, v := range env {
		if !envNameRE.MatchString(k) {
			return fieldErr("env", "%q is not a valid variable name (letters, digits, _; not starting with a digit)", k)
		}
		if strings.ContainsRune(v, 0) {
			return fieldErr("env."+k, "must not contain NUL bytes")
		}
	}
	return checkEnvBytes(env)
}

// checkEnvCount and checkEnvBytes are ValidateEnv's bounds on the whole.
func checkEnvCount(env map[string]string) error {
	if len(env) > 128 {
		return fieldErr("env", "has %d variables; at most 128", len(env))
	}
	return nil
}

func checkEnvBytes(env map[string]string) error {
	n := 0
	for k, v := range env {
		n += len(k) + len(v)
	}
	if n > 64<<10 {
		return fieldErr("env", "is %d bytes; at most %d", n, 64<<10)
	}
	return nil
}

// UnderEnv is own with the variables of base it does not set: a session
// job's env over its session's. Each was checked by ValidateEnv when it was
// given; what a merge can break, the bounds on the whole, is checked here.
func UnderEnv(own, base map[string]string) (map[string]string, error) {
	if len(base) == 0 {
		return own, nil
	}
	out := make(map[string]string, len(own)+len(base))
	maps.Copy(out, base)
	maps.Copy(out, own)
	if err := checkEnvCount(out); err != nil {
		return nil, err
	}
	return out, checkEnvBytes(out)
}

// ValidateMetadata checks a job's or session's metadata: at most 32 keys of
// 1-64 bytes, values of at most 512 bytes, and no NUL bytes anywhere
// (Postgres cannot store them in JSON).
func ValidateMetadata(m map[string]string) error {
	if len(m) > 32 {
		return fieldErr("metadata", "has %d keys; at most 32", len(m))
	}
	for k, v := range m {
		switch {
		case k == "" || len(k) > 64:
			return fieldErr("metadata", "keys must be 1-64 bytes (%q)", truncate(k, 64))
		case strings.ContainsRune(k, 0):
			return fieldErr("metadata", "key %q must not contain NUL bytes", truncate(k, 64))
		case len(v) > 512:
			return fieldErr("metadata."+k, "is %d bytes; at most 512", len(v))
		case strings.ContainsRune(v, 0):
			return fieldErr("metadata."+k, "must not contain NUL bytes")
		}
	}
	return nil
}

func (p Policy) normalizeFiles(in []File) ([]SpecFile, error) {
	if len(in) > p.MaxFiles {
		return nil, fieldErr("files", "has %d files; at most %d", len(in), p.MaxFiles)
	}
	seen := make(map[string]bool, len(in))
	total := 0
	out := make([]SpecFile, 0, len(in))
	for i, f := range in {
		field := fmt.Sprintf("files[%d].path", i)
		clean, err := CleanPath(f.Path)
		if err != nil {
			return nil, fieldErr(field, "%v", err)
		}
		if seen[clean] {
			return nil, fieldErr(field, "%q is given twice", clean)
		}
		seen[clean] = true
		var content []byte
		switch f.Encoding {
		case "", EncodingUTF8, "utf-8":
			content = []byte(f.Content)
		case EncodingBase64:
			content, err = base64.StdEncoding.DecodeString(f.Content)
			if err != nil {
				return nil, fieldErr(fmt.Sprintf("files[%d].content", i), "is not valid base64: %v", err)
			}
		default:
			return nil, fieldErr(fmt.Sprintf("files[%d].encoding", i), "must be %s, not %q", encodingNames(), f.Encoding)
		}
		total += len(content)
		if total > p.MaxFilesBytes {
			return nil, fieldErr("files", "hold more than %d bytes in all", p.MaxFilesBytes)
		}
		out = append(out, SpecFile{Path: clean, Content: content})
	}
	return out, nil
}

func (p Policy) normalizeLimits(in *Limits) (Limits, error) {
	l := p.DefaultLimits
	if in != nil {
		if in.MemoryMB != 0 {
			l.MemoryMB = in.MemoryMB
		}
		if in.CPUs != 0 {
			l.CPUs = in.CPUs
		}
		if in.Pids != 0 {
			l.Pids = in.Pids
		}
		if in.DiskMB != 0 {
			l.DiskMB = in.DiskMB
		}
		if in.OutputBytes != 0 {
			l.OutputBytes = in.OutputBytes
		}
		if in.ToolCalls != 0 {
			l.ToolCalls = in.ToolCalls
		}
	}
	checks := []struct {
		field       string
		v, min, max float64
	}{
		{"limits.memory_mb", float64(l.MemoryMB), float64(p.MinLimits.MemoryMB), float64(p.MaxLimits.MemoryMB)},
		{"limits.cpus", l.CPUs, p.MinLimits.CPUs, p.MaxLimits.CPUs},
		{"limits.pids", float64(l.Pids), float64(p.MinLimits.Pids), float64(p.MaxLimits.Pids)},
		{"limits.disk_mb", float64(l.DiskMB), float64(p.MinLimits.DiskMB), float64(p.MaxLimits.DiskMB)},
		{"limits.output_bytes", float64(l.OutputBytes), float64(p.MinLimits.OutputBytes), float64(p.MaxLimits.OutputBytes)},
		{"limits.tool_calls", float64(l.ToolCalls), float64(p.MinLimits.ToolCalls), float64(p.MaxLimits.ToolCalls)},
	}
	if in == nil || in.DiskMB == 0 {
		// The workspace is held in memory: by default it is no larger
		// than the memory the job has.
		l.DiskMB = min(l.DiskMB, l.MemoryMB)
	}
	for _, c := range checks {
		if c.field == "limits.disk_mb" {
			c.v = float64(l.DiskMB)
		}
		if c.v < c.min || c.v > c.max {
			return Limits{}, fieldErr(c.field, "must be between %g and %g", c.min, c.max)
		}
	}
	if l.DiskMB > l.MemoryMB {
		return Limits{}, fieldErr("limits.disk_mb", "must be at most limits.memory_mb (%d): the workspace is held in memory and counts against the job's memory", l.MemoryMB)
	}
	return l, nil
}

// CleanPath checks that p names a file inside the workspace and returns it
// in canonical form ("./a//b" → "a/b"). Absolute paths, ".." that leaves the
// workspace, NUL bytes and invalid UTF-8 are refused.
func CleanPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("must not be empty")
	case len(p) > 1024:
		return "", errors.New("is longer than 1024 bytes")
	case strings.ContainsRune(p, 0):
		return "", errors.New("must not contain NUL bytes")
	case !utf8.ValidString(p):
		return "", errors.New("must be valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%q is absolute; give a path relative to /workspace", p)
	}
	c := path.Clean(p)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%q leaves the workspace", p)
	}
	for _, seg := range strings.Split(c, "/") {
		if len(seg) > 255 {
			return "", errors.New("has a path segment longer than 255 bytes")
		}
	}
	return c, nil
}

// RequestHash fingerprints a request so that a reused idempotency key with a
// different request can be told apart from a retry.
func RequestHash(req Request) []byte {
	req.IdempotencyKey = ""
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(req) // maps encode with sorted keys
	sum := sha256.Sum256(buf.Bytes())
	return sum[:]
}

func languageNames() string {
	names := LanguageNames()
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
