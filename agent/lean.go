package agent

import (
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/gantryhq/gantry/agent/wire"
)

// The lean interpreter is a second warm interpreter beside the full one,
// which has loaded only the standard library's most used modules (16 MB
// against the full one's ~90 MB). A Python job whose program imports
// nothing else is forked from it: a fork and an exit of a smaller address
// space cost less CPU (print(6*7) back to back 20 against 26 ms, about a
// third more jobs a second at 4 at once, a test in a job a third less
// time: docs/PERFORMANCE.md). Any other Python job is forked from the
// full one, as before. A program the scan misjudges (a module imported by
// name at run time, exec of a string) still runs as a fresh `python3`
// would, importing what it needs at its own cost (its time, CPU and
// memory).
var leanModules = []string{
	"re", "json", "math", "collections", "itertools", "functools", "typing", "dataclasses", "random",
	"string", "heapq", "bisect", "datetime", "fractions", "decimal", "statistics", "operator", "copy",
	"enum", "io", "os", "time", "array", "struct", "hashlib", "base64", "textwrap", "unicodedata", "queue",
	"contextlib", "traceback", "warnings", "__future__",
}

// maxLeanScan bounds the program the agent scans for its imports; a
// larger one goes to the full interpreter.
const maxLeanScan = 64 << 10

// maxShadowScan bounds the entries read of a workspace directory on a
// job's PYTHONPATH (shadowed).
const maxShadowScan = 4096

var (
	importStmt = regexp.MustCompile(`^import\s+(.+)$`)
	fromStmt   = regexp.MustCompile(`^from\s+(\S+)\s+import\b`)
	identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// warmFor is the interpreter to fork the request's sandbox from: the one
// the request names (LauncherWarm the full one, LauncherLean the lean
// one), else the lean one for a program that imports only what it has
// loaded, else the full one; nil when the request is not for a warm
// interpreter or it is not ready.
func (s *server) warmFor(req wire.Request) *warm {
	if s.warm == nil || !warmEligible(req.Argv, req.Env) {
		return nil
	}
	ready := func(w *warm) *warm {
		if w != nil && w.waitReady(0) {
			return w
		}
		return nil
	}
	switch req.Launcher {
	case wire.LauncherWarm:
		return ready(s.warm)
	case wire.LauncherLean:
		return ready(s.lean)
	}
	if w := ready(s.lean); w != nil && w.covers(programOf(req)) && !w.shadowed(req) {
		return w
	}
	if w := ready(s.warm); w != nil && !w.shadowed(req) {
		return w
	}
	return nil
}

// shadowed reports whether the job brings a module of a name w has
// loaded (a json.py beside its program, a package random/ on its
// PYTHONPATH): `python3 <file>` would import the job's, a fork of w has
// its own in sys.modules already. Such a job gets an interpreter of its
// own. The directories are the program's and its PYTHONPATH's; their
// entries are the request's files, and what the workspace holds.
func (w *warm) shadowed(req wire.Request) bool {
	if len(req.Argv) < 2 {
		return false
	}
	w.mu.Lock()
	roots := w.roots
	w.mu.Unlock()
	dirs := []string{path.Dir(req.Argv[1])}
	for _, d := range strings.Split(req.Env["PYTHONPATH"], ":") {
		if d != "" {
			dirs = append(dirs, path.Clean(d))
		}
	}
	module := func(entry string) string {
		name, _, _ := strings.Cut(entry, ".") // x.py, x.cpython-311-x86_64-linux-gnu.so, a package x
		return name
	}
	for _, d := range dirs {
		for _, f := range req.Files {
			if rest, ok := strings.CutPrefix(f.Path, d+"/"); ok {
				first, _, _ := strings.Cut(rest, "/")
				if roots[module(first)] {
					return true
				}
			}
		}
		if d != wire.Workspace && !strings.HasPrefix(d, wire.Workspace+"/") {
			continue
		}
		dir, err := os.Open(d)
		if err != nil {
			continue
		}
		names, err := dir.Readdirnames(maxShadowScan + 1)
		dir.Close()
		if len(names) > maxShadowScan {
			return true // too many to read for every job: an interpreter of its own
		}
		_ = err // io.EOF, or fewer than asked for
		for _, n := range names {
			if roots[module(n)] {
				return true
			}
		}
	}
	return false
}

// programOf is the source of the request's program file, nil when the
// request does not carry it.
func programOf(req wire.Request) []byte {
	if len(req.Argv) < 2 {
		return nil
	}
	for _, f := range req.Files {
		if f.Path == req.Argv[1] {
			return f.Data
		}
	}
	return nil
}

// covers reports whether every module src imports is one w has loaded.
// It reads import statements line by line, conservatively: a line that
// mentions "import" in any way it does not parse (an import in a string,
// __import__, importlib, a statement continued on the next line) says
// no.
func (w *warm) covers(src []byte) bool {
	if src == nil || len(src) > maxLeanScan {
		return false
	}
	w.mu.Lock()
	roots := w.roots
	w.mu.Unlock()
	if roots == nil || declaresEncoding(src) {
		return false
	}
	// Python ends a line at \n, \r\n or a lone \r.
	text := strings.ReplaceAll(string(src), "\r", "\n")
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.Contains(line, "import") {
			continue
		}
		if i := strings.IndexByte(line, '#'); i >= 0 && !strings.ContainsAny(line, `'"`) {
			// A comment; with a quote anywhere on the line the # may be in
			// a string (one begun lines before, too): kept, and the line
			// is then refused unless it has no import at all.
			line = line[:i]
		}
		for stmt := range strings.SplitSeq(line, ";") {
			stmt = strings.TrimSpace(stmt)
			// An import under a compound statement's header on one line
			// ("try: import x", "if y: import x").
			if i := strings.LastIndexByte(stmt, ':'); i >= 0 && !strings.ContainsAny(stmt, `'"`) {
				stmt = strings.TrimSpace(stmt[i+1:])
			}
			if !strings.Contains(stmt, "import") {
				continue
			}
			names, ok := importedRoots(stmt)
			if !ok {
				return false
			}
			for _, n := range names {
				if !roots[n] {
					return false
				}
			}
		}
	}
	return true
}

