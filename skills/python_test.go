package skills_test

import (
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/skills/skillstest"
)

// TestPythonImportsSkillFolders runs, in the sandbox image's Python with
// this tree's sitecustomize.py, the import a skill's users write:
// `from skills.data_analysis import helpers` finds the folder
// /skills/data-analysis (the standard's hyphenated name). Every built-in
// skill's examples run there, laid out as runners mount them, and so do a
// public-style skill's scripts.
func TestPythonImportsSkillFolders(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs Docker and the sandbox image")
	}
	image := os.Getenv("GANTRY_IMAGE")
	if image == "" {
		image = "gantry-sandbox:latest"
	}
	if err := exec.Command("docker", "image", "inspect", image).Run(); err != nil {
		if os.Getenv("GANTRY_TEST_REQUIRE") == "1" {
			t.Fatalf("the sandbox image %s is not available: %v", image, err)
		}
		t.Skipf("the sandbox image %s is not available (set GANTRY_TEST_REQUIRE=1 to fail instead)", image)
	}
	sitecustomize, err := filepath.Abs("../images/sandbox/sitecustomize.py")
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	all, err := skills.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, skillstest.Skill(t, skillstest.PDF))
	var program strings.Builder
	program.WriteString("import os, sys\nos.makedirs('/tmp/work', exist_ok=True)\nos.chdir('/tmp/work')\n")
	for _, s := range all {
		write(t, filepath.Join(dir, s.Name, skills.SkillFileName), s.Markdown())
		for _, f := range s.Files {
			write(t, filepath.Join(dir, s.Name, f.Path), f.Content)
		}
		for i, ex := range s.Examples() {
			program.WriteString("print('== " + s.Name + " " + string(rune('0'+i)) + "', flush=True)\n")
			program.WriteString("exec(compile(" + pyString(ex) + ", " + pyString(s.Name) + ", 'exec'), {})\n")
		}
	}
	program.WriteString(`
import skills.pdf_processing.scripts.pdf_tools as t
print("page_count", t.page_count(t.SAMPLE))
try:
    import skills.no_such_skill
except ImportError:
    print("missing skill: ImportError")
`)
	out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp",
		"-e", "PYTHONPYCACHEPREFIX=/tmp/pycache", "-e", "MPLCONFIGDIR=/tmp/mpl", "-e", "HOME=/tmp",
		"-v", sitecustomize+":/etc/python3.11/sitecustomize.py:ro", "-v", dir+":/skills:ro",
		image, "python3", "-c", program.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	for _, s := range all {
		if !strings.Contains(string(out), "== "+s.Name+" 0") {
			t.Errorf("the example of %s did not run:\n%s", s.Name, out)
		}
	}
	if !strings.Contains(string(out), "page_count 2\n") || !strings.Contains(string(out), "missing skill: ImportError") {
		t.Errorf("output:\n%s", out)
	}
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	// t.TempDir is private to its owner; the sandbox runs as another user.
	for d := filepath.Dir(p); strings.HasPrefix(d, os.TempDir()) && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755) //nolint:errcheck
	}
}

// pyString is s as a Python string literal.
func pyString(s string) string {
	return "bytes.fromhex('" + hex.EncodeToString([]byte(s)) + "').decode()"
}
