package runner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// A program per compiled language, doing what its first argument says:
// echo (a line of stdin), args (the rest, comma-separated), crash (a
// runtime error), spin (forever), alloc N (N MB, touched).
var modePrograms = map[string]string{
	"c": `#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "greeting.h"
int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "echo";
    if (!strcmp(mode, "echo")) {
        char line[256] = "";
        if (!fgets(line, sizeof line, stdin)) return 3;
        line[strcspn(line, "\n")] = 0;
        printf("%s %s\n", GREETING, line);
        return 0;
    }
    if (!strcmp(mode, "args")) {
        for (int i = 2; i < argc; i++) printf("%s%s", argv[i], i + 1 < argc ? "," : "\n");
        return 0;
    }
    if (!strcmp(mode, "crash")) { fprintf(stderr, "about to crash\n"); fflush(stderr); volatile int *p = NULL; return *p; }
    if (!strcmp(mode, "spin")) { for (volatile unsigned long x = 0;; x++) {} }
    if (!strcmp(mode, "alloc")) {
        size_t n = (size_t)atoi(argv[2]) << 20;
        char *b = malloc(n);
        memset(b, 1, n);
        printf("%d\n", b[n - 1]);
        return 0;
    }
    return 2;
}
`,
	"cpp": `#include <bits/stdc++.h>
using namespace std;
int main(int argc, char **argv) {
    string mode = argc > 1 ? argv[1] : "echo";
    if (mode == "echo") { string line; getline(cin, line); cout << "hello " << line << "\n"; return 0; }
    if (mode == "args") {
        vector<string> rest(argv + 2, argv + argc);
        for (size_t i = 0; i < rest.size(); i++) cout << rest[i] << (i + 1 < rest.size() ? "," : "\n");
        return 0;
    }
    if (mode == "crash") throw runtime_error("boom");
    if (mode == "spin") { volatile unsigned long x = 0; for (;;) x++; }
    if (mode == "alloc") { vector<char> b((size_t)stoi(argv[2]) << 20, 1); cout << int(b.back()) << "\n"; return 0; }
    return 2;
}
`,
	"go": `package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	mode := "echo"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "echo":
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		fmt.Println("hello", strings.TrimSpace(line))
	case "args":
		fmt.Println(strings.Join(slices.Clone(os.Args[2:]), ","))
	case "crash":
		var m map[string]int
		m["boom"] = 1
	case "spin":
		for x := 0; ; x++ {
		}
	case "alloc":
		n, _ := strconv.Atoi(os.Args[2])
		b := make([]byte, n<<20)
		for i := range b {
			b[i] = 1
		}
		fmt.Println(b[len(b)-1])
	default:
		os.Exit(2)
	}
}
`,
	"java": `import java.io.*;
import java.util.*;

public class Solution {
    public static void main(String[] args) throws IOException {
        String mode = args.length > 0 ? args[0] : "echo";
        switch (mode) {
            case "echo":
                System.out.println("hello " + new BufferedReader(new InputStreamReader(System.in)).readLine());
                break;
            case "args":
                System.out.println(String.join(",", Arrays.copyOfRange(args, 1, args.length)));
                break;
            case "crash":
                throw new IllegalStateException("boom");
            case "spin":
                for (long x = 0; ; x++) { if (x == -1) break; }
                break;
            case "alloc":
                List<byte[]> keep = new ArrayList<>();
                for (int i = 0; i < Integer.parseInt(args[1]); i++) { byte[] b = new byte[1 << 20]; Arrays.fill(b, (byte) 1); keep.add(b); }
                System.out.println(keep.get(keep.size() - 1)[0]);
                break;
            default:
                System.exit(2);
        }
    }
}
`,
	"rust": `use std::io::BufRead;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("echo");
    match mode {
        "echo" => {
            let line = std::io::stdin().lock().lines().next().unwrap().unwrap();
            println!("hello {}", line.trim());
        }
        "args" => println!("{}", args[2..].join(",")),
        "crash" => {
            let v: Vec<i32> = Vec::new();
            println!("{}", v[std::hint::black_box(3)]);
        }
        "spin" => {
            let mut x: u64 = 0;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        "alloc" => {
            let n: usize = args[2].parse().unwrap();
            let b = vec![1u8; n << 20];
            println!("{}", std::hint::black_box(&b)[b.len() - 1]);
        }
        _ => std::process::exit(2),
    }
}
`,
}

