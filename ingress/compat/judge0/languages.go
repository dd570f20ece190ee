package judge0

import (
	"sort"
	"strings"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/jobs"
)

// language is a Judge0 language gantry runs.
type language struct {
	ID int
	// Label is the name without the version, which gantry's image adds.
	Label string
	// Gantry are the gantry language names it may run as, in order.
	Gantry []string
	// SourceFile and Compiled describe it as Judge0 does (GET
	// /languages/{id}).
	SourceFile string
	Compiled   bool
}

// languages are Judge0 CE 1.13.1's own ids (db/languages/active.rb) of the
// languages gantry can run, and the newer ids of the hosted instance as
// aliases: a submission may name either, and is answered with the id it
// named.
var languages = []language{
	{ID: 71, Label: "Python", Gantry: []string{"python"}, SourceFile: "script.py"},
	{ID: 63, Label: "JavaScript (Node.js", Gantry: []string{"node", "javascript"}, SourceFile: "script.js"},
	{ID: 46, Label: "Bash", Gantry: []string{"bash"}, SourceFile: "script.sh"},
	{ID: 74, Label: "TypeScript", Gantry: []string{"typescript"}, SourceFile: "script.ts", Compiled: true},
	{ID: 50, Label: "C (GCC", Gantry: []string{"c"}, SourceFile: "main.c", Compiled: true},
	{ID: 54, Label: "C++ (GCC", Gantry: []string{"cpp", "c++"}, SourceFile: "main.cpp", Compiled: true},
	{ID: 60, Label: "Go", Gantry: []string{"go"}, SourceFile: "main.go", Compiled: true},
	{ID: 62, Label: "Java (OpenJDK", Gantry: []string{"java"}, SourceFile: "Main.java", Compiled: true},
	{ID: 73, Label: "Rust", Gantry: []string{"rust"}, SourceFile: "main.rs", Compiled: true},
}

// aliases are the hosted instance's newer ids, by the id of the same
// language above. 1.13.1's older compilers of C and C++ (GCC 7 and 8) are
// aliases too.
var aliases = map[int]int{
	92: 71, 100: 71, 109: 71, // Python 3.11, 3.12, 3.13
	93: 63, 97: 63, 102: 63, // Node.js 18, 20, 22
	94: 74, 101: 74, // TypeScript 5.0, 5.6
	48: 50, 49: 50, 75: 50, 103: 50, 104: 50, 110: 50, // C: GCC 7, 8, Clang 7, GCC 14, Clang 18, 19
	52: 54, 53: 54, 76: 54, 105: 54, // C++: GCC 7, 8, Clang 7, GCC 14
	95: 60, 106: 60, 107: 60, // Go 1.18, 1.22, 1.23
	91:  62, // Java (JDK 17)
	108: 73, // Rust 1.85
}

// lookup finds the language of an id or alias that gantry runs now, with
// the gantry language it runs as.
func lookup(p jobs.Policy, id int) (language, string, bool) {
	if to, ok := aliases[id]; ok {
		id = to
	}
	for _, l := range languages {
		if l.ID == id {
			name, ok := compat.Language(p, l.Gantry...)
			return l, name, ok
		}
	}
	return language{}, "", false
}

// name is the language's name as Judge0 words it, with the version the
// sandbox image has: "Python (3.11.2)", "C++ (GCC 12.2.0)".
func (l language) name(gantry string) string {
	v := compat.Version(gantry)
	if strings.Contains(l.Label, "(") {
		return l.Label + " " + v + ")"
	}
	return l.Label + " (" + v + ")"
}

// languageRef is a language as a list shows it.
type languageRef struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

// available lists the languages gantry runs, by name as Judge0 orders
// them.
func available(p jobs.Policy) []languageRef {
	var out []languageRef
	for _, l := range languages {
		if g, ok := compat.Language(p, l.Gantry...); ok {
			out = append(out, languageRef{ID: l.ID, Name: l.name(g)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Judge0's statuses (app/enumerations/status.rb).
const (
	statusInQueue    = 1
	statusProcessing = 2
	statusAccepted   = 3
	statusWrong      = 4
	statusTLE        = 5
	statusCE         = 6
	statusSIGSEGV    = 7
	statusSIGXFSZ    = 8
	statusSIGFPE     = 9
	statusSIGABRT    = 10
	statusNZEC       = 11
	statusOther      = 12
	statusInternal   = 13
	statusExecFormat = 14
)

// statusNames are the descriptions of the statuses, by id.
var statusNames = map[int]string{
	statusInQueue: "In Queue", statusProcessing: "Processing", statusAccepted: "Accepted",
	statusWrong: "Wrong Answer", statusTLE: "Time Limit Exceeded", statusCE: "Compilation Error",
	statusSIGSEGV: "Runtime Error (SIGSEGV)", statusSIGXFSZ: "Runtime Error (SIGXFSZ)",
	statusSIGFPE: "Runtime Error (SIGFPE)", statusSIGABRT: "Runtime Error (SIGABRT)",
	statusNZEC: "Runtime Error (NZEC)", statusOther: "Runtime Error (Other)",
	statusInternal: "Internal Error", statusExecFormat: "Exec Format Error",
}

// statusRef is a status as Judge0 shows it.
type statusRef struct {
	ID          int    `json:"id"`
	Description string `json:"description"`
}

func statusOf(id int) statusRef { return statusRef{ID: id, Description: statusNames[id]} }

// signalStatus is the status of a program killed by a signal, as Judge0
// maps isolate's exit signal.
func signalStatus(sig int) int {
	switch sig {
	case 11:
		return statusSIGSEGV
	case 25:
		return statusSIGXFSZ
	case 8:
		return statusSIGFPE
	case 6:
		return statusSIGABRT
	}
	return statusOther
}
