package skills

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"
)

// Archive formats a skill folder travels in.
const (
	FormatZip = "zip"
	FormatTar = "tar"
)

// MaxArchiveBytes bounds an uploaded archive: the skill's limits, plus
// room for headers and directory entries.
const MaxArchiveBytes = MaxTotalBytes + MaxSkillMD + 1<<20

// maxEntries bounds how many entries (files, directories, anything) an
// archive may list before it is refused, whatever they are.
const maxEntries = 4 * MaxFiles

// entry is one regular file read from an archive, at its path in the
// archive.
type entry struct {
	name    string
	content []byte
}

// ReadArchive reads a skill folder from a zip or tar archive (a tar may be
// gzipped). The archive holds SKILL.md at its root, or one folder holding
// it, named as the skill; the other regular files under that root become
// the skill's files. Symbolic links, devices and paths that leave the
// folder are refused; macOS's __MACOSX/ and .DS_Store litter is skipped.
// Sizes are checked against the bytes actually read, not the headers.
func ReadArchive(format string, data []byte) (Skill, error) {
	if len(data) > MaxArchiveBytes {
		return Skill{}, errf("archive", "is %d bytes; at most %d", len(data), MaxArchiveBytes)
	}
	var entries []entry
	var err error
	switch format {
	case FormatZip:
		entries, err = readZip(data)
	case FormatTar:
		entries, err = readTar(data)
	default:
		return Skill{}, errf("archive", "format must be zip or tar, not %q", format)
	}
	if err != nil {
		return Skill{}, err
	}
	return fromEntries(entries)
}

// budget counts what an archive has given so far against the caps.
type budget struct{ entries, bytes int }

func (b *budget) entry() error {
	b.entries++
	if b.entries > maxEntries {
		return errf("archive", "has more than %d entries", maxEntries)
	}
	return nil
}

// read reads one file's content, refusing it once the file or the whole
// archive passes its cap.
func (b *budget) read(name string, r io.Reader) ([]byte, error) {
	limit := min(MaxFileBytes, MaxTotalBytes+MaxSkillMD-b.bytes)
	content, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if errors.Is(err, errArchiveTooLarge) {
		return nil, errf("archive", "unpacks to more than %d bytes", MaxArchiveBytes)
	}
	if err != nil {
		return nil, errf("archive", "%s cannot be read: %v", truncate(name, 200), err)
	}
	if len(content) > limit {
		if len(content) > MaxFileBytes {
			return nil, errf("archive", "%s is larger than %d bytes", truncate(name, 200), MaxFileBytes)
		}
		return nil, errf("archive", "holds more than %d bytes in all", MaxTotalBytes+MaxSkillMD)
	}
	b.bytes += len(content)
	return content, nil
}

func readZip(data []byte) ([]entry, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, errf("archive", "is not a valid zip file: %v", err)
	}
	var b budget
	var out []entry
	for _, f := range zr.File {
		if err := b.entry(); err != nil {
			return nil, err
		}
		mode := f.Mode()
		switch {
		case junk(f.Name):
			continue
		case mode.IsDir() || strings.HasSuffix(f.Name, "/"):
			continue
		case mode&fs.ModeSymlink != 0:
			return nil, errf("archive", "%s is a symbolic link; a skill holds regular files only", truncate(f.Name, 200))
		case !mode.IsRegular():
			return nil, errf("archive", "%s is not a regular file", truncate(f.Name, 200))
		}
		rc, err := f.Open()
		if err != nil {
			return nil, errf("archive", "%s cannot be read: %v", truncate(f.Name, 200), err)
		}
		content, err := b.read(f.Name, rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, entry{f.Name, content})
	}
	return out, nil
}

func readTar(data []byte) ([]entry, error) {
	var r io.Reader = bytes.NewReader(data)
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, errf("archive", "is not a valid gzip stream: %v", err)
		}
		defer gz.Close()
		// Skipped entries are decompressed too: cap the whole stream.
		r = &capReader{r: gz, left: MaxArchiveBytes}
	}
	tr := tar.NewReader(r)
	var b budget
	var out []entry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, errArchiveTooLarge) {
			return nil, errf("archive", "unpacks to more than %d bytes", MaxArchiveBytes)
		}
		if err != nil {
			return nil, errf("archive", "is not a valid tar file: %v", err)
		}
		if err := b.entry(); err != nil {
			return nil, err
		}
		switch {
		case junk(hdr.Name):
			continue
		case hdr.Typeflag == tar.TypeDir:
			continue
		case hdr.Typeflag == tar.TypeXGlobalHeader:
			continue
		case hdr.Typeflag == tar.TypeSymlink || hdr.Typeflag == tar.TypeLink:
			return nil, errf("archive", "%s is a link; a skill holds regular files only", truncate(hdr.Name, 200))
		case hdr.Typeflag != tar.TypeReg:
			return nil, errf("archive", "%s is not a regular file", truncate(hdr.Name, 200))
		}
		content, err := b.read(hdr.Name, tr)
		if err != nil {
			return nil, err
		}
		out = append(out, entry{hdr.Name, content})
	}
	return out, nil
}

