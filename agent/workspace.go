package agent

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// noFollow makes an open fail on a symlink instead of following it.
const noFollow = syscall.O_NOFOLLOW

// The workspace holds what programs wrote, so the agent handles it as
// hostile: every access goes through an os.Root (no symlink or ".." leads
// out of it), walks never follow symlinks, and only regular files are
// read. No program runs while the agent reads it (a run's sandbox is dead
// by then), so nothing changes under its feet.

// writeTar writes the given workspace-relative regular files to w as a
// tar (files that are gone or not regular are left out), or with all the
// whole workspace: directories, regular files and symlinks, named "./…".
func writeTar(dir string, paths []string, all bool, w io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	if all {
		err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable: left out
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil || rel == "." {
				return nil
			}
			return addEntry(tw, root, rel, "./"+rel)
		})
	} else {
		for _, p := range paths {
			if err = addEntry(tw, root, p, p); err != nil {
				break
			}
		}
	}
	if err != nil {
		return err
	}
	return tw.Close()
}

// addEntry adds one workspace entry; only errors of the writer are
// returned, an entry that cannot be read is left out.
func addEntry(tw *tar.Writer, root *os.Root, rel, name string) error {
	info, err := root.Lstat(rel)
	if err != nil {
		return nil
	}
	hdr := &tar.Header{Name: name, ModTime: info.ModTime(), Mode: int64(info.Mode().Perm()), Format: tar.FormatPAX}
	switch {
	case info.Mode().IsRegular():
		f, err := root.OpenFile(rel, os.O_RDONLY|noFollow, 0)
		if err != nil {
			return nil
		}
		defer f.Close()
		hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		// A file that shrank since Lstat is padded, one that grew is cut:
		// the header's size is what the reader will take.
		n, err := io.Copy(tw, io.LimitReader(f, hdr.Size))
		if err != nil {
			return err
		}
		if n < hdr.Size {
			_, err = io.CopyN(tw, zeros{}, hdr.Size-n)
		}
		return err
	case info.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
		return tw.WriteHeader(hdr)
	case info.Mode()&fs.ModeSymlink != 0:
		target, err := root.Readlink(rel)
		if err != nil {
			return nil
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		return tw.WriteHeader(hdr)
	}
	return nil // fifos, sockets, devices: not workspace content
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// extractTar unpacks a tar (a session snapshot) into dir: directories,
// regular files and symlinks, never through a symlink or out of dir.
// Names may carry a "./" prefix. Entries that cannot be placed (other
// types, names that climb out, paths through a symlink) are skipped; a
// full workspace, more than limit bytes of file content or a broken
// stream fail the whole restore (a tar can describe sparse files far
// larger than the stream itself).
func extractTar(dir string, r io.Reader, limit int64) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read snapshot: %w", err)
		}
		name, ok := cleanRel(hdr.Name)
		if !ok {
			continue
		}
		if hdr.Typeflag == tar.TypeReg {
			if limit -= hdr.Size; limit < 0 {
				return errors.New("the snapshot holds more than the workspace can")
			}
		}
		if err := extractEntry(root, tr, hdr, name); err != nil {
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("restore %s: %w", name, err)
			}
		}
	}
}

func extractEntry(root *os.Root, r io.Reader, hdr *tar.Header, name string) error {
	mode := fs.FileMode(hdr.Mode).Perm() | 0o200 // the owner can always clean up
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, mode|0o700); err != nil {
			return err
		}
	case tar.TypeReg:
		if err := mkParents(root, name); err != nil {
			return err
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|noFollow, mode)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		_ = root.Chmod(name, mode)
	case tar.TypeSymlink:
		if err := mkParents(root, name); err != nil {
			return err
		}
		_ = root.Remove(name)
		return root.Symlink(hdr.Linkname, name) // no Chtimes: it would follow the link
	default:
		return nil
	}
	_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
	return nil
}

func mkParents(root *os.Root, name string) error {
	if dir := path.Dir(name); dir != "." {
		return root.MkdirAll(dir, 0o755)
	}
	return nil
}

// cleanRel returns a tar entry name as a clean relative path, or false for
// the root itself, absolute names and names that climb out.
func cleanRel(name string) (string, bool) {
	name = strings.TrimPrefix(name, "./")
	name = strings.TrimSuffix(name, "/")
	if name == "" || name == "." || strings.HasPrefix(name, "/") || strings.ContainsRune(name, 0) {
		return "", false
	}
	clean := path.Clean(name)
	if clean != name || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", false
	}
	return clean, true
}

// emptyDir removes everything inside dir and checks that nothing is left.
// A program may leave directories it made unreadable or unwritable; the
// agent runs as the same user and gives itself access back first.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			// WalkDir calls the function on a directory before it reads
			// it, so each directory is opened up before it is entered.
			_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
				if d != nil && d.IsDir() {
					_ = os.Chmod(q, 0o700)
				}
				return nil
			})
			if err := os.RemoveAll(p); err != nil {
				return err
			}
		}
	}
	if entries, err = os.ReadDir(dir); err != nil {
		return err
	} else if len(entries) > 0 {
		return errors.New(dir + " is not empty after cleaning")
	}
	return nil
}

// placeFile writes a file of the request under dir (a Workspace path's
// rest) through root, creating parents.
func placeFile(root *os.Root, rel string, data []byte) error {
	if err := mkParents(root, rel); err != nil {
		return err
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|noFollow, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
