package sandboxfusion

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeRunCode(t *testing.T) {
	req, err := decodeRunCode([]byte(`{"code": "print(1)", "language": "python", "extra": 1}`))
	if err != nil || req.RunTimeout != 10 || req.CompileTimeout != 10 || req.MemoryLimitMB != -1 || req.Stdin != nil {
		t.Fatalf("defaults: %+v %v", req, err)
	}
	// verl's request, numbers as pydantic's lax mode takes them.
	req, err = decodeRunCode([]byte(`{"compile_timeout": 5, "run_timeout": "2.5", "code": "x", "stdin": "in",
		"memory_limit_MB": 1024.0, "language": "cpp", "files": {"a.txt": "aGk=", "skip": null, "IGNORE_THIS_FILE": "aGk="}, "fetch_files": ["a.txt"]}`))
	if err != nil || req.RunTimeout != 2.5 || req.CompileTimeout != 5 || req.MemoryLimitMB != 1024 || *req.Stdin != "in" ||
		len(req.Files) != 1 || string(req.Files["a.txt"]) != "hi" || req.FetchFiles[0] != "a.txt" {
		t.Fatalf("verl's request: %+v %v", req, err)
	}
	for body, want := range map[string]string{
		`{"language": "python"}`:                                      "missing code",
		`{"code": "x", "language": "cobol"}`:                          "literal_error language",
		`{"code": 1, "language": "python"}`:                           "string_type code",
		`{"code": "x", "language": "python", "run_timeout": "a"}`:     "float_parsing run_timeout",
		`{"code": "x", "language": "python", "memory_limit_MB": 1.5}`: "int_from_float memory_limit_MB",
		`{"code": "x", "language": "python", "files": []}`:            "dict_type files",
		`{"code": "x", "language": "python", "fetch_files": {}}`:      "list_type fetch_files",
		`[1]`:   "model_attributes_type",
		`{"a":`: "json_invalid",
	} {
		_, err := decodeRunCode([]byte(body))
		var ve *validationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: %v", body, err)
			continue
		}
		got := ve.Detail[0].Type
		if len(ve.Detail[0].Loc) > 1 {
			if s, ok := ve.Detail[0].Loc[1].(string); ok {
				got += " " + s
			}
		}
		if got != want {
			t.Errorf("%s: %s, want %s", body, got, want)
		}
		if _, err := json.Marshal(ve); err != nil {
			t.Error(err)
		}
	}
}

func TestLiteralGlob(t *testing.T) {
	for in, want := range map[string]string{"out.txt": "out.txt", "a/b[1].txt": `a/b\[1\].txt`, "./x": "x", "../x": "", "/etc/passwd": ""} {
		got, ok := literalGlob(in)
		if got != want || ok != (want != "") {
			t.Errorf("literalGlob(%q) = %q, %v", in, got, ok)
		}
	}
}

func FuzzDecodeRunCode(f *testing.F) {
	f.Add([]byte(`{"compile_timeout": 10, "run_timeout": 10, "code": "print(1)", "stdin": null, "memory_limit_MB": 1024, "language": "python", "files": {}, "fetch_files": []}`))
	f.Add([]byte(`{"code": "x", "language": "cpp", "files": {"a/b": "aGk="}, "fetch_files": ["a/b", "../x"], "run_timeout": "1e3"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeRunCode(body)
		if err != nil {
			var ve *validationError
			if !errors.As(err, &ve) || len(ve.Detail) == 0 {
				t.Fatalf("not a validation error: %v", err)
			}
			if _, err := json.Marshal(ve); err != nil {
				t.Fatal(err)
			}
			return
		}
		if !known(req.Language) {
			t.Fatalf("accepted language %q", req.Language)
		}
		for _, f := range req.FetchFiles {
			if g, ok := literalGlob(f); ok && strings.HasPrefix(g, "/") {
				t.Fatalf("glob %q", g)
			}
		}
	})
}