var errArchiveTooLarge = errors.New("archive too large")

// capReader fails once more than left bytes were read through it.
type capReader struct {
	r    io.Reader
	left int
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errArchiveTooLarge
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= n
	return n, err
}

// junk is what archivers add beside a folder: macOS resource forks and
// Finder state.
func junk(name string) bool {
	name = strings.TrimPrefix(name, "./")
	return strings.HasPrefix(name, "__MACOSX/") || path.Base(name) == ".DS_Store"
}

// fromEntries finds SKILL.md (at the root or in one top folder) and makes
// the skill.
func fromEntries(entries []entry) (Skill, error) {
	names := make([]string, len(entries))
	for i, e := range entries {
		n := strings.TrimPrefix(e.name, "./")
		if n == "" || strings.HasPrefix(n, "/") || strings.ContainsAny(n, "\\\x00") {
			return Skill{}, errf("archive", "%q is not a relative path inside the skill's folder", truncate(e.name, 200))
		}
		for _, seg := range strings.Split(n, "/") {
			if seg == ".." {
				return Skill{}, errf("archive", "%q leaves the skill's folder", truncate(e.name, 200))
			}
		}
		names[i] = path.Clean(n)
	}
	prefix, folder := "", ""
	found := false
	for _, n := range names {
		if n == SkillFileName {
			found = true
			break
		}
	}
	if !found {
		for _, n := range names {
			if dir, file := path.Split(n); file == SkillFileName && strings.Count(dir, "/") == 1 {
				if found {
					return Skill{}, errf("archive", "holds more than one SKILL.md folder; upload one skill at a time")
				}
				found, prefix, folder = true, dir, strings.TrimSuffix(dir, "/")
			}
		}
	}
	if !found {
		return Skill{}, errf("archive", "has no SKILL.md at its root or in a top-level folder")
	}
	var s Skill
	haveMD := false
	for i, e := range entries {
		n := names[i]
		rel, ok := strings.CutPrefix(n, prefix)
		if !ok {
			return Skill{}, errf("archive", "%q is outside the skill's folder %q", truncate(n, 200), folder)
		}
		if rel == SkillFileName {
			if haveMD {
				return Skill{}, errf("archive", "holds %s twice", n)
			}
			haveMD = true
			md, err := Parse(e.content)
			if err != nil {
				return Skill{}, err
			}
			md.Files = s.Files
			s = md
			continue
		}
		s.Files = append(s.Files, File{Path: rel, Content: string(e.content)})
	}
	if folder != "" && s.Name != folder {
		return Skill{}, errf("name", "%q does not match the skill's folder %q", s.Name, folder)
	}
	return s, s.Validate()
}

// WriteArchive writes the skill as a folder named after it, holding its
// SKILL.md and files, in a zip or tar archive.
func WriteArchive(w io.Writer, format string, s Skill, modTime time.Time) error {
	files := append([]File{{Path: SkillFileName, Content: s.Markdown()}}, s.Files...)
	switch format {
	case FormatZip:
		zw := zip.NewWriter(w)
		for _, f := range files {
			h := &zip.FileHeader{Name: s.Name + "/" + f.Path, Method: zip.Deflate, Modified: modTime}
			h.SetMode(0o644)
			fw, err := zw.CreateHeader(h)
			if err != nil {
				return err
			}
			if _, err := io.WriteString(fw, f.Content); err != nil {
				return err
			}
		}
		return zw.Close()
	case FormatTar:
		tw := tar.NewWriter(w)
		dirs := map[string]bool{}
		for _, f := range files {
			name := s.Name + "/" + f.Path
			var parents []string
			for d := path.Dir(name); d != "." && !dirs[d]; d = path.Dir(d) {
				dirs[d] = true
				parents = append([]string{d}, parents...)
			}
			for _, d := range parents {
				if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: modTime}); err != nil {
					return err
				}
			}
			if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.Content)), ModTime: modTime}); err != nil {
				return err
			}
			if _, err := io.WriteString(tw, f.Content); err != nil {
				return err
			}
		}
		return tw.Close()
	}
	return fmt.Errorf("unknown archive format %q", format)
}
