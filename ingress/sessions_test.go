package ingress_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/localapi"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

func (h *harness) newSession(t *testing.T, key string) jobs.Session {
	t.Helper()
	r := h.do(t, key, "POST", "/v1/sessions", `{"language":"python","ttl_seconds":600,"metadata":{"k":"v"}}`)
	var s jobs.Session
	r.json(t, &s)
	if r.status != 201 || r.header.Get("Location") != "/v1/sessions/"+s.ID || s.Status != "active" || s.Metadata["k"] != "v" {
		t.Fatalf("create session: %d %s", r.status, r.body)
	}
	return s
}

// plantSnapshot makes a workspace snapshot by hand, as a sandbox could
// have produced it, with entries a hostile program might leave.
func (h *harness) plantSnapshot(t *testing.T, sessionID string, entries ...*tar.Header) {
	t.Helper()
	ctx := context.Background()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := tw.WriteHeader(e); err != nil {
			t.Fatal(err)
		}
		if e.Typeflag == tar.TypeReg {
			if _, err := tw.Write(bytes.Repeat([]byte("x"), int(e.Size))); err != nil {
				t.Fatal(err)
			}
		}
	}
	tw.Close()
	st, ok, err := h.st.AcquireSession(ctx, sessionID, "test", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	snap := store.Snapshot{Version: st.Version + 1, Key: blob.NewSessionKey(st.TenantID, sessionID, st.Version+1), Bytes: int64(buf.Len())}
	if err := h.blobs.Put(ctx, snap.Key, bytes.NewReader(buf.Bytes()), int64(buf.Len()), "application/x-tar"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.CommitWorkspace(ctx, sessionID, "test", snap); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.st.ReleaseSession(ctx, sessionID, "test", true); err != nil {
		t.Fatal(err)
	}
}

func TestSessionsAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.newSession(t, h.keyA)

	if r := h.do(t, h.keyA, "GET", "/v1/sessions/"+s.ID, ""); r.status != 200 {
		t.Errorf("get: %d", r.status)
	}
	var list struct{ Sessions []jobs.Session }
	h.do(t, h.keyA, "GET", "/v1/sessions", "").json(t, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != s.ID {
		t.Errorf("list: %+v", list)
	}
	for _, c := range []struct{ body, field string }{
		{`{"ttl_seconds":5}`, "ttl_seconds"},
		{`{"language":"cobol"}`, "language"},
		{`{"disk_mb":100000}`, "disk_mb"},
		{`{"color":"red"}`, "color"},
	} {
		if r := h.do(t, h.keyA, "POST", "/v1/sessions", c.body); r.status != 400 || !strings.Contains(string(r.body), `"field":"`+c.field+`"`) {
			t.Errorf("%s: %d %s", c.body, r.status, r.body)
		}
	}

	// Files.
	if r := h.do(t, h.keyA, "PUT", "/v1/sessions/"+s.ID+"/files/src/main.py", "print(42)\n"); r.status != 200 || !strings.Contains(string(r.body), `"path":"src/main.py"`) {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "PUT", "/v1/sessions/"+s.ID+"/files/data.bin", "\x00\x01\x02"); r.status != 200 {
		t.Fatalf("put binary: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/sessions/"+s.ID+"/files/src/main.py", ""); r.status != 200 || string(r.body) != "print(42)\n" {
		t.Errorf("get: %d %q", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/sessions/"+s.ID+"/files/data.bin", ""); string(r.body) != "\x00\x01\x02" {
		t.Errorf("get binary: %q", r.body)
	}
	var files struct{ Files []struct{ Path, Type string } }
	h.do(t, h.keyA, "GET", "/v1/sessions/"+s.ID+"/files", "").json(t, &files)
	var paths []string
	for _, f := range files.Files {
		paths = append(paths, f.Path+":"+f.Type)
	}
	if strings.Join(paths, " ") != "data.bin:file src:dir src/main.py:file" {
		t.Errorf("listing: %v", paths)
	}
	h.do(t, h.keyA, "GET", "/v1/sessions/"+s.ID+"/files?path=src", "").json(t, &files)
	if len(files.Files) != 1 || files.Files[0].Path != "src/main.py" {
		t.Errorf("listing src: %+v", files)
	}
	if r := h.do(t, h.keyA, "DELETE", "/v1/sessions/"+s.ID+"/files/src", ""); r.status != 204 {
		t.Errorf("delete dir: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/sessions/"+s.ID+"/files/src/main.py", ""); r.status != 404 {
		t.Errorf("deleted file: %d", r.status)
	}
	got := h.do(t, h.keyA, "GET", "/v1/sessions/"+s.ID, "")
	var sess jobs.Session
	got.json(t, &sess)
	if sess.Version != 3 {
		t.Errorf("version after three edits: %d", sess.Version)
	}
	// Only the current snapshot is kept.
	if n, _ := h.blobs.Count(context.Background(), blob.SessionPrefix(h.tenantA, s.ID)); n != 1 {
		t.Errorf("%d snapshot objects", n)
	}

	// Delete reclaims the row and every object; later calls get 404.
	if r := h.do(t, h.keyB, "DELETE", "/v1/sessions/"+s.ID, ""); r.status != 404 {
		t.Errorf("tenant b deleted a's session: %d", r.status)
	}
	if r := h.do(t, h.keyA, "DELETE", "/v1/sessions/"+s.ID, ""); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/sessions/" + s.ID}, {"DELETE", "/v1/sessions/" + s.ID},
		{"GET", "/v1/sessions/" + s.ID + "/files"}, {"PUT", "/v1/sessions/" + s.ID + "/files/x"},
	} {
		if r := h.do(t, h.keyA, c.method, c.path, "x"); r.status != 404 {
			t.Errorf("%s %s after delete: %d", c.method, c.path, r.status)
		}
	}
	if r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"x","session_id":"`+s.ID+`"}`); r.status != 404 || !strings.Contains(string(r.body), `"field":"session_id"`) {
		t.Errorf("job into a deleted session: %d %s", r.status, r.body)
	}
	if n, _ := h.blobs.Count(context.Background(), blob.SessionPrefix(h.tenantA, s.ID)); n != 0 {
		t.Errorf("%d objects left after delete", n)
	}
}

func TestSessionFileAttacks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.newSession(t, h.keyA)
	h.plantSnapshot(t, s.ID,
		&tar.Header{Name: "./ok.txt", Typeflag: tar.TypeReg, Size: 2, Mode: 0o644},
		&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
		&tar.Header{Name: "ldir", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		&tar.Header{Name: "../../escape.txt", Typeflag: tar.TypeReg, Size: 3, Mode: 0o644},
		&tar.Header{Name: "/abs.txt", Typeflag: tar.TypeReg, Size: 3, Mode: 0o644},
		&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
	)
	base := "/v1/sessions/" + s.ID + "/files"
	var files struct{ Files []struct{ Path, Type string } }
	h.do(t, h.keyA, "GET", base, "").json(t, &files)
	var paths []string
	for _, f := range files.Files {
		paths = append(paths, f.Path)
	}
	if strings.Join(paths, " ") != "ldir link ok.txt" {
		t.Errorf("listing shows %v; entries outside the workspace must be dropped", paths)
	}
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", base + "/link", 400},                       // a symlink is not followed
		{"GET", base + "/ldir/passwd", 404},                // nor is a symlinked directory
		{"PUT", base + "/ldir/x", 409},                     // nothing is written through a symlink
		{"PUT", base + "/link", 409},                       // or over one
		{"PUT", base + "/..%2F..%2Fx", 400},                // traversal
		{"PUT", base + "/%2Fetc%2Fpasswd", 400},            // absolute
		{"PUT", base + "/a%00b", 400},                      // NUL
		{"GET", base + "/..%2Fok.txt", 400},                // traversal on read
		{"GET", base + "?path=..%2F..", 400},               // traversal on list
		{"PUT", base + "/big", 413},                        // over the size cap
		{"GET", "/v1/sessions/ses_nope/files/ok.txt", 404}, // garbage id
	} {
		body := "x"
		if strings.HasSuffix(c.path, "/big") {
			body = strings.Repeat("x", 65<<10)
		}
		if r := h.do(t, h.keyA, c.method, c.path, body); r.status != c.status {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	// Another tenant can neither read nor write the session.
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		if r := h.do(t, h.keyB, m, base+"/ok.txt", "y"); r.status != 404 {
			t.Errorf("tenant b %s: %d", m, r.status)
		}
	}
	if r := h.do(t, h.keyA, "GET", base+"/ok.txt", ""); string(r.body) != "xx" {
		t.Errorf("ok.txt changed: %q", r.body)
	}
	// An expired session takes no writes.
	if err := storetest.Exec(h.st, `UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = $1`, s.ID); err != nil {
		t.Fatal(err)
	}
	if r := h.do(t, h.keyA, "PUT", base+"/late.txt", "x"); r.status != 404 {
		t.Errorf("write to an expired session: %d", r.status)
	}
}

// TestFileReadInProcessCutShort: the agent and the console read a session
// file in-process (localapi); DoLimited keeps the start of a large file and
// stops the download there, and the handler's abort of the answer it could
// not finish goes no further.
func TestFileReadInProcessCutShort(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.MaxBodyBytes = 16 << 20 })
	s := h.newSession(t, h.keyA)
	content := strings.Repeat("0123456789abcdef", 1<<19) // 8 MiB
	if r := h.do(t, h.keyA, "PUT", "/v1/sessions/"+s.ID+"/files/big.txt", content); r.status != 200 {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	api := localapi.New(h.handler, h.keyA)
	resp, err := api.DoLimited(context.Background(), "GET", "/v1/sessions/"+s.ID+"/files/big.txt", nil, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || !resp.Cut || string(resp.Body) != content[:1000] || resp.Header.Get("Content-Length") != fmt.Sprint(len(content)) {
		t.Fatalf("%d cut=%v %d bytes, Content-Length %s", resp.Status, resp.Cut, len(resp.Body), resp.Header.Get("Content-Length"))
	}
	// The whole file still reads in full.
	whole, err := api.Do(context.Background(), "GET", "/v1/sessions/"+s.ID+"/files/big.txt", nil, "")
	if err != nil || whole.Cut || string(whole.Body) != content {
		t.Fatalf("whole read: %v, cut=%v, %d bytes", err, whole.Cut, len(whole.Body))
	}
}

// TestSessionDiskFitsMemory: a session's workspace is held in memory and
// counts against its jobs' memory, so a disk_mb no job could hold is
// refused, a job that does not say how much memory it needs gets at least
// the session's disk_mb, and one that asks for less is refused naming the
// field.
func TestSessionDiskFitsMemory(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.Policy.MaxLimits.MemoryMB = 2048 })
	if r := h.do(t, h.keyA, "POST", "/v1/sessions", `{"disk_mb":4096}`); r.status != 400 || !strings.Contains(string(r.body), `"field":"disk_mb"`) {
		t.Errorf("disk_mb over the memory maximum: %d %s", r.status, r.body)
	}
	r := h.do(t, h.keyA, "POST", "/v1/sessions", `{"disk_mb":1024}`)
	var s jobs.Session
	r.json(t, &s)
	if r.status != 201 {
		t.Fatalf("session: %d %s", r.status, r.body)
	}
	r = h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"x","session_id":"`+s.ID+`","limits":{"memory_mb":512}}`)
	if r.status != 400 || !strings.Contains(string(r.body), `"field":"limits.memory_mb"`) || !strings.Contains(string(r.body), "disk_mb (1024)") {
		t.Errorf("a job with less memory than the workspace: %d %s", r.status, r.body)
	}
	r = h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"x","session_id":"`+s.ID+`"}`)
	if r.status != 202 {
		t.Fatalf("a job without memory_mb: %d %s", r.status, r.body)
	}
	id := r.job(t).ID
	r = h.do(t, h.keyA, "GET", "/v1/jobs/"+id+"?include=spec", "")
	if !strings.Contains(string(r.body), `"memory_mb":1024`) {
		t.Errorf("the job's memory is not raised to the workspace's size: %s", r.body)
	}
}

// TestKernelNeedsAStatefulSession: a job's kernel lives in a stateful
// session's live sandbox: in a session that is not stateful it is refused
// naming the field; in a stateful one it is taken and kept in the spec.
func TestKernelNeedsAStatefulSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, stateful := range []bool{false, true} {
		r := h.do(t, h.keyA, "POST", "/v1/sessions", fmt.Sprintf(`{"stateful":%v}`, stateful))
		var s jobs.Session
		r.json(t, &s)
		if r.status != 201 {
			t.Fatalf("session: %d %s", r.status, r.body)
		}
		r = h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"js","code":"1","kernel":"k1","session_id":"`+s.ID+`"}`)
		switch {
		case !stateful && (r.status != 400 || !strings.Contains(string(r.body), `"field":"kernel"`)):
			t.Errorf("a kernel in a session that is not stateful: %d %s", r.status, r.body)
		case stateful && r.status != 202:
			t.Errorf("a kernel in a stateful session: %d %s", r.status, r.body)
		case stateful:
			r = h.do(t, h.keyA, "GET", "/v1/jobs/"+r.job(t).ID+"?include=spec", "")
			if !strings.Contains(string(r.body), `"kernel":"k1"`) {
				t.Errorf("the spec has no kernel: %s", r.body)
			}
			// A cell reads no stdin: refused, not accepted and lost.
			r = h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"js","code":"1","stdin":"x","session_id":"`+s.ID+`"}`)
			if r.status != 400 || !strings.Contains(string(r.body), `"field":"stdin"`) {
				t.Errorf("stdin for a cell: %d %s", r.status, r.body)
			}
		}
	}
}
