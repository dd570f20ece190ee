// Package skills defines gantry's skills: reusable know-how for agents in the
// open Agent Skills format (agentskills.io). A skill is a folder holding a
// SKILL.md (YAML front matter and a markdown body) and, optionally, more
// files: scripts/, references/, assets/ (binary allowed) or code beside
// SKILL.md. The package parses and validates skills strictly, with errors
// naming the bad field, reads and writes them as zip or tar archives,
// renders them back, and holds the built-in skills that ship in this
// directory.
package skills

import (
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/gantryhq/gantry/jobs"
)

// Skill is one version of a skill. The first six fields are the Agent
// Skills standard's front matter; Version, Tags, Language and Requires are
// gantry's own.
type Skill struct {
	Name          string            `json:"name"`
	Description   string            `json:"description"`
	License       string            `json:"license,omitempty"`
	Compatibility string            `json:"compatibility,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	// AllowedTools is the standard's allowed-tools, as written: tool names
	// separated by spaces (a YAML list is joined with spaces).
	AllowedTools string   `json:"allowed_tools,omitempty"`
	Version      int      `json:"version"`
	Tags         []string `json:"tags"`
	Language     string   `json:"language"`
	Requires     []string `json:"requires"`
	Body         string   `json:"body"`
	Files        []File   `json:"files"`
}

// File is a file that comes with a skill, at a path relative to its folder
// (helpers.py, scripts/run.py, assets/logo.png).
//
// Content holds the file's bytes, text or not (a Go string may hold any
// bytes). In JSON, content that is not UTF-8 text (or holds NUL bytes) is
// written as base64 with "encoding": "base64"; a file decoded from JSON
// holds that form until Decode (which Validate calls) turns it into bytes.
type File struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
}

// Binary reports whether the file is not plain text (so JSON carries it as
// base64).
func (f File) Binary() bool {
	return !utf8.ValidString(f.Content) || strings.ContainsRune(f.Content, 0)
}

// MarshalJSON writes text as it is and anything else as base64.
func (f File) MarshalJSON() ([]byte, error) {
	type wire File
	w := wire{Path: f.Path, Content: f.Content}
	if f.Encoding == jobs.EncodingBase64 || f.Binary() {
		if f.Encoding != jobs.EncodingBase64 {
			w.Content = base64.StdEncoding.EncodeToString([]byte(f.Content))
		}
		w.Encoding = jobs.EncodingBase64
	}
	return json.Marshal(w)
}

// Decode turns content given as base64 into its bytes. It is idempotent.
func (f *File) Decode() error {
	switch f.Encoding {
	case "", jobs.EncodingUTF8:
	case jobs.EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(f.Content)
		if err != nil {
			return fmt.Errorf("is not valid base64: %w", err)
		}
		f.Content = string(b)
	default:
		return fmt.Errorf("must be %s, not %q", strings.Join(jobs.Encodings, " or "), f.Encoding)
	}
	f.Encoding = ""
	return nil
}

// Limits on what a skill may hold. A tenant's skills are all mounted into
// every sandbox, so the tenant as a whole has a cap too.
const (
	MaxSkillMD       = 64 << 10
	MaxFiles         = 100
	MaxFileBytes     = 1 << 20
	MaxTotalBytes    = 4 << 20
	MaxTenantBytes   = 32 << 20
	MaxNameLen       = 64
	MaxDescription   = 1024
	MaxCompatibility = 500
	MaxLicense       = 500
	MaxAllowedTools  = 1024
	MaxMetadata      = 64
	MaxMetadataKey   = 64
	MaxMetadataValue = 1024
	MaxTags          = 20
	SkillFileName    = "SKILL.md"
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

// NamePattern is the standard's skill name (of at most MaxNameLen
// characters): lowercase letters, digits and single hyphens between them.
const NamePattern = `^[a-z0-9]+(-[a-z0-9]+)*$`

// Languages are the languages a skill's examples and code may be in.
var Languages = []string{"python", "bash", "node"}

var (
	nameRE    = regexp.MustCompile(NamePattern)
	tagRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]{0,31}$`)
	packageRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9+._-]{0,63}$`)
)

// CheckName says why name is not a valid skill name, or returns nil. The
// standard's rule: 1 to 64 characters, lowercase letters, digits and
// hyphens, no hyphen at either end and never two in a row.
func CheckName(name string) error {
	switch {
	case name == "":
		return errf("name", "is required")
	case len(name) > MaxNameLen:
		return errf("name", "%q is %d characters; at most %d", truncate(name, 80), len(name), MaxNameLen)
	case nameRE.MatchString(name):
		return nil
	case strings.HasPrefix(name, "-") || strings.HasSuffix(name, "-"):
		return errf("name", "%q must not start or end with a hyphen", name)
	case strings.Contains(name, "--"):
		return errf("name", "%q must not contain two hyphens in a row", name)
	case strings.Contains(name, "_") && nameRE.MatchString(strings.ReplaceAll(name, "_", "-")):
		return errf("name", "%q: skill names use hyphens, not underscores (%q); Python still imports it as skills.%s",
			name, strings.ReplaceAll(name, "_", "-"), name)
	}
	return errf("name", "%q may hold only lowercase letters, digits and hyphens", truncate(name, 80))
}

// ImportName is the name Python imports the skill by: skills.<ImportName>.
func ImportName(name string) string { return strings.ReplaceAll(name, "-", "_") }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// Validate checks every field and normalises tags and files (base64 content
// decoded, paths cleaned, files sorted by path).
func (s *Skill) Validate() error {
	s.Description = strings.TrimSpace(s.Description)
	s.License = strings.TrimSpace(s.License)
	s.Compatibility = strings.TrimSpace(s.Compatibility)
	s.AllowedTools = strings.TrimSpace(s.AllowedTools)
	if err := CheckName(s.Name); err != nil {
		return err
	}
	switch n := utf8.RuneCountInString(s.Description); {
	case s.Description == "":
		return errf("description", "is required: what the skill does and when to use it")
	case n > MaxDescription:
		return errf("description", "is %d characters; at most %d", n, MaxDescription)
	}
	if n := utf8.RuneCountInString(s.Compatibility); n > MaxCompatibility {
		return errf("compatibility", "is %d characters; at most %d", n, MaxCompatibility)
	}
	if n := utf8.RuneCountInString(s.License); n > MaxLicense {
		return errf("license", "is %d characters; at most %d", n, MaxLicense)
	}
	if n := utf8.RuneCountInString(s.AllowedTools); n > MaxAllowedTools {
		return errf("allowed-tools", "is %d characters; at most %d", n, MaxAllowedTools)
	}
	if err := checkMetadata(s.Metadata); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(s.Body) == "":
		return errf("body", "is required: when to use the skill, the steps and an example")
	case len(s.Body) > MaxSkillMD-4096:
		return errf("body", "is %d bytes; at most %d", len(s.Body), MaxSkillMD-4096)
	case s.Version < 0:
		return errf("version", "must be a positive whole number")
	}
	if s.Language == "" {
		s.Language = "python"
	}
	if !slices.Contains(Languages, s.Language) {
		return errf("language", "must be one of %s, not %q", strings.Join(Languages, ", "), s.Language)
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
	if err := s.validateFiles(); err != nil {
		return err
	}
	if s.Tags == nil {
		s.Tags = []string{}
	}
	if s.Requires == nil {
		s.Requires = []string{}
	}
	if len(s.Metadata) == 0 {
		s.Metadata = nil
	}
	return nil
}

func checkMetadata(m map[string]string) error {
	if len(m) > MaxMetadata {
		return errf("metadata", "has %d entries; at most %d", len(m), MaxMetadata)
	}
	for k, v := range m {
		switch {
		case strings.TrimSpace(k) == "":
			return errf("metadata", "has an empty key")
		case len(k) > MaxMetadataKey:
			return errf("metadata", "key %q is longer than %d bytes", truncate(k, 80), MaxMetadataKey)
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return errf("metadata", "must be UTF-8 text")
		case utf8.RuneCountInString(v) > MaxMetadataValue:
			return errf("metadata."+k, "is longer than %d characters", MaxMetadataValue)
		}
	}
	return nil
}

func (s *Skill) validateFiles() error {
	if len(s.Files) > MaxFiles {
		return errf("files", "has %d files; at most %d", len(s.Files), MaxFiles)
	}
	total := len(s.Body)
	seen := map[string]bool{}
	for i := range s.Files {
		f := &s.Files[i]
		field := fmt.Sprintf("files[%d]", i)
		if err := f.Decode(); err != nil {
			field += ".content"
			if f.Encoding != "" && f.Encoding != "base64" {
				field = fmt.Sprintf("files[%d].encoding", i)
			}
			return errf(field, "%v", err)
		}
		p, err := cleanPath(f.Path)
		if err != nil {
			return errf(field+".path", "%v", err)
		}
		if seen[p] {
			return errf(field+".path", "%q is given twice", p)
		}
		seen[p] = true
		if len(f.Content) > MaxFileBytes {
			return errf(field+".content", "%s is %d bytes; at most %d per file", p, len(f.Content), MaxFileBytes)
		}
		total += len(f.Content)
		f.Path = p
	}
	if total > MaxTotalBytes {
		return errf("files", "the skill holds %d bytes; at most %d", total, MaxTotalBytes)
	}
	sort.Slice(s.Files, func(i, j int) bool { return s.Files[i].Path < s.Files[j].Path })
	if s.Files == nil {
		s.Files = []File{}
	}
	return nil
}

// cleanPath checks a file's path inside the skill: relative, not leaving
// the folder, no hidden parts, not SKILL.md itself.
func cleanPath(p string) (string, error) {
	bad := func() (string, error) {
		return "", fmt.Errorf("%q must be a plain relative path inside the skill's folder", truncate(p, 200))
	}
	if p == "" || len(p) > 512 || !utf8.ValidString(p) || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\x00\\") {
		return bad()
	}
	c := path.Clean(p)
	for _, seg := range strings.Split(c, "/") {
		if seg == ".." || seg == "." || strings.HasPrefix(seg, ".") {
			return bad()
		}
	}
	if c == SkillFileName {
		return "", fmt.Errorf("SKILL.md is the skill itself, not one of its files")
	}
	return c, nil
}

// Size is how many bytes the skill takes when mounted: its SKILL.md and
// files.
func (s Skill) Size() int {
	n := len(s.Markdown())
	for _, f := range s.Files {
		n += len(f.Content)
	}
	return n
}

// Summary is the skill's one-line entry in a list.
func (s Skill) Summary() string { return s.Name + ": " + OneLine(s.Description) }

// OneLine folds a multi-line text (a description) onto one line.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// builtinFS holds the built-in skills, one folder each, named here one by
// one (this directory also holds Go test data); TestBuiltins checks that
// every folder with a SKILL.md is listed.
//
//go:embed plotting data-analysis symbolic-math csv-json-files
var builtinFS embed.FS

// Builtins returns the skills that ship with gantry, parsed from the
// folders beside this file (each named as its skill, as the standard asks).
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
		s, err := ReadDir(builtinFS, d.Name())
		if err != nil {
			return nil, fmt.Errorf("built-in skill %s: %w", d.Name(), err)
		}
		out = append(out, s)
	}
	return out, nil
}

// ReadDir reads the skill in folder dir of fsys: its SKILL.md, whose name
// must be the folder's, and every file under it.
func ReadDir(fsys fs.FS, dir string) (Skill, error) {
	md, err := fs.ReadFile(fsys, dir+"/"+SkillFileName)
	if err != nil {
		return Skill{}, err
	}
	s, err := Parse(md)
	if err != nil {
		return Skill{}, err
	}
	if s.Name != dir {
		return Skill{}, errf("name", "%q does not match the skill's folder %q", s.Name, dir)
	}
	err = fs.WalkDir(fsys, dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || p == dir+"/"+SkillFileName {
			return err
		}
		content, err := fs.ReadFile(fsys, p)
		s.Files = append(s.Files, File{Path: strings.TrimPrefix(p, dir+"/"), Content: string(content)})
		return err
	})
	if err != nil {
		return Skill{}, err
	}
	return s, s.Validate()
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
