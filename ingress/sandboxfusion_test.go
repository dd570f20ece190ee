package ingress_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

// countingBlobs is the object store, counting the reads of each key.
type countingBlobs struct {
	*blob.Store
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingBlobs) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	c.mu.Lock()
	c.reads[key]++
	c.mu.Unlock()
	return c.Store.Get(ctx, key)
}

func (c *countingBlobs) readsOf(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[key]
}

// runCode calls SandboxFusion's /run_code while playing the runner: the
// job finishes having written files (path → content) as its artifacts.
func runCode(t *testing.T, h *harness, body string, files map[string][]byte) response {
	t.Helper()
	done := make(chan response, 1)
	go func() {
		r, err := h.request(nil, h.keyA, "POST", "/compat/sandboxfusion/run_code", body)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	var list struct{ Jobs []jobs.Job }
	if !eventually.Within(10*time.Second, func() bool {
		h.do(t, h.keyA, "GET", "/v1/jobs?status=queued&metadata.compat=sandboxfusion", "").json(t, &list)
		return len(list.Jobs) == 1
	}) {
		t.Fatal("the job is not queued")
	}
	id := list.Jobs[0].ID
	res := succeeded("")
	for path, content := range files {
		if err := h.blobs.Put(context.Background(), blob.ArtifactKey(h.tenantA, id, path), bytes.NewReader(content), int64(len(content)), "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(content)
		res.Artifacts = append(res.Artifacts, jobs.Artifact{Path: path, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), ContentType: "application/octet-stream"})
	}
	h.finish(t, id, res)
	r := <-done
	if r.header.Get("X-Gantry-Job-Id") != id {
		t.Errorf("answered for job %q, want %s", r.header.Get("X-Gantry-Job-Id"), id)
	}
	return r
}

// TestSandboxFusionFetchFiles: fetch_files are read once per distinct
// file, however many names they are given by (big.bin, ./big.bin,
// .//big.bin, a/../big.bin), and answered under every name the request
// gave; a name that is not a clean relative path is left out, as
// SandboxFusion leaves out what is not a file. A call that asks for more
// than 16 MiB — a file counted once per name, as the answer holds it once
// per name — is answered 413 in FastAPI's shape, without reading anything.
func TestSandboxFusionFetchFiles(t *testing.T) {
	t.Parallel()
	var counter *countingBlobs
	h := newHarness(t, func(h *harness, _ *ingress.Config) {
		counter = &countingBlobs{Store: h.blobs, reads: map[string]int{}}
		h.serviceBlobs = counter
	})
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	names := []string{"data.bin", "./data.bin", ".//data.bin", "sub/../data.bin", "data.bin", "missing.txt", "/etc/passwd", "../data.bin"}
	req, _ := json.Marshal(map[string]any{"code": "print(1)", "language": "python", "fetch_files": names})
	r := runCode(t, h, string(req), map[string][]byte{"data.bin": data})
	var out struct {
		Status string
		Files  map[string]string
	}
	if err := json.Unmarshal(r.body, &out); r.status != 200 || err != nil || out.Status != "Success" {
		t.Fatalf("run_code: %d %.300s", r.status, r.body)
	}
	want := base64.StdEncoding.EncodeToString(data)
	for _, name := range []string{"data.bin", "./data.bin", ".//data.bin", "sub/../data.bin"} {
		if out.Files[name] != want {
			t.Errorf("files[%q]: %d base64 bytes, want the file's %d", name, len(out.Files[name]), len(want))
		}
	}
	if len(out.Files) != 4 {
		t.Errorf("answered %d files, want the 4 names of data.bin", len(out.Files))
	}
	id := r.header.Get("X-Gantry-Job-Id")
	if n := counter.readsOf(blob.ArtifactKey(h.tenantA, id, "data.bin")); n != 1 {
		t.Errorf("data.bin, named 4 ways, was read %d times from the object store", n)
	}

	// 4 MiB named 8 ways: 32 MiB to answer, past the 16 a call may fetch.
	big := bytes.Repeat([]byte{7}, 4<<20)
	var aliases []string
	for i := range 8 {
		aliases = append(aliases, strings.Repeat("./", i)+"big.bin")
	}
	req, _ = json.Marshal(map[string]any{"code": "print(1)", "language": "python", "fetch_files": aliases})
	r = runCode(t, h, string(req), map[string][]byte{"big.bin": big})
	id = r.header.Get("X-Gantry-Job-Id")
	var refusal struct{ Detail string }
	if err := json.Unmarshal(r.body, &refusal); r.status != 413 || err != nil || !strings.Contains(refusal.Detail, "fetch_files") ||
		!strings.Contains(refusal.Detail, id) || !strings.Contains(refusal.Detail, "16777216") {
		t.Errorf("a fetch past the cap: %d %.500s", r.status, r.body)
	}
	if n := counter.readsOf(blob.ArtifactKey(h.tenantA, id, "big.bin")); n != 0 {
		t.Errorf("big.bin was read %d times for a refused answer", n)
	}
}
