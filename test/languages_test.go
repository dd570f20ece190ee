package test

import (
	"encoding/json"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/ingress/contracttest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// helloPrograms greet the line they read and their first argument.
var helloPrograms = map[string]string{
	"c":    "#include <stdio.h>\nint main(int c, char **v) { char s[64]; scanf(\"%63s\", s); printf(\"hello %s %s\\n\", s, v[1]); }\n",
	"cpp":  "#include <iostream>\n#include <string>\nint main(int c, char **v) { std::string s; std::cin >> s; std::cout << \"hello \" << s << ' ' << v[1] << '\\n'; }\n",
	"go":   "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n\tvar s string\n\tfmt.Scan(&s)\n\tfmt.Println(\"hello\", s, os.Args[1])\n}\n",
	"java": "import java.util.Scanner;\npublic class Hello { public static void main(String[] a) { System.out.println(\"hello \" + new Scanner(System.in).next() + \" \" + a[0]); } }\n",
	"rust": "fn main() { let mut s = String::new(); std::io::stdin().read_line(&mut s).unwrap(); println!(\"hello {} {}\", s.trim(), std::env::args().nth(1).unwrap()); }\n",
}

// TestCompiledLanguagesOverHTTP drives gantry dev on the compilers image as
// a judge's client would: it offers what its image labels, compiles and
// runs each language with stdin and args, tells a compile error apart, and
// reports what each program used; every answer is checked against the
// OpenAPI document.
func TestCompiledLanguagesOverHTTP(t *testing.T) {
	d := startDev(t)
	target, _ := url.Parse(d.url)
	checked := httptest.NewServer(contracttest.Handler(t, httputil.NewSingleHostReverseProxy(target)))
	defer checked.Close()
	c := &dev{url: checked.URL, key: d.key}

	var list struct{ Languages []jobs.Language }
	if err := json.Unmarshal(c.call(t, "GET", "/v1/languages", "").body, &list); err != nil {
		t.Fatal(err)
	}
	offered := map[string]bool{}
	for _, l := range list.Languages {
		offered[l.Name] = true
	}
	if !offered["c"] {
		storetest.Unavailable(t, "gantry dev's image offers no compiled language (%v): make image-compilers and GANTRY_IMAGE", list.Languages)
	}
	for _, lang := range []string{"c", "cpp", "go", "java", "rust"} {
		if !offered[lang] {
			t.Fatalf("%s is not offered: %+v", lang, list.Languages)
		}
		body, _ := json.Marshal(map[string]any{"language": lang, "code": helloPrograms[lang], "stdin": "world\n", "args": []string{"and " + lang},
			"compile_timeout_ms": 60_000, "timeout_ms": 10_000})
		r := c.call(t, "POST", "/v1/execute?wait=90s", string(body))
		var j jobs.Job
		if err := json.Unmarshal(r.body, &j); err != nil || r.status != 200 {
			t.Fatalf("%s: %d %s", lang, r.status, r.body)
		}
		if j.Status != jobs.StatusSucceeded || j.Stdout != "hello world and "+lang+"\n" || j.Compile == nil || j.Compile.Status != jobs.CompileSucceeded ||
			j.CPUTimeMS == nil || j.PeakMemoryKB == nil || *j.PeakMemoryKB <= 0 || j.Compile.CPUTimeMS == nil || *j.Compile.CPUTimeMS <= 0 {
			t.Errorf("%s: %s %q %q compile %+v output %q cpu %v peak %v", lang, j.Status, j.Stdout, j.Stderr, j.Compile, j.CompileOutput, j.CPUTimeMS, j.PeakMemoryKB)
		}
		t.Logf("%s: compile %d ms (%d ms CPU, %d KiB), run %d ms (%d ms CPU, %d KiB)", lang, j.Compile.DurationMS,
			deref(j.Compile.CPUTimeMS), deref(j.Compile.PeakMemoryKB), deref(j.DurationMS), deref(j.CPUTimeMS), deref(j.PeakMemoryKB))
	}

	// gantry run: the language from the extension, the arguments after --;
	// a compile error shows the compiler's output.
	dir := t.TempDir()
	writeFile(t, dir+"/sum.c", "#include <stdio.h>\n#include <stdlib.h>\nint main(int c, char **v) { int s = 0; for (int i = 1; i < c; i++) s += atoi(v[i]); printf(\"%d\\n\", s); }\n")
	if r := d.gantryCLI(t, dir, "", nil, "run", "sum.c", "--", "1", "2", "39"); r.code != 0 || r.stdout != "42\n" {
		t.Errorf("gantry run sum.c -- 1 2 39: %+v", r)
	}
	writeFile(t, dir+"/broken.cpp", "int main() { return nope; }\n")
	if r := d.gantryCLI(t, dir, "", nil, "run", "broken.cpp"); r.code != 1 || !strings.Contains(r.stderr, "nope") || !strings.Contains(r.stderr, "did not compile") {
		t.Errorf("gantry run broken.cpp: %+v", r)
	}

	// A compile error: the job failed before its program ran, and says so.
	r := c.call(t, "POST", "/v1/execute?wait=90s", `{"language": "c++", "code": "int main() { return missing; }", "compile_timeout_ms": 60000}`)
	var j jobs.Job
	_ = json.Unmarshal(r.body, &j)
	if r.status != 200 || j.Status != jobs.StatusFailed || j.Error == nil || j.Error.Code != jobs.ErrCodeCompileError || j.ExitCode != nil ||
		j.Compile == nil || j.Compile.Status != jobs.CompileFailed || !strings.Contains(j.CompileOutput, "missing") || j.Stderr != "" {
		t.Errorf("compile error: %d %s", r.status, r.body)
	}
	// History keeps it, found by the language's alias.
	var page struct{ Jobs []jobs.Job }
	_ = json.Unmarshal(c.call(t, "GET", "/v1/jobs?language=c%2B%2B&status=failed", "").body, &page)
	if !slices.ContainsFunc(page.Jobs, func(h jobs.Job) bool {
		return h.ID == j.ID && h.CompileOutput == j.CompileOutput && h.Compile != nil && h.Compile.Status == jobs.CompileFailed
	}) {
		t.Errorf("history of c++ failures: %+v", page.Jobs)
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}
