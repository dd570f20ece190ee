// Package wire is the protocol the runner speaks with gantry's sandbox
// agent, both ends of it: the frames and their kinds, the requests and
// what the agent answers (Request, Exit, the live operations), the egress
// streams carried beside a run (NetMux), the workspace listing, and the
// runner's end of the connection (Conn). The agent (package agent) is the
// other end. Standard library only: the runner and the ingress import
// this, and nothing else of the agent.
package wire

import "encoding/json"

// Protocol is the version of the runner-agent protocol. The agent reports
// it in its Hello; a runner refuses an agent of another version (the
// sandbox image was built from other sources than the runner). 9: port
// streams (ports.go). 10: a usage's peak memory is absent when it was not
// measured (no longer 0). 11: JavaScript and TypeScript kernels (Kernel).
// 12: a session sandbox made ahead says so (Live.Spare). 13: the warm
// interpreter's sandboxes have an init of their own
// (cmd/gantry-sandbox-init, in the image).
const Protocol = 13

// Where things are inside the sandbox, as the program sees them.
const (
	// Workspace is the program's working directory. In a job's container
	// it is emptied after every job; in a session's, it persists.
	Workspace = "/workspace"
	// ProgramDir holds the program, the code-mode wrappers and the
	// code-mode bridge socket, read-only, outside the workspace.
	ProgramDir = "/tmp/gantry"
	// SkillsDir holds the tenant's skills, read-only.
	SkillsDir = "/skills"
	// BridgeSocket is where the program reaches the code-mode bridge.
	BridgeSocket = ProgramDir + "/bridge.sock"
	// BuildDir is where a compile step writes what it builds: writable
	// only by the compile, read-only to the program, and never part of
	// the workspace.
	BuildDir = ProgramDir + "/build"
)

// Isolation is how the agent runs programs.
type Isolation string

const (
	// Namespaces runs each program in a fresh bubblewrap sandbox inside
	// the container, so the container can serve many jobs.
	Namespaces Isolation = "namespaces"
	// Container runs the program directly in the container, which then
	// serves one job (gVisor, where bubblewrap cannot create namespaces).
	Container Isolation = "container"
)

// Hello is the agent's first frame.
type Hello struct {
	Protocol  int       `json:"protocol"`
	Isolation Isolation `json:"isolation"`
	// Error says why the agent cannot run programs (for example bubblewrap
	// cannot create namespaces on this host); empty when it can.
	Error string `json:"error,omitempty"`
}

// File is a file to place in the sandbox. Path is absolute as the program
// sees it: under Workspace or ProgramDir for a run, under SkillsDir for
// the skills.
type File struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
}

