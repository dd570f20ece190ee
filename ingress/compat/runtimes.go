package compat

import (
	"encoding/json"
	"regexp"
	"slices"

	"github.com/gantryhq/gantry/jobs"
)

// The compatible APIs read a few parts of gantry's contract by their JSON
// names (a language's "compile" step, a policy's offered "Languages", a
// request's "compile_timeout_ms", a job's "compile", "compile_output",
// "cpu_time_ms", "peak_memory_kb"): the names the HTTP API shows them by.
// A gantry without one of them (no compiled languages, no usage figures)
// simply has none to report.

// versions are the versions of the standard sandbox image's languages
// (Debian 12's packages), for the APIs that name runtimes by version
// (Piston, Judge0's language names). Others are read from the language's
// description ("Go 1.23 (...)"); "0.0.0" when it names none.
var versions = map[string]string{
	"python":     "3.11.2",
	"node":       "18.20.4",
	"bash":       "5.2.15",
	"typescript": "5.0.0", // esbuild 0.17 transpiles TypeScript 5.0 syntax (no type checking)
}

var versionRE = regexp.MustCompile(`\b(\d+)(?:\.(\d+))?(?:\.(\d+))?\b`)

// Version is the version of a gantry language, as x.y.z.
func Version(lang string) string {
	if v, ok := versions[lang]; ok {
		return v
	}
	l, ok := jobs.LookupLanguage(lang)
	if !ok {
		return "0.0.0"
	}
	m := versionRE.FindStringSubmatch(l.Description)
	if m == nil {
		return "0.0.0"
	}
	for i := 2; i <= 3; i++ {
		if m[i] == "" {
			m[i] = "0"
		}
	}
	return m[1] + "." + m[2] + "." + m[3]
}

// Compiled says whether a gantry language has a compile step (then its
// compile timeout applies and its job reports a compile stage).
func Compiled(lang string) bool {
	l, ok := jobs.LookupLanguage(lang)
	if !ok {
		return false
	}
	var probe struct {
		Compile []string `json:"compile"`
	}
	b, _ := json.Marshal(l)
	return json.Unmarshal(b, &probe) == nil && len(probe.Compile) > 0
}

// Language is the first of names that this gantry offers, by its gantry
// name (""/false: none): the compatible APIs name languages their own way,
// and list candidates so that a language gantry adds later is found
// without a change here.
func Language(p jobs.Policy, names ...string) (string, bool) {
	var probe struct {
		Languages []string // the languages the operator's images offer (none: all)
	}
	b, _ := json.Marshal(p)
	_ = json.Unmarshal(b, &probe)
	for _, n := range names {
		l, ok := jobs.LookupLanguage(n)
		if ok && (len(probe.Languages) == 0 || slices.Contains(probe.Languages, l.Name)) {
			return l.Name, true
		}
	}
	return "", false
}

// WithCompileTimeout is req with the compile step's timeout set, for a
// compiled language (other requests are returned as they are).
func WithCompileTimeout(req jobs.Request, ms int) jobs.Request {
	if !Compiled(req.Language) {
		return req
	}
	b, err := json.Marshal(req)
	if err != nil {
		return req
	}
	var fields map[string]any
	if json.Unmarshal(b, &fields) != nil {
		return req
	}
	fields["compile_timeout_ms"] = ms
	b, _ = json.Marshal(fields)
	var out jobs.Request
	if json.Unmarshal(b, &out) != nil {
		return req
	}
	out.Compat = req.Compat // not part of the JSON
	return out
}
