// Package snapshot owns a session's workspace snapshots: tar archives in
// the object store, one per version. The runner writes one after each job
// from what the sandbox streams out; the ingress reads them for the files
// API and writes the next version for an edit. Both go through here, so a
// snapshot is bounded, cleaned up on failure and read the same way.
//
// Every entry of a snapshot came out of a sandbox and is untrusted: Walk
// yields only entries with a clean relative path and a plain type (file,
// directory, symlink), never following a link.
package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// Blobs is what snapshots need of the object store.
type Blobs interface {
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	PutStream(ctx context.Context, key string, r io.Reader, contentType string) (int64, error)
	Delete(ctx context.Context, key string) error
}

// Entry is an entry of a workspace snapshot.
type Entry struct {
	Path       string    `json:"path"`
	Type       string    `json:"type"` // file, dir or symlink
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
	Target     string    `json:"target,omitempty"` // of a symlink
}

// ErrTooLarge is a snapshot larger than its session's workspace could be.
var ErrTooLarge = errors.New("the workspace is larger than the session's disk")

// Limit bounds the snapshot of a workspace of diskMB: the tmpfs caps the
// files, and tar adds a header per entry and padding.
func Limit(diskMB int) int64 {
	lim := int64(diskMB) << 20
	return lim + lim/8 + 1<<20
}

// Put stores, at key, the tar that write produces, and returns its size. It
// fails with ErrTooLarge beyond Limit(diskMB). On any failure nothing is
// left at key.
func Put(ctx context.Context, b Blobs, key string, diskMB int, write func(w io.Writer) error) (int64, error) {
	pr, pw := io.Pipe()
	writeErr := make(chan error, 1)
	go func() {
		err := write(pw)
		pw.CloseWithError(err)
		writeErr <- err
	}()
	limit := Limit(diskMB)
	n, err := b.PutStream(ctx, key, io.LimitReader(pr, limit+1), "application/x-tar")
	pr.CloseWithError(io.ErrClosedPipe) // the writer stops if the upload did
	// A failure of write is the cause of the upload's (it ended the pipe).
	if werr := <-writeErr; werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		err = werr
	}
	if err == nil && n > limit {
		err = fmt.Errorf("%w (%d MB)", ErrTooLarge, diskMB)
	}
	if err != nil {
		_ = b.Delete(context.WithoutCancel(ctx), key)
		return 0, err
	}
	return n, nil
}

// Walk calls fn for each valid entry of the snapshot at key (none when key
// is empty: a workspace never saved). fn may read a file's content from r.
// An error of fn stops the walk and is returned.
func Walk(ctx context.Context, b Blobs, key string, fn func(e Entry, r io.Reader) error) error {
	if key == "" {
		return nil
	}
	rc, err := b.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read workspace snapshot: %w", err)
		}
		if e, ok := EntryOf(hdr); ok {
			if err := fn(e, tr); err != nil {
				return err
			}
		}
	}
}

// EntryOf describes a tar entry, or reports false for one that is not a
// clean relative path of a plain type.
func EntryOf(hdr *tar.Header) (Entry, bool) {
	name := strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "./"), "/")
	if name == "" || name == "." {
		return Entry{}, false
	}
	clean, err := jobs.CleanPath(name)
	if err != nil || clean != name {
		return Entry{}, false
	}
	e := Entry{Path: clean, Size: hdr.Size, ModifiedAt: hdr.ModTime.UTC()}
	switch hdr.Typeflag {
	case tar.TypeReg:
		e.Type = "file"
	case tar.TypeDir:
		e.Type, e.Size = "dir", 0
	case tar.TypeSymlink:
		e.Type, e.Size, e.Target = "symlink", 0, hdr.Linkname
	default:
		return Entry{}, false
	}
	return e, true
}

// WriteEntry writes e (with a file's content from r) to tw.
func WriteEntry(tw *tar.Writer, e Entry, r io.Reader) error {
	hdr := &tar.Header{Name: e.Path, ModTime: e.ModifiedAt, Mode: 0o644}
	switch e.Type {
	case "file":
		hdr.Typeflag, hdr.Size = tar.TypeReg, e.Size
	case "dir":
		hdr.Typeflag, hdr.Mode, hdr.Name = tar.TypeDir, 0o755, e.Path+"/"
	case "symlink":
		hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, e.Target, 0o777
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if e.Type == "file" {
		if _, err := io.CopyN(tw, r, e.Size); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes a regular file at p with content, preceded by an
// entry for each parent directory not in have, so that they list like
// directories a program made.
func WriteFile(tw *tar.Writer, p string, content []byte, modified time.Time, have func(dir string) bool) error {
	var parents []string
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if !have(dir) {
			parents = append([]string{dir}, parents...)
		}
	}
	for _, dir := range parents {
		if err := WriteEntry(tw, Entry{Path: dir, Type: "dir", ModifiedAt: modified}, nil); err != nil {
			return err
		}
	}
	return WriteEntry(tw, Entry{Path: p, Type: "file", Size: int64(len(content)), ModifiedAt: modified}, bytes.NewReader(content))
}
