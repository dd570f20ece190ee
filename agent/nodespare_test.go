package agent

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

// TestNodeJobOf: a spare Node runs a Node or TypeScript program as the
// runner runs it, with its arguments, unless its environment sets what
// Node reads as it starts.
func TestNodeJobOf(t *testing.T) {
	ts, _ := jobs.LookupLanguage("typescript")
	tsArgv := append(slices.Clone(ts.Command), "/tmp/gantry/main.ts", "a")
	env := []string{"A=1"}
	for _, c := range []struct {
		argv   []string
		jobEnv map[string]string
		want   *nodeJob
	}{
		{[]string{"node", "/tmp/gantry/main.js", "x", "y"}, nil, &nodeJob{Main: "/tmp/gantry/main.js", Args: []string{"x", "y"}, Env: env}},
		{tsArgv, map[string]string{"TZ": "UTC"}, &nodeJob{Build: jobs.TypeScriptBuild("/tmp/gantry/main.ts"), Main: jobs.TypeScriptOut, Args: []string{"a"}, Env: env, SourceMaps: true}},
		{[]string{"node", "/tmp/gantry/main.js"}, map[string]string{"NODE_PATH": "/x"}, &nodeJob{Main: "/tmp/gantry/main.js", Args: []string{}, Env: env}},
		{[]string{"node", "/tmp/gantry/main.js"}, map[string]string{"NODE_OPTIONS": "--x"}, nil},
		{[]string{"node", "/tmp/gantry/main.js"}, map[string]string{"LC_ALL": "C"}, nil},
		{[]string{"node", "-e", "1"}, nil, nil},
		{[]string{"node", "main.js"}, nil, nil},
		{[]string{"python3", "/tmp/gantry/main.py"}, nil, nil},
		{tsArgv[1:], nil, nil},
	} {
		got, ok := nodeJobOf(c.argv, c.jobEnv, env)
		if ok != (c.want != nil) || ok && !equalJSON(t, got, *c.want) {
			t.Errorf("%q %v: %+v %v, want %+v", c.argv, c.jobEnv, got, ok, c.want)
		}
	}
	if !strings.Contains(ts.Command[2], strings.Join(jobs.TypeScriptBuild(`"$1"`), " ")) {
		t.Errorf("TypeScript's command %q does not build as TypeScriptBuild %q", ts.Command[2], jobs.TypeScriptBuild(`"$1"`))
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestNodeJobHeader: the header is a length, then the job as JSON; one too
// large for a pipe write is refused.
func TestNodeJobHeader(t *testing.T) {
	j := nodeJob{Main: "/tmp/gantry/main.js", Args: []string{"a"}, Env: []string{"A=1"}}
	head, ok := j.header()
	if !ok || int(binary.BigEndian.Uint32(head)) != len(head)-4 || !equalJSON(t, json.RawMessage(head[4:]), j) {
		t.Fatalf("header %q %v", head, ok)
	}
	j.Env = []string{"BIG=" + strings.Repeat("x", maxHeader)}
	if _, ok := j.header(); ok {
		t.Error("a header past maxHeader was made")
	}
}

// TestNodeSnapshotPath: the images make the snapshot where the agent
// looks for it.
func TestNodeSnapshotPath(t *testing.T) {
	for _, f := range []string{"../images/sandbox/Dockerfile", "../images/sandbox/build.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "--snapshot-blob "+nodeSnapshot+" --build-snapshot") {
			t.Errorf("%s makes no Node snapshot at %s", f, nodeSnapshot)
		}
	}
}
