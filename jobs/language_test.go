package jobs

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestLanguageNamesAndAliases(t *testing.T) {
	seen := map[string]string{}
	for _, l := range Languages {
		for _, n := range append([]string{l.Name}, l.Aliases...) {
			if other, ok := seen[n]; ok {
				t.Errorf("%q names both %s and %s", n, other, l.Name)
			}
			seen[n] = l.Name
			if got, ok := LookupLanguage(strings.ToUpper(n)); !ok || got.Name != l.Name {
				t.Errorf("LookupLanguage(%q) = %q, %v", strings.ToUpper(n), got.Name, ok)
			}
		}
		if l.Aliases == nil {
			t.Errorf("%s: aliases must be a list (JSON [])", l.Name)
		}
	}
	for alias, want := range map[string]string{"c++": "cpp", "golang": "go", "js": "node", "py": "python", "rs": "rust", "ts": "typescript"} {
		if l, _ := LookupLanguage(alias); l.Name != want {
			t.Errorf("%s is %q, want %s", alias, l.Name, want)
		}
	}
	if got := StandardLanguages(); !slices.Equal(got, []string{"python", "bash", "node", "typescript"}) {
		t.Errorf("standard languages %v", got)
	}
}

// The images label the languages they have, and the runner believes them:
// the labels must say what jobs/language.go knows.
func TestImagesLabelTheirLanguages(t *testing.T) {
	var compiled []string
	for _, l := range Languages {
		if l.Compiled() {
			compiled = append(compiled, l.Name)
		}
	}
	standard := strings.Join(StandardLanguages(), ",")
	all := strings.Join(append(StandardLanguages(), compiled...), ",")
	for file, want := range map[string]string{
		"../images/sandbox/Dockerfile":           "LABEL dev.gantry.languages=" + standard + "\n",
		"../images/sandbox/compilers.Dockerfile": "LABEL dev.gantry.languages=" + all + "\n",
		"../images/sandbox/build.sh":             "LANGUAGES=" + standard + " ;;",
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q", file, want)
		}
	}
}

