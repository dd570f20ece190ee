// Command openapigen writes ingress/openapi.json from the route table and
// the Go types of the API (ingress.OpenAPI). `go generate ./ingress` and
// `make openapi` run it; TestOpenAPIUpToDate fails when the committed file
// is not what it writes.
package main

import (
	"fmt"
	"os"

	"github.com/gantryhq/gantry/ingress"
)

func main() {
	out := "openapi.json"
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	doc, err := ingress.OpenAPI()
	if err == nil {
		err = os.WriteFile(out, doc, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapigen:", err)
		os.Exit(1)
	}
}
