package mcpapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/gantryhq/gantry/ingress/openapi"
)

// The MCP tools' schemas are reflected from the Go types their handlers
// decode the arguments into and answer with, by the reflector that writes
// openapi.json (package openapi): a field the handler reads is in the
// input schema, a field it answers is in the output schema, and the two
// cannot drift. Fields without omitempty are required. Each schema stands
// alone (no $ref: MCP clients pass a tool's schema to a model as it is).
//
// What a type cannot say (bounds, enums, a short description a model needs
// to write the call) is a toolNote laid over the reflected schema, by
// property path. Every byte of tools/list is in the model's context, so
// the notes are short and the output schemas leave out
// additionalProperties: false (an answer never has more than its type).
//
// mcp-go's own WithInputSchema[T] reflects with google/jsonschema-go, whose
// struct tags carry only a description; the bounds here come from the
// operator's policy at startup, so they are notes, not tags.

// toolNote adds keywords to a reflected tool schema: by property path
// ("files.encoding" is the encoding of each item of files), and at the
// root (desc). A path the type does not have is a bug in gantry, found by
// the first test that starts a server.
type toolNote struct {
	desc  string
	props map[string]js
}

// inputOf is a tool's input schema, reflected from In (the type its
// handler decodes the arguments into).
func inputOf[In any](note toolNote) mcp.ToolOption {
	raw := toolSchema(typ[In](), note, true)
	return func(t *mcp.Tool) {
		t.InputSchema = mcp.ToolInputSchema{}
		t.RawInputSchema = raw
	}
}

// outputOf is a tool's output schema, reflected from Out (the type of its
// structured content).
func outputOf[Out any](note toolNote) mcp.ToolOption {
	return mcp.WithRawOutputSchema(toolSchema(typ[Out](), note, false))
}

// toolSchema reflects t as a standalone schema and lays the note over it.
// It panics on a type the reflector cannot describe or a note that does
// not fit: both are bugs, not input.
func toolSchema(t reflect.Type, note toolNote, input bool) json.RawMessage {
	s, err := openapi.NewReflector(nil).Schema(t)
	if err != nil {
		panic(fmt.Sprintf("tool schema of %s: %v", t, err))
	}
	if s["type"] != "object" {
		panic(fmt.Sprintf("tool schema of %s: a tool's arguments and structured content are objects", t))
	}
	trim(s, !input)
	if err := note.apply(s); err != nil {
		panic(fmt.Sprintf("tool schema of %s: %v", t, err))
	}
	raw, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return raw
}

func (n toolNote) apply(s js) error {
	if n.desc != "" {
		s["description"] = n.desc
	}
	for path, extra := range n.props {
		p, err := propertyAt(s, path)
		if err != nil {
			return err
		}
		maps.Copy(p, extra)
	}
	return nil
}

// propertyAt finds a property of s by its dotted path, stepping into the
// items of arrays and the values of maps on the way.
func propertyAt(s js, path string) (js, error) {
	node := s
	for _, name := range strings.Split(path, ".") {
		node = elements(node)
		props, _ := node["properties"].(js)
		p, ok := props[name].(js)
		if !ok {
			return nil, fmt.Errorf("a note on %q, which the type does not have", path)
		}
		node = p
	}
	return node, nil
}

// elements is the schema of what an array or map holds, or s itself.
func elements(s js) js {
	for {
		if items, ok := s["items"].(js); ok {
			s = items
			continue
		}
		if values, ok := s["additionalProperties"].(js); ok && s["properties"] == nil {
			s = values
			continue
		}
		return s
	}
}

// trim removes what only the OpenAPI document needs from every schema in
// s: format int64, and (closed) additionalProperties: false.
func trim(s js, closed bool) {
	if s["format"] == "int64" {
		delete(s, "format")
	}
	if v, ok := s["additionalProperties"].(bool); ok && !v && closed {
		delete(s, "additionalProperties")
	}
	for _, v := range s {
		switch v := v.(type) {
		case js:
			trim(v, closed)
		case []any:
			for _, e := range v {
				if e, ok := e.(js); ok {
					trim(e, closed)
				}
			}
		}
	}
}
