package sandbox

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/ingress/service"
)

func TestPaths(t *testing.T) {
	for in, want := range map[string]string{
		"": "/workspace", "~": "/workspace", "~/a": "/workspace/a", "a/b": "/workspace/a/b", "/home/user": "/workspace",
		"/home/user/x.txt": "/workspace/x.txt", "/home/user/../../etc/passwd": "/etc/passwd", "/home/userx": "/home/userx",
		"/tmp/t": "/tmp/t", "a/../../..": "/", "/workspace/z": "/workspace/z",
	} {
		if got := toSandbox(in); got != want {
			t.Errorf("toSandbox(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"/workspace": "/home/user", "/workspace/a": "/home/user/a", "/workspacex": "/workspacex", "/tmp": "/tmp"} {
		if got := fromSandbox(in); got != want {
			t.Errorf("fromSandbox(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEndOf(t *testing.T) {
	for _, c := range []struct {
		exit             service.ProcessExit
		code             int32
		exited           bool
		status, errorMsg string
	}{
		{service.ProcessExit{Code: 0}, 0, true, "exit status 0", ""},
		{service.ProcessExit{Code: 3}, 3, true, "exit status 3", "exit status 3"},
		{service.ProcessExit{Code: -1, Signal: 9}, -1, false, "signal: killed", "signal: killed"},
		{service.ProcessExit{Code: -1, Signal: 15}, -1, false, "signal: terminated", "signal: terminated"},
	} {
		e := endOf(c.exit)
		msg := ""
		if e.Error != nil {
			msg = *e.Error
		}
		if e.ExitCode != c.code || e.Exited != c.exited || e.Status != c.status || msg != c.errorMsg {
			t.Errorf("endOf(%+v) = %+v %q", c.exit, e, msg)
		}
	}
}

func TestSignal(t *testing.T) {
	for in, want := range map[string]signal{`"SIGNAL_SIGKILL"`: 9, `"SIGNAL_SIGTERM"`: 15, `9`: 9, `"15"`: 15, `"SIGNAL_UNSPECIFIED"`: 0} {
		var s signal
		if err := json.Unmarshal([]byte(in), &s); err != nil || s != want {
			t.Errorf("%s: %d %v", in, s, err)
		}
	}
	var s signal
	if err := json.Unmarshal([]byte(`"SIGHUP"`), &s); err == nil {
		t.Error("an unknown signal name was accepted")
	}
}

// envelope frames a message as Connect's streaming requests carry it.
func envelope(flags byte, msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

func TestConnectStreamCodec(t *testing.T) {
	r := httptest.NewRequest("POST", "/process.Process/Start", bytes.NewReader(envelope(0,
		[]byte(`{"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],"envs":{"A":"1"}},"stdin":false,"tag":"t","unknown":1}`))))
	r.Header.Set("Content-Type", "application/connect+json")
	var req startRequest
	if e := decodeStreamRequest(r, &req); e != nil {
		t.Fatal(e)
	}
	if req.Process.Cmd != "/bin/bash" || len(req.Process.Args) != 3 || req.Process.Envs["A"] != "1" || req.Stdin == nil || *req.Stdin || *req.Tag != "t" {
		t.Errorf("decoded %+v", req)
	}
	for name, body := range map[string][]byte{
		"cut":        envelope(0, []byte(`{"process":{}}`))[:8],
		"compressed": envelope(1, []byte(`{}`)),
		"two":        append(envelope(0, []byte(`{}`)), envelope(0, []byte(`{}`))...),
		"not json":   envelope(0, []byte(`{"process":`)),
		"wrong type": envelope(0, []byte(`{"process":{"cmd":1}}`)),
	} {
		r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/connect+json")
		if e := decodeStreamRequest(r, &req); e == nil || e.Code != codeInvalidArgument {
			t.Errorf("%s: %v", name, e)
		}
	}

	w := httptest.NewRecorder()
	st := newStream(w)
	_ = st.send(eventResponse{Event: processEvent{Start: &startEvent{Pid: 7}}})
	st.end(errorf(codeNotFound, "gone"))
	body := w.Body.Bytes()
	msg, rest, e := readEnvelope(body)
	if e != nil || string(msg) != `{"event":{"start":{"pid":7}}}` {
		t.Fatalf("first message %q %v", msg, e)
	}
	if rest[0] != endStreamFlag || !bytes.Contains(rest, []byte(`{"error":{"code":"not_found","message":"gone"}}`)) {
		t.Errorf("end of stream %q", rest)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/connect+json" {
		t.Errorf("content type %q", ct)
	}
}

func TestUnaryErrors(t *testing.T) {
	for code, status := range map[string]int{codeNotFound: 404, codeInvalidArgument: 400, codeUnauthenticated: 401,
		codeAlreadyExists: 409, codeUnimplemented: 501, codePermissionDenied: 403, codeUnavailable: 503} {
		w := httptest.NewRecorder()
		writeUnary(w, nil, errorf(code, "why"))
		var got rpcError
		if w.Code != status || json.Unmarshal(w.Body.Bytes(), &got) != nil || got.Code != code || got.Message != "why" {
			t.Errorf("%s: %d %s", code, w.Code, w.Body)
		}
	}
}

func TestEntryOf(t *testing.T) {
	e := entryOf(service.FileEntry{Name: "a.txt", Path: "/workspace/a.txt", Type: service.FileRegular, Size: 5, Mode: 0o644, Owner: "sandbox", Group: "sandbox"})
	b, _ := json.Marshal(e)
	for _, want := range []string{`"type":"FILE_TYPE_FILE"`, `"path":"/home/user/a.txt"`, `"size":"5"`, `"permissions":"-rw-r--r--"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	d := entryOf(service.FileEntry{Name: "workspace", Path: "/workspace", Type: service.FileDir, Mode: 0o755})
	if d.Type != "FILE_TYPE_DIRECTORY" || d.Name != "user" || d.Path != "/home/user" || d.Permissions != "drwxr-xr-x" {
		t.Errorf("the home directory: %+v", d)
	}
}

func TestRequestUser(t *testing.T) {
	for header, ok := range map[string]bool{"": true, "Basic dXNlcjo=": true, "Basic cm9vdDo=": false, "Basic !!": false, "Bearer x": true} {
		r := httptest.NewRequest("POST", "/", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		if e := requestUser(r); (e == nil) != ok {
			t.Errorf("%q: %v", header, e)
		}
	}
}

// FuzzDecodeRPC feeds arbitrary bodies to the decoders of what E2B's SDKs
// send (untrusted: any client can): no panic, and what decodes encodes
// again.
func FuzzDecodeRPC(f *testing.F) {
	f.Add(envelope(0, []byte(`{"process":{"cmd":"ls","args":["-l"],"envs":{"A":"b"},"cwd":"/tmp"},"stdin":true}`)), true)
	f.Add([]byte(`{"process":{"pid":3},"input":{"stdin":"aGk="}}`), false)
	f.Add([]byte(`{"process":{"tag":"x"},"signal":"SIGNAL_SIGKILL"}`), false)
	f.Add([]byte(`{"path":"/home/user","depth":2}`), false)
	f.Add([]byte(`{"code":"1+1","context_id":"python","env_vars":{"A":"1"}}`), false)
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		targets := []any{&startRequest{}, &connectRequest{}, &sendInputRequest{}, &sendSignalRequest{}, &closeStdinRequest{}, &pathRequest{}, &moveRequest{}}
		for _, v := range targets {
			r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
			var e *rpcError
			if stream {
				r.Header.Set("Content-Type", "application/connect+json")
				e = decodeStreamRequest(r, v)
			} else {
				r.Header.Set("Content-Type", "application/json")
				e = decodeUnary(r, v)
			}
			if e != nil {
				if e.Code == "" || e.httpStatus() < 400 {
					t.Fatalf("error %+v", e)
				}
				continue
			}
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("decoded %T does not encode: %v", v, err)
			}
		}
		var ex executeRequest
		_ = json.Unmarshal(body, &ex)
		_ = toSandbox(string(body))
		_ = normalizeLanguage(string(body))
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("Authorization", "Basic "+string(body))
		_ = requestUser(r)
		r.Header.Set("Connect-Timeout-Ms", string(body))
		if d, e := connectTimeout(r); e == nil && d < 0 {
			t.Fatalf("negative timeout %s", d)
		}
	})
}
