package runner

import (
	"context"
	"testing"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestCompileOnce: a program is compiled once and its build used for
// every later call of the same program, the tenant's alone, in memory and
// through the object store; a refusal of the compiler is kept only for the
// very same inputs; and calls of one program at once compile it once.
func TestCompileOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 4)
	needCompilers(t, h)
	// A small program: a loaded machine compiles it well within the
	// harness's wait.
	code := "#include <cstdio>\nint main() { char s[64] = \"\"; if (scanf(\"%63s\", s) != 1) return 3; printf(\"hello %s\\n\", s); }\n"
	req := func(stdin string) jobs.Request {
		return jobs.Request{Language: "cpp", Code: code, Stdin: stdin, TimeoutMS: 20_000, CompileTimeoutMS: 60_000,
			Files: []jobs.File{{Path: "greeting.h", Content: "// unused\n"}}}
	}
	cached := func(j jobs.Job) bool { return j.Compile != nil && j.Compile.Cached }

	first := h.run(t, req("one\n"))
	if first.Status != jobs.StatusSucceeded || first.Stdout != "hello one\n" || cached(first) || first.Compile.DurationMS <= 0 {
		t.Fatalf("first: %s %q %+v", first.Status, first.Stdout, first.Compile)
	}
	j := h.run(t, req("two\n"))
	if j.Status != jobs.StatusSucceeded || j.Stdout != "hello two\n" || !cached(j) || j.Compile.DurationMS != 0 ||
		j.Compile.Status != jobs.CompileSucceeded || j.Compile.CPUTimeMS != nil || j.CompileOutput != first.CompileOutput {
		t.Fatalf("second: %s %q %+v", j.Status, j.Stdout, j.Compile)
	}

	// Another input file is another program; another tenant has its own.
	r := req("three\n")
	r.Files[0].Content = "// changed\n"
	if j := h.run(t, r); j.Status != jobs.StatusSucceeded || cached(j) {
		t.Errorf("changed file: %s %+v", j.Status, j.Compile)
	}
	other, _ := storetest.Tenant(t, h.st, "t2")
	id := h.submitFor(t, other, req("four\n"))
	if j := h.waitFor(t, id, func(j jobs.Job) bool { return j.Status.Terminal() }); j.Status != jobs.StatusSucceeded || cached(j) {
		t.Errorf("another tenant: %s %+v", j.Status, j.Compile)
	}

	// A runner that never compiled it (its memory emptied) finds the
	// build in the object store.
	h.r.builds.mu.Lock()
	for h.r.builds.lru.Len() > 0 {
		h.r.builds.evictLocked(func(*buildEntry) bool { return true })
	}
	h.r.builds.mu.Unlock()
	if n, err := h.blobs.Count(context.Background(), blob.BuildsPrefix(h.tenant)); err != nil || n != 2 {
		t.Errorf("builds in the object store: %d %v", n, err)
	}
	if j := h.run(t, req("five\n")); j.Status != jobs.StatusSucceeded || j.Stdout != "hello five\n" || !cached(j) {
		t.Errorf("from the object store: %s %q %+v", j.Status, j.Stdout, j.Compile)
	}
	if got := h.metric(t, "gantry_build_cache_lookups_total", map[string]string{"found": "object_store"}); got != 1 {
		t.Errorf("object store hits: %v", got)
	}

	// A compile error is kept for the same program in the same memory,
	// not for another limit.
	broken := jobs.Request{Language: "cpp", Code: brokenPrograms["cpp"][0], CompileTimeoutMS: 60_000}
	b1 := h.run(t, broken)
	b2 := h.run(t, broken)
	if b1.Status != jobs.StatusFailed || cached(b1) || !cached(b2) || b2.Error == nil || b2.Error.Code != jobs.ErrCodeCompileError ||
		b2.Compile.Status != jobs.CompileFailed || b2.Compile.ExitCode == nil || *b2.Compile.ExitCode != *b1.Compile.ExitCode ||
		b2.CompileOutput != b1.CompileOutput || b2.CompileOutput == "" {
		t.Errorf("broken: %+v %+v / %+v %q", b1.Compile, b1.Error, b2.Compile, b2.CompileOutput)
	}
	broken.Limits = &jobs.Limits{MemoryMB: 600}
	if b3 := h.run(t, broken); cached(b3) || b3.Error == nil || b3.Error.Code != jobs.ErrCodeCompileError {
		t.Errorf("broken in more memory: %+v %+v", b3.Compile, b3.Error)
	}

	// Four calls of a new program at once: one compile, three waited.
	fresh := req("")
	fresh.Code += "// a new one\n"
	var ids []string
	for range 4 {
		r := fresh
		r.Stdin = "x\n"
		ids = append(ids, h.submit(t, r))
	}
	compiled := 0
	for _, id := range ids {
		j := h.waitFor(t, id, func(j jobs.Job) bool { return j.Status.Terminal() })
		if j.Status != jobs.StatusSucceeded || j.Stdout != "hello x\n" {
			t.Errorf("at once: %s %q %+v", j.Status, j.Stdout, j.Error)
		}
		if !cached(j) {
			compiled++
		}
	}
	if compiled != 1 {
		t.Errorf("four at once compiled %d times", compiled)
	}
}
