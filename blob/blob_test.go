package blob_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/blob/blobtest"
)

// TestPutStream stores objects of unknown size, below, at and above one
// part, and reads back exactly what went in.
func TestPutStream(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs the S3 server")
	}
	st := blobtest.New(t)
	ctx := context.Background()
	for _, size := range []int{0, 5, 8 << 20, 8<<20 + 1, 20 << 20} {
		want := make([]byte, size)
		_, _ = rand.Read(want)
		// A reader that is neither a Seeker nor a ReaderAt, as a tar pipe is.
		n, err := st.PutStream(ctx, "stream/obj", io.MultiReader(bytes.NewReader(want)), "application/octet-stream")
		if err != nil || n != int64(size) {
			t.Fatalf("PutStream of %d bytes: n=%d err=%v", size, n, err)
		}
		rc, err := st.Get(ctx, "stream/obj")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("object of %d bytes read back as %d bytes (err %v)", size, len(got), err)
		}
	}
}

// TestPutStreamSmallAllocates checks that a small upload of unknown size
// does not reserve a large part buffer (minio-go's default for unknown
// sizes is 576 MiB per upload). Not parallel: it counts the process's
// allocations.
func TestPutStreamSmallAllocates(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the S3 server")
	}
	st := blobtest.New(t)
	ctx := context.Background()
	if _, err := st.PutStream(ctx, "warm", io.MultiReader(bytes.NewReader([]byte("x"))), "text/plain"); err != nil {
		t.Fatal(err) // first call: connection set-up, bucket location
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 10; i++ {
		if _, err := st.PutStream(ctx, "small", io.MultiReader(bytes.NewReader([]byte("hello"))), "text/plain"); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	perPut := (after.TotalAlloc - before.TotalAlloc) / 10
	t.Logf("%d bytes allocated per 5-byte PutStream", perPut)
	if perPut > 1<<20 {
		t.Errorf("a 5-byte PutStream allocated %d bytes; want under 1 MiB", perPut)
	}
}

// TestUnavailable: the store's 5xx answers (507 on a full disk, 503)
// count as unavailable however deeply they are wrapped; its refusals and
// other answers do not.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	wrap := func(e error) error { return fmt.Errorf("upload artifact x: %w", fmt.Errorf("put k: %w", e)) }
	for _, c := range []struct {
		err  error
		want bool
	}{
		{wrap(minio.ErrorResponse{StatusCode: 507, Code: "InsufficientStorage"}), true},
		{wrap(minio.ErrorResponse{StatusCode: 503, Code: "SlowDown"}), true},
		{wrap(minio.ErrorResponse{StatusCode: 404, Code: "NoSuchKey"}), false},
		{wrap(&net.OpError{Op: "dial", Err: errors.New("connection refused")}), true},
		{wrap(errors.New("tar: invalid header")), false},
		{nil, false},
	} {
		if got := blob.Unavailable(c.err); got != c.want {
			t.Errorf("Unavailable(%v) = %v", c.err, got)
		}
	}
}

// TestGetMissing: reading a key with no object fails with ErrNotFound,
// and deleting one is no error.
func TestGetMissing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs the S3 server")
	}
	st := blobtest.New(t)
	ctx := context.Background()
	rc, err := st.Get(ctx, "no/such/object")
	if err == nil {
		_, err = io.ReadAll(rc)
		rc.Close()
	}
	if !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("read of a missing object: %v, want ErrNotFound", err)
	}
	if err := st.Delete(ctx, "no/such/object"); err != nil {
		t.Errorf("delete of a missing object: %v", err)
	}
}

// TestPutLeavesTheReader: once Put returned, it reads nothing more of a
// streamed reader (net/http may read a body past its length after the
// response came, to check there is no more): the next file of a tar
// stream stays the caller's.
func TestPutLeavesTheReader(t *testing.T) {
	st := blobtest.New(t)
	ctx := context.Background()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := map[string]string{"a": strings.Repeat("a", 100<<10), "b": strings.Repeat("b", 100<<10), "c": "c"}
	for _, name := range []string{"a", "b", "c"} {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name]))})
		_, _ = tw.Write([]byte(files[name]))
	}
	_ = tw.Close()
	for range 200 {
		tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Put(ctx, hdr.Name, tr, hdr.Size, "text/plain"); err != nil {
				t.Fatal(err)
			}
		}
		for name, want := range files {
			rc, err := st.Get(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || string(got) != want {
				t.Fatalf("%s: %d bytes %v, want %d", name, len(got), err, len(want))
			}
		}
	}
}
