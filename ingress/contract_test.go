package ingress_test

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/ingress/contracttest"
)

// TestMain fails a full run of the package's tests when an operation of
// the document was never called: the ingress tests' server checks every
// request and answer against openapi.json (contracttest.Handler, in
// harness.serve), and each route must have been checked by at least one
// test.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code != 0 || testing.Short() || flag.Lookup("test.run").Value.String() != "" || !contracttest.Exercised() {
		os.Exit(code)
	}
	missing, err := contracttest.Unexercised()
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapi.json:", err)
		os.Exit(1)
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "contract: no test called these operations, so their answers were never checked against openapi.json:\n  %s\n",
			strings.Join(missing, "\n  "))
		os.Exit(1)
	}
	os.Exit(code)
}
