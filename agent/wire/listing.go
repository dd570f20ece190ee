package wire

import (
	"bytes"
	"io/fs"
	"path/filepath"
	"strconv"
)

// Listing returns what the workspace holds, paths relative to dir, as
// records ending in NUL: "<size> <path>" for a regular file, "L <path>"
// for a symlink and "X <path>" for anything else that is not a directory
// (a fifo, a socket, a device): what a job asks to collect is either
// collected or said not to be (ParseListing).
func Listing(dir string) []byte {
	var out []byte
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return nil
		}
		switch {
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return nil
			}
			out = strconv.AppendInt(out, info.Size(), 10)
		case d.Type()&fs.ModeSymlink != 0:
			out = append(out, 'L')
		default:
			out = append(out, 'X')
		}
		out = append(out, ' ')
		out = append(out, rel...)
		out = append(out, 0)
		return nil
	})
	return out
}

// EntryKind is what a listed workspace entry is.
type EntryKind string

// Kinds of workspace entries in a listing.
const (
	EntryFile    EntryKind = "file"
	EntrySymlink EntryKind = "symlink"
	EntryOther   EntryKind = "other"
)

// ListedEntry is one entry of a workspace listing. Path is as the
// workspace holds it: untrusted, possibly not valid UTF-8.
type ListedEntry struct {
	Path string
	Kind EntryKind
	Size int64 // regular files
}

// ParseListing reads a listing the agent sent; records it cannot read are
// skipped.
func ParseListing(b []byte) []ListedEntry {
	var out []ListedEntry
	for _, rec := range bytes.Split(b, []byte{0}) {
		head, p, ok := bytes.Cut(rec, []byte{' '})
		if !ok || len(head) == 0 || len(p) == 0 {
			continue
		}
		e := ListedEntry{Path: string(p), Kind: EntryFile}
		switch string(head) {
		case "L":
			e.Kind = EntrySymlink
		case "X":
			e.Kind = EntryOther
		default:
			size, err := strconv.ParseInt(string(head), 10, 64)
			if err != nil || size < 0 {
				continue
			}
			e.Size = size
		}
		out = append(out, e)
	}
	return out
}
