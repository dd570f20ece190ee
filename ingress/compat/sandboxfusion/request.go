package sandboxfusion

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/ingress/compat"
)

// languages are SandboxFusion's Language literal (sandbox/runners/types.py),
// in its order: a request naming another is refused with 422, as pydantic
// does; one gantry does not run answers SandboxError.
var languages = []string{"python", "cpp", "nodejs", "go", "go_test", "java", "php", "csharp", "bash", "typescript", "sql",
	"rust", "cuda", "lua", "R", "perl", "D_ut", "ruby", "scala", "julia", "pytest", "junit",
	"kotlin_script", "jest", "verilog", "python_gpu", "lean", "swift", "racket"}

// gantryNames are the names gantry may know each of SandboxFusion's
// languages by, in order of preference.
var gantryNames = map[string][]string{
	"python":     {"python"},
	"cpp":        {"cpp", "c++"},
	"nodejs":     {"node", "javascript"},
	"go":         {"go"},
	"java":       {"java"},
	"bash":       {"bash"},
	"typescript": {"typescript"},
	"rust":       {"rust"},
}

// runCode is a RunCodeRequest (sandbox/server/sandbox_api.py) with its
// defaults filled in.
type runCode struct {
	CompileTimeout float64 // seconds
	RunTimeout     float64 // seconds
	MemoryLimitMB  int64   // -1: the default
	Code           string
	Stdin          *string
	Language       string
	// Files maps a path to its content (decoded); files whose value was
	// null are left out, as SandboxFusion skips them.
	Files      map[string][]byte
	FetchFiles []string
}

// fieldError is one entry of FastAPI's 422 answer.
type fieldError struct {
	Type  string         `json:"type"`
	Loc   []any          `json:"loc"`
	Msg   string         `json:"msg"`
	Input any            `json:"input"`
	Ctx   map[string]any `json:"ctx,omitempty"`
}

// validationError is FastAPI's 422 body: {"detail": [...]}.
type validationError struct {
	Detail []fieldError `json:"detail"`
}

func (e *validationError) Error() string {
	if len(e.Detail) == 0 {
		return "invalid request"
	}
	return fmt.Sprintf("%v: %s", e.Detail[0].Loc, e.Detail[0].Msg)
}

// decodeRunCode reads a RunCodeRequest as pydantic (lax mode) reads it:
// unknown fields are ignored, numbers may come as numeric strings, and
// every bad field is reported, FastAPI's way.
func decodeRunCode(body []byte) (runCode, error) {
	req := runCode{CompileTimeout: 10, RunTimeout: 10, MemoryLimitMB: -1}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&fields); err != nil || dec.More() {
		var raw any
		if json.Unmarshal(body, &raw) != nil || dec.More() {
			msg := "JSON decode error"
			if err != nil {
				msg = err.Error()
			}
			return req, &validationError{Detail: []fieldError{{Type: "json_invalid", Loc: []any{"body", 0}, Msg: "JSON decode error",
				Input: map[string]any{}, Ctx: map[string]any{"error": msg}}}}
		}
		return req, &validationError{Detail: []fieldError{{Type: "model_attributes_type", Loc: []any{"body"},
			Msg: "Input should be a valid dictionary or object to extract fields from", Input: raw}}}
	}
	var errs []fieldError
	bad := func(field, typ, msg string, raw json.RawMessage, ctx map[string]any) {
		var input any
		_ = json.Unmarshal(raw, &input)
		errs = append(errs, fieldError{Type: typ, Loc: []any{"body", field}, Msg: msg, Input: input, Ctx: ctx})
	}
	missing := func(field string) {
		var input any
		_ = json.Unmarshal(body, &input)
		errs = append(errs, fieldError{Type: "missing", Loc: []any{"body", field}, Msg: "Field required", Input: input})
	}
	for _, f := range []struct {
		name string
		to   *float64
	}{{"compile_timeout", &req.CompileTimeout}, {"run_timeout", &req.RunTimeout}} {
		if raw, ok := fields[f.name]; ok {
			v, typ, msg := laxFloat(raw)
			if typ != "" {
				bad(f.name, typ, msg, raw, nil)
			} else {
				*f.to = v
			}
		}
	}
	if raw, ok := fields["memory_limit_MB"]; ok {
		v, typ, msg := laxInt(raw)
		if typ != "" {
			bad("memory_limit_MB", typ, msg, raw, nil)
		} else {
			req.MemoryLimitMB = v
		}
	}
	if raw, ok := fields["code"]; !ok {
		missing("code")
	} else if err := json.Unmarshal(raw, &req.Code); err != nil || isNull(raw) {
		bad("code", "string_type", "Input should be a valid string", raw, nil)
	}
	if raw, ok := fields["stdin"]; ok && !isNull(raw) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			bad("stdin", "string_type", "Input should be a valid string", raw, nil)
		} else {
			req.Stdin = &s
		}
	}
	if raw, ok := fields["language"]; !ok {
		missing("language")
	} else if err := json.Unmarshal(raw, &req.Language); err != nil || !known(req.Language) {
		expected := literalList(languages)
		bad("language", "literal_error", "Input should be "+expected, raw, map[string]any{"expected": expected})
	}
	if raw, ok := fields["files"]; ok {
		var files map[string]*string
		if err := json.Unmarshal(raw, &files); err != nil || isNull(raw) {
			bad("files", "dict_type", "Input should be a valid dictionary", raw, nil)
		} else {
			req.Files = make(map[string][]byte, len(files))
			for name, content := range files {
				if content == nil || strings.Contains(name, "IGNORE_THIS_FILE") {
					continue
				}
				b, err := compat.LaxBase64(*content)
				if err != nil {
					bad("files", "value_error", fmt.Sprintf("Value error, the content of %q is not base64: %v", name, err), raw, nil)
					continue
				}
				req.Files[name] = b
			}
		}
	}
	if raw, ok := fields["fetch_files"]; ok {
		if err := json.Unmarshal(raw, &req.FetchFiles); err != nil || isNull(raw) {
			bad("fetch_files", "list_type", "Input should be a valid list", raw, nil)
		}
	}
	if len(errs) > 0 {
		return req, &validationError{Detail: errs}
	}
	return req, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func known(lang string) bool {
	for _, l := range languages {
		if l == lang {
			return true
		}
	}
	return false
}

// literalList words a Literal's values as pydantic does: 'a', 'b' or 'c'.
func literalList(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = "'" + v + "'"
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// laxFloat reads a number, or a string holding one, as pydantic's float
// does in lax mode; typ names the error otherwise.
func laxFloat(raw json.RawMessage) (v float64, typ, msg string) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		if f, err := n.Float64(); err == nil {
			return f, "", ""
		}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			return f, "", ""
		}
		return 0, "float_parsing", "Input should be a valid number, unable to parse string as a number"
	}
	return 0, "float_type", "Input should be a valid number"
}

// laxInt reads an integer as pydantic's int does in lax mode: a number
// without a fractional part, or a string holding an integer.
func laxInt(raw json.RawMessage) (v int64, typ, msg string) {
	f, typ, _ := laxFloat(raw)
	switch {
	case typ == "float_type":
		return 0, "int_type", "Input should be a valid integer"
	case typ != "":
		return 0, "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
	case f != math.Trunc(f) || math.IsInf(f, 0):
		return 0, "int_from_float", "Input should be a valid integer, got a number with a fractional part"
	case f > math.MaxInt64/2 || f < math.MinInt64/2:
		return 0, "int_parsing_size", "Unable to parse input string as an integer, exceeded maximum size"
	}
	return int64(f), "", ""
}
