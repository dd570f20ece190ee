package test

import (
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/ingress/contracttest"
	"github.com/gantryhq/gantry/store/storetest"
)

// sdkDir is sdk/<name> in this checkout.
func sdkDir(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "sdk", name)
}

// runSDKTests runs a client library's own tests against the dev instance.
func runSDKTests(t *testing.T, d *dev, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	// The library talks to gantry through a proxy that checks every
	// request and answer against openapi.json: real jobs' answers, as a
	// client sees them.
	target, err := url.Parse(d.url)
	if err != nil {
		t.Fatal(err)
	}
	checked := httptest.NewServer(contracttest.Handler(t, httputil.NewSingleHostReverseProxy(target)))
	defer checked.Close()
	cmd.Env = append(cleanEnv(), "GANTRY_URL="+checked.URL, "GANTRY_API_KEY="+d.key, "GANTRY_TEST_REQUIRE=1", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPythonSDK runs sdk/python's tests against gantry dev.
func TestPythonSDK(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		storetest.Unavailable(t, "python3 is not installed")
	}
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	out := runSDKTests(t, d, sdkDir("python"), py, "-m", "unittest", "discover", "-s", "tests", "-v")
	if !strings.Contains(out, "\nOK") || strings.Contains(out, "skipped") {
		t.Fatalf("python tests did not all run:\n%s", out)
	}
	t.Log(lastLines(out, 3))
}

// TestTypeScriptSDK builds sdk/typescript with its pinned compiler and runs
// its tests against gantry dev.
func TestTypeScriptSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		storetest.Unavailable(t, "node is not installed")
	}
	dir := sdkDir("typescript")
	_, file, _, _ := runtime.Caller(0)
	ensure := exec.Command(filepath.Join(filepath.Dir(file), "..", "scripts", "ensure-sdk-deps.sh"))
	if out, err := ensure.CombinedOutput(); err != nil {
		storetest.Unavailable(t, "the TypeScript SDK's build tools: %v\n%s", err, out)
	}
	if out, err := exec.Command(node, filepath.Join(dir, "node_modules", "typescript", "bin", "tsc"), "-p", dir).CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	out := runSDKTests(t, d, dir, node, "--test", filepath.Join("dist", "test")+string(os.PathSeparator))
	if !strings.Contains(out, "# fail 0") || !strings.Contains(out, "# skipped 0") {
		t.Fatalf("typescript tests did not all pass:\n%s", out)
	}
	t.Log(lastLines(out, 8))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