// Request is what the runner asks of the agent. Op says which fields count.
type Request struct {
	// Op is "run", "tar", "restore", "skills", "clean", "warm" (answered
	// once the warm interpreter has loaded, or failed to) or "reply".
	Op string `json:"op"`

	// run
	Files []File            `json:"files,omitempty"`
	Argv  []string          `json:"argv,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	Stdin []byte            `json:"stdin,omitempty"` // nil: the program reads /dev/null
	// OutputCap bounds each of stdout and stderr; the rest is read and dropped.
	OutputCap int `json:"output_cap,omitempty"`
	// Bridge opens the code-mode bridge socket for the program.
	Bridge bool `json:"bridge,omitempty"`
	// Egress runs the program behind a relay to the runner's egress proxy
	// (EgressProxy in the sandbox), its connections carried as streams.
	Egress bool `json:"egress,omitempty"`
	// Fresh empties the workspace before the run (a job's container);
	// without it the workspace is kept (a session's container).
	Fresh bool `json:"fresh,omitempty"`
	// Stateful runs the program in the container's live session sandbox
	// (made first if there is none): a Python program as a cell of the
	// session's interpreter, a Node or TypeScript program as a cell of a
	// kernel (Kernel), anything else as a process of the sandbox.
	Stateful bool `json:"stateful,omitempty"`
	// KeepEgress (with Stateful and Egress) keeps the run's egress relay,
	// and its program directory, after it: the live sandbox's processes
	// reach the proxy between runs too (keptegress.go), until a run
	// without it.
	KeepEgress bool `json:"keep_egress,omitempty"`
	// Kernel (with Stateful) names the live sandbox's JavaScript or
	// TypeScript kernel a Node or TypeScript program runs in, as a cell:
	// a Node process of the sandbox, started at its first cell, whose
	// globals persist from cell to cell ("": the language's own kernel,
	// "javascript" or "typescript"). See KernelTag.
	Kernel string `json:"kernel,omitempty"`
	// TimeoutMS, when set, has the agent kill the program this long after
	// it started and report it (Exit.TimedOut) with what it used; the
	// runner keeps a deadline of its own a little later.
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// Compile, when set, builds the program first (see Compile).
	Compile *Compile `json:"compile,omitempty"`
	// Build, when set instead of Compile, is what an earlier compile step
	// of the same program built (a tar as KindBuild carries it): the agent
	// unpacks it into BuildDir and runs the program without compiling.
	Build []byte `json:"build,omitempty"`
	// Launcher, when set, is the launcher the program must start with
	// (the conformance tests run every one); the agent chooses otherwise.
	// One the request cannot use fails the run before anything started.
	Launcher Launcher `json:"launcher,omitempty"`

	// tar: Paths are workspace-relative regular files (artifacts); All
	// streams the whole workspace (a session snapshot) instead.
	Paths []string `json:"paths,omitempty"`
	All   bool     `json:"all,omitempty"`

	// skills: Files replace the skills.

	// reply: the answer to bridge request ID.
	ID   int64           `json:"id,omitempty"`
	Body json.RawMessage `json:"body,omitempty"`
}

// Compile is a run's compile step. It runs in a sandbox of its own, made
// like the program's but with the workspace read-only and BuildDir
// writable, with the program's environment and no stdin; its stdout and
// stderr are one stream (KindCompileOutput), and a KindCompiled frame
// reports its Exit. When that Exit is not a success the run ends there;
// otherwise the program runs as any, finding in BuildDir what the step
// built.
type Compile struct {
	Argv []string `json:"argv"`
	// TimeoutMS bounds the step as Request.TimeoutMS bounds the program.
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// OutputCap bounds its output; the rest is read and dropped.
	OutputCap int `json:"output_cap,omitempty"`
	// SendBuild has the agent send what a successful step built, as one
	// KindBuild frame before its KindCompiled: a tar of BuildDir's
	// directories and regular files, empty when it holds more than
	// MaxBuild bytes. The runner keeps it to run the program again
	// without compiling it (Request.Build).
	SendBuild bool `json:"send_build,omitempty"`
}

// MaxBuild bounds a build the agent sends or unpacks: with a job's files
// and input it must fit in one request frame (MaxFrame), base64-encoded.
const MaxBuild = 12 << 20

// Usage is what a sandbox's processes used, from the kernel's accounting
// of the sandbox's first process (rusage, children included): under
// Namespaces that is bubblewrap, whose init reaps every process of the
// sandbox's pid namespace, so nothing escapes it; under Container the
// program itself and the children it waited for.
type Usage struct {
	// CPUTimeUS is user and system CPU time, in microseconds.
	CPUTimeUS int64 `json:"cpu_time_us"`
	// PeakMemoryKB is the largest resident set of any one process, in
	// KiB (ru_maxrss; for a stateful session's job, the largest peak
	// resident set of the session sandbox's processes while it ran). Nil
	// when it was not measured: a session's job under gVisor, which
	// cannot reset a process's peak.
	PeakMemoryKB *int64 `json:"peak_memory_kb,omitempty"`
	// WaitUS is what accounting added to the run: how long after the
	// sandbox's output ended the agent still waited for its init, to reap
	// it.
	WaitUS int64 `json:"wait_us,omitempty"`
}

// Exit reports how a run ended.
type Exit struct {
	// Started: the program's sandbox was set up and the program was
	// started. When false nothing of the program ran, and Message says why.
	Started bool   `json:"started"`
	Message string `json:"message,omitempty"`
	// Code is the main process's exit status, 128+n when signal n killed it.
	Code   int `json:"code"`
	Signal int `json:"signal,omitempty"`
	// OOMKills counts the container's out-of-memory kills during the run.
	OOMKills int `json:"oom_kills,omitempty"`
	// Value is the last expression's value of a Python program run as a
	// session's cell, as a notebook shows it: a JSON object from MIME type
	// to representation (see jobs.Value). Untrusted: the runner checks it.
	Value json.RawMessage `json:"value,omitempty"`
	// Exception is the exception that ended such a cell, as a notebook's
	// error output has it (see jobs.Exception); Displays are what the cell
	// displayed (MIME bundles, as Value), such as figures with
	// GANTRY_FIGURES=display. Untrusted, as Value.
	Exception json.RawMessage   `json:"exception,omitempty"`
	Displays  []json.RawMessage `json:"displays,omitempty"`
	// Live describes the session sandbox of a Stateful run.
	Live *Live `json:"live,omitempty"`
	// TimedOut: the agent killed the program at its TimeoutMS.
	TimedOut bool `json:"timed_out,omitempty"`
	// Usage is what the program used, when the agent could measure it.
	Usage *Usage `json:"usage,omitempty"`
	// Launcher is the launcher that started the program.
	Launcher Launcher `json:"launcher,omitempty"`
}

// Launcher names a way the agent starts a program in its sandbox.
type Launcher string

// The launchers.
const (
	// LauncherBwrap: a new bubblewrap sandbox (Namespaces).
	LauncherBwrap Launcher = "bwrap"
	// LauncherContainer: the container itself (the Container isolation).
	LauncherContainer Launcher = "container"
	// LauncherWarm: a fork of the container's warm interpreter, in a
	// sandbox it builds from the same layout as bubblewrap's (Python).
	LauncherWarm Launcher = "warm"
	// LauncherLean: a fork of the container's lean interpreter (the
	// standard library's most used modules only), made as LauncherWarm's;
	// chosen for a Python program that imports nothing else.
	LauncherLean Launcher = "lean"
	// LauncherSpare: a sandbox made ahead of the job by one of the above,
	// its first process waiting for the job.
	LauncherSpare Launcher = "spare"
	// LauncherSession: the container's stateful session sandbox (a Python
	// program as a cell of the session's interpreter, anything else as a
	// process of the sandbox); Stateful requests only.
	LauncherSession Launcher = "session"
)

// Live describes the session sandbox a stateful run ran in.
type Live struct {
	// ID numbers the container's session sandboxes, from 1.
	ID int `json:"id"`
	// Fresh: the sandbox was made for this run; nothing of an earlier one
	// is in it.
	Fresh bool `json:"fresh"`
	// Ended says why the container's previous session sandbox ended, if
	// one did.
	Ended string `json:"ended,omitempty"`
	// Spare: a fresh sandbox that was made ahead of its session, in the
	// container its tenant's last session left (agent/livespare.go).
	Spare bool `json:"spare,omitempty"`
}

// Succeeded reports whether the program ran and exited 0 by itself: for a
// compile step, whether the program it built runs next.
func (e Exit) Succeeded() bool { return e.Started && !e.TimedOut && e.Code == 0 }

// BridgeRequest is a request the program made on the bridge socket,
// numbered by the agent; the runner answers with a "reply" Request.
type BridgeRequest struct {
	ID  int64           `json:"id"`
	Req json.RawMessage `json:"req"`
}