// brokenPrograms do not compile, and what each compiler says of them.
var brokenPrograms = map[string][2]string{
	"c":    {"int main(void) { return undeclared_name; }\n", "undeclared_name"},
	"cpp":  {"#include <vector>\nint main() { std::vector<int> v; v.no_such_method(); }\n", "no_such_method"},
	"go":   {"package main\n\nfunc main() { x := 1 }\n", "declared and not used: x"},
	"java": {"public class Main { public static void main(String[] a) { int x = \"text\"; } }\n", "incompatible types"},
	"rust": {"fn main() { let x: u32 = \"text\"; }\n", "mismatched types"},
}

// crashSigns is what each language's runtime error prints (or its exit).
var crashSigns = map[string]struct {
	code   int
	stderr string
}{
	"c":    {139, "about to crash"},
	"cpp":  {134, "boom"},
	"go":   {2, "assignment to entry in nil map"},
	"java": {1, "java.lang.IllegalStateException: boom"},
	"rust": {101, "index out of bounds"},
}

// needCompilers skips (or under GANTRY_TEST_REQUIRE fails) a test when the
// image has no compilers: `make image-compilers` builds the image that has.
func needCompilers(t *testing.T, h *harness) {
	t.Helper()
	for _, l := range jobs.Languages {
		if l.Compiled() && !h.sb.Runs(l.Name) {
			storetest.Unavailable(t, "the sandbox image %s has no %s: build the compilers image (make image-compilers) and set GANTRY_IMAGE", testImage(), l.Name)
		}
	}
}

