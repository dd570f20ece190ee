package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// schema is one JSON Schema object of the document, as decoded.
type schema = map[string]any

// document is the part of the OpenAPI document the generator reads.
type document struct {
	Info struct {
		Title   string `json:"title"`
		Version string `json:"version"`
	} `json:"info"`
	Components struct {
		Schemas map[string]schema `json:"schemas"`
	} `json:"components"`
}

func parse(data []byte) (*document, error) {
	var d document
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	if len(d.Components.Schemas) == 0 {
		return nil, fmt.Errorf("openapi.json has no components.schemas")
	}
	return &d, nil
}

// names lists the document's schemas in a stable order.
func (d *document) names() []string {
	out := make([]string, 0, len(d.Components.Schemas))
	for n := range d.Components.Schemas {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// errorCodes are the API's error codes: the enum of ErrorDetail.code (or
// of Error.error.code in documents that inline it).
func (d *document) errorCodes() []string {
	s := d.Components.Schemas["ErrorDetail"]
	if s == nil {
		if e := d.Components.Schemas["Error"]; e != nil {
			s, _ = props(e)["error"].(schema)
		}
	}
	code, _ := props(s)["code"].(schema)
	return enumStrings(code)
}

func props(s schema) map[string]any {
	p, _ := s["properties"].(map[string]any)
	return p
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func required(s schema) map[string]bool {
	out := map[string]bool{}
	r, _ := s["required"].([]any)
	for _, v := range r {
		if n, ok := v.(string); ok {
			out[n] = true
		}
	}
	return out
}

// types is a schema's "type", as a list.
func types(s schema) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, v := range t {
			if n, ok := v.(string); ok {
				out = append(out, n)
			}
		}
		return out
	}
	return nil
}

func refName(s schema) (string, bool) {
	r, ok := s["$ref"].(string)
	if !ok {
		return "", false
	}
	return strings.TrimPrefix(r, "#/components/schemas/"), true
}

func enumStrings(s schema) []string {
	e, _ := s["enum"].([]any)
	var out []string
	for _, v := range e {
		if n, ok := v.(string); ok {
			out = append(out, n)
		}
	}
	return out
}

// enumNull reports whether a schema's enum lists null (a nullable enum).
func enumNull(s schema) bool {
	e, _ := s["enum"].([]any)
	return slices.Contains(e, nil)
}

func subschemas(s schema, key string) []schema {
	l, _ := s[key].([]any)
	var out []schema
	for _, v := range l {
		if m, ok := v.(schema); ok {
			out = append(out, m)
		}
	}
	return out
}

// isObject reports whether s describes an object with named properties.
func isObject(s schema) bool {
	return props(s) != nil
}

func description(s schema) string {
	d, _ := s["description"].(string)
	return strings.TrimSpace(d)
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// pascal turns a property name into a part of a type name.
func pascal(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		switch {
		case r == '_' || r == '-' || r == '.' || r == ' ':
			up = true
		case up:
			b.WriteString(strings.ToUpper(string(r)))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// wrap breaks text into lines of at most width runes.
func wrap(text string, width int) []string {
	var lines []string
	for _, para := range strings.Split(text, "\n") {
		words := strings.Fields(para)
		line := ""
		for _, w := range words {
			if line != "" && len([]rune(line))+1+len([]rune(w)) > width {
				lines = append(lines, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += w
		}
		lines = append(lines, line)
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func quote(s string) string { return strconv.Quote(s) }
