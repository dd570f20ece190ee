package skills_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/skills/skillstest"
)

func TestBuiltins(t *testing.T) {
	t.Parallel()
	all, err := skills.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range all {
		names[s.Name] = true
		if err := skills.CheckName(s.Name); err != nil {
			t.Errorf("built-in %s has a non-standard name: %v", s.Name, err)
		}
		if len(s.Examples()) == 0 {
			t.Errorf("%s has no runnable example", s.Name)
		}
		if len(s.Files) == 0 {
			t.Errorf("%s has no helpers", s.Name)
		}
		if !strings.Contains(s.Body, "from skills."+skills.ImportName(s.Name)+" import helpers") {
			t.Errorf("%s's example does not import skills.%s", s.Name, skills.ImportName(s.Name))
		}
		again, err := skills.Parse([]byte(s.Markdown()))
		again.Files = s.Files
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Errorf("%s does not survive Markdown/Parse: %v\n%+v\n%+v", s.Name, err, again, s)
		}
	}
	for _, want := range []string{"plotting", "data-analysis", "symbolic-math", "csv-json-files"} {
		if !names[want] {
			t.Errorf("built-in %s missing", want)
		}
	}
	dirs, _ := os.ReadDir(".")
	for _, d := range dirs {
		if _, err := os.Stat(d.Name() + "/" + skills.SkillFileName); err == nil && !names[d.Name()] {
			t.Errorf("the folder %s holds a skill that is not embedded: add it to builtinFS", d.Name())
		}
	}
}

