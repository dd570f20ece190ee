// Package skillstest holds skills shaped like the public Agent Skills that
// users bring to gantry, for tests: a skill with scripts/, references/ and
// a binary asset, one that sets every optional front matter field, each
// invalid form of SKILL.md, and the archives (zip, tar) such folders
// travel in.
package skillstest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"embed"
	"io/fs"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/skills"
)

// Names of the fixture skills.
const (
	// PDF has scripts/pdf_tools.py, references/REFERENCE.md and the
	// binary assets/logo.png, and a description spanning lines.
	PDF = "pdf-processing"
	// EveryField sets license, compatibility, metadata and allowed-tools,
	// with a literal block description, and ships a LICENSE.txt.
	EveryField = "release-notes"
)

//go:embed fixtures
var fixtures embed.FS

// FS is the fixtures folder: one folder per skill.
func FS() fs.FS {
	sub, err := fs.Sub(fixtures, "fixtures")
	if err != nil {
		panic(err)
	}
	return sub
}

// Files returns the files of a fixture skill (SKILL.md included), by path
// inside its folder.
func Files(t testing.TB, name string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := fs.WalkDir(FS(), name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(FS(), p)
		out[strings.TrimPrefix(p, name+"/")] = b
		return err
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("fixture skill %s: %v", name, err)
	}
	return out
}

// Skill is a fixture skill as gantry reads it.
func Skill(t testing.TB, name string) skills.Skill {
	t.Helper()
	s, err := skills.ReadDir(FS(), name)
	if err != nil {
		t.Fatalf("fixture skill %s: %v", name, err)
	}
	return s
}

// Entry is one entry of a hand-made archive.
type Entry struct {
	Name    string
	Content []byte
	// Symlink makes the entry a symbolic link to Content.
	Symlink bool
}

// Folder lists a fixture skill's files as archive entries under folder/
// ("" for the archive's root), sorted, as a user would zip the folder.
func Folder(t testing.TB, name, folder string) []Entry {
	t.Helper()
	files := Files(t, name)
	var out []Entry
	for p, b := range files {
		if folder != "" {
			p = folder + "/" + p
		}
		out = append(out, Entry{Name: p, Content: b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Zip packs entries as a zip file, with the directory entries and the
// macOS litter (__MACOSX/, .DS_Store) a zip made on a Mac has.
func Zip(t testing.TB, entries []Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, e := range entries {
		if dir, _, ok := cutLast(e.Name, "/"); ok && !dirs[dir] {
			dirs[dir] = true
			if _, err := zw.Create(dir + "/"); err != nil {
				t.Fatal(err)
			}
		}
		h := &zip.FileHeader{Name: e.Name, Method: zip.Deflate, Modified: time.Unix(1700000000, 0)}
		h.SetMode(0o644)
		if e.Symlink {
			h.SetMode(fs.ModeSymlink | 0o777)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(e.Content) //nolint:errcheck
	}
	for _, junk := range []string{"__MACOSX/._SKILL.md", ".DS_Store"} {
		w, _ := zw.Create(junk)
		w.Write([]byte{0, 5, 22, 7, 0xff}) //nolint:errcheck
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Tar packs entries as a tar file, with directory entries.
func Tar(t testing.TB, entries []Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, e := range entries {
		if dir, _, ok := cutLast(e.Name, "/"); ok && !dirs[dir] {
			dirs[dir] = true
			tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755}) //nolint:errcheck
		}
		h := &tar.Header{Name: e.Name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(e.Content))}
		if e.Symlink {
			h = &tar.Header{Name: e.Name, Typeflag: tar.TypeSymlink, Linkname: string(e.Content), Mode: 0o777}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if !e.Symlink {
			tw.Write(e.Content) //nolint:errcheck
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// Invalid is a SKILL.md that breaks one rule, and the field the error must
// name.
type Invalid struct {
	Why, SkillMD, Field string
}

// InvalidSkills is every way a SKILL.md can be refused.
func InvalidSkills() []Invalid {
	fm := func(lines string) string { return "---\n" + lines + "---\n# Body\n\nSteps.\n" }
	ok := "description: Does a thing. Use when a thing is needed.\n"
	return []Invalid{
		{"no front matter", "# Just markdown\n", "SKILL.md"},
		{"front matter not closed", "---\nname: x\n" + ok, "SKILL.md"},
		{"not UTF-8", "---\nname: x\n" + ok + "---\n\xff\xfe\n", "SKILL.md"},
		{"too large", fm("name: x\n"+ok) + strings.Repeat("x", skills.MaxSkillMD), "SKILL.md"},
		{"empty front matter", "---\n---\nbody\n", "front matter"},
		{"front matter is a list", fm("- name\n- description\n"), "front matter"},
		{"YAML syntax error", fm("name: [x\n" + ok), "front matter"},
		{"name missing", fm(ok), "name"},
		{"name with capitals", fm("name: PDF-Processing\n" + ok), "name"},
		{"name with underscore", fm("name: pdf_processing\n" + ok), "name"},
		{"name with a space", fm("name: pdf processing\n" + ok), "name"},
		{"name starts with a hyphen", fm("name: -pdf\n" + ok), "name"},
		{"name ends with a hyphen", fm("name: pdf-\n" + ok), "name"},
		{"name with two hyphens in a row", fm("name: pdf--processing\n" + ok), "name"},
		{"name over 64 characters", fm("name: " + strings.Repeat("a", 65) + "\n" + ok), "name"},
		{"name is a list", fm("name: [pdf]\n" + ok), "name"},
		{"name given twice", fm("name: a\nname: b\n" + ok), "name"},
		{"description missing", fm("name: x\n"), "description"},
		{"description empty", fm("name: x\ndescription: \"  \"\n"), "description"},
		{"description over 1024 characters", fm("name: x\ndescription: " + strings.Repeat("d", 1025) + "\n"), "description"},
		{"description is a mapping", fm("name: x\ndescription:\n  a: b\n"), "description"},
		{"license is a list", fm("name: x\n" + ok + "license: [MIT]\n"), "license"},
		{"compatibility over 500 characters", fm("name: x\n" + ok + "compatibility: " + strings.Repeat("c", 501) + "\n"), "compatibility"},
		{"metadata is a list", fm("name: x\n" + ok + "metadata: [a, b]\n"), "metadata"},
		{"metadata is text", fm("name: x\n" + ok + "metadata: v1\n"), "metadata"},
		{"metadata value is a list", fm("name: x\n" + ok + "metadata:\n  authors: [a, b]\n"), "metadata.authors"},
		{"allowed-tools is a mapping", fm("name: x\n" + ok + "allowed-tools:\n  Bash: yes\n"), "allowed-tools"},
		{"unknown field", fm("name: x\n" + ok + "color: red\n"), "color"},
		{"version is not a number", fm("name: x\n" + ok + "version: two\n"), "version"},
		{"tags is text", fm("name: x\n" + ok + "tags: charts\n"), "tags"},
		{"language unknown", fm("name: x\n" + ok + "language: cobol\n"), "language"},
		{"alias", fm("name: &n x\n" + ok + "license: *n\n"), "license"},
		{"body missing", "---\nname: x\n" + ok + "---\n", "body"},
	}
}