// TestCompiledLanguages runs each compiled language end to end: its
// program gets stdin and args, its runtime errors are the program's, a
// compile error is told apart from a run failure, and the run is limited
// in time and memory as any job's.
func TestCompiledLanguages(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 2)
	needCompilers(t, h)
	for _, lang := range []string{"c", "cpp", "go", "java", "rust"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			code := modePrograms[lang]
			req := func(args ...string) jobs.Request {
				return jobs.Request{Language: lang, Code: code, Args: args, TimeoutMS: 20_000, CompileTimeoutMS: 60_000,
					Files: []jobs.File{{Path: "greeting.h", Content: `#define GREETING "hello"` + "\n"}}}
			}

			// stdin, and the compile's own record.
			r := req()
			r.Stdin = "world\n"
			j := h.run(t, r)
			if j.Status != jobs.StatusSucceeded || j.Stdout != "hello world\n" || j.Error != nil {
				t.Fatalf("echo: %s %q %q %+v (compile: %+v %q)", j.Status, j.Stdout, j.Stderr, j.Error, j.Compile, j.CompileOutput)
			}
			if c := j.Compile; c == nil || c.Status != jobs.CompileSucceeded || c.ExitCode == nil || *c.ExitCode != 0 ||
				c.DurationMS <= 0 || c.CPUTimeMS == nil || *c.CPUTimeMS <= 0 || c.PeakMemoryKB == nil || *c.PeakMemoryKB < 1024 {
				t.Errorf("compile record: %+v", j.Compile)
			}
			if j.CPUTimeMS == nil || j.PeakMemoryKB == nil || *j.PeakMemoryKB <= 0 {
				t.Errorf("usage: cpu %v peak %v", j.CPUTimeMS, j.PeakMemoryKB)
			} else if lang == "c" && (*j.CPUTimeMS > 50 || *j.PeakMemoryKB > 8<<10) {
				// The sandbox's set-up (bubblewrap, its init) is not the
				// program's: a C program that reads a line uses next to
				// nothing.
				t.Errorf("a small C program: cpu %d ms, peak %d KiB", *j.CPUTimeMS, *j.PeakMemoryKB)
			}
			// What the compiler built is not in the workspace: no
			// artifact, whatever the globs.
			r = req()
			r.Stdin, r.Artifacts = "again\n", []string{"**"}
			if j := h.run(t, r); j.Status != jobs.StatusSucceeded || len(j.Artifacts) != 1 || j.Artifacts[0].Path != "greeting.h" {
				t.Errorf("artifacts of **: %s %+v", j.Status, j.Artifacts)
			}

			// args
			j = h.run(t, req("args", "a b", "", "c"))
			if j.Status != jobs.StatusSucceeded || j.Stdout != "a b,,c\n" {
				t.Errorf("args: %s %q %q", j.Status, j.Stdout, j.Stderr)
			}

			// A runtime error is the program's failure, after a compile
			// that succeeded.
			j = h.run(t, req("crash"))
			want := crashSigns[lang]
			if j.Status != jobs.StatusFailed || j.ExitCode == nil || *j.ExitCode != want.code || !strings.Contains(j.Stderr, want.stderr) ||
				j.Compile == nil || j.Compile.Status != jobs.CompileSucceeded || (j.Error != nil && j.Error.Code == jobs.ErrCodeCompileError) {
				t.Errorf("crash: %s exit %v %q %+v %+v", j.Status, j.ExitCode, j.Stderr, j.Error, j.Compile)
			}

			// A compile error: failed, the compiler's message in
			// compile_output, nothing of the program.
			broken := brokenPrograms[lang]
			j = h.run(t, jobs.Request{Language: lang, Code: broken[0], CompileTimeoutMS: 60_000})
			if j.Status != jobs.StatusFailed || j.Error == nil || j.Error.Code != jobs.ErrCodeCompileError || j.ExitCode != nil ||
				j.Compile == nil || j.Compile.Status != jobs.CompileFailed || j.Compile.ExitCode == nil || *j.Compile.ExitCode == 0 ||
				!strings.Contains(j.CompileOutput, broken[1]) || j.Stdout != "" || j.Stderr != "" || j.CPUTimeMS != nil {
				t.Errorf("compile error: %s exit %v %+v %+v output %q stderr %q", j.Status, j.ExitCode, j.Error, j.Compile, j.CompileOutput, j.Stderr)
			}

			// The program's time limit, measured: it spun until killed
			// (with as much CPU as this machine gave it meanwhile).
			r = req("spin")
			r.TimeoutMS = 1500
			j = h.run(t, r)
			if j.Status != jobs.StatusTimedOut || j.Error == nil || j.Error.Code != jobs.ErrCodeTimedOut ||
				j.Compile == nil || j.Compile.Status != jobs.CompileSucceeded || j.CPUTimeMS == nil || *j.CPUTimeMS < 20 || *j.CPUTimeMS > 2000 ||
				j.DurationMS == nil || *j.DurationMS < 1400 || *j.DurationMS > 1500+4000 {
				t.Errorf("spin: %s %+v cpu %v duration %v", j.Status, j.Error, deref(j.CPUTimeMS), deref(j.DurationMS))
			}

			// The program's memory limit: killed (or, on the JVM, refused
			// its heap) past it, while 100 MB below it fit and are seen.
			r = req("alloc", "100")
			r.Limits = &jobs.Limits{MemoryMB: 320}
			j = h.run(t, r)
			if j.Status != jobs.StatusSucceeded || j.Stdout != "1\n" || j.PeakMemoryKB == nil || *j.PeakMemoryKB < 100<<10 || *j.PeakMemoryKB > 320<<10 {
				t.Errorf("alloc 100 MB: %s %q %q peak %v KiB", j.Status, j.Stdout, j.Stderr, deref(j.PeakMemoryKB))
			}
			r = req("alloc", "600")
			r.Limits = &jobs.Limits{MemoryMB: 320}
			j = h.run(t, r)
			oom := j.Error != nil && j.Error.Code == jobs.ErrCodeOOMKilled
			jvmOOM := lang == "java" && strings.Contains(j.Stderr, "java.lang.OutOfMemoryError")
			// The container's limit also holds the warm interpreter's
			// allowance, which the program may use where the interpreter
			// does not.
			if j.Status != jobs.StatusFailed || !(oom || jvmOOM) || j.PeakMemoryKB == nil || *j.PeakMemoryKB > int64(320+h.sb.cfg.WarmMB)<<10 {
				t.Errorf("alloc 600 MB in 320: %s exit %v %+v %q peak %v KiB", j.Status, j.ExitCode, j.Error, j.Stderr, deref(j.PeakMemoryKB))
			}
		})
	}
}