// TestPublicSkills reads skills shaped like public Agent Skills: every
// standard field, descriptions over several lines, scripts, references and
// a binary asset.
func TestPublicSkills(t *testing.T) {
	t.Parallel()
	pdf := skillstest.Skill(t, skillstest.PDF)
	if pdf.License != "Apache-2.0" || pdf.Metadata["version"] != "1.0" || pdf.Metadata["author"] != "example-org" ||
		!strings.HasPrefix(pdf.Description, "Extract text and page counts from PDF files, and list their form fields. Use when") {
		t.Errorf("pdf-processing front matter: %+v", pdf)
	}
	var paths []string
	for _, f := range pdf.Files {
		paths = append(paths, f.Path)
	}
	if want := []string{"assets/logo.png", "references/REFERENCE.md", "scripts/pdf_tools.py"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("files %v, want %v", paths, want)
	}
	logo := skillstest.Files(t, skillstest.PDF)["assets/logo.png"]
	if pdf.Files[0].Content != string(logo) || !pdf.Files[0].Binary() {
		t.Error("the binary asset did not come through byte for byte")
	}

	every := skillstest.Skill(t, skillstest.EveryField)
	want := skills.Skill{Name: "release-notes",
		Description:   "Draft release notes from a list of merged changes.\nUse when the user asks for a changelog, release notes or a summary of what\nchanged between two versions.",
		License:       "Complete terms in LICENSE.txt",
		Compatibility: "Requires git, and network access to the repository host",
		Metadata:      map[string]string{"author": "example-org", "version": "2.1", "category": "docs"},
		AllowedTools:  "Bash(git log:*) Bash(git tag:*) Read",
		Tags:          []string{}, Language: "python", Requires: []string{}, Body: every.Body,
		Files: []skills.File{{Path: "LICENSE.txt", Content: "Copyright example-org. Licensed under the Apache License, Version 2.0.\n"}},
	}
	if !reflect.DeepEqual(every, want) {
		t.Errorf("release-notes:\n got %+v\nwant %+v", every, want)
	}
	// Rendering keeps every field, and the result is again a standard skill.
	for _, s := range []skills.Skill{pdf, every} {
		md := s.Markdown()
		again, err := skills.Parse([]byte(md))
		again.Files = s.Files
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Errorf("%s does not survive Markdown/Parse: %v\n%s", s.Name, err, md)
		}
		for _, gantryOnly := range []string{"\nversion:", "\ntags:", "\nlanguage:", "\nrequires:"} {
			if strings.Contains(md, gantryOnly) {
				t.Errorf("%s renders gantry's %s though it was not set:\n%s", s.Name, gantryOnly, md)
			}
		}
	}
	// allowed-tools may also be a YAML list.
	s, err := skills.Parse([]byte("---\nname: x\ndescription: d\nallowed-tools:\n  - Read\n  - Bash(git:*)\n---\nbody\n"))
	if err != nil || s.AllowedTools != "Read Bash(git:*)" {
		t.Errorf("allowed-tools as a list: %q %v", s.AllowedTools, err)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, c := range skillstest.InvalidSkills() {
		_, err := skills.Parse([]byte(c.SkillMD))
		var e *skills.Error
		if !errors.As(err, &e) || e.Field != c.Field {
			t.Errorf("%s: err = %v, want one naming %q", c.Why, err, c.Field)
			continue
		}
		if strings.Contains(e.Message, "skills.frontMatter") || strings.Contains(e.Message, "yaml:") || strings.Contains(e.Message, "unmarshal") || strings.Contains(e.Message, "!!") {
			t.Errorf("%s: the message leaks the YAML library: %s", c.Why, e.Message)
		}
	}
	for _, c := range []struct {
		name, want string
	}{
		{"Bad", "lowercase letters, digits and hyphens"},
		{"tidy_logs", `hyphens, not underscores ("tidy-logs")`},
		{"-x", "start or end with a hyphen"},
		{"a--b", "two hyphens in a row"},
		{strings.Repeat("a", 65), "at most 64"},
	} {
		if err := skills.CheckName(c.name); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckName(%q) = %v, want %q", c.name, err, c.want)
		}
	}
	for _, good := range []string{"a", "pdf-processing", "x2", "0-day", strings.Repeat("a", 64)} {
		if err := skills.CheckName(good); err != nil {
			t.Errorf("CheckName(%q): %v", good, err)
		}
	}
	for _, files := range [][]skills.File{
		{{Path: "../evil.py"}},
		{{Path: "/etc/passwd"}},
		{{Path: "SKILL.md"}},
		{{Path: ".hidden"}},
		{{Path: "a.py"}, {Path: "./a.py"}},
		{{Path: "a.bin", Content: "!!!", Encoding: "base64"}},
		{{Path: "a.bin", Content: "x", Encoding: "hex"}},
		{{Path: "big.bin", Content: strings.Repeat("x", skills.MaxFileBytes+1)}},
	} {
		s := skills.Skill{Name: "x", Description: "d", Body: "b", Files: files}
		var e *skills.Error
		if err := s.Validate(); !errors.As(err, &e) || !strings.HasPrefix(e.Field, "files[") {
			t.Errorf("files %+v: %v", files[len(files)-1], err)
		}
	}
}

// TestBinaryFilesInJSON: content that is not text travels as base64 and
// comes back as the same bytes.
func TestBinaryFilesInJSON(t *testing.T) {
	t.Parallel()
	logo := skillstest.Files(t, skillstest.PDF)["assets/logo.png"]
	files := []skills.File{{Path: "a.txt", Content: "héllo\n"}, {Path: "logo.png", Content: string(logo)}, {Path: "nul.txt", Content: "a\x00b"}}
	raw, err := jsonMarshal(files)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(raw, `{"path":"a.txt","content":"héllo\n"}`) || !strings.Contains(raw, `"encoding":"base64"`) || strings.Contains(raw, `\u0000`) {
		t.Errorf("JSON: %s", raw)
	}
	var back []skills.File
	if err := jsonUnmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	s := skills.Skill{Name: "x", Description: "d", Body: "b", Files: back}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	for i := range files {
		if s.Files[i] != files[i] {
			t.Errorf("file %s came back as %q", files[i].Path, s.Files[i].Content)
		}
	}
}

