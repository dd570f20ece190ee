package ingress

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/gantryhq/gantry/ingress/httpapi"
)

var openapiMethods = map[string]bool{
	"get": true, "put": true, "post": true, "delete": true,
	"options": true, "head": true, "patch": true, "trace": true,
}

func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		t.Fatalf("openapi.json is not valid JSON: %v", err)
	}
	return doc
}

// openapiOperations returns the document's operations keyed "METHOD path".
func openapiOperations(t *testing.T, doc map[string]any) map[string]map[string]any {
	t.Helper()
	paths, ok := doc["paths"].(map[string]any)
	if !ok {
		t.Fatalf("paths is missing or not an object")
	}
	ops := map[string]map[string]any{}
	for p, item := range paths {
		itemObj, ok := item.(map[string]any)
		if !ok {
			t.Fatalf("path item %q is not an object", p)
		}
		for k, v := range itemObj {
			if !openapiMethods[k] {
				continue
			}
			op, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("operation %s %s is not an object", k, p)
			}
			ops[strings.ToUpper(k)+" "+p] = op
		}
	}
	return ops
}

// resolveRef follows a local JSON pointer ("#/components/...") in doc.
func resolveRef(doc map[string]any, ref string) (any, bool) {
	frag, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var cur any = doc
	for _, tok := range strings.Split(frag, "/") {
		tok, err := url.PathUnescape(tok)
		if err != nil {
			return nil, false
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			if cur, ok = c[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	if v := doc["openapi"]; v != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", v)
	}
	info, _ := doc["info"].(map[string]any)
	if info["title"] != "gantry" || info["version"] != "1" {
		t.Errorf("info = %v, want title gantry and version 1", info)
	}
}

// TestOpenAPIUpToDate: the committed openapi.json is what the route table
// and the Go types give. Run `go generate ./ingress` (make openapi) after
// changing either, or httpapi/openapi.yaml.
func TestOpenAPIUpToDate(t *testing.T) {
	t.Parallel()
	doc, err := httpapi.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, openapiJSON) {
		t.Fatal("ingress/openapi.json is stale: run `go generate ./ingress` (or make openapi) and commit it")
	}
}

// TestOpenAPIValid: kin-openapi loads the document and finds it a valid
// OpenAPI 3.1 document, every $ref resolved.
func TestOpenAPIValid(t *testing.T) {
	t.Parallel()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapiJSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatal(err)
	}
}

func TestOpenAPIOperations(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	paths := doc["paths"].(map[string]any)
	seen := map[string]string{}
	templ := regexp.MustCompile(`\{([^}]+)\}`)
	for key, op := range openapiOperations(t, doc) {
		id, _ := op["operationId"].(string)
		if id == "" {
			t.Errorf("%s has no operationId", key)
		} else if other, dup := seen[id]; dup {
			t.Errorf("operationId %q is used by both %s and %s", id, other, key)
		} else {
			seen[id] = key
		}
		if s, _ := op["summary"].(string); s == "" {
			t.Errorf("%s has no summary", key)
		}
		if r, _ := op["responses"].(map[string]any); len(r) == 0 {
			t.Errorf("%s has no responses", key)
		}

		// Authentication: /v1/* uses the document's bearer security; the
		// service endpoints opt out.
		_, path, _ := strings.Cut(key, " ")
		sec, hasSec := op["security"].([]any)
		if strings.HasPrefix(path, "/v1/") {
			if hasSec {
				t.Errorf("%s overrides security; /v1 operations use the global bearer scheme", key)
			}
		} else if !hasSec || len(sec) != 0 {
			t.Errorf("%s must declare security: [] (no authentication)", key)
		}

		// Every template variable in the path is a declared path parameter.
		declared := map[string]bool{}
		var params []any
		if pl, ok := paths[path].(map[string]any)["parameters"].([]any); ok {
			params = append(params, pl...)
		}
		if ol, ok := op["parameters"].([]any); ok {
			params = append(params, ol...)
		}
		for _, p := range params {
			pm, _ := p.(map[string]any)
			if ref, ok := pm["$ref"].(string); ok {
				v, _ := resolveRef(doc, ref)
				pm, _ = v.(map[string]any)
			}
			if pm["in"] == "path" {
				declared[pm["name"].(string)] = true
			}
		}
		for _, m := range templ.FindAllStringSubmatch(path, -1) {
			if !declared[m[1]] {
				t.Errorf("%s: path parameter %q is not declared", key, m[1])
			}
		}
	}
	if len(seen) == 0 {
		t.Fatal("no operations found")
	}
}

func TestOpenAPIRefsResolve(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	var walk func(where string, v any)
	n := 0
	walk = func(where string, v any) {
		switch c := v.(type) {
		case map[string]any:
			if ref, ok := c["$ref"].(string); ok {
				n++
				if !strings.HasPrefix(ref, "#/components/") {
					t.Errorf("%s: $ref %q does not point into components", where, ref)
				} else if _, ok := resolveRef(doc, ref); !ok {
					t.Errorf("%s: $ref %q does not resolve", where, ref)
				}
			}
			for k, e := range c {
				walk(where+"/"+k, e)
			}
		case []any:
			for i, e := range c {
				walk(where+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("#", doc)
	if n == 0 {
		t.Error("the document uses no $ref; expected components")
	}
}
