// Package skills defines gantry's skills: reusable know-how for agents, each
// a SKILL.md (YAML front matter and a markdown body) with optional code
// files. It parses and validates them strictly, renders them back, and
// holds the built-in skills that ship in this directory.
package skills

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Skill is one version of a skill.
type Skill struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Version     int      `json:"version"`
	Tags        []string `json:"tags"`
	Language    string   `json:"language"`
	Requires    []string `json:"requires"`
	Body        string   `json:"body"`
	Files       []File   `json:"files"`
}

// File is a code file that comes with a skill.
type File struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// Limits on what a skill may hold.
const (
	MaxSkillMD      = 64 << 10
	MaxFiles        = 20
	MaxFileBytes    = 256 << 10
	MaxTotalBytes   = 1 << 20
	MaxDescription  = 300
	MaxTags         = 20
	SkillFileName   = "SKILL.md"
	frontMatterMark = "---"
)

// Error is a skill refused by validation; Field names what is wrong.
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func errf(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

var (
	// NameRE: a skill's name is also its directory under /skills and its
	// Python package (skills.<name>), so it is a lowercase identifier.
	NameRE    = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	tagRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]{0,31}$`)
	packageRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9+._-]{0,63}$`)
)

// frontMatter is SKILL.md's YAML header. Unknown keys are refused.
type frontMatter struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Version     *int     `yaml:"version"`
	Tags        []string `yaml:"tags"`
	Language    string   `yaml:"language"`
	Requires    []string `yaml:"requires"`
}

// Parse reads a SKILL.md. The version in the front matter is optional (0
// when absent).
func Parse(md []byte) (Skill, error) {
	if len(md) > MaxSkillMD {
		return Skill{}, errf("SKILL.md", "is %d bytes; at most %d", len(md), MaxSkillMD)
	}
	if !utf8.Valid(md) {
		return Skill{}, errf("SKILL.md", "must be UTF-8 text")
	}
	text := strings.ReplaceAll(string(md), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, frontMatterMark+"\n")
	if !ok {
		return Skill{}, errf("SKILL.md", "must start with a YAML front matter block between --- lines")
	}
	// The leading newline lets an empty header ("---\n---\n") close too.
	header, body, ok := strings.Cut("\n"+rest, "\n"+frontMatterMark+"\n")
	if !ok {
		if h, found := strings.CutSuffix("\n"+rest, "\n"+frontMatterMark); found {
			header, body, ok = h, "", true
		}
	}
	if !ok {
		return Skill{}, errf("SKILL.md", "front matter is not closed by a --- line")
	}
	var fm frontMatter
	dec := yaml.NewDecoder(strings.NewReader(header))
	dec.KnownFields(true)
	if err := dec.Decode(&fm); err != nil {
		return Skill{}, yamlError(err)
	}
	s := Skill{
		Name: fm.Name, Description: strings.TrimSpace(fm.Description), Tags: fm.Tags,
		Language: fm.Language, Requires: fm.Requires, Body: strings.TrimLeft(body, "\n"),
	}
	if fm.Version != nil {
		if *fm.Version < 1 {
			return Skill{}, errf("version", "must be a positive whole number")
		}
		s.Version = *fm.Version
	}
	return s, s.Validate()
}

var (
	unknownFieldRE = regexp.MustCompile(`field (\w+) not found in type`)
	wrongTypeRE    = regexp.MustCompile(`line \d+: cannot unmarshal !!(\w+)`)
)

func yamlError(err error) error {
	if errors.Is(err, io.EOF) {
		return errf("front matter", "is empty")
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
		return errf(m[1], "unknown front matter field (allowed: name, description, version, tags, language, requires)")
	}
	if wrongTypeRE.MatchString(msg) {
		return errf("front matter", "has a value of the wrong type: %s (name, description and language are text; version a number; tags and requires lists)", msg)
	}
	return errf("front matter", "is not valid YAML: %s", msg)
}