func TestArchives(t *testing.T) {
	t.Parallel()
	want := skillstest.Skill(t, skillstest.PDF)
	for _, c := range []struct {
		format string
		data   []byte
	}{
		{skills.FormatZip, skillstest.Zip(t, skillstest.Folder(t, skillstest.PDF, "pdf-processing"))},
		{skills.FormatZip, skillstest.Zip(t, skillstest.Folder(t, skillstest.PDF, ""))},
		{skills.FormatTar, skillstest.Tar(t, skillstest.Folder(t, skillstest.PDF, "pdf-processing"))},
		{skills.FormatTar, skillstest.Tar(t, skillstest.Folder(t, skillstest.PDF, "./pdf-processing"))},
		{skills.FormatTar, gzipped(t, skillstest.Tar(t, skillstest.Folder(t, skillstest.PDF, "")))},
	} {
		got, err := skills.ReadArchive(c.format, c.data)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s archive: %v\n got %+v\nwant %+v", c.format, err, got, want)
		}
	}
	// What gantry writes, it reads back the same.
	for _, format := range []string{skills.FormatZip, skills.FormatTar} {
		var buf bytes.Buffer
		if err := skills.WriteArchive(&buf, format, want, time.Now()); err != nil {
			t.Fatal(err)
		}
		got, err := skills.ReadArchive(format, buf.Bytes())
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s round trip: %v", format, err)
		}
	}

	md := skillstest.Files(t, skillstest.PDF)["SKILL.md"]
	big := bytes.Repeat([]byte{0}, skills.MaxFileBytes+1)
	many := []skillstest.Entry{{Name: "SKILL.md", Content: md}}
	for i := range skills.MaxFiles + 1 {
		many = append(many, skillstest.Entry{Name: "f/" + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + "-" + string(rune('a'+i/26)), Content: []byte("x")})
	}
	for _, c := range []struct {
		why     string
		entries []skillstest.Entry
		field   string
		want    string
	}{
		{"path traversal", []skillstest.Entry{{Name: "SKILL.md", Content: md}, {Name: "../evil.py", Content: []byte("x")}}, "archive", "leaves the skill's folder"},
		{"traversal inside", []skillstest.Entry{{Name: "SKILL.md", Content: md}, {Name: "scripts/../../evil.py", Content: []byte("x")}}, "archive", "leaves"},
		{"absolute path", []skillstest.Entry{{Name: "SKILL.md", Content: md}, {Name: "/etc/cron.d/x", Content: []byte("x")}}, "archive", "relative path"},
		{"symlink", []skillstest.Entry{{Name: "SKILL.md", Content: md}, {Name: "scripts/x", Content: []byte("/etc/passwd"), Symlink: true}}, "archive", "link"},
		{"no SKILL.md", []skillstest.Entry{{Name: "README.md", Content: md}}, "archive", "no SKILL.md"},
		{"two skills", []skillstest.Entry{{Name: "a/SKILL.md", Content: md}, {Name: "b/SKILL.md", Content: md}}, "archive", "more than one"},
		{"file outside the folder", []skillstest.Entry{{Name: "pdf-processing/SKILL.md", Content: md}, {Name: "other/x.py", Content: []byte("x")}}, "archive", "outside"},
		{"folder named otherwise", []skillstest.Entry{{Name: "pdf/SKILL.md", Content: md}}, "name", "does not match the skill's folder"},
		{"hidden file", []skillstest.Entry{{Name: "SKILL.md", Content: md}, {Name: ".env", Content: []byte("x")}}, "files[0].path", "plain relative path"},
		{"file too large", []skillstest.Entry{{Name: "SKILL.md", Content: md}, {Name: "assets/big.bin", Content: big}}, "archive", "larger than"},
		{"too many files", many, "files", "at most 100"},
		{"bad SKILL.md", []skillstest.Entry{{Name: "SKILL.md", Content: []byte("---\nname: X\ndescription: d\n---\nb\n")}}, "name", "lowercase"},
	} {
		for _, format := range []string{skills.FormatZip, skills.FormatTar} {
			data := skillstest.Tar(t, c.entries)
			if format == skills.FormatZip {
				data = skillstest.Zip(t, c.entries)
			}
			_, err := skills.ReadArchive(format, data)
			var e *skills.Error
			if !errors.As(err, &e) || e.Field != c.field || !strings.Contains(e.Message, c.want) {
				t.Errorf("%s (%s): %v; want field %s, %q", c.why, format, err, c.field, c.want)
			}
		}
	}
	if _, err := skills.ReadArchive(skills.FormatZip, []byte("PK\x03\x04 not really")); err == nil {
		t.Error("garbage accepted as zip")
	}
	// A gzip bomb: skipped entries count too.
	bomb := gzipped(t, skillstest.Tar(t, []skillstest.Entry{{Name: "SKILL.md", Content: md}, {Name: "__MACOSX/pad", Content: make([]byte, skills.MaxArchiveBytes)}}))
	if _, err := skills.ReadArchive(skills.FormatTar, bomb); err == nil || !strings.Contains(err.Error(), "unpacks to more than") {
		t.Errorf("gzip bomb: %v", err)
	}
}

