package ingress

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// imports lists the packages the non-test Go files of dir import, by file.
func imports(t *testing.T, dir string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no Go files (%v)", dir, err)
	}
	out := map[string][]string{}
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
		out[f] = []string{}
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			out[f] = append(out[f], path)
		}
	}
	return out
}

// within reports whether path is pkg or a package under it.
func within(path, pkg string) bool { return path == pkg || strings.HasPrefix(path, pkg+"/") }

// TestAdaptersStayAdapters: the HTTP API, MCP, the compatible APIs and the
// ports translate requests into calls of the service, in the service's
// types; they never reach the store, the job history or NATS themselves,
// nor the queue's messages or the agent's protocol beneath the service. A
// compatible API added under compat is held to the same.
func TestAdaptersStayAdapters(t *testing.T) {
	t.Parallel()
	forbidden := []string{
		"github.com/gantryhq/gantry/store",
		"github.com/gantryhq/gantry/history",
		"github.com/gantryhq/gantry/blob",
		"github.com/gantryhq/gantry/queue",
		"github.com/gantryhq/gantry/agent",
		"github.com/nats-io/nats.go",
	}
	dirs := []string{"httpapi", "mcpapi", "ports"}
	err := filepath.WalkDir("compat", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if matches, _ := filepath.Glob(filepath.Join(path, "*.go")); len(matches) > 0 {
				dirs = append(dirs, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"compat", "compat/e2b", "compat/e2b/sandbox", "compat/judge0", "compat/piston", "compat/sandboxfusion"} {
		if !slices.Contains(dirs, filepath.FromSlash(want)) {
			t.Errorf("%s was not found among the adapters", want)
		}
	}
	for _, dir := range dirs {
		for f, paths := range imports(t, dir) {
			for _, path := range paths {
				for _, bad := range forbidden {
					if within(path, bad) {
						t.Errorf("%s imports %s: an adapter goes through the service, in its types", f, path)
					}
				}
			}
		}
	}
}

// TestServiceSpeaksItsOwnTypes: the service's live-sandbox API is in its
// own types; the agent's protocol beneath it is translated in one file,
// livewire.go, and nowhere else of the service.
func TestServiceSpeaksItsOwnTypes(t *testing.T) {
	t.Parallel()
	translated := false
	for f, paths := range imports(t, "service") {
		for _, path := range paths {
			if !within(path, "github.com/gantryhq/gantry/agent") {
				continue
			}
			if filepath.Base(f) != "livewire.go" || path != "github.com/gantryhq/gantry/agent/wire" {
				t.Errorf("%s imports %s: the service speaks the agent's protocol in livewire.go only", f, path)
			}
			translated = true
		}
	}
	if !translated {
		t.Error("service/livewire.go does not import agent/wire: where is the protocol translated?")
	}
}
