package runner

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// oneObject is the part of Blobs a checkpoint's download uses: Get of one
// object.
type oneObject struct {
	Blobs
	data []byte
}

func (o oneObject) Get(context.Context, string) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(o.data)), nil
}

// TestCheckpointObject: a checkpoint's directory packed as an object reads
// back the same, and so does one stored as zstd by an earlier release.
func TestCheckpointObject(t *testing.T) {
	src := t.TempDir()
	files := map[string][]byte{"checkpoint.img": bytes.Repeat([]byte("state "), 50_000), "pages.img": make([]byte, 3<<20), "pages_meta.img": nil}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range files["pages.img"] {
		files["pages.img"][i] = byte(rng.UintN(256))
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(src, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var packed bytes.Buffer
	if err := packCheckpoint(&packed, src); err != nil {
		t.Fatal(err)
	}
	// As an earlier release stored it: the same tar, as zstd.
	var legacy bytes.Buffer
	zw, _ := zstd.NewWriter(&legacy)
	tw := tar.NewWriter(zw)
	for _, name := range []string{"checkpoint.img", "pages.img", "pages_meta.img"} {
		if err := addCheckpointFile(tw, src, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	for kind, object := range map[string][]byte{"s2": packed.Bytes(), "zstd": legacy.Bytes()} {
		dir := t.TempDir()
		if err := fetchCheckpoint(context.Background(), oneObject{data: object}, "k", dir); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		for name, want := range files {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: %s read back %d bytes (%v), want %d", kind, name, len(got), err, len(want))
			}
		}
	}
	if n := packed.Len(); n > 3<<20+100_000 {
		t.Errorf("packed into %d bytes: the repeated file is not compressed", n)
	}
}
