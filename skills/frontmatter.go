package skills

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

const frontMatterMark = "---"

// Front matter fields: the standard's, then gantry's own.
const (
	fieldName          = "name"
	fieldDescription   = "description"
	fieldLicense       = "license"
	fieldCompatibility = "compatibility"
	fieldMetadata      = "metadata"
	fieldAllowedTools  = "allowed-tools"
	fieldVersion       = "version"
	fieldTags          = "tags"
	fieldLanguage      = "language"
	fieldRequires      = "requires"
)

const unknownFieldHelp = "unknown front matter field; the standard's fields are name, description, license, compatibility, " +
	"metadata and allowed-tools (put anything else under metadata), and gantry also reads version, tags, language and requires"

// Parse reads a SKILL.md: YAML front matter between --- lines, then the
// markdown body. It walks the YAML itself, so that every error names the
// front matter field at fault. The version in the front matter is
// optional (0 when absent).
func Parse(md []byte) (Skill, error) {
	if len(md) > MaxSkillMD {
		return Skill{}, errf("SKILL.md", "is %d bytes; at most %d", len(md), MaxSkillMD)
	}
	if !utf8.Valid(md) {
		return Skill{}, errf("SKILL.md", "must be UTF-8 text")
	}
	text := strings.TrimPrefix(string(md), "\ufeff")
	text = strings.ReplaceAll(text, "\r\n", "\n")
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
	s, err := decodeFrontMatter(header)
	if err != nil {
		return Skill{}, err
	}
	s.Body = strings.TrimLeft(body, "\n")
	return s, s.Validate()
}

func decodeFrontMatter(header string) (Skill, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(header), &doc); err != nil {
		return Skill{}, errf("front matter", "is not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return Skill{}, errf("front matter", "is empty: name and description are required")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return Skill{}, errf("front matter", "must be a mapping of fields (name: ..., description: ...), not %s", kindName(root))
	}
	var s Skill
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return Skill{}, errf("front matter", "field names must be plain words, not %s", kindName(k))
		}
		key := k.Value
		if strings.TrimSpace(key) == "" {
			return Skill{}, errf("front matter", "has a field without a name")
		}
		if seen[key] {
			return Skill{}, errf(truncate(key, 64), "is given twice")
		}
		seen[key] = true
		var err error
		switch key {
		case fieldName:
			s.Name, err = text(key, v)
		case fieldDescription:
			s.Description, err = text(key, v)
		case fieldLicense:
			s.License, err = text(key, v)
		case fieldCompatibility:
			s.Compatibility, err = text(key, v)
		case fieldMetadata:
			s.Metadata, err = stringMap(key, v)
		case fieldAllowedTools:
			s.AllowedTools, err = textOrList(key, v)
		case fieldVersion:
			s.Version, err = wholeNumber(key, v)
		case fieldTags:
			s.Tags, err = list(key, v)
		case fieldLanguage:
			s.Language, err = text(key, v)
		case fieldRequires:
			s.Requires, err = list(key, v)
		default:
			err = errf(truncate(key, 64), unknownFieldHelp)
		}
		if err != nil {
			return Skill{}, err
		}
	}
	return s, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias (*name)"
	case yaml.DocumentNode:
		return "a document"
	}
	if n.Tag == "!!null" {
		return "empty"
	}
	return "text"
}

// text reads a scalar as text: YAML numbers and booleans count as their
// written form (a license of 2.0 is "2.0"); an empty value is "".
func text(field string, n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", errf(field, "must be text, not %s", kindName(n))
	}
	if n.Tag == "!!null" {
		return "", nil
	}
	if n.Tag == "!!binary" {
		return "", errf(field, "must be text, not binary data")
	}
	return n.Value, nil
}

func list(field string, n *yaml.Node) ([]string, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, errf(field, "must be a list, e.g. [a, b], not %s", kindName(n))
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		t, err := text(fmt.Sprintf("%s[%d]", field, i), item)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// textOrList reads allowed-tools: the standard writes it as one string of
// space-separated names; some hosts write a YAML list.
func textOrList(field string, n *yaml.Node) (string, error) {
	if n.Kind == yaml.SequenceNode {
		items, err := list(field, n)
		return strings.Join(items, " "), err
	}
	t, err := text(field, n)
	if err != nil {
		return "", errf(field, "must be text (tool names separated by spaces) or a list of tool names, not %s", kindName(n))
	}
	return t, nil
}

func stringMap(field string, n *yaml.Node) (map[string]string, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, errf(field, "must be a mapping of names to text (key: value lines, indented), not %s", kindName(n))
	}
	out := make(map[string]string, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
			return nil, errf(field, "keys must be plain words, not %s", kindName(k))
		}
		if _, dup := out[k.Value]; dup {
			return nil, errf(field+"."+truncate(k.Value, 64), "is given twice")
		}
		t, err := text(field+"."+truncate(k.Value, 64), v)
		if err != nil {
			return nil, errf(field+"."+truncate(k.Value, 64), "must be text (metadata maps names to strings), not %s", kindName(v))
		}
		out[k.Value] = t
	}
	return out, nil
}

func wholeNumber(field string, n *yaml.Node) (int, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, errf(field, "must be a whole number, not %s", describe(n))
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v < 1 {
		return 0, errf(field, "must be a positive whole number, not %s", describe(n))
	}
	return v, nil
}

func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		return strconv.Quote(truncate(n.Value, 40))
	}
	return kindName(n)
}

// Markdown renders the skill's SKILL.md: the standard's fields in the
// standard's order, gantry's own only where they differ from their
// defaults, then the body. The version is not written: it is the store's,
// shown beside the skill.
func (s Skill) Markdown() string {
	root := &yaml.Node{Kind: yaml.MappingNode}
	add := func(key string, v *yaml.Node) {
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
	}
	str := func(v string) *yaml.Node {
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
		if strings.Contains(v, "\n") {
			n.Style = yaml.LiteralStyle
		}
		return n
	}
	seq := func(items []string) *yaml.Node {
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, it := range items {
			n.Content = append(n.Content, str(it))
		}
		return n
	}
	add(fieldName, str(s.Name))
	add(fieldDescription, str(s.Description))
	if s.License != "" {
		add(fieldLicense, str(s.License))
	}
	if s.Compatibility != "" {
		add(fieldCompatibility, str(s.Compatibility))
	}
	if len(s.Metadata) > 0 {
		keys := make([]string, 0, len(s.Metadata))
		for k := range s.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		m := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range keys {
			m.Content = append(m.Content, str(k), str(s.Metadata[k]))
		}
		add(fieldMetadata, m)
	}
	if s.AllowedTools != "" {
		add(fieldAllowedTools, str(s.AllowedTools))
	}
	if len(s.Tags) > 0 {
		add(fieldTags, seq(s.Tags))
	}
	if s.Language != "" && s.Language != "python" {
		add(fieldLanguage, str(s.Language))
	}
	if len(s.Requires) > 0 {
		add(fieldRequires, seq(s.Requires))
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	_ = enc.Encode(root)
	return frontMatterMark + "\n" + buf.String() + frontMatterMark + "\n\n" + s.Body
}
