// Command k8sschema turns Kubernetes' own OpenAPI v3 documents (the
// api/openapi-spec/v3 directory of the k8s.io/kubernetes module) into the
// JSON schemas kubeconform reads: one self-contained file per kind, named
// as kubeconform looks them up (<kind>[-<group>]-<version>.json), written
// into <out>/v<version>-standalone-strict/. "Strict" means every object
// with declared properties refuses others, so a misspelt field fails.
//
// This is how CI validates the Helm chart without reaching a schema
// server: the documents come from a pinned Go module.
//
// Usage: k8sschema -spec DIR -out DIR -version 1.37.2
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	spec := flag.String("spec", "", "directory of Kubernetes' OpenAPI v3 documents (api/openapi-spec/v3)")
	out := flag.String("out", "", "schema directory to write (kubeconform's -schema-location)")
	version := flag.String("version", "", "Kubernetes version the documents describe, such as 1.37.2")
	flag.Parse()
	if *spec == "" || *out == "" || *version == "" {
		flag.Usage()
		os.Exit(2)
	}
	n, err := run(*spec, filepath.Join(*out, "v"+strings.TrimPrefix(*version, "v")+"-standalone-strict"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8sschema:", err)
		os.Exit(1)
	}
	fmt.Printf("k8sschema: wrote %d schemas for Kubernetes %s\n", n, *version)
}

type document struct {
	Components struct {
		Schemas map[string]any `json:"schemas"`
	} `json:"components"`
}

type gvk struct {
	Group, Version, Kind string
}

const refPrefix = "#/components/schemas/"

func run(specDir, outDir string) (int, error) {
	// One document per group version ("apis__apps__v1_openapi.json"); the
	// others list groups and hold no kinds.
	files, err := filepath.Glob(filepath.Join(specDir, "*__v*_openapi.json"))
	if err != nil {
		return 0, err
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("no OpenAPI v3 documents in %s", specDir)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return 0, err
	}
	written := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return written, err
		}
		var doc document
		if err := json.Unmarshal(b, &doc); err != nil {
			return written, fmt.Errorf("%s: %w", f, err)
		}
		n, err := writeKinds(doc.Components.Schemas, outDir)
		if err != nil {
			return written, fmt.Errorf("%s: %w", f, err)
		}
		written += n
	}
	return written, nil
}

// writeKinds writes a schema for each kind the document defines.
func writeKinds(schemas map[string]any, outDir string) (int, error) {
	names := make([]string, 0, len(schemas))
	for name := range schemas {
		names = append(names, name)
	}
	sort.Strings(names)
	n := 0
	for _, name := range names {
		s, _ := schemas[name].(map[string]any)
		kinds := kindsOf(s)
		// Types such as DeleteOptions name every group they serve; they are
		// not resources anyone writes in a manifest.
		if len(kinds) != 1 {
			continue
		}
		k := kinds[0]
		defs := map[string]any{}
		if err := collect(schemas, name, defs); err != nil {
			return n, err
		}
		root := rewrite(s).(map[string]any)
		delete(defs, name)
		if len(defs) > 0 {
			root["definitions"] = defs
		}
		root["$schema"] = "http://json-schema.org/draft-07/schema#"
		b, err := json.Marshal(root)
		if err != nil {
			return n, err
		}
		if err := os.WriteFile(filepath.Join(outDir, fileName(k)), b, 0o644); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func kindsOf(s map[string]any) []gvk {
	list, _ := s["x-kubernetes-group-version-kind"].([]any)
	var out []gvk
	for _, v := range list {
		m, _ := v.(map[string]any)
		g, _ := m["group"].(string)
		ver, _ := m["version"].(string)
		k, _ := m["kind"].(string)
		if ver != "" && k != "" {
			out = append(out, gvk{g, ver, k})
		}
	}
	return out
}

// fileName is where kubeconform looks for the kind: "deployment-apps-v1",
// "service-v1", "ingress-networking-v1" (the group's first label).
func fileName(k gvk) string {
	name := strings.ToLower(k.Kind)
	if k.Group != "" {
		name += "-" + strings.ToLower(strings.Split(k.Group, ".")[0])
	}
	return name + "-" + strings.ToLower(k.Version) + ".json"
}

// collect adds name and every schema it references, rewritten, to defs.
func collect(schemas map[string]any, name string, defs map[string]any) error {
	if _, done := defs[name]; done {
		return nil
	}
	s, ok := schemas[name]
	if !ok {
		return fmt.Errorf("reference to undefined schema %s", name)
	}
	defs[name] = rewrite(s)
	var err error
	walkRefs(s, func(ref string) {
		if err == nil {
			err = collect(schemas, ref, defs)
		}
	})
	return err
}

func walkRefs(v any, fn func(string)) {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, refPrefix) {
			fn(strings.TrimPrefix(ref, refPrefix))
		}
		for _, e := range v {
			walkRefs(e, fn)
		}
	case []any:
		for _, e := range v {
			walkRefs(e, fn)
		}
	}
}

// rewrite copies a schema, pointing references at "definitions", closing
// every object that declares its properties and letting optional
// properties be null. "nullable" becomes a null in the type, as JSON Schema
// says it.
func rewrite(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v)+1)
		for k, e := range v {
			switch {
			case k == "$ref":
				ref, _ := e.(string)
				out[k] = "#/definitions/" + strings.TrimPrefix(ref, refPrefix)
			case k == "properties":
				// Property names are data here, not keywords. An optional
				// property may be null: the API server reads null as unset,
				// and charts render it (resources: null).
				props, _ := e.(map[string]any)
				required := map[string]bool{}
				list, _ := v["required"].([]any)
				for _, r := range list {
					name, _ := r.(string)
					required[name] = true
				}
				np := make(map[string]any, len(props))
				for name, p := range props {
					np[name] = rewrite(p)
					if !required[name] {
						np[name] = map[string]any{"anyOf": []any{map[string]any{"type": "null"}, np[name]}}
					}
				}
				out[k] = np
			case k == "nullable" || strings.HasPrefix(k, "x-kubernetes-"):
				// Not JSON Schema; nullable is folded into the type below.
			default:
				out[k] = rewrite(e)
			}
		}
		if _, hasProps := v["properties"]; hasProps {
			if _, set := v["additionalProperties"]; !set && v["x-kubernetes-preserve-unknown-fields"] != true {
				out["additionalProperties"] = false
			}
		}
		if v["nullable"] == true {
			if t, ok := v["type"].(string); ok {
				out["type"] = []any{t, "null"}
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = rewrite(e)
		}
		return out
	}
	return v
}