// codingLine is PEP 263's encoding declaration.
var codingLine = regexp.MustCompile(`^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)`)

// declaresEncoding reports whether src declares an encoding other than
// UTF-8 in its first two lines (in another, an import may be spelt in
// bytes the scan does not read as such).
func declaresEncoding(src []byte) bool {
	lines := strings.SplitN(strings.ReplaceAll(string(src[:min(len(src), 512)]), "\r", "\n"), "\n", 3)
	for _, l := range lines[:min(len(lines), 2)] {
		if m := codingLine.FindStringSubmatch(l); m != nil {
			enc := strings.ReplaceAll(strings.ToLower(m[1]), "_", "-")
			return enc != "utf-8" && enc != "utf8" && !strings.HasPrefix(enc, "utf-8-")
		}
	}
	return false
}

// importedRoots is the top-level modules one import statement names; false
// when stmt is not an import statement it can read whole.
func importedRoots(stmt string) ([]string, bool) {
	if strings.HasSuffix(stmt, `\`) || strings.ContainsAny(stmt, `'"`) {
		return nil, false
	}
	if m := fromStmt.FindStringSubmatch(stmt); m != nil {
		root, _, _ := strings.Cut(m[1], ".")
		if !identifier.MatchString(root) { // a relative import: the program's own module
			return nil, false
		}
		return []string{root}, true
	}
	m := importStmt.FindStringSubmatch(stmt)
	if m == nil {
		return nil, false
	}
	var roots []string
	for part := range strings.SplitSeq(m[1], ",") {
		fields := strings.Fields(part)
		if len(fields) != 1 && (len(fields) != 3 || fields[1] != "as" || !identifier.MatchString(fields[2])) {
			return nil, false
		}
		root, _, _ := strings.Cut(fields[0], ".")
		if !identifier.MatchString(root) {
			return nil, false
		}
		roots = append(roots, root)
	}
	return roots, len(roots) > 0
}