// rssSlackKB is how far below what a program touched its peak memory may
// read: the kernel keeps a process's resident set in per-CPU counters,
// each up to 32 pages behind (percpu_counter_batch), and both ends of a
// job's peak (what its process held as it started, its high-water mark)
// are read from them.
const rssSlackKB = 1 << 10

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestCompileLimits: the compile step has its own timeout, and its output
// is capped and kept apart from the program's.
func TestCompileLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 2)
	needCompilers(t, h)

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		// Templates the compiler unfolds for far longer than 300 ms.
		j := h.run(t, jobs.Request{Language: "cpp", CompileTimeoutMS: 300, Code: `#include <bits/stdc++.h>
template <int N> struct F { static const long v = F<N - 1>::v + F<N - 2>::v; };
template <> struct F<1> { static const long v = 1; };
template <> struct F<0> { static const long v = 0; };
int main() { std::map<int, std::string> m; std::cout << F<80>::v << m.size() << "\n"; }
`})
		if j.Status != jobs.StatusFailed || j.Error == nil || j.Error.Code != jobs.ErrCodeCompileError || !strings.Contains(j.Error.Message, "timeout") ||
			j.Compile == nil || j.Compile.Status != jobs.CompileTimedOut || j.Compile.ExitCode != nil || j.Compile.DurationMS < 300 || j.Compile.DurationMS > 300+4000 {
			t.Errorf("compile timeout: %s %+v %+v", j.Status, j.Error, j.Compile)
		}
	})

	t.Run("output", func(t *testing.T) {
		t.Parallel()
		// Warnings on success are the compiler's, not the program's.
		var b strings.Builder
		b.WriteString("#include <stdio.h>\nint main(void) {\n")
		for i := range 3000 {
			fmt.Fprintf(&b, "  int unused_%d = %d;\n", i, i)
		}
		b.WriteString("  printf(\"ran\\n\");\n  return 0;\n}\n")
		code := strings.Replace(b.String(), "int main(void) {", "#pragma GCC diagnostic warning \"-Wunused-variable\"\nint main(void) {", 1)
		j := h.run(t, jobs.Request{Language: "c", Code: code, CompileTimeoutMS: 60_000})
		if j.Status != jobs.StatusSucceeded || j.Stdout != "ran\n" || j.Stderr != "" || j.Compile == nil || !j.Compile.OutputTruncated ||
			len(j.CompileOutput) != jobs.CompileOutputCap || !strings.Contains(j.CompileOutput, "warning: unused variable") {
			t.Errorf("warnings: %s %q %q truncated %v, %d bytes", j.Status, j.Stdout, j.Stderr, j.Compile, len(j.CompileOutput))
		}
	})

	t.Run("in a session", func(t *testing.T) {
		t.Parallel()
		sid := h.session(t)
		run := func(req jobs.Request) jobs.Job {
			return h.waitFor(t, h.submitIn(t, sid, req), func(j jobs.Job) bool { return j.Status.Terminal() })
		}
		if j := run(jobs.Request{Language: "bash", Code: "echo '#define ANSWER 42' > answer.h"}); j.Status != jobs.StatusSucceeded {
			t.Fatalf("bash: %s %q", j.Status, j.Stderr)
		}
		// The compile sees the session's workspace, read-only.
		j := run(jobs.Request{Language: "c", Code: "#include <stdio.h>\n#include \"answer.h\"\nint main(void) { FILE *f = fopen(\"from-c.txt\", \"w\"); fprintf(f, \"%d\\n\", ANSWER); return fclose(f); }\n"})
		if j.Status != jobs.StatusSucceeded || j.Compile == nil || j.Compile.Status != jobs.CompileSucceeded {
			t.Fatalf("c in the session: %s %q %q", j.Status, j.Stderr, j.CompileOutput)
		}
		j = run(jobs.Request{Language: "c", Code: "#include <stdio.h>\nint main(void) { return 0; }\n#error stop here\n"})
		if j.Status != jobs.StatusFailed || j.Error == nil || j.Error.Code != jobs.ErrCodeCompileError {
			t.Fatalf("a compile error in the session: %s %+v", j.Status, j.Error)
		}
		// The program's file is there, the build is not.
		j = run(jobs.Request{Language: "bash", Code: "cat from-c.txt; ls -A | sort | tr '\\n' ' '"})
		if j.Status != jobs.StatusSucceeded || j.Stdout != "42\nanswer.h from-c.txt out " {
			t.Errorf("the session's workspace: %s %q %q", j.Status, j.Stdout, j.Stderr)
		}
	})

	t.Run("alias and a Java class of its own name", func(t *testing.T) {
		t.Parallel()
		j := h.run(t, jobs.Request{Language: "c++", Code: "#include <iostream>\nint main() { std::cout << __cplusplus << std::endl; }\n"})
		if j.Status != jobs.StatusSucceeded || j.Stdout != "201703\n" {
			t.Errorf("c++: %s %q %q %q", j.Status, j.Stdout, j.Stderr, j.CompileOutput)
		}
		j = h.run(t, jobs.Request{Language: "java", Code: "package judge.app;\n// class Decoy {}\nclass Helper { static int two() { return 2; } }\nfinal class Runner {\n  public static void main(String[] a) { System.out.println(Helper.two()); }\n}\n"})
		if j.Status != jobs.StatusSucceeded || j.Stdout != "2\n" {
			t.Errorf("java package and main class: %s %q %q %q", j.Status, j.Stdout, j.Stderr, j.CompileOutput)
		}
	})
}