// Validate checks every field and normalises tags and files.
func (s *Skill) Validate() error {
	switch {
	case s.Name == "":
		return errf("name", "is required")
	case !NameRE.MatchString(s.Name):
		return errf("name", "%q must be a lowercase identifier: a letter, then letters, digits or _ (at most 64)", s.Name)
	case s.Description == "":
		return errf("description", "is required: one line saying when to use the skill")
	case len(s.Description) > MaxDescription:
		return errf("description", "is %d characters; at most %d (keep it one line)", len(s.Description), MaxDescription)
	case strings.ContainsAny(s.Description, "\n\r"):
		return errf("description", "must be one line")
	case strings.TrimSpace(s.Body) == "":
		return errf("body", "is required: when to use the skill, the steps and an example")
	case len(s.Body) > MaxSkillMD-1024:
		return errf("body", "is %d bytes; at most %d", len(s.Body), MaxSkillMD-1024)
	case s.Version < 0:
		return errf("version", "must be a positive whole number")
	}
	if s.Language == "" {
		s.Language = "python"
	}
	if s.Language != "python" && s.Language != "bash" && s.Language != "node" {
		return errf("language", "must be python, bash or node, not %q", s.Language)
	}
	if len(s.Tags) > MaxTags {
		return errf("tags", "has %d tags; at most %d", len(s.Tags), MaxTags)
	}
	for i, t := range s.Tags {
		t = strings.ToLower(strings.TrimSpace(t))
		if !tagRE.MatchString(t) {
			return errf("tags", "%q: tags are short lowercase words (letters, digits, + . -)", s.Tags[i])
		}
		s.Tags[i] = t
	}
	for _, r := range s.Requires {
		if !packageRE.MatchString(r) {
			return errf("requires", "%q is not a package name", r)
		}
	}
	if len(s.Files) > MaxFiles {
		return errf("files", "has %d files; at most %d", len(s.Files), MaxFiles)
	}
	total := len(s.Body)
	seen := map[string]bool{}
	for i, f := range s.Files {
		p := path.Clean(f.Path)
		hidden := false
		for _, seg := range strings.Split(p, "/") {
			hidden = hidden || strings.HasPrefix(seg, ".")
		}
		if f.Path == "" || strings.HasPrefix(f.Path, "/") || hidden || strings.ContainsAny(f.Path, "\x00\\") {
			return errf(fmt.Sprintf("files[%d].path", i), "%q must be a plain relative path inside the skill", f.Path)
		}
		if p == SkillFileName {
			return errf(fmt.Sprintf("files[%d].path", i), "SKILL.md is the skill itself, not one of its files")
		}
		if seen[p] {
			return errf(fmt.Sprintf("files[%d].path", i), "%q is given twice", p)
		}
		seen[p] = true
		if len(f.Content) > MaxFileBytes {
			return errf(fmt.Sprintf("files[%d].content", i), "is %d bytes; at most %d per file", len(f.Content), MaxFileBytes)
		}
		if !utf8.ValidString(f.Content) {
			return errf(fmt.Sprintf("files[%d].content", i), "must be UTF-8 text")
		}
		total += len(f.Content)
		s.Files[i].Path = p
	}
	if total > MaxTotalBytes {
		return errf("files", "the skill holds %d bytes; at most %d", total, MaxTotalBytes)
	}
	sort.Slice(s.Files, func(i, j int) bool { return s.Files[i].Path < s.Files[j].Path })
	if s.Tags == nil {
		s.Tags = []string{}
	}
	if s.Requires == nil {
		s.Requires = []string{}
	}
	if s.Files == nil {
		s.Files = []File{}
	}
	return nil
}

// Markdown renders the skill's SKILL.md, with its version.
func (s Skill) Markdown() string {
	fm := frontMatter{Name: s.Name, Description: s.Description, Tags: s.Tags, Language: s.Language, Requires: s.Requires}
	if s.Version > 0 {
		v := s.Version
		fm.Version = &v
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	_ = enc.Encode(fm)
	return frontMatterMark + "\n" + buf.String() + frontMatterMark + "\n\n" + s.Body
}

// Summary is the skill's one-line entry in a list.
func (s Skill) Summary() string { return s.Name + ": " + s.Description }

//go:embed */SKILL.md */*
var builtinFS embed.FS

// Builtins returns the skills that ship with gantry, parsed from the
// directories beside this file.
func Builtins() ([]Skill, error) {
	dirs, err := fs.ReadDir(builtinFS, ".")
	if err != nil {
		return nil, err
	}
	var out []Skill
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		md, err := fs.ReadFile(builtinFS, d.Name()+"/"+SkillFileName)
		if err != nil {
			return nil, fmt.Errorf("built-in skill %s: %w", d.Name(), err)
		}
		s, err := Parse(md)
		if err != nil {
			return nil, fmt.Errorf("built-in skill %s: %w", d.Name(), err)
		}
		if s.Name != d.Name() {
			return nil, fmt.Errorf("built-in skill in %s/ is named %q", d.Name(), s.Name)
		}
		entries, _ := fs.ReadDir(builtinFS, d.Name())
		for _, e := range entries {
			if e.IsDir() || e.Name() == SkillFileName {
				continue
			}
			content, err := fs.ReadFile(builtinFS, d.Name()+"/"+e.Name())
			if err != nil {
				return nil, err
			}
			s.Files = append(s.Files, File{Path: e.Name(), Content: string(content)})
		}
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("built-in skill %s: %w", d.Name(), err)
		}
		out = append(out, s)
	}
	return out, nil
}

// Examples returns the fenced code blocks of the skill's body in its
// language (```python, ```bash, ```node or ```javascript): the examples a
// test must be able to run.
func (s Skill) Examples() []string {
	var out []string
	lines := strings.Split(s.Body, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "```")
		if !ok || lang == "" {
			continue
		}
		var block []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			block = append(block, lines[i])
		}
		if lang == s.Language || (s.Language == "node" && lang == "javascript") || (s.Language == "bash" && lang == "sh") {
			out = append(out, strings.Join(block, "\n")+"\n")
		}
	}
	return out
}
