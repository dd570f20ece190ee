package compat

// Versions are the versions of the languages in the sandbox image (built
// from Debian 12's packages), by gantry language name, for the APIs that
// name runtimes by version (Piston, Judge0's language names). A language
// gantry runs that is missing here is reported as version 0.0.0.
var Versions = map[string]string{
	"python":     "3.11.2",
	"node":       "18.20.4",
	"javascript": "18.20.4",
	"bash":       "5.2.15",
	"typescript": "5.0.0", // esbuild 0.17 transpiles TypeScript 5.0 syntax (no type checking)
	"c":          "12.2.0",
	"cpp":        "12.2.0",
	"c++":        "12.2.0",
	"go":         "1.19.8",
	"java":       "17.0.13",
	"rust":       "1.63.0",
}

// Version is the version of a gantry language (Versions).
func Version(lang string) string {
	if v, ok := Versions[lang]; ok {
		return v
	}
	return "0.0.0"
}

// compiled are the gantry languages with a compile step.
var compiled = map[string]bool{"c": true, "cpp": true, "c++": true, "go": true, "java": true, "rust": true}

// Compiled says whether a gantry language has a compile step (its
// compile_timeout applies).
func Compiled(lang string) bool { return compiled[lang] }
