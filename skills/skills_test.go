package skills

import (
	"errors"
	"strings"
	"testing"
)

func TestBuiltins(t *testing.T) {
	all, err := Builtins()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range all {
		names[s.Name] = true
		if len(s.Examples()) == 0 {
			t.Errorf("%s has no runnable example", s.Name)
		}
		if len(s.Files) == 0 {
			t.Errorf("%s has no helpers", s.Name)
		}
		again, err := Parse([]byte(s.Markdown()))
		if err != nil || again.Name != s.Name || again.Body != s.Body || again.Version != s.Version {
			t.Errorf("%s does not survive Markdown/Parse: %v", s.Name, err)
		}
	}
	for _, want := range []string{"plotting", "data_analysis", "symbolic_math", "csv_json_files"} {
		if !names[want] {
			t.Errorf("built-in %s missing", want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	good := "---\nname: x\ndescription: d\n---\nbody\n"
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ md, field string }{
		{"no front matter", "SKILL.md"},
		{"---\nname: x\n", "SKILL.md"},
		{"---\nname: x\ndescription: d\ncolor: red\n---\nbody", "color"},
		{"---\nname: Bad-Name\ndescription: d\n---\nbody", "name"},
		{"---\nname: ../etc\ndescription: d\n---\nbody", "name"},
		{"---\ndescription: d\n---\nbody", "name"},
		{"---\nname: x\n---\nbody", "description"},
		{"---\nname: x\ndescription: d\n---\n", "body"},
		{"---\nname: x\ndescription: d\nversion: two\n---\nbody", "front matter"},
		{"---\nname: x\ndescription: d\nversion: 0\n---\nbody", "version"},
		{"---\nname: x\ndescription: d\ntags: [\"Has Space\"]\n---\nbody", "tags"},
		{"---\nname: x\ndescription: d\nlanguage: cobol\n---\nbody", "language"},
		{"---\nname: [x\n---\nbody", "front matter"},
		{"---\n---\nbody", "front matter"},
		{"---\nname: x\ndescription: d\n---\n" + strings.Repeat("x", MaxSkillMD), "SKILL.md"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.md))
		var e *Error
		if !errors.As(err, &e) || e.Field != c.field {
			t.Errorf("%q: err = %v, want field %q", c.md[:min(len(c.md), 40)], err, c.field)
		}
	}
	s := Skill{Name: "x", Description: "d", Body: "b", Files: []File{{Path: "../evil.py"}}}
	if err := s.Validate(); err == nil {
		t.Error("file path leaving the skill accepted")
	}
	s.Files = []File{{Path: "SKILL.md"}}
	if err := s.Validate(); err == nil {
		t.Error("a file named SKILL.md accepted")
	}
}

// FuzzParse: the front-matter parser never panics and never accepts a skill
// that fails validation.
func FuzzParse(f *testing.F) {
	f.Add("---\nname: x\ndescription: d\ntags: [a, b]\nversion: 3\n---\n# body\n")
	f.Add("---\nname: x\ndescription: |\n  multi\n---\nbody")
	f.Add("---\n&a [*a]\n---\n")
	f.Fuzz(func(t *testing.T, md string) {
		s, err := Parse([]byte(md))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("non-skill error %T: %v", err, err)
			}
			return
		}
		if !NameRE.MatchString(s.Name) || s.Description == "" || strings.ContainsAny(s.Description, "\n") {
			t.Fatalf("accepted invalid skill %+v", s)
		}
	})
}
