// Package openapi reflects gantry's contract from its Go types: JSON
// Schemas of the types the API reads and writes, as encoding/json writes
// them (Reflector, also used for the MCP tools' schemas), and the OpenAPI
// 3.1 document of the HTTP API from its operations (Write), with the
// prose the types cannot carry laid over them (Note).
package openapi

import (
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/gantryhq/gantry/chat"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/skills"
)

// JS is a JSON object of the document (a schema, an operation, ...).
type JS = map[string]any

type js = JS

// TypeOf is the reflect.Type of T, for schemas.
func TypeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

func typ[T any]() reflect.Type { return reflect.TypeFor[T]() }

// Component is a schema of components.schemas and the Go type it is
// reflected from. Wherever else the type appears it is a $ref.
type Component struct {
	Name string
	Type reflect.Type
}

// enums are the values of the API's string enumerations, from the Go
// constants that define them.
var enums = map[reflect.Type][]any{
	typ[jobs.Status]():        Enum(jobs.Statuses),
	typ[jobs.ErrorCode]():     Enum(jobs.ErrorCodes),
	typ[jobs.CompileStatus](): Enum(jobs.CompileStatuses),
	typ[service.Code]():       Enum(service.Codes),
	typ[jobs.LiveState]():     Enum(jobs.LiveStates),
	typ[jobs.TestStatus]():    Enum(jobs.TestStatuses),
	typ[jobs.Compare]():       Enum(jobs.Compares),
}

// Enum is a list of values as a schema's enum.
func Enum[T ~string](values []T) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// typeSchemas are the schemas of types whose JSON is not their fields.
var typeSchemas = map[reflect.Type]js{
	typ[time.Time]():       {"type": "string", "format": "date-time"},
	typ[json.RawMessage](): {},
	// A message's text: written as a string, read also as null or an
	// array of text parts.
	typ[chat.Content](): {"oneOf": []any{
		js{"type": "string"},
		js{"type": "null"},
		js{"type": "array", "items": js{"type": "object", "required": []any{"type", "text"}, "properties": js{"type": js{"const": "text"}, "text": js{"type": "string"}}}},
	}},
}

// sameShape are types with a MarshalJSON that writes their fields as
// reflected (skills.File chooses the encoding of its content).
var sameShape = map[reflect.Type]bool{
	typ[skills.File](): true,
}

// Note is what a component's Go type cannot say (descriptions, examples,
// patterns, bounds), by property.
type Note struct {
	Description string        `yaml:"description"`
	More        JS            `yaml:"more"`
	Properties  map[string]JS `yaml:"properties"`
	// Optional are fields of a request type without omitempty that the
	// decoder does not require (it fills in a default).
	Optional []string `yaml:"optional"`
}

// Reflector reflects JSON Schemas (2020-12, as OpenAPI 3.1 has them) from
// Go types, as encoding/json writes them: fields without omitempty or
// omitzero are required, pointers nullable, the components' types $refs,
// string enums from the Go constants of their package.
type Reflector struct {
	names map[reflect.Type]string
	order []Component
}

// NewReflector reflects with these components (nil: none, every schema
// stands alone).
func NewReflector(cs []Component) *Reflector {
	g := &Reflector{names: map[reflect.Type]string{}, order: cs}
	for _, c := range cs {
		g.names[c.Type] = c.Name
	}
	return g
}

// components reflects every component and adds its notes.
func (g *Reflector) components(notes map[string]Note) (js, error) {
	out := js{}
	for _, c := range g.order {
		if out[c.Name] != nil {
			return nil, fmt.Errorf("component %s is listed twice", c.Name)
		}
		s, err := g.define(c.Type, map[reflect.Type]bool{})
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", c.Name, err)
		}
		// An embedded component's fields are flattened into the object
		// (additionalProperties: false rules out allOf); its notes on them
		// come along.
		for i := range structFields(c.Type) {
			f := c.Type.Field(i)
			if base, ok := g.names[f.Type]; ok && f.Anonymous && f.Tag.Get("json") == "" {
				if err := (Note{Properties: notes[base].Properties}).apply(s); err != nil {
					return nil, fmt.Errorf("schema %s, fields of %s: %w", c.Name, base, err)
				}
			}
		}
		if n, ok := notes[c.Name]; ok {
			if err := n.apply(s); err != nil {
				return nil, fmt.Errorf("schema %s: %w", c.Name, err)
			}
		}
		out[c.Name] = s
	}
	for name := range notes {
		if out[name] == nil {
			return nil, fmt.Errorf("notes for %s, which is no component", name)
		}
	}
	return out, nil
}

// structFields is t's number of fields (0 if t is no struct).
func structFields(t reflect.Type) int {
	if t.Kind() != reflect.Struct {
		return 0
	}
	return t.NumField()
}