// FuzzParse: the front-matter parser never panics, answers only with
// errors naming a field, and never accepts a skill that fails validation
// or does not survive rendering.
func FuzzParse(f *testing.F) {
	f.Add("---\nname: x\ndescription: d\ntags: [a, b]\nversion: 3\n---\n# body\n")
	f.Add("---\nname: x\ndescription: |\n  multi\n  line\nmetadata:\n  a: \"1\"\nallowed-tools: Read\n---\nbody")
	f.Add("---\n&a [*a]\n---\n")
	for _, c := range skillstest.InvalidSkills() {
		f.Add(c.SkillMD)
	}
	f.Fuzz(func(t *testing.T, md string) {
		s, err := skills.Parse([]byte(md))
		if err != nil {
			var e *skills.Error
			if !errors.As(err, &e) || e.Field == "" {
				t.Fatalf("error without a field %T: %v", err, err)
			}
			return
		}
		if skills.CheckName(s.Name) != nil || s.Description == "" {
			t.Fatalf("accepted invalid skill %+v", s)
		}
		again, err := skills.Parse([]byte(s.Markdown()))
		s.Version = 0
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("does not survive Markdown/Parse: %v\n%q\n%+v\n%+v", err, s.Markdown(), again, s)
		}
	})
}

// FuzzReadArchive: the archive readers never panic and refuse with a
// skill error; what they accept is a valid skill.
func FuzzReadArchive(f *testing.F) {
	md := []byte("---\nname: x\ndescription: d\n---\nbody\n")
	f.Add(true, skillstest.Zip(f, []skillstest.Entry{{Name: "x/SKILL.md", Content: md}, {Name: "x/a.bin", Content: []byte{0, 1, 2}}}))
	f.Add(false, skillstest.Tar(f, []skillstest.Entry{{Name: "SKILL.md", Content: md}, {Name: "scripts/a.py", Content: []byte("print(1)")}}))
	f.Add(false, gzipped(f, skillstest.Tar(f, []skillstest.Entry{{Name: "SKILL.md", Content: md}})))
	f.Add(true, []byte("PK\x05\x06"+strings.Repeat("\x00", 18)))
	f.Fuzz(func(t *testing.T, zipped bool, data []byte) {
		format := skills.FormatTar
		if zipped {
			format = skills.FormatZip
		}
		s, err := skills.ReadArchive(format, data)
		if err != nil {
			var e *skills.Error
			if !errors.As(err, &e) {
				t.Fatalf("non-skill error %T: %v", err, err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted an invalid skill: %v", err)
		}
	})
}

func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func gzipped(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data) //nolint:errcheck
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
