package codemode

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Signature renders a tool for a model to call from code, in a fraction of
// the bytes of its JSON schemas:
//
//	shop.list_orders(customer_id: number, status?: "late"|"shipped") -> {orders?: object[]}
//	  List a customer's orders.
//	  customer_id: The customer's id
//
// Optional arguments end in "?"; each documented argument gets a line with
// its description and default. Schemas it cannot read become "any". The
// JSON schemas themselves stay available (ToolInfo.InputSchema).
func Signature(t ToolInfo) string {
	var in, out map[string]any
	_ = json.Unmarshal(t.InputSchema, &in)
	_ = json.Unmarshal(t.OutputSchema, &out)
	params := ""
	if props, _ := in["properties"].(map[string]any); len(props) > 0 {
		params = strings.TrimSuffix(strings.TrimPrefix(objectType(in, 0), "{"), "}")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s.%s(%s)", t.Server, t.Name, params)
	if out != nil {
		b.WriteString(" -> " + schemaType(out, 0))
	}
	if d := strings.Join(strings.Fields(t.Description), " "); d != "" {
		b.WriteString("\n  " + d)
	}
	props, _ := in["properties"].(map[string]any)
	for _, name := range propertyOrder(in) {
		p, _ := props[name].(map[string]any)
		desc, _ := p["description"].(string)
		desc = strings.Join(strings.Fields(desc), " ")
		if def, ok := p["default"]; ok {
			d, _ := json.Marshal(def)
			desc = strings.TrimSpace(desc + " (default " + string(d) + ")")
		}
		if desc != "" {
			fmt.Fprintf(&b, "\n  %s: %s", name, desc)
		}
	}
	return b.String()
}

// maxTypeDepth bounds how deep nested objects are spelled out.
const maxTypeDepth = 3

func schemaType(s map[string]any, depth int) string {
	if s == nil {
		return "any"
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		vals := make([]string, len(enum))
		for i, v := range enum {
			b, _ := json.Marshal(v)
			vals[i] = string(b)
		}
		return strings.Join(vals, "|")
	}
	if c, ok := s["const"]; ok {
		b, _ := json.Marshal(c)
		return string(b)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[key].([]any); ok && len(alts) > 0 {
			var parts []string
			for _, a := range alts {
				m, _ := a.(map[string]any)
				parts = append(parts, schemaType(m, depth+1))
			}
			return strings.Join(parts, "|")
		}
	}
	switch ty := s["type"].(type) {
	case string:
		return typeName(ty, s, depth)
	case []any:
		var parts []string
		for _, one := range ty {
			if name, ok := one.(string); ok {
				parts = append(parts, typeName(name, s, depth))
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "|")
		}
	}
	if _, ok := s["properties"]; ok {
		return objectType(s, depth)
	}
	return "any"
}

func typeName(ty string, s map[string]any, depth int) string {
	switch ty {
	case "array":
		items, _ := s["items"].(map[string]any)
		t := schemaType(items, depth+1)
		if strings.ContainsAny(t, "|") {
			t = "(" + t + ")"
		}
		return t + "[]"
	case "object":
		return objectType(s, depth)
	}
	return ty
}

func objectType(s map[string]any, depth int) string {
	props, _ := s["properties"].(map[string]any)
	if len(props) == 0 {
		if extra, ok := s["additionalProperties"].(map[string]any); ok {
			return "{[key: string]: " + schemaType(extra, depth+1) + "}"
		}
		return "object"
	}
	if depth >= maxTypeDepth {
		return "object"
	}
	required := map[string]bool{}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	var parts []string
	for _, name := range propertyOrder(s) {
		p, _ := props[name].(map[string]any)
		opt := "?"
		if required[name] {
			opt = ""
		}
		parts = append(parts, name+opt+": "+schemaType(p, depth+1))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// propertyOrder lists an object schema's properties, required ones first,
// each group by name (stored schemas do not keep their key order).
func propertyOrder(s map[string]any) []string {
	props, _ := s["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if required[names[i]] != required[names[j]] {
			return required[names[i]]
		}
		return names[i] < names[j]
	})
	return names
}
