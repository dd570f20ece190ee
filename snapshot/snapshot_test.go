package snapshot_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/blob/blobtest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/snapshot"
)

func TestPutWalk(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs the S3 server")
	}
	b := blobtest.New(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	n, err := snapshot.Put(ctx, b, "s/1.tar", 1, func(w io.Writer) error {
		tw := tar.NewWriter(w)
		if err := snapshot.WriteFile(tw, "src/pkg/main.py", []byte("print(1)\n"), now, func(string) bool { return false }); err != nil {
			return err
		}
		// What a hostile sandbox could add is skipped by Walk.
		for _, h := range []*tar.Header{{Name: "../escape", Typeflag: tar.TypeReg}, {Name: "dev", Typeflag: tar.TypeChar}} {
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		}
		return tw.Close()
	})
	if err != nil || n == 0 {
		t.Fatalf("put: %d %v", n, err)
	}
	var got []string
	err = snapshot.Walk(ctx, b, "s/1.tar", func(e snapshot.Entry, r io.Reader) error {
		content, _ := io.ReadAll(r)
		got = append(got, e.Type+":"+e.Path+":"+string(content))
		return nil
	})
	if err != nil || strings.Join(got, "|") != "dir:src:|dir:src/pkg:|file:src/pkg/main.py:print(1)\n" {
		t.Fatalf("walk: %q %v", got, err)
	}
	if err := snapshot.Walk(ctx, b, "", func(snapshot.Entry, io.Reader) error { t.Fatal("entry of an empty workspace"); return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestPutTooLargeLeavesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs the S3 server")
	}
	b := blobtest.New(t)
	ctx := context.Background()
	_, err := snapshot.Put(ctx, b, "s/big.tar", 1, func(w io.Writer) error {
		_, err := io.Copy(w, io.LimitReader(zeros{}, snapshot.Limit(1)+10))
		return err
	})
	if !errors.Is(err, snapshot.ErrTooLarge) {
		t.Fatalf("err = %v", err)
	}
	if n, err := b.Count(ctx, "s/"); err != nil || n != 0 {
		t.Errorf("%d objects left in the store (%v)", n, err)
	}
	// A writer that fails leaves nothing either.
	_, err = snapshot.Put(ctx, b, "s/failed.tar", 1, func(w io.Writer) error {
		_, _ = w.Write(bytes.Repeat([]byte("x"), 1000))
		return errors.New("sandbox went away")
	})
	if err == nil || !strings.Contains(err.Error(), "sandbox went away") {
		t.Fatalf("err = %v", err)
	}
	if n, err := b.Count(ctx, "s/"); err != nil || n != 0 {
		t.Errorf("%d objects left in the store (%v)", n, err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// FuzzEntryOf: whatever a sandbox puts in a snapshot, readers only ever
// see paths inside the workspace, of a plain type.
func FuzzEntryOf(f *testing.F) {
	for _, n := range []string{"./a.txt", "../../etc/passwd", "/abs", "a/../../b", "dir/", ".", "a\x00b"} {
		f.Add(n, byte(tar.TypeReg))
	}
	f.Add("link", byte(tar.TypeSymlink))
	f.Add("dev", byte(tar.TypeChar))
	f.Fuzz(func(t *testing.T, name string, typ byte) {
		e, ok := snapshot.EntryOf(&tar.Header{Name: name, Typeflag: typ, Linkname: "/etc"})
		if !ok {
			return
		}
		if clean, err := jobs.CleanPath(e.Path); err != nil || clean != e.Path {
			t.Fatalf("entry %q gave path %q", name, e.Path)
		}
		if e.Type != "file" && e.Type != "dir" && e.Type != "symlink" {
			t.Fatalf("entry type %q", e.Type)
		}
	})
}
