package ingress

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAdaptersStayAdapters: the HTTP API and MCP translate requests into
// calls of the service; they never reach the store, the job history or
// NATS themselves. A compatible API added beside them is held to the same.
func TestAdaptersStayAdapters(t *testing.T) {
	t.Parallel()
	forbidden := []string{
		"github.com/gantryhq/gantry/store",
		"github.com/gantryhq/gantry/history",
		"github.com/gantryhq/gantry/blob",
		"github.com/nats-io/nats.go",
	}
	for _, dir := range []string{"httpapi", "mcpapi", "compat", "compat/sandboxfusion", "compat/judge0", "compat/piston", "compat/e2b", "compat/e2b/sandbox", "ports"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range forbidden {
					if path == bad || strings.HasPrefix(path, bad+"/") {
						t.Errorf("%s imports %s: an adapter goes through the service", f, path)
					}
				}
			}
		}
	}
}
