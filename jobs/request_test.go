package jobs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gantryhq/gantry/glob"
)

func decodeAndNormalize(body string) (Spec, error) {
	req, err := DecodeRequest(strings.NewReader(body))
	if err != nil {
		return Spec{}, err
	}
	return DefaultPolicy().Normalize(req)
}

func TestNormalizeDefaults(t *testing.T) {
	t.Parallel()
	spec, err := decodeAndNormalize(`{"language":"python","code":"print(1)"}`)
	if err != nil {
		t.Fatal(err)
	}
	p := DefaultPolicy()
	if spec.TimeoutMS != p.DefaultTimeoutMS || spec.Limits != p.DefaultLimits {
		t.Errorf("defaults not applied: %+v", spec)
	}
	if len(spec.Artifacts) != 1 || spec.Artifacts[0] != "out/**" {
		t.Errorf("artifacts = %v", spec.Artifacts)
	}
	if got := spec.Plan().Run; strings.Join(got, " ") != "python3 /tmp/gantry/main.py" {
		t.Errorf("argv = %v", got)
	}
	// The workspace is held in memory: by default it is no larger than
	// the job's memory.
	spec, err = decodeAndNormalize(`{"language":"python","code":"print(1)","limits":{"memory_mb":256}}`)
	if err != nil || spec.Limits.DiskMB != 256 {
		t.Errorf("disk_mb by default with memory_mb 256: %+v %v", spec.Limits, err)
	}
}

