package jobs

import (
	"slices"
	"strings"
)

// Language is a programming language gantry runs code in.
type Language struct {
	Name string `json:"name"`
	// Aliases are other names a request may give it ("c++" for cpp); a
	// job records Name.
	Aliases []string `json:"aliases"`
	// File is the name the program is written to inside the sandbox, in
	// ProgramDir (Java: the name of its public class decides, see Plan).
	File string `json:"file"`
	// Compile, for a compiled language, is the compile step's argv: it
	// builds the program into BuildDir, in a sandbox of its own with its
	// own timeout, before the program runs. Placeholders: {source} is the
	// program's path, {build} is BuildDir.
	Compile []string `json:"compile,omitempty"`
	// Command is the argv that runs the program: an interpreted
	// language's program path is appended to it; a compiled language's
	// runs what Compile built ({build}, and {class}: Java's main class).
	// The job's args follow.
	Command []string `json:"command"`
	// Description tells users what the sandbox offers for it.
	Description string `json:"description"`
}

// Compiled reports whether the language has a compile step.
func (l Language) Compiled() bool { return len(l.Compile) > 0 }

// ProgramDir is where the runner writes the program inside the sandbox. It
// is outside /workspace so the program never shows up among a job's files.
const ProgramDir = "/tmp/gantry"

// BuildDir is where a compiled language's compile step writes the program
// it built: inside ProgramDir, so neither a job's artifacts nor a session's
// workspace ever hold it, and read-only to the program.
const BuildDir = ProgramDir + "/build"

// WorkspaceDir is the job's working directory inside the sandbox.
const WorkspaceDir = "/workspace"

// TypeScriptOut is where a TypeScript program is transpiled to, in the
// sandbox's /tmp, and run from.
const TypeScriptOut = "/tmp/.gantry-ts/main.js"

// typeScriptFlags are esbuild's flags for a TypeScript program.
var typeScriptFlags = []string{"--log-level=warning", "--platform=node", "--format=cjs", "--target=node18", "--sourcemap=inline", "--outfile=" + TypeScriptOut}

// TypeScriptBuild is the argv that transpiles the TypeScript program at
// source to TypeScriptOut, as the language's Command does before it runs
// the result with Node (source maps on): a Node started ahead of the job
// does the same (the agent's spares).
func TypeScriptBuild(source string) []string {
	return append([]string{"esbuild", source}, typeScriptFlags...)
}

