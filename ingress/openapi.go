package ingress

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

//go:generate go run ./openapigen

// openapiJSON is the OpenAPI 3.1 description of the HTTP API, served at
// /openapi.json and read by sdk/gen. It is what OpenAPI() writes (go
// generate ./ingress, or make openapi); TestOpenAPIUpToDate fails when the
// committed file is not.
//
//go:embed openapi.json
var openapiJSON []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapiJSON)
}

// js is a JSON object of the document (a schema, an operation, ...).
type js = map[string]any

// sharedErrorNames are the components.responses a route names by status
// in its errs.
var sharedErrorNames = map[int]string{
	http.StatusBadRequest:            "BadRequest",
	http.StatusNotFound:              "NotFound",
	http.StatusConflict:              "Conflict",
	http.StatusRequestEntityTooLarge: "PayloadTooLarge",
	http.StatusBadGateway:            "UpstreamError",
}

// authErrors are the answers every authenticated route may give: a bad
// key, the tenant's rate, a bug, the database away.
var authErrors = []struct {
	status string
	name   string
}{{"401", "Unauthenticated"}, {"429", "RateLimited"}, {"500", "Internal"}, {"503", "Unavailable"}}

var pathVar = regexp.MustCompile(`\{([^}.]+)(\.\.\.)?\}`)

// OpenAPI writes the API's OpenAPI 3.1 document: the operations from the
// route table, the schemas reflected from the Go types the handlers read
// and write, and the prose of openapi_text.go.
func OpenAPI() ([]byte, error) {
	g := newSchemaGen(componentTypes)
	paths := js{}
	ids := map[string]string{}
	for _, rt := range (&Server{}).routeTable() {
		key := rt.method + " " + rt.path
		if other, dup := ids[rt.id]; dup {
			return nil, fmt.Errorf("operationId %s: both %s and %s", rt.id, other, key)
		}
		ids[rt.id] = key
		op, err := g.operation(rt)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		path := pathVar.ReplaceAllString(rt.path, "{$1}")
		item, _ := paths[path].(js)
		if item == nil {
			item = js{}
			paths[path] = item
		}
		method := strings.ToLower(rt.method)
		if item[method] != nil {
			return nil, fmt.Errorf("%s is in the route table twice", key)
		}
		item[method] = op
	}
	schemas, err := g.components(schemaNotes)
	if err != nil {
		return nil, err
	}
	doc := js{
		"openapi":  "3.1.0",
		"info":     infoText,
		"servers":  []any{js{"url": "/"}},
		"security": []any{js{"bearerAuth": []any{}}},
		"tags":     tagsText,
		"paths":    paths,
		"webhooks": webhooksText,
		"components": js{
			"schemas":         schemas,
			"parameters":      sharedParameters,
			"headers":         sharedHeaders,
			"responses":       sharedResponses,
			"securitySchemes": sharedSecuritySchemes,
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
func (g *schemaGen) operation(rt route) (js, error) {
	op := js{"operationId": rt.id, "summary": rt.summary, "tags": rt.tags}
	if rt.desc != "" {
		op["description"] = rt.desc
	}
	if rt.public {
		op["security"] = []any{}
		if rt.serve == nil && rt.handle != nil {
			return nil, fmt.Errorf("a public route needs serve, not handle")
		}
	}
	declared := map[string]bool{}
	var params []any
	for _, p := range rt.params {
		if p.ref != "" {
			shared, ok := sharedParameters[p.ref].(js)
			if !ok {
				return nil, fmt.Errorf("no shared parameter %q", p.ref)
			}
			if shared["in"] == "path" {
				declared[shared["name"].(string)] = true
			}
			params = append(params, js{"$ref": "#/components/parameters/" + p.ref})
			continue
		}
		o := js{"name": p.name, "in": p.in}
		for k, v := range p.more {
			o[k] = v
		}
		if p.desc != "" {
			o["description"] = p.desc
		}
		o["required"] = p.required || p.in == "path"
		switch {
		case p.of != nil:
			s, err := g.schema(p.of)
			if err != nil {
				return nil, fmt.Errorf("parameter %s: %w", p.name, err)
			}
			o["schema"] = s
		case p.schema != nil:
			o["schema"] = p.schema
		default:
			o["schema"] = js{"type": "string"}
		}
		if p.examples != nil {
			o["examples"] = p.examples
		}
		if p.in == "path" {
			declared[p.name] = true
		}
		params = append(params, o)
	}
	for _, m := range pathVar.FindAllStringSubmatch(rt.path, -1) {
		if !declared[m[1]] {
			return nil, fmt.Errorf("path parameter %q is not declared", m[1])
		}
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if rt.body != nil {
		content, err := g.content(rt.body.content)
		if err != nil {
			return nil, fmt.Errorf("request body: %w", err)
		}
		b := js{"content": content, "required": rt.body.required}
		if rt.body.desc != "" {
			b["description"] = rt.body.desc
		}
		op["requestBody"] = b
	}
	responses := js{}
	for _, r := range rt.resps {
		if responses[r.status] != nil {
			return nil, fmt.Errorf("answer %s is listed twice", r.status)
		}
		if r.ref != "" {
			if _, ok := sharedResponses[r.ref]; !ok {
				return nil, fmt.Errorf("no shared response %q", r.ref)
			}
			responses[r.status] = js{"$ref": "#/components/responses/" + r.ref}
			continue
		}
		if r.desc == "" {
			return nil, fmt.Errorf("answer %s has no description", r.status)
		}
		o := js{"description": r.desc}
		if r.headers != nil {
			o["headers"] = r.headers
		}
		if len(r.content) > 0 {
			content, err := g.content(r.content)
			if err != nil {
				return nil, fmt.Errorf("answer %s: %w", r.status, err)
			}
			o["content"] = content
		}
		responses[r.status] = o
	}
	for _, code := range rt.errs {
		name, ok := sharedErrorNames[code]
		status := strconv.Itoa(code)
		if !ok {
			return nil, fmt.Errorf("no shared answer for %d: list it in resps", code)
		}
		if responses[status] != nil {
			return nil, fmt.Errorf("answer %s is listed twice", status)
		}
		responses[status] = js{"$ref": "#/components/responses/" + name}
	}
	if rt.body != nil && responses["408"] == nil {
		responses["408"] = js{"$ref": "#/components/responses/RequestTimeout"}
	}
	if !rt.public {
		for _, e := range authErrors {
			if responses[e.status] == nil {
				responses[e.status] = js{"$ref": "#/components/responses/" + e.name}
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
func (g *schemaGen) content(ms []media) (js, error) {
	out := js{}
	for _, m := range ms {
		o := js{}
		for k, v := range m.more {
			o[k] = v
		}
		switch {
		case m.schema != nil:
			s, err := g.schema(m.schema)
			if err != nil {
				return nil, err
			}
			o["schema"] = s
		case m.raw != nil:
			o["schema"] = m.raw
		}
		if len(m.events) > 0 {
			ev := js{}
			names := make([]string, 0, len(m.events))
			for n := range m.events {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				s, err := g.schema(m.events[n])
				if err != nil {
					return nil, err
				}
				ev[n] = s
			}
			o["x-sse-events"] = ev
		}
		out[m.typ] = o
	}
	return out, nil
}
