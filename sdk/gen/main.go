// Command gen writes the client libraries' types from the API's OpenAPI
// document (ingress/openapi.json, served at GET /openapi.json), so that the
// SDKs never hold hand copies of the API's types:
//
//	sdk/python/gantry_client/api_types.py   TypedDicts (Python 3.9+)
//	sdk/typescript/src/types.ts             interfaces and type aliases
//
// `make sdk` runs it (go run ./sdk/gen); a test fails when the files are
// not what the document gives.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// Outputs are the generated files, relative to the repository's root.
var Outputs = map[string]func(*document) string{
	"sdk/python/gantry_client/api_types.py": generatePython,
	"sdk/typescript/src/types.ts":           generateTypeScript,
}

// Source is the OpenAPI document, relative to the repository's root.
const Source = "ingress/openapi.json"

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "sdk/gen:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	files, err := generate(root)
	if err != nil {
		return err
	}
	for path, content := range files {
		if err := os.WriteFile(filepath.Join(root, path), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// generate returns every output file's content.
func generate(root string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(root, Source))
	if err != nil {
		return nil, err
	}
	doc, err := parse(data)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for path, gen := range Outputs {
		out[path] = gen(doc)
	}
	return out, nil
}