// Languages lists the languages gantry knows. The compiled ones need the
// compilers image (images/sandbox/compilers.Dockerfile), which labels the
// languages it has; the standard image has the others.
var Languages = []Language{
	{Name: "python", Aliases: []string{"python3", "py"}, File: "main.py", Command: []string{"python3"},
		Description: "Python 3 with numpy, pandas, scipy, matplotlib and sympy"},
	{Name: "bash", Aliases: []string{"sh"}, File: "main.sh", Command: []string{"bash"},
		Description: "bash with coreutils, findutils and tar"},
	{Name: "node", Aliases: []string{"javascript", "js", "nodejs"}, File: "main.js", Command: []string{"node"},
		Description: "Node.js 18 (CommonJS, standard library only)"},
	// TypeScript is transpiled (not type-checked) by esbuild into the
	// sandbox's /tmp and run by Node, with source maps so that stack
	// traces name main.ts's lines. Imports stay requires, so
	// require('servers/<name>') and require('gantry') work as from Node.
	{Name: "typescript", Aliases: []string{"ts"}, File: "main.ts", Command: []string{"sh", "-c",
		`esbuild "$1" ` + strings.Join(typeScriptFlags, " ") + ` && shift && exec node --enable-source-maps ` + TypeScriptOut + ` "$@"`,
		"typescript"},
		Description: "TypeScript, transpiled by esbuild and run by Node.js 18 (no type checking)"},
	// The compiled languages, as judges build them: optimised, one source
	// file, the standard library only. The compile runs in /workspace:
	// `#include "x.h"` finds the job's files there, as javac finds other
	// classes' sources.
	{Name: "c", Aliases: []string{}, File: "main.c",
		Compile:     []string{"gcc", "-O2", "-pipe", "-iquote", WorkspaceDir, "-o", "{build}/main", "{source}", "-lm"},
		Command:     []string{"{build}/main"},
		Description: "C (gcc 12, GNU C17, -O2, with libm); compilers image"},
	{Name: "cpp", Aliases: []string{"c++"}, File: "main.cpp",
		Compile:     []string{"g++", "-O2", "-pipe", "-iquote", WorkspaceDir, "-o", "{build}/main", "{source}"},
		Command:     []string{"{build}/main"},
		Description: "C++ (g++ 12, GNU C++17, -O2); compilers image"},
	// Go compiles from the image's read-only build cache of the standard
	// library (GOCACHE), offline, without cgo.
	{Name: "go", Aliases: []string{"golang"}, File: "main.go",
		Compile:     []string{"go", "build", "-o", "{build}/main", "{source}"},
		Command:     []string{"{build}/main"},
		Description: "Go 1.23 (package main, standard library only); compilers image"},
	// javac gets a quick JIT and the serial collector (a compile is short);
	// the program gets the serial collector too (one CPU's worth of
	// threads) and three quarters of the job's memory as its heap limit.
	{Name: "java", Aliases: []string{}, File: "Main.java",
		Compile: []string{"javac", "-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1", "-J-XX:-UsePerfData",
			"-encoding", "UTF-8", "-d", "{build}", "{source}"},
		Command:     []string{"java", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-XX:MaxRAMPercentage=75", "-cp", "{build}", "{class}"},
		Description: "Java 17 (OpenJDK; the public class, else Main, holds main); compilers image"},
	{Name: "rust", Aliases: []string{"rs"}, File: "main.rs",
		Compile:     []string{"rustc", "--edition", "2021", "-O", "-C", "strip=debuginfo", "-o", "{build}/main", "{source}"},
		Command:     []string{"{build}/main"},
		Description: "Rust 1.96 (edition 2021, -O, the standard library only); compilers image"},
}

// StandardLanguages are the languages of the standard sandbox image: all
// but the compiled ones.
func StandardLanguages() []string {
	var names []string
	for _, l := range Languages {
		if !l.Compiled() {
			names = append(names, l.Name)
		}
	}
	return names
}

// LanguageNames lists the languages' names, in the order of Languages.
func LanguageNames() []string {
	names := make([]string, len(Languages))
	for i, l := range Languages {
		names[i] = l.Name
	}
	return names
}

// LanguageNamesAndAliases lists every name a request may give a language.
func LanguageNamesAndAliases() []string {
	var names []string
	for _, l := range Languages {
		names = append(append(names, l.Name), l.Aliases...)
	}
	return names
}

// LookupLanguage returns the language with the given name or alias
// (case-insensitive).
func LookupLanguage(name string) (Language, bool) {
	name = strings.ToLower(name)
	for _, l := range Languages {
		if l.Name == name || slices.Contains(l.Aliases, name) {
			return l, true
		}
	}
	return Language{}, false
}

// Plan is how a spec's program is built and run in the sandbox.
type Plan struct {
	// File is the program's path (under ProgramDir), "" for a command.
	File string
	// Compile is the compile step's argv, nil when there is none.
	Compile []string
	// Run is the argv that runs the program, with the job's args.
	Run []string
}

// Plan says how the spec's program is built and run: a command as it is;
// code written to its language's file, compiled when the language is, and
// run by the language's command with the job's args.
func (s *Spec) Plan() Plan {
	if len(s.Command) > 0 {
		return Plan{Run: s.Command}
	}
	l, _ := LookupLanguage(s.Language)
	file, class := l.File, ""
	if l.Name == "java" {
		var name string
		name, class = javaClasses(s.Code)
		file = name + ".java"
	}
	p := Plan{File: ProgramDir + "/" + file}
	expand := func(argv []string) []string {
		out := make([]string, 0, len(argv)+len(s.Args)+1)
		for _, a := range argv {
			a = strings.ReplaceAll(a, "{build}", BuildDir)
			a = strings.ReplaceAll(a, "{source}", p.File)
			out = append(out, strings.ReplaceAll(a, "{class}", class))
		}
		return out
	}
	if l.Compiled() {
		p.Compile = expand(l.Compile)
		p.Run = expand(l.Command)
	} else {
		p.Run = append(expand(l.Command), p.File)
	}
	p.Run = append(p.Run, s.Args...)
	return p
}

// StartupVariable says whether a Python interpreter reads the variable
// name when it starts (PYTHON* but PYTHONPATH, LANG, LC_*, LD_*, HOME, TZ,
// PATH, MPLCONFIGDIR): a Python job whose env sets one runs in a new
// interpreter, never in an already running one.
func StartupVariable(k string) bool {
	switch {
	case k == "PYTHONPATH":
		return false
	case strings.HasPrefix(k, "PYTHON"), strings.HasPrefix(k, "LC_"), strings.HasPrefix(k, "LD_"):
		return true
	case k == "LANG", k == "LANGUAGE", k == "HOME", k == "TZ", k == "PATH", k == "MPLCONFIGDIR":
		return true
	}
	return false
}
