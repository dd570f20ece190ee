package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Operation is one operation of the HTTP API as the document describes
// it: the route table's entries, less their handlers.
type Operation struct {
	Method, Path string // the mux pattern's; {name...} takes the rest of the path
	ID           string // operationId, unique
	Summary      string
	Description  string
	Tags         []string
	// Public operations are served without an API key; the others may
	// also answer the document's AuthErrors.
	Public bool
	Params []Param
	Body   *Body
	// Errors are shared error answers the operation gives, by status
	// (Document.SharedErrors). An operation with a body may also answer
	// 408 (its body too slow).
	Errors    []int
	Responses []Response
}

// Param is a parameter of an operation: a shared one (Ref, a name of
// components.parameters) or its own.
type Param struct {
	Ref         string
	In, Name    string // query, header or path
	Description string
	Required    bool
	Of          reflect.Type // the value's Go type, whose schema is reflected
	Schema      JS           // or the schema as is; neither: a string
	Examples    JS
	More        JS // other keywords of the parameter object
}

// Body is what an operation takes, by media type.
type Body struct {
	Description string
	Required    bool
	Content     []Media
}

// Media is one media type of a body: its schema reflected from a Go type,
// or given as is (Raw) when the body is not JSON.
type Media struct {
	Type   string
	Schema reflect.Type
	Raw    JS
	// Events are the data of each event of a text/event-stream, by event
	// name (written as x-sse-events).
	Events map[string]reflect.Type
	More   JS // other keywords of the media type object (examples)
}

// Response is one answer of an operation: a shared one (Ref, a name of
// components.responses) or its own.
type Response struct {
	Status      string // "200", "2XX", "default"
	Ref         string
	Description string
	Headers     JS
	Content     []Media
}

// Document is what the document holds besides its operations.
type Document struct {
	Info     JS
	Tags     []any
	Webhooks JS
	// Components are the named schemas, reflected from their types, with
	// their Notes.
	Components []Component
	Notes      map[string]Note
	// Parameters, Headers, Responses and SecuritySchemes are the shared
	// components of those kinds, as they are.
	Parameters, Headers, Responses, SecuritySchemes JS
	// SharedErrors names the components.responses an operation's Errors
	// refer to, by status.
	SharedErrors map[int]string
	// AuthErrors are the answers every operation that is not public may
	// give, besides its own: components.responses names by status.
	AuthErrors []StatusRef
}

// StatusRef is a status and the name of its components.responses entry.
type StatusRef struct {
	Status string
	Name   string
}

var pathVar = regexp.MustCompile(`\{([^}.]+)(\.\.\.)?\}`)

