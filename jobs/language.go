package jobs

// Language is a programming language gantry runs code in.
type Language struct {
	Name string `json:"name"`
	// File is the name the program is written to inside the sandbox.
	File string `json:"file"`
	// Command is the argv that runs the program; the program's path is
	// appended.
	Command []string `json:"command"`
	// Description tells users what the sandbox offers for it.
	Description string `json:"description"`
}

// ProgramDir is where the runner writes the program inside the sandbox. It
// is outside /workspace so the program never shows up among a job's files.
const ProgramDir = "/tmp/gantry"

// WorkspaceDir is the job's working directory inside the sandbox.
const WorkspaceDir = "/workspace"

// Languages lists the languages the sandbox image supports.
var Languages = []Language{
	{Name: "python", File: "main.py", Command: []string{"python3"},
		Description: "Python 3 with numpy, pandas, scipy, matplotlib and sympy"},
	{Name: "bash", File: "main.sh", Command: []string{"bash"},
		Description: "bash with coreutils, findutils and tar"},
	{Name: "node", File: "main.js", Command: []string{"node"},
		Description: "Node.js 18 (CommonJS, standard library only)"},
	// TypeScript is transpiled (not type-checked) by esbuild into the
	// sandbox's /tmp and run by Node, with source maps so that stack
	// traces name main.ts's lines. Imports stay requires, so
	// require('servers/<name>') and require('gantry') work as from Node.
	{Name: "typescript", File: "main.ts", Command: []string{"sh", "-c",
		`esbuild "$1" --log-level=warning --platform=node --format=cjs --target=node18 --sourcemap=inline --outfile=/tmp/.gantry-ts/main.js && exec node --enable-source-maps /tmp/.gantry-ts/main.js`,
		"typescript"},
		Description: "TypeScript, transpiled by esbuild and run by Node.js 18 (no type checking)"},
}

// LanguageNames lists the languages' names, in the order of Languages.
func LanguageNames() []string {
	names := make([]string, len(Languages))
	for i, l := range Languages {
		names[i] = l.Name
	}
	return names
}

// LookupLanguage returns the language with the given name.
func LookupLanguage(name string) (Language, bool) {
	for _, l := range Languages {
		if l.Name == name {
			return l, true
		}
	}
	return Language{}, false
}

// Argv is the command line that runs the spec inside the sandbox.
func (s *Spec) Argv() []string {
	if len(s.Command) > 0 {
		return s.Command
	}
	l, _ := LookupLanguage(s.Language)
	argv := append(append([]string(nil), l.Command...), ProgramDir+"/"+l.File)
	return append(argv, s.Args...)
}
