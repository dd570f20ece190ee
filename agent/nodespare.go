package agent

import (
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"os"
	"slices"
	"strings"

	"github.com/gantryhq/gantry/jobs"
)

// Node cannot fork safely (its threads: V8's, libuv's), so nothing stands
// in for the warm interpreter's fork. What stands in for it is a spare
// (spare.go): a Node started ahead of its job in the job's own fresh
// sandbox, made by bubblewrap from the layout as any sandbox is, waiting
// on stdin for its one job (nodespare.js). It then runs the job's program
// in itself, as `node <file> <args>` would, or for TypeScript first
// transpiles it as the language's command does. A job takes a fresh Node
// in a fresh sandbox, as a cold one does: only Node's start-up is paid
// before the job exists.

//go:embed nodespare.js
var nodeSpareSource string

// nodeSnapshot is a startup snapshot of the image's Node (made when the
// image is built: images/sandbox/Dockerfile, build.sh), from which a
// spare's Node starts in about half the CPU: the distribution's Node has
// no startup snapshot of its own. Nothing but Node's bootstrap is in it.
const nodeSnapshot = "/usr/lib/gantry/node-snapshot.blob"

// nodeSpareArgv starts a spare Node: from the snapshot where the image
// has one.
func nodeSpareArgv() []string {
	if _, err := os.Stat(nodeSnapshot); err == nil {
		return []string{"node", "--snapshot-blob", nodeSnapshot, "-e", nodeSpareSource}
	}
	return []string{"node", "-e", nodeSpareSource}
}

// nodeProgram reads a run as a Node or TypeScript program run as the
// runner runs it (jobs.Languages: the language's command, its program
// file in ProgramDir, then its arguments). It returns the language
// ("javascript" or "typescript"), the program's path and its arguments.
func nodeProgram(argv []string) (language, path string, args []string, ok bool) {
	for _, name := range []string{"node", "typescript"} {
		lang, _ := jobs.LookupLanguage(name)
		n := len(lang.Command)
		path := jobs.ProgramDir + "/" + lang.File
		if len(argv) > n && slices.Equal(argv[:n], lang.Command) && argv[n] == path {
			if name == "node" {
				name = "javascript"
			}
			return name, path, argv[n+1:], true
		}
	}
	return "", "", nil, false
}

// nodeStartupVariable reports whether Node reads the variable as it
// starts (its options, OpenSSL's configuration, the locale ICU takes): a
// Node started ahead of the job would run it without the variable's
// effect. NODE_PATH is not one: the spare works out where require looks
// again once it has the job's environment (code mode sets it for every
// job).
func nodeStartupVariable(k string) bool {
	if k == "NODE_PATH" {
		return false
	}
	for _, p := range []string{"NODE_", "UV_", "OPENSSL_", "SSL_", "LC_"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return k == "LANG" || k == "LANGUAGE"
}

// nodeJob is a job for a spare Node: what it runs and with what.
type nodeJob struct {
	// Build, when set, runs first (esbuild, for TypeScript); a failure
	// ends the job with its status.
	Build []string `json:"build,omitempty"`
	// Main is the program file Node runs, with Args after it.
	Main string   `json:"main"`
	Args []string `json:"args"`
	// Env is the program's whole environment ("K=V").
	Env []string `json:"env"`
	// SourceMaps: Node's --enable-source-maps.
	SourceMaps bool `json:"source_maps,omitempty"`
}

// nodeJobOf is the job a spare Node may run in itself exactly as the
// language's command would: a Node or TypeScript program whose
// environment sets nothing Node reads as it starts.
func nodeJobOf(argv []string, jobEnv map[string]string, env []string) (nodeJob, bool) {
	language, path, args, ok := nodeProgram(argv)
	if !ok {
		return nodeJob{}, false
	}
	for k := range jobEnv {
		if nodeStartupVariable(k) {
			return nodeJob{}, false
		}
	}
	j := nodeJob{Main: path, Args: append([]string{}, args...), Env: env}
	if language == "typescript" {
		j.Build, j.Main, j.SourceMaps = jobs.TypeScriptBuild(path), jobs.TypeScriptOut, true
	}
	return j, true
}

// isNode says whether a run was a Node or TypeScript program (the next
// run's spare should then be a Node).
func isNode(argv []string) bool {
	_, _, _, ok := nodeProgram(argv)
	return ok
}

// header encodes the job for a spare Node: a 4-byte big-endian length,
// then JSON. It fails on a header too large for one pipe write.
func (j nodeJob) header() ([]byte, bool) {
	body, err := json.Marshal(j)
	if err != nil || len(body)+4 > maxHeader {
		return nil, false
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...), true
}