// TestCompiledLanguagesInTheirOwnContainer: under the container isolation
// (gVisor's) the compile step and the program run in the job's container
// one after the other, and a compile error is told apart as under
// bubblewrap.
func TestCompiledLanguagesInTheirOwnContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarnessWith(t, testSandboxWith(t, wire.Container), 1)
	needCompilers(t, h)
	j := h.run(t, jobs.Request{Language: "rust", Code: modePrograms["rust"], Stdin: "gvisor\n", CompileTimeoutMS: 60_000})
	if j.Status != jobs.StatusSucceeded || j.Stdout != "hello gvisor\n" || j.Compile == nil || j.Compile.CPUTimeMS == nil || j.CPUTimeMS == nil {
		t.Errorf("rust: %s %q %q %+v %q", j.Status, j.Stdout, j.Stderr, j.Compile, j.CompileOutput)
	}
	j = h.run(t, jobs.Request{Language: "go", Code: brokenPrograms["go"][0], CompileTimeoutMS: 60_000})
	if j.Status != jobs.StatusFailed || j.Error == nil || j.Error.Code != jobs.ErrCodeCompileError || !strings.Contains(j.CompileOutput, brokenPrograms["go"][1]) {
		t.Errorf("go compile error: %s %+v %q", j.Status, j.Error, j.CompileOutput)
	}
}