func TestPlan(t *testing.T) {
	cases := []struct {
		spec          Spec
		file, compile string
		run           []string
	}{
		{Spec{Language: "python", Code: "x", Args: []string{"a b", "c"}}, "/tmp/gantry/main.py", "", []string{"python3", "/tmp/gantry/main.py", "a b", "c"}},
		{Spec{Language: "c", Code: "x", Args: []string{"1"}}, "/tmp/gantry/main.c",
			"gcc -O2 -pipe -iquote /workspace -o /tmp/gantry/build/main /tmp/gantry/main.c -lm", []string{"/tmp/gantry/build/main", "1"}},
		{Spec{Language: "go", Code: "x"}, "/tmp/gantry/main.go", "go build -o /tmp/gantry/build/main /tmp/gantry/main.go", []string{"/tmp/gantry/build/main"}},
		{Spec{Language: "java", Code: "public class Sol { public static void main(String[] a) {} }"}, "/tmp/gantry/Sol.java",
			"javac -J-XX:+UseSerialGC -J-XX:TieredStopAtLevel=1 -J-XX:-UsePerfData -encoding UTF-8 -d /tmp/gantry/build /tmp/gantry/Sol.java",
			[]string{"java", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-XX:MaxRAMPercentage=75", "-cp", "/tmp/gantry/build", "Sol"}},
		// A command is run as it is, whatever the language.
		{Spec{Language: "c", Command: []string{"gcc", "--version"}}, "", "", []string{"gcc", "--version"}},
	}
	for _, c := range cases {
		p := c.spec.Plan()
		if p.File != c.file || strings.Join(p.Compile, " ") != c.compile || !slices.Equal(p.Run, c.run) {
			t.Errorf("%s: plan %q / %q / %q", c.spec.Language, p.File, p.Compile, p.Run)
		}
	}
	// TypeScript's command passes the args through its shell.
	p := (&Spec{Language: "typescript", Code: "x", Args: []string{"one"}}).Plan()
	if p.Run[len(p.Run)-2] != "/tmp/gantry/main.ts" || p.Run[len(p.Run)-1] != "one" || !strings.Contains(p.Run[2], `"$@"`) {
		t.Errorf("typescript plan %q", p.Run)
	}
}

func TestJavaClasses(t *testing.T) {
	cases := []struct{ code, file, main string }{
		{"public class Main { public static void main(String[] a) {} }", "Main", "Main"},
		{"import java.util.*;\npublic final class Solution {\n public static void main(String... args) {}\n}\nclass Helper {}", "Solution", "Solution"},
		// No public class: the class with main names the file.
		{"class A { void f() {} }\nclass B { static public void x() {} public static void main(String[] a) {} }", "B", "B"},
		// The public class names the file; main may be in another.
		{"public class Api { }\nclass Runner { public static void main(String[] a) {} }", "Api", "Runner"},
		// A package qualifies the main class, not the file.
		{"package judge . app;\npublic class P { public static void main(String[] a) {} }", "P", "judge.app.P"},
		// Comments, strings, text blocks and nested classes do not count.
		{"// public class Fake {}\n/* public class Fake2 { static void main( */\npublic class Real {\n String s = \"public class InString {\";\n String t = \"\"\"\n  class InBlock { public static void main(\n  \"\"\";\n static class Inner { public static void main(String[] a) {} }\n public static void main(String[] a) {}\n}", "Real", "Real"},
		{"record Point(int x) {}\nenum E { A }\ninterface I {}\npublic record R(int y) { public static void main(String[] a) {} }", "R", "R"},
		// Nothing to go by: Main.
		{"int x = 1;", "Main", "Main"},
		{"", "Main", "Main"},
		{"public class {", "Main", "Main"},
	}
	for _, c := range cases {
		file, main := javaClasses(c.code)
		if file != c.file || main != c.main {
			t.Errorf("javaClasses(%q) = %q, %q; want %q, %q", c.code, file, main, c.file, c.main)
		}
	}
}

func FuzzJavaClasses(f *testing.F) {
	f.Add("public class Main { public static void main(String[] a) {} }")
	f.Add("package a.b; class X { static void main(String[] a) {} } /* \" */ '\\''")
	f.Add("\"\"\"\n\"\"\"public class Q{}")
	name := regexp.MustCompile(`^[\p{L}_$][\p{L}\p{N}_$]*$`)
	qualified := regexp.MustCompile(`^[\p{L}_$][\p{L}\p{N}_$]*(\.[\p{L}_$][\p{L}\p{N}_$]*)*$`)
	f.Fuzz(func(t *testing.T, code string) {
		file, main := javaClasses(code)
		// The file name lands in a path and the class in an argv: both
		// must be plain Java names, whatever the code.
		if !name.MatchString(file) || !qualified.MatchString(main) {
			t.Fatalf("javaClasses(%q) = %q, %q", code, file, main)
		}
	})
}

func TestNormalizeLanguages(t *testing.T) {
	p := DefaultPolicy()
	spec, err := p.Normalize(Request{Language: "C++", Code: "int main(){}", Args: []string{"x"}})
	if err != nil || spec.Language != "cpp" || spec.CompileTimeoutMS != p.DefaultCompileTimeoutMS || !slices.Equal(spec.Args, []string{"x"}) {
		t.Errorf("c++: %+v %v", spec, err)
	}
	spec, err = p.Normalize(Request{Language: "rust", Code: "fn main(){}", CompileTimeoutMS: 5000})
	if err != nil || spec.CompileTimeoutMS != 5000 {
		t.Errorf("rust: %+v %v", spec, err)
	}
	// Without a compile step the compile timeout is not kept.
	spec, err = p.Normalize(Request{Language: "python", Code: "print(1)", CompileTimeoutMS: 5000})
	if err != nil || spec.CompileTimeoutMS != 0 {
		t.Errorf("python with compile_timeout_ms: %+v %v", spec, err)
	}
	p.Languages = StandardLanguages()
	for _, c := range []struct {
		req   Request
		field string
		msg   string
	}{
		{Request{Language: "c", Code: "x"}, "language", "c is not offered by this gantry"},
		{Request{Language: "golang", Code: "x"}, "language", "go is not offered"},
		{Request{Language: "cobol", Code: "x"}, "language", "one of bash, node, python, typescript)"},
		{Request{Language: "bash", Command: []string{"ls"}, Args: []string{"x"}}, "args", "a command holds its own"},
		{Request{Language: "bash", Code: "x", Args: []string{"a\x00"}}, "args[0]", "NUL"},
		{Request{Language: "bash", Code: "x", Args: make([]string, 257)}, "args", "at most 256"},
		{Request{Language: "bash", Code: "x", CompileTimeoutMS: -1}, "compile_timeout_ms", "between"},
		{Request{Language: "bash", Code: "x", CompileTimeoutMS: 900_001}, "compile_timeout_ms", "between"},
	} {
		_, err := p.Normalize(c.req)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Message, c.msg) {
			t.Errorf("%+v: %v, want %s: %s", c.req.Language, err, c.field, c.msg)
		}
	}
	if got := len(p.Offered()); got != 4 {
		t.Errorf("offered %d languages", got)
	}
}
