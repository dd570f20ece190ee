package piston

import (
	"errors"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

func TestSatisfies(t *testing.T) {
	for _, c := range []struct {
		v, r string
		ok   bool
	}{
		{"3.11.2", "*", true}, {"3.11.2", "3.11.2", true}, {"3.11.2", "3.11", true}, {"3.11.2", "3", true},
		{"3.11.2", "3.x", true}, {"3.11.2", "3.12.0", false}, {"3.11.2", "^3.10", true}, {"3.11.2", "~3.10", false},
		{"3.11.2", ">=3.12", false}, {"3.11.2", ">3.10 <3.12", true}, {"3.11.2", "2 || 3", true}, {"3.11.2", "3.9.4", false},
		{"3.11.2", "3.0.0 - 3.11", true}, {"18.20.4", "18.15.0", false}, {"18.20.4", "^18", true}, {"1.2.3", "garbage", false},
	} {
		if got := satisfies(c.v, c.r); got != c.ok {
			t.Errorf("satisfies(%s, %q) = %v", c.v, c.r, got)
		}
	}
}

func TestDecodeExecute(t *testing.T) {
	req, err := decodeExecute([]byte(`{"language": "py", "version": "3.x", "files": [{"content": "print(1)"}, {"name": "d.bin", "content": "AAE=", "encoding": "base64"}],
		"args": ["1", 2], "stdin": "x", "run_timeout": 500, "compile_memory_limit": -1}`), jobs.DefaultPolicy())
	if err != nil || req.gantry != "python" || string(req.main) != "print(1)" || len(req.files) != 1 || req.files[0].Path != "d.bin" ||
		req.args[1] != "2" || req.stdin != "x\n" || req.runTimeout != 500 || req.runCPU != defRunTimeout {
		t.Fatalf("%+v %v", req, err)
	}
	// run_cpu_time bounds the wall clock only when sent: its default
	// would cut a longer run_timeout.
	for body, want := range map[string]int{
		`{"language": "python", "version": "*", "files": [{"content": ""}], "run_timeout": 20000}`:                       20000,
		`{"language": "python", "version": "*", "files": [{"content": ""}], "run_timeout": 20000, "run_cpu_time": 1000}`: 1000,
		`{"language": "python", "version": "*", "files": [{"content": ""}], "run_timeout": 500, "run_cpu_time": 1000}`:   500,
	} {
		if req, err := decodeExecute([]byte(body), jobs.DefaultPolicy()); err != nil || req.runTimeout != want {
			t.Errorf("%s: wall %d, want %d (%v)", body, req.runTimeout, want, err)
		}
	}
	for body, want := range map[string]string{
		`{}`:                                     "language is required as a string",
		`{"language": "python"}`:                 "version is required as a string",
		`{"language": "python", "version": "*"}`: "files is required as an array",
		`{"language": "python", "version": "*", "files": [{}]}`:                                  "files[0].content is required as a string",
		`{"language": "cobol", "version": "*", "files": [{"content": ""}]}`:                      "cobol-* runtime is unknown",
		`{"language": "python", "version": "*", "files": [{"content": "", "encoding": "hex"}]}`:  "files must include at least one utf8 encoded file",
		`{"language": "python", "version": "*", "files": [{"content": ""}], "run_timeout": "1"}`: "If specified, run_timeout must be a number",
		`{"language": "python", "version": "*", "files": [{"content": ""}], "run_timeout": 1e9}`: "run_timeout cannot exceed the configured limit of 900000",
	} {
		_, err := decodeExecute([]byte(body), jobs.DefaultPolicy())
		var bad badRequest
		if !errors.As(err, &bad) || string(bad) != want {
			t.Errorf("%s: %v, want %s", body, err, want)
		}
	}
}

func FuzzDecodeExecute(f *testing.F) {
	f.Add([]byte(`{"language": "python", "version": "3.11.2", "files": [{"name": "main.py", "content": "print(1)"}], "stdin": "", "args": ["1", "2", "3"], "compile_timeout": 10000, "run_timeout": 3000, "compile_memory_limit": -1, "run_memory_limit": -1}`))
	f.Add([]byte(`{"language": "js", "version": "^18 || >=20", "files": [{"content": "AA", "encoding": "hex"}, {"content": "x"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeExecute(body, jobs.DefaultPolicy())
		if err != nil {
			var bad badRequest
			if !errors.As(err, &bad) {
				t.Fatalf("not a 400: %v", err)
			}
			return
		}
		if req.gantry == "" || req.stdin == "" || req.stdin[len(req.stdin)-1] != '\n' {
			t.Fatalf("accepted %+v", req)
		}
	})
}