func TestNormalizeFiles(t *testing.T) {
	t.Parallel()
	spec, err := decodeAndNormalize(`{"language":"bash","code":"cat a/b.txt","files":[
		{"path":"./a//b.txt","content":"hi"},
		{"path":"bin.dat","content":"AAEC","encoding":"base64"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Files[0].Path != "a/b.txt" || string(spec.Files[0].Content) != "hi" {
		t.Errorf("file 0 = %+v", spec.Files[0])
	}
	if string(spec.Files[1].Content) != "\x00\x01\x02" {
		t.Errorf("base64 not decoded: %q", spec.Files[1].Content)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body, field, msg string
	}{
		{"malformed", `{"language":`, "", "malformed JSON"},
		{"not object", `[1,2]`, "", "JSON object"},
		{"empty body", ``, "", "empty"},
		{"trailing data", `{"language":"python","code":"x"} {}`, "", "single JSON object"},
		{"unknown field", `{"language":"python","code":"x","bogus":1}`, "bogus", "unknown field"},
		{"wrong type", `{"language":"python","code":"x","timeout_ms":"10"}`, "timeout_ms", "number"},
		{"missing language", `{"code":"x"}`, "language", "required"},
		{"unknown language", `{"language":"cobol","code":"x"}`, "language", "unknown language"},
		{"empty code", `{"language":"python","code":"   "}`, "code", "must not be empty"},
		{"code and command", `{"language":"python","code":"x","command":["ls"]}`, "command", "either"},
		{"timeout too big", `{"language":"python","code":"x","timeout_ms":900001}`, "timeout_ms", "between 1 and 900000"},
		{"timeout negative", `{"language":"python","code":"x","timeout_ms":-5}`, "timeout_ms", "between"},
		{"memory too small", `{"language":"python","code":"x","limits":{"memory_mb":1}}`, "limits.memory_mb", "between"},
		{"cpus too many", `{"language":"python","code":"x","limits":{"cpus":64}}`, "limits.cpus", "between"},
		{"disk over memory", `{"language":"python","code":"x","limits":{"memory_mb":256,"disk_mb":512}}`, "limits.disk_mb", "at most limits.memory_mb (256)"},
		{"pids negative", `{"language":"python","code":"x","limits":{"pids":-1}}`, "limits.pids", "between"},
		{"traversal", `{"language":"python","code":"x","files":[{"path":"../x","content":""}]}`, "files[0].path", "leaves the workspace"},
		{"deep traversal", `{"language":"python","code":"x","files":[{"path":"a/../../x","content":""}]}`, "files[0].path", "leaves the workspace"},
		{"absolute", `{"language":"python","code":"x","files":[{"path":"/etc/passwd","content":""}]}`, "files[0].path", "absolute"},
		{"nul", `{"language":"python","code":"x","files":[{"path":"a\u0000b","content":""}]}`, "files[0].path", "NUL"},
		{"dot", `{"language":"python","code":"x","files":[{"path":".","content":""}]}`, "files[0].path", "leaves"},
		{"duplicate", `{"language":"python","code":"x","files":[{"path":"a","content":""},{"path":"./a","content":""}]}`, "files[1].path", "twice"},
		{"bad base64", `{"language":"python","code":"x","files":[{"path":"a","content":"!!","encoding":"base64"}]}`, "files[0].content", "base64"},
		{"bad encoding", `{"language":"python","code":"x","files":[{"path":"a","content":"","encoding":"hex"}]}`, "files[0].encoding", "utf8 or base64"},
		{"bad env name", `{"language":"python","code":"x","env":{"1X":"y"}}`, "env", "not a valid variable name"},
		{"bad glob", `{"language":"python","code":"x","artifacts":["out/["]}`, "artifacts[0]", "malformed"},
		{"glob traversal", `{"language":"python","code":"x","artifacts":["../*"]}`, "artifacts[0]", ".."},
		{"glob absolute", `{"language":"python","code":"x","artifacts":["/etc/*"]}`, "artifacts[0]", "relative"},
		{"bad idempotency key", `{"language":"python","code":"x","idempotency_key":"has space"}`, "idempotency_key", "printable"},
		{"empty argv0", `{"language":"bash","command":[""]}`, "command", "must not be empty"},
		{"nul in stdin", `{"language":"python","code":"x","stdin":"a\u0000b"}`, "stdin", "stdin_encoding"},
		{"bad stdin base64", `{"language":"python","code":"x","stdin":"!!","stdin_encoding":"base64"}`, "stdin", "base64"},
		{"bad stdin encoding", `{"language":"python","code":"x","stdin":"","stdin_encoding":"hex"}`, "stdin_encoding", "utf8 or base64"},
		{"nul in metadata key", `{"language":"python","code":"x","metadata":{"a\u0000":"v"}}`, "metadata", "NUL"},
		{"nul in metadata value", `{"language":"python","code":"x","metadata":{"agent":"v\u0000"}}`, "metadata.agent", "NUL"},
		{"long metadata value", `{"language":"python","code":"x","metadata":{"agent":"` + strings.Repeat("v", 513) + `"}}`, "metadata.agent", "at most 512"},
		{"kernel for python", `{"language":"python","code":"x","kernel":"k","session_id":"ses_1"}`, "kernel", "JavaScript or TypeScript"},
		{"kernel outside a session", `{"language":"javascript","code":"x","kernel":"k"}`, "kernel", "stateful session"},
		{"kernel with args", `{"language":"javascript","code":"x","kernel":"k","session_id":"ses_1","args":["a"]}`, "kernel", "as a cell"},
		{"kernel with command", `{"language":"javascript","command":["node"],"kernel":"k","session_id":"ses_1"}`, "kernel", "as a cell"},
		{"bad kernel name", `{"language":"typescript","code":"x","kernel":"a b","session_id":"ses_1"}`, "kernel", "1-64 letters"},
		{"invalid utf8 in code", "{\"language\":\"python\",\"code\":\"print('\xff')\"}", "code", "UTF-8"},
		{"invalid utf8 in a file", "{\"language\":\"python\",\"code\":\"x\",\"files\":[{\"path\":\"a\",\"content\":\"\"},{\"path\":\"b\",\"content\":\"\xc3(\"}]}", "files[1].content", "UTF-8"},
		{"invalid utf8 in a metadata key", "{\"language\":\"python\",\"code\":\"x\",\"metadata\":{\"k\xfe\":\"v\"}}", "metadata", "UTF-8"},
		{"invalid utf8 in an env value", "{\"language\":\"python\",\"env\":{\"A\":\"1\",\"B\":\"\xe2\x82\"},\"code\":\"x\"}", "env.B", "UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeAndNormalize(c.body)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a FieldError", err)
			}
			if fe.Field != c.field || !strings.Contains(fe.Error(), c.msg) {
				t.Errorf("got field %q message %q; want field %q containing %q", fe.Field, fe.Error(), c.field, c.msg)
			}
		})
	}
}

// TestBinaryStdin: base64 stdin is decoded, and the raw bytes survive the
// spec's storage encoding (JSON that Postgres must accept: no NUL, valid
// UTF-8) exactly.
func TestBinaryStdin(t *testing.T) {
	t.Parallel()
	raw := "\x00\x01\xff\xfebinary\n"
	body, _ := json.Marshal(map[string]any{"language": "python", "code": "x", "stdin": base64.StdEncoding.EncodeToString([]byte(raw)), "stdin_encoding": "base64"})
	spec, err := decodeAndNormalize(string(body))
	if err != nil {
		t.Fatal(err)
	}
	if spec.Stdin != raw {
		t.Fatalf("stdin = %q, want %q", spec.Stdin, raw)
	}
	stored, err := MarshalSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stored, []byte(`\u0000`)) || !utf8.Valid(stored) || !bytes.Contains(stored, []byte(`"stdin_base64"`)) {
		t.Errorf("stored spec is not safe for jsonb: %s", stored)
	}
	var back Spec
	if err := json.Unmarshal(stored, &back); err != nil || back.Stdin != raw {
		t.Fatalf("stdin after storage = %q (err %v), want %q", back.Stdin, err, raw)
	}
	// Text stdin is stored as text.
	spec.Stdin = "héllo\n"
	stored, _ = MarshalSpec(spec)
	if !bytes.Contains(stored, []byte(`"stdin":"héllo\n"`)) || bytes.Contains(stored, []byte("stdin_base64")) {
		t.Errorf("text stdin stored as %s", stored)
	}
	// The decoded size is what counts against the limit.
	big := base64.StdEncoding.EncodeToString(make([]byte, DefaultPolicy().MaxStdinBytes+1))
	body, _ = json.Marshal(map[string]any{"language": "python", "code": "x", "stdin": big, "stdin_encoding": "base64"})
	var fe *FieldError
	if _, err := DefaultPolicy().Normalize(mustDecode(t, body)); !errors.As(err, &fe) || fe.Field != "stdin" {
		t.Errorf("oversize stdin: %v", err)
	}
}

func mustDecode(t *testing.T, body []byte) Request {
	t.Helper()
	req, err := DecodeRequest(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestSessionMetadata(t *testing.T) {
	t.Parallel()
	_, err := SessionRequest{Language: "python", Metadata: map[string]string{"who": "a\x00b"}}.Normalize()
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "metadata.who" || !strings.Contains(fe.Message, "NUL") {
		t.Errorf("NUL in session metadata: %v", err)
	}
}

func TestOversizeCode(t *testing.T) {
	t.Parallel()
	big, _ := json.Marshal(map[string]any{"language": "python", "code": strings.Repeat("x", DefaultPolicy().MaxCodeBytes+1)})
	_, err := decodeAndNormalize(string(big))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "code" {
		t.Fatalf("err = %v", err)
	}
}

func TestIDs(t *testing.T) {
	t.Parallel()
	a := NewID("job")
	b := NewID("job")
	if !ValidID("job", a) || !ValidID("job", b) || a == b {
		t.Fatalf("ids %q %q", a, b)
	}
	if ValidID("job", "job_../../etc") || ValidID("ten", a) || ValidID("job", "") {
		t.Error("ValidID accepted garbage")
	}
}

func TestRequestHashIgnoresKey(t *testing.T) {
	t.Parallel()
	r := Request{Language: "python", Code: "x", IdempotencyKey: "a"}
	r2 := r
	r2.IdempotencyKey = "b"
	if string(RequestHash(r)) != string(RequestHash(r2)) {
		t.Error("hash depends on the idempotency key")
	}
	r2.Code = "y"
	if string(RequestHash(r)) == string(RequestHash(r2)) {
		t.Error("hash ignores the code")
	}
}

// FuzzDecodeRequest feeds arbitrary bodies through decoding and validation:
// they must never panic, and whatever is accepted must be safe to run.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(`{"language":"python","code":"print(1)"}`)
	f.Add(`{"language":"bash","command":["ls","-la"],"files":[{"path":"a/b","content":"x"}]}`)
	f.Add(`{"language":"node","code":"1","limits":{"memory_mb":64},"artifacts":["**/*.png"],"env":{"A":"b"}}`)
	f.Add(`{"language":"python","code":"x","files":[{"path":"../../etc/passwd","content":"x"}]}`)
	f.Add(`{"language":"python","code":"x","stdin":"AP8=","stdin_encoding":"base64","metadata":{"a":"b"}}`)
	f.Add("{\"language\":\"python\",\"code\":\"\xff\"}")
	f.Add(`{"language":"python","code":"1","network":{"allow_out":["a.example"],"deny_out":["0.0.0.0/0"],"rules":{"*.a.example":[{"headers":{"X-Key":"k ${secrets.K} ${secrets.}"}}]}}}`)
	f.Fuzz(func(t *testing.T, body string) {
		spec, err := decodeAndNormalize(body)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("non-FieldError %T: %v", err, err)
			}
			return
		}
		for _, file := range spec.Files {
			if c, err := CleanPath(file.Path); err != nil || c != file.Path {
				t.Fatalf("accepted unsafe path %q", file.Path)
			}
		}
		for _, g := range spec.Artifacts {
			if glob.Validate(g) != nil {
				t.Fatalf("accepted bad glob %q", g)
			}
		}
		if spec.TimeoutMS < 1 || spec.Limits.MemoryMB < 32 {
			t.Fatalf("accepted out-of-range spec %+v", spec)
		}
		// An accepted network's header values render without a line break.
		for _, rules := range spec.Network.ruleList() {
			for name, v := range rules.Headers {
				if out, _ := Render(v, map[string]string{}); strings.ContainsAny(out+name, "\r\n") {
					t.Fatalf("accepted a header that breaks a line: %q: %q", name, v)
				}
			}
		}
		// What is accepted can be stored (no NUL, valid UTF-8) and comes
		// back the same.
		stored, err := MarshalSpec(spec)
		if err != nil || bytes.Contains(stored, []byte(`\u0000`)) || !utf8.Valid(stored) {
			t.Fatalf("spec cannot be stored: %s (%v)", stored, err)
		}
		var back Spec
		if err := json.Unmarshal(stored, &back); err != nil || back.Stdin != spec.Stdin {
			t.Fatalf("stdin %q came back as %q (%v)", spec.Stdin, back.Stdin, err)
		}
	})
}

// TestIDsSortInOrder: ids made one after another sort in that order, also
// within one millisecond.
func TestIDsSortInOrder(t *testing.T) {
	t.Parallel()
	prev := NewID("job")
	for range 10000 {
		id := NewID("job")
		if id <= prev {
			t.Fatalf("%s made after %s sorts before it", id, prev)
		}
		prev = id
	}
}

func TestArgsFollowTheProgram(t *testing.T) {
	p := DefaultPolicy()
	spec, err := p.Normalize(Request{Language: "python", Code: "print(1)", Args: []string{"a", "b c"}})
	if err != nil {
		t.Fatal(err)
	}
	argv := spec.Plan().Run
	if n := len(argv); n < 3 || argv[n-2] != "a" || argv[n-1] != "b c" || argv[n-3] != ProgramDir+"/main.py" {
		t.Errorf("argv = %q", argv)
	}
	if _, err := p.Normalize(Request{Language: "python", Command: []string{"python3", "x.py"}, Args: []string{"a"}}); err == nil {
		t.Error("args with a command accepted")
	}
	if _, err := p.Normalize(Request{Language: "python", Code: "x", Args: []string{"a\x00"}}); err == nil {
		t.Error("a NUL byte in args accepted")
	}
}

// TestUnderEnv: a session job's env is its own over its session's, and the
// two together keep ValidateEnv's bounds on the whole.
func TestUnderEnv(t *testing.T) {
	own := map[string]string{"A": "job", "B": "b"}
	if got, err := UnderEnv(own, nil); err != nil || len(got) != 2 {
		t.Errorf("without a session env: %v %v", got, err)
	}
	got, err := UnderEnv(own, map[string]string{"A": "session", "C": "c"})
	if err != nil || got["A"] != "job" || got["B"] != "b" || got["C"] != "c" || len(got) != 3 {
		t.Errorf("merged: %v %v", got, err)
	}
	many := map[string]string{}
	for i := range 100 {
		many[fmt.Sprintf("S%d", i)] = "x"
	}
	mine := map[string]string{}
	for i := range 29 {
		mine[fmt.Sprintf("J%d", i)] = "x"
	}
	var fe *FieldError
	if _, err := UnderEnv(mine, many); !errors.As(err, &fe) || fe.Field != "env" || !strings.Contains(err.Error(), "129 variables") {
		t.Errorf("129 variables together: %v", err)
	}
	big := map[string]string{"BIG": strings.Repeat("x", 40<<10)}
	if _, err := UnderEnv(map[string]string{"MORE": strings.Repeat("y", 30<<10)}, big); !errors.As(err, &fe) || !strings.Contains(err.Error(), "at most 65536") {
		t.Errorf("70 KiB together: %v", err)
	}
}

// TestNormalizeSessionDisk: a session's disk_mb is bounded once, by the
// smaller of the sessions' maximum and the policy's largest disk.
func TestNormalizeSessionDisk(t *testing.T) {
	p := DefaultPolicy()
	p.MaxLimits.DiskMB = 1024
	var fe *FieldError
	if _, err := p.NormalizeSession(SessionRequest{DiskMB: 2048}); !errors.As(err, &fe) || fe.Field != "disk_mb" || !strings.Contains(err.Error(), "between 1 and 1024") {
		t.Errorf("past the policy's disk: %v", err)
	}
	if _, err := p.NormalizeSession(SessionRequest{DiskMB: 1024}); err != nil {
		t.Errorf("at the policy's disk: %v", err)
	}
	p.MaxLimits.DiskMB = 1 << 20
	if _, err := p.NormalizeSession(SessionRequest{DiskMB: MaxSessionMB + 1}); !errors.As(err, &fe) || !strings.Contains(err.Error(), fmt.Sprintf("between 1 and %d", MaxSessionMB)) {
		t.Errorf("past the sessions' maximum: %v", err)
	}
}