// apply adds the note to a reflected schema. A note on a property the type
// does not have is an error: the prose follows the type.
func (n Note) apply(s js) error {
	if n.Description != "" {
		s["description"] = n.Description
	}
	maps.Copy(s, n.More)
	own := s
	props, _ := own["properties"].(js)
	for name, extra := range n.Properties {
		p, ok := props[name].(js)
		if !ok {
			return fmt.Errorf("a note on property %q, which the type does not have", name)
		}
		for k, v := range extra {
			// Notes on an array's items add to the reflected items.
			if items, ok := p[k].(js); ok && k == "items" {
				if more, ok := v.(js); ok {
					maps.Copy(items, more)
					continue
				}
			}
			p[k] = v
		}
	}
	for _, name := range n.Optional {
		req, _ := own["required"].([]any)
		i := slices.Index(req, any(name))
		if i < 0 {
			return fmt.Errorf("optional %q is not a required property", name)
		}
		if req = slices.Delete(req, i, i+1); len(req) == 0 {
			delete(own, "required")
		} else {
			own["required"] = req
		}
	}
	return nil
}

// Schema is the schema of a value of type t where it is used: a $ref for a
// component, else its reflected schema.
func (g *Reflector) Schema(t reflect.Type) (JS, error) {
	return g.use(t, map[reflect.Type]bool{})
}

func (g *Reflector) use(t reflect.Type, seen map[reflect.Type]bool) (js, error) {
	nullable := false
	for t.Kind() == reflect.Pointer {
		nullable, t = true, t.Elem()
	}
	var s js
	if name, ok := g.names[t]; ok {
		s = js{"$ref": "#/components/schemas/" + name}
	} else {
		var err error
		if s, err = g.define(t, seen); err != nil {
			return nil, err
		}
	}
	if !nullable {
		return s, nil
	}
	switch ty := s["type"].(type) {
	case string:
		s["type"] = []any{ty, "null"}
	case nil:
		if _, ok := s["$ref"]; ok {
			return js{"oneOf": []any{s, js{"type": "null"}}}, nil
		}
		// No type: anything, null included.
	}
	return s, nil
}

var (
	marshalerType     = typ[json.Marshaler]()
	textMarshalerType = typ[encoding.TextMarshaler]()
)

// define reflects the schema of t itself (never a $ref to t).
func (g *Reflector) define(t reflect.Type, seen map[reflect.Type]bool) (js, error) {
	if s, ok := typeSchemas[t]; ok {
		return maps.Clone(s), nil
	}
	if !sameShape[t] && (t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) ||
		t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType)) {
		return nil, fmt.Errorf("%s marshals itself: give it a schema in typeSchemas", t)
	}
	switch t.Kind() {
	case reflect.Bool:
		return js{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32:
		return js{"type": "integer"}, nil
	case reflect.Int64:
		return js{"type": "integer", "format": "int64"}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return js{"type": "integer", "minimum": 0}, nil
	case reflect.Float32, reflect.Float64:
		return js{"type": "number"}, nil
	case reflect.String:
		s := js{"type": "string"}
		if e, ok := enums[t]; ok {
			s["enum"] = slices.Clone(e)
		}
		return s, nil
	case reflect.Interface:
		return js{}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return js{"type": "string", "contentEncoding": "base64"}, nil
		}
		items, err := g.use(t.Elem(), seen)
		if err != nil {
			return nil, err
		}
		return js{"type": "array", "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map keys must be strings", t)
		}
		values, err := g.use(t.Elem(), seen)
		if err != nil {
			return nil, err
		}
		return js{"type": "object", "additionalProperties": values}, nil
	case reflect.Struct:
		if seen[t] {
			return nil, fmt.Errorf("%s contains itself: make it a component", t)
		}
		seen[t] = true
		defer delete(seen, t)
		return g.object(t, seen)
	}
	return nil, fmt.Errorf("%s: no JSON Schema for kind %s", t, t.Kind())
}

// field is a property of a struct as encoding/json sees it.
type field struct {
	name     string
	depth    int
	required bool
	schema   js
}

// object reflects a struct: its JSON fields, embedded structs' promoted
// ones included; fields without omitempty or omitzero are required.
func (g *Reflector) object(t reflect.Type, seen map[reflect.Type]bool) (js, error) {
	fields := map[string]field{}
	var order []string
	var walk func(t reflect.Type, depth int) error
	walk = func(t reflect.Type, depth int) error {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			ft := f.Type
			if f.Anonymous && name == "" {
				et := ft
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct {
					if err := walk(et, depth+1); err != nil {
						return err
					}
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if old, ok := fields[name]; ok && old.depth <= depth {
				continue
			}
			omit := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
			if omit && ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
				// A nil struct is left out, never written as null (and a
				// request's null for it reads as absent).
				ft = ft.Elem()
			}
			s, err := g.use(ft, seen)
			if err != nil {
				return fmt.Errorf("%s.%s: %w", t, f.Name, err)
			}
			if d := f.Tag.Get("jsonschema"); d != "" {
				s["description"] = d
			}
			if _, ok := fields[name]; !ok {
				order = append(order, name)
			}
			fields[name] = field{name: name, depth: depth, required: !omit, schema: s}
		}
		return nil
	}
	if err := walk(t, 0); err != nil {
		return nil, err
	}
	props := js{}
	var required []any
	for _, n := range order {
		f := fields[n]
		props[n] = f.schema
		if f.required {
			required = append(required, n)
		}
	}
	s := js{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s, nil
}