// Write writes the OpenAPI 3.1 document of the operations: their answers'
// and bodies' schemas reflected from the Go types, the prose of d laid
// over them. Everything is checked as it is written: an operationId used
// twice, an undeclared path parameter, a reference to no component, a
// note on a property a type does not have are errors.
func Write(ops []Operation, d Document) ([]byte, error) {
	g := NewReflector(d.Components)
	paths := js{}
	ids := map[string]string{}
	for _, rt := range ops {
		key := rt.Method + " " + rt.Path
		if other, dup := ids[rt.ID]; dup {
			return nil, fmt.Errorf("operationId %s: both %s and %s", rt.ID, other, key)
		}
		ids[rt.ID] = key
		op, err := g.operation(rt, d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		path := pathVar.ReplaceAllString(rt.Path, "{$1}")
		item, _ := paths[path].(js)
		if item == nil {
			item = js{}
			paths[path] = item
		}
		method := strings.ToLower(rt.Method)
		if item[method] != nil {
			return nil, fmt.Errorf("%s is in the route table twice", key)
		}
		item[method] = op
	}
	schemas, err := g.components(d.Notes)
	if err != nil {
		return nil, err
	}
	doc := js{
		"openapi":  "3.1.0",
		"info":     d.Info,
		"servers":  []any{js{"url": "/"}},
		"security": []any{js{"bearerAuth": []any{}}},
		"tags":     d.Tags,
		"paths":    paths,
		"webhooks": d.Webhooks,
		"components": js{
			"schemas":         schemas,
			"parameters":      d.Parameters,
			"headers":         d.Headers,
			"responses":       d.Responses,
			"securitySchemes": d.SecuritySchemes,
		},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// operation is the document's operation object of a route.
func (g *Reflector) operation(rt Operation, d Document) (js, error) {
	op := js{"operationId": rt.ID, "summary": rt.Summary, "tags": rt.Tags}
	if rt.Description != "" {
		op["description"] = rt.Description
	}
	if rt.Public {
		op["security"] = []any{}
	}
	declared := map[string]bool{}
	var params []any
	for _, p := range rt.Params {
		if p.Ref != "" {
			shared, ok := d.Parameters[p.Ref].(js)
			if !ok {
				return nil, fmt.Errorf("no shared parameter %q", p.Ref)
			}
			if shared["in"] == "path" {
				declared[shared["name"].(string)] = true
			}
			params = append(params, js{"$ref": "#/components/parameters/" + p.Ref})
			continue
		}
		o := js{"name": p.Name, "in": p.In}
		for k, v := range p.More {
			o[k] = v
		}
		if p.Description != "" {
			o["description"] = p.Description
		}
		o["required"] = p.Required || p.In == "path"
		switch {
		case p.Of != nil:
			s, err := g.Schema(p.Of)
			if err != nil {
				return nil, fmt.Errorf("parameter %s: %w", p.Name, err)
			}
			o["schema"] = s
		case p.Schema != nil:
			o["schema"] = p.Schema
		default:
			o["schema"] = js{"type": "string"}
		}
		if p.Examples != nil {
			o["examples"] = p.Examples
		}
		if p.In == "path" {
			declared[p.Name] = true
		}
		params = append(params, o)
	}
	for _, m := range pathVar.FindAllStringSubmatch(rt.Path, -1) {
		if !declared[m[1]] {
			return nil, fmt.Errorf("path parameter %q is not declared", m[1])
		}
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if rt.Body != nil {
		content, err := g.content(rt.Body.Content)
		if err != nil {
			return nil, fmt.Errorf("request body: %w", err)
		}
		b := js{"content": content, "required": rt.Body.Required}
		if rt.Body.Description != "" {
			b["description"] = rt.Body.Description
		}
		op["requestBody"] = b
	}
	responses := js{}
	for _, r := range rt.Responses {
		if responses[r.Status] != nil {
			return nil, fmt.Errorf("answer %s is listed twice", r.Status)
		}
		if r.Ref != "" {
			if _, ok := d.Responses[r.Ref]; !ok {
				return nil, fmt.Errorf("no shared response %q", r.Ref)
			}
			responses[r.Status] = js{"$ref": "#/components/responses/" + r.Ref}
			continue
		}
		if r.Description == "" {
			return nil, fmt.Errorf("answer %s has no description", r.Status)
		}
		o := js{"description": r.Description}
		if r.Headers != nil {
			o["headers"] = r.Headers
		}
		if len(r.Content) > 0 {
			content, err := g.content(r.Content)
			if err != nil {
				return nil, fmt.Errorf("answer %s: %w", r.Status, err)
			}
			o["content"] = content
		}
		responses[r.Status] = o
	}
	for _, code := range rt.Errors {
		name, ok := d.SharedErrors[code]
		status := strconv.Itoa(code)
		if !ok {
			return nil, fmt.Errorf("no shared answer for %d: list it in resps", code)
		}
		if responses[status] != nil {
			return nil, fmt.Errorf("answer %s is listed twice", status)
		}
		responses[status] = js{"$ref": "#/components/responses/" + name}
	}
	if rt.Body != nil && responses["408"] == nil {
		responses["408"] = js{"$ref": "#/components/responses/RequestTimeout"}
	}
	if !rt.Public {
		for _, e := range d.AuthErrors {
			if responses[e.Status] == nil {
				responses[e.Status] = js{"$ref": "#/components/responses/" + e.Name}
			}
		}
	}
	if len(responses) == 0 {
		return nil, fmt.Errorf("no answers")
	}
	op["responses"] = responses
	return op, nil
}

// content is the content map of a body.
func (g *Reflector) content(ms []Media) (js, error) {
	out := js{}
	for _, m := range ms {
		o := js{}
		for k, v := range m.More {
			o[k] = v
		}
		switch {
		case m.Schema != nil:
			s, err := g.Schema(m.Schema)
			if err != nil {
				return nil, err
			}
			o["schema"] = s
		case m.Raw != nil:
			o["schema"] = m.Raw
		}
		if len(m.Events) > 0 {
			ev := js{}
			names := make([]string, 0, len(m.Events))
			for n := range m.Events {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				s, err := g.Schema(m.Events[n])
				if err != nil {
					return nil, err
				}
				ev[n] = s
			}
			o["x-sse-events"] = ev
		}
		out[m.Type] = o
	}
	return out, nil
}
