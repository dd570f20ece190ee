// Command openapigen writes ingress/openapi.json from the HTTP API's route
// table, its Go types and its prose (httpapi.OpenAPI). `go generate
// ./ingress` and `make openapi` run it; TestOpenAPIUpToDate fails when the
// committed file is not what it writes.
package main

import (
	"fmt"
	"os"

	"github.com/gantryhq/gantry/ingress/httpapi"
)

func main() {
	out := "openapi.json"
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	doc, err := httpapi.OpenAPI()
	if err == nil {
		err = os.WriteFile(out, doc, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapigen:", err)
		os.Exit(1)
	}
}
