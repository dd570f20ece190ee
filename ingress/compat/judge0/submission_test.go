package judge0

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

func TestTokensAreJobIDs(t *testing.T) {
	for range 100 {
		id := jobs.NewID("job")
		tok := token(id)
		back, ok := jobID(tok)
		if !ok || back != id || len(tok) != 36 {
			t.Fatalf("%s → %s → %s", id, tok, back)
		}
	}
	for _, bad := range []string{"", "x", "d85cd024-1548-4165-96c7-7bc88673f19", "d85cd024154841659-6c7-7bc88673f194z", "zz5cd024-1548-4165-96c7-7bc88673f194"} {
		if _, ok := jobID(bad); ok {
			t.Errorf("%q read as a token", bad)
		}
	}
}

func TestShellWords(t *testing.T) {
	for in, want := range map[string][]string{
		`a b  c`:           {"a", "b", "c"},
		`"a b" 'c d' e\ f`: {"a b", "c d", "e f"},
		`"x\"y" ''`:        {`x"y`, ""},
		``:                 nil,
	} {
		if got := shellWords(stripShell(in)); !reflect.DeepEqual(got, want) {
			t.Errorf("%q → %q, want %q", in, got, want)
		}
	}
	if got := stripShell("a; rm -rf / && `x` $HOME | y > z"); strings.ContainsAny(got, "$&;<>|`") {
		t.Errorf("stripShell left %q", got)
	}
}

func TestSameOutputStripsAsJudge0(t *testing.T) {
	for _, c := range []struct {
		expected, stdout string
		same             bool
	}{
		{"hello, Judge0", "hello, Judge0\n", true},
		{"a  \nb\t\n\n", "a\nb", true},
		{"a\nb", "a\n b", false},
		{"\na", "a", false},
		{"", "", false}, // an empty stdout is null in Judge0: it matches nothing
		{"x", "", false},
	} {
		if got := sameOutput([]byte(c.expected), []byte(c.stdout)); got != c.same {
			t.Errorf("%q vs %q: %v", c.expected, c.stdout, got)
		}
	}
}

func decode(t *testing.T, body string, b64 bool) (submission, error) {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	return decodeSubmission(raw, b64, jobs.DefaultPolicy())
}

func TestDecodeSubmission(t *testing.T) {
	sub, err := decode(t, `{"source_code": "print(1)", "language_id": "71", "stdin": "x", "expected_output": "1",
		"cpu_time_limit": "2", "memory_limit": 256000, "command_line_arguments": "a 'b c'", "unknown": 1}`, false)
	st := sub.Stored
	if err != nil || sub.Gantry != "python" || st.LanguageID != 71 || st.CPUTimeLimit != 2 || st.WallTimeLimit != defWallTimeLimit ||
		st.MemoryLimit != 256000 || !st.HasExpected || string(sub.Stdin) != "x" || !reflect.DeepEqual(sub.ArgList, []string{"a", "b c"}) {
		t.Fatalf("%+v %v", sub, err)
	}
	sub, err = decode(t, `{"source_code": "cHJpbnQoMSk=\n", "language_id": 92, "stdin": "eA=="}`, true)
	if err != nil || string(sub.Source) != "print(1)" || string(sub.Stdin) != "x" || sub.Stored.LanguageID != 92 {
		t.Fatalf("base64 and an alias: %+v %v", sub, err)
	}
	_, err = decode(t, `{"source_code": " ", "language_id": 150000, "wall_time_limit": 100000, "memory_limit": "abc",
		"number_of_runs": 0, "enable_network": true, "compiler_options": "-O2"}`, false)
	var fe fieldErrors
	if !errors.As(err, &fe) {
		t.Fatal(err)
	}
	want := fieldErrors{
		"source_code":      {"can't be blank"},
		"language_id":      {"language with id 150000 doesn't exist"},
		"wall_time_limit":  {"must be less than or equal to 20"},
		"memory_limit":     {"is not a number"},
		"number_of_runs":   {"must be greater than 0"},
		"enable_network":   {"enabling network is not allowed"},
		"compiler_options": {"setting compiler options is not allowed"},
	}
	if !reflect.DeepEqual(fe, want) {
		t.Errorf("errors %v\nwant   %v", fe, want)
	}
	if _, err := decode(t, `{"source_code": "x"}`, false); !errors.As(err, &fe) || fe["language_id"][0] != "can't be blank" {
		t.Errorf("no language: %v", err)
	}
}

func zipOf(t testing.TB, files map[string]string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, content := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(content))
	}
	_ = zw.Close()
	return buf.Bytes()
}

func TestAdditionalFiles(t *testing.T) {
	files, err := unzip(zipOf(t, map[string]string{"lib/helper.py": "X = 1", "data.txt": "d"}), 1<<20)
	if err != nil || len(files) != 2 {
		t.Fatalf("%v %v", files, err)
	}
	for _, bad := range []map[string]string{{"../x": "a"}, {"/etc/x": "a"}, {"big": strings.Repeat("a", 2000)}} {
		if _, err := unzip(zipOf(t, bad), 1000); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if _, err := unzip([]byte("not a zip"), 1000); err == nil {
		t.Error("garbage accepted")
	}
}

func FuzzDecodeSubmission(f *testing.F) {
	f.Add([]byte(`{"source_code": "print(1)", "language_id": 71, "stdin": "x", "expected_output": "1", "command_line_arguments": "a \"b c\" 'd'"}`), false)
	f.Add([]byte(`{"source_code": "cHJpbnQoMSk=", "language_id": "92", "cpu_time_limit": "1.5", "callback_url": "http://x"}`), true)
	f.Add([]byte(`{"source_code": "x", "language_id": 71, "additional_files": "`+base64.StdEncoding.EncodeToString(zipOf(f, map[string]string{"a": "b"}))+`"}`), false)
	f.Fuzz(func(t *testing.T, body []byte, b64 bool) {
		var raw map[string]json.RawMessage
		if json.Unmarshal(body, &raw) != nil {
			return
		}
		sub, err := decodeSubmission(raw, b64, jobs.DefaultPolicy())
		if err != nil {
			var fe fieldErrors
			if !errors.As(err, &fe) || len(fe) == 0 {
				t.Fatalf("not field errors: %v", err)
			}
			return
		}
		if sub.Gantry == "" || isBlank(sub.Source) {
			t.Fatalf("accepted %+v", sub)
		}
		for _, f := range sub.Files {
			if _, err := jobs.CleanPath(f.Path); err != nil {
				t.Fatalf("file %q", f.Path)
			}
		}
		if _, err := json.Marshal(sub.Stored); err != nil {
			t.Fatal(err)
		}
	})
}
