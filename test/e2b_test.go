package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/store/storetest"
)

// e2bThrown is how e2b.mjs reports an SDK call that threw.
type e2bThrown struct {
	Error    string `json:"error"`
	Message  string `json:"message"`
	ExitCode *int   `json:"exitCode"`
}

// jsCell is what e2b.mjs reports of a JavaScript or TypeScript cell.
type jsCell struct {
	Text   *string  `json:"text"`
	Stdout []string `json:"stdout"`
	Error  *string  `json:"error"`
}

func ptr[T any](v T) *T { return &v }

func derefText(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func pretty(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// e2bClients is node and the directory of E2B's SDKs, which the test
// needs (make compat-deps installs them).
func e2bClients(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		storetest.Unavailable(t, "node is not installed")
	}
	_, file, _, _ := runtime.Caller(0)
	dir = filepath.Join(filepath.Dir(file), "compatclients")
	for _, pkg := range []string{"e2b", "@e2b/code-interpreter"} {
		if _, err := exec.Command(node, "-e", "require.resolve('"+pkg+"/package.json', {paths: [process.argv[1]]})", dir).CombinedOutput(); err != nil {
			storetest.Unavailable(t, "%s is not installed (make compat-deps)", pkg)
		}
	}
	return node, dir
}

// driveE2B runs e2b.mjs's scenario against d (OTHER_E2B_API_KEY:
// otherKey, and env) and reads what it reports into out.
func driveE2B(t *testing.T, d *dev, otherKey string, env []string, scenario string, out any) {
	t.Helper()
	node, dir := e2bClients(t)
	cmd := exec.Command(node, filepath.Join(dir, "e2b.mjs"), scenario)
	cmd.Env = append(append(os.Environ(), "E2B_API_URL="+d.url+"/compat/e2b", "E2B_SANDBOX_URL="+d.url+"/compat/e2b/sandbox",
		"E2B_API_KEY="+d.key, "OTHER_E2B_API_KEY="+otherKey), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("e2b.mjs %s: %v\n%s%s", scenario, err, raw, stderr.String())
	}
	var fatal struct {
		Fatal *e2bThrown `json:"fatal"`
		Stack string     `json:"stack"`
	}
	if json.Unmarshal(raw, &fatal) == nil && fatal.Fatal != nil {
		t.Fatalf("e2b.mjs %s: %s: %s\n%s", scenario, fatal.Fatal.Error, fatal.Fatal.Message, fatal.Stack)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("e2b.mjs %s: %v: %s", scenario, err, raw)
	}
	t.Logf("%s: %s", scenario, raw)
}

// TestE2BSDKs drives E2B's own SDKs from npm (e2b 2.51 and
// @e2b/code-interpreter 2.8, pinned in test/compatclients, unmodified)
// against gantry, pointed at it by E2B_API_URL, E2B_SANDBOX_URL and
// E2B_API_KEY as a user would point them.
func TestE2BSDKs(t *testing.T) {
	e2bClients(t)
	d := startDev(t, "GANTRY_RUNNER_SLOTS=4")
	d.cli(t, "tenants", "create", "e2b-other")
	otherKey := regexp.MustCompile(`gk_\S+`).FindString(d.cli(t, "keys", "create", "e2b-other", "e2b test"))
	drive := func(t *testing.T, scenario string, out any) {
		t.Helper()
		driveE2B(t, d, otherKey, nil, scenario, out)
	}

	t.Run("runCode", func(t *testing.T) {
		var got struct {
			First struct {
				Text  string          `json:"text"`
				Main  []bool          `json:"main"`
				Error json.RawMessage `json:"error"`
			} `json:"first"`
			Second struct {
				Text   string   `json:"text"`
				Stdout []string `json:"stdout"`
			} `json:"second"`
			Streamed struct {
				Chunks []struct {
					Line string `json:"line"`
					MS   int    `json:"ms"`
				} `json:"chunks"`
				MS     int      `json:"ms"`
				Stdout []string `json:"stdout"`
			} `json:"streamed"`
			Plot struct {
				Results []struct {
					PNG  bool   `json:"png"`
					Text string `json:"text"`
					Main bool   `json:"main"`
				} `json:"results"`
			} `json:"plot"`
			DF struct {
				Text string `json:"text"`
				HTML bool   `json:"html"`
			} `json:"df"`
			Error *struct {
				Name, Value, Traceback string
			} `json:"error"`
			AfterError  string   `json:"afterError"`
			JS          []jsCell `json:"js"`
			MadeContext struct {
				Language, Cwd string
			} `json:"madeContext"`
			InContext     []jsCell  `json:"inContext"`
			Contexts      []string  `json:"contexts"`
			AfterRestart  jsCell    `json:"afterRestart"`
			Removed       e2bThrown `json:"removed"`
			PythonContext e2bThrown `json:"pythonContext"`
			Killed        bool      `json:"killed"`
		}
		drive(t, "code", &got)
		if got.First.Text != "42" || !slices.Equal(got.First.Main, []bool{true}) || string(got.First.Error) != "null" {
			t.Errorf("the last expression's value: %+v", got.First)
		}
		if got.Second.Text != "42" || strings.Join(got.Second.Stdout, "") != "x is 42\n" {
			t.Errorf("state kept across calls: %+v", got.Second)
		}
		s := got.Streamed
		if len(s.Chunks) != 2 || s.Chunks[0].Line != "a\n" || strings.Join(s.Stdout, "") != "a\nb\n" || s.MS-s.Chunks[0].MS < 1500 {
			t.Errorf("output is not streamed a line at a time as it comes: %+v", s)
		}
		if len(got.Plot.Results) != 1 || !got.Plot.Results[0].PNG || got.Plot.Results[0].Main || !strings.HasPrefix(got.Plot.Results[0].Text, "<Figure size") {
			t.Errorf("a plot: %+v", got.Plot)
		}
		if !strings.Contains(got.DF.Text, "a") || !got.DF.HTML {
			t.Errorf("a DataFrame: %+v", got.DF)
		}
		if e := got.Error; e == nil || e.Name != "ZeroDivisionError" || e.Value != "division by zero" || !strings.Contains(e.Traceback, "in f") {
			t.Errorf("an error: %+v", got.Error)
		}
		if got.AfterError != "42" {
			t.Errorf("state after an error: %q", got.AfterError)
		}
		wantJS := []jsCell{
			{Text: ptr("21"), Stdout: []string{"from js\n"}},
			{Text: ptr("40"), Stdout: []string{}},
			{Stdout: []string{}, Error: ptr("TypeError: Cannot read properties of null (reading 'x')")},
			{Text: ptr("15"), Stdout: []string{}},
		}
		if !reflect.DeepEqual(got.JS, wantJS) {
			t.Errorf("JavaScript and TypeScript cells: %s", pretty(got.JS))
		}
		if got.MadeContext.Language != "javascript" || got.MadeContext.Cwd != "/home/user" {
			t.Errorf("a context made: %+v", got.MadeContext)
		}
		if len(got.InContext) != 2 || derefText(got.InContext[0].Text) != "undefined" || derefText(got.InContext[1].Text) != "mine" {
			t.Errorf("a context of its own: %s", pretty(got.InContext))
		}
		if !slices.Equal(got.Contexts, []string{"javascript", "javascript", "python", "typescript"}) {
			t.Errorf("contexts listed: %q", got.Contexts)
		}
		if derefText(got.AfterRestart.Text) != "undefined" {
			t.Errorf("a context restarted is a new kernel: %s", pretty(got.AfterRestart))
		}
		if got.Removed.Error != "NotFoundError" || got.PythonContext.Error != "SandboxError" || !strings.Contains(got.PythonContext.Message, "501") {
			t.Errorf("a context removed: %+v; a Python context made: %+v", got.Removed, got.PythonContext)
		}
		if !got.Killed {
			t.Errorf("not killed")
		}
	})

	t.Run("commands and files", func(t *testing.T) {
		var got struct {
			Foreground struct {
				Stdout, Stderr string
				ExitCode       int
			} `json:"foreground"`
			BackgroundPid int `json:"backgroundPid"`
			Listed        []struct {
				Pid  int      `json:"pid"`
				Cmd  string   `json:"cmd"`
				Args []string `json:"args"`
			} `json:"listed"`
			Meanwhile  string `json:"meanwhile"`
			Background struct {
				Stdout   string   `json:"stdout"`
				ExitCode int      `json:"exitCode"`
				Seen     []string `json:"seen"`
			} `json:"background"`
			Failing            e2bThrown `json:"failing"`
			FailingIsExitError bool      `json:"failingIsExitError"`
			Stdin              string    `json:"stdin"`
			KilledCommand      bool      `json:"killedCommand"`
			AfterKill          e2bThrown `json:"afterKill"`
			Root               e2bThrown `json:"root"`
			Read               string    `json:"read"`
			List               []string  `json:"list"`
			Nested             string    `json:"nested"`
			CodeSees           string    `json:"codeSees"`
			CommandSees        string    `json:"commandSees"`
			MadeByCommand      string    `json:"madeByCommand"`
			Tmp                string    `json:"tmp"`
			Exists             []bool    `json:"exists"`
			Missing            e2bThrown `json:"missing"`
			MakeDir            []bool    `json:"makeDir"`
			Renamed            string    `json:"renamed"`
			AfterRemove        bool      `json:"afterRemove"`
			EnvInCode          string    `json:"envInCode"`
			CallEnv            string    `json:"callEnv"`
			BytesRoundTrip     bool      `json:"bytesRoundTrip"`
			Streamed           string    `json:"streamed"`
			Multi              []string  `json:"multi"`
			FileInfo           struct {
				Name, Type, Path string
				Size             int
			} `json:"fileInfo"`
			Deep           []string `json:"deep"`
			ConnectCommand struct {
				Stdout   string `json:"stdout"`
				ExitCode int    `json:"exitCode"`
			} `json:"connectCommand"`
			StderrSeen []string `json:"stderrSeen"`
		}
		drive(t, "commands", &got)
		if f := got.Foreground; f.Stdout != "hello\neverywhere /home/user\n/home/user\n" || f.Stderr != "oops\n" || f.ExitCode != 0 {
			t.Errorf("a foreground command: %+v", f)
		}
		if i := slices.IndexFunc(got.Listed, func(p struct {
			Pid  int      `json:"pid"`
			Cmd  string   `json:"cmd"`
			Args []string `json:"args"`
		}) bool {
			return p.Pid == got.BackgroundPid
		}); i < 0 || got.Listed[i].Cmd != "/bin/bash" || !slices.Equal(got.Listed[i].Args, []string{"-l", "-c", "sleep 1; echo done"}) {
			t.Errorf("the background command (pid %d) in the list: %+v", got.BackgroundPid, got.Listed)
		}
		if got.Meanwhile != "meanwhile\n" || got.Background.Stdout != "done\n" || strings.Join(got.Background.Seen, "") != "done\n" {
			t.Errorf("a background command: %+v, meanwhile %q", got.Background, got.Meanwhile)
		}
		if !got.FailingIsExitError || got.Failing.ExitCode == nil || *got.Failing.ExitCode != 3 || !strings.Contains(got.Failing.Message, "exit status 3") {
			t.Errorf("a failing command: %+v", got.Failing)
		}
		if got.Stdin != "got hi\n" {
			t.Errorf("stdin: %q", got.Stdin)
		}
		if !got.KilledCommand || got.AfterKill.Error != "CommandExitError" || got.AfterKill.ExitCode == nil || *got.AfterKill.ExitCode != -1 {
			t.Errorf("a killed command: %v %+v", got.KilledCommand, got.AfterKill)
		}
		if got.Root.Error == "" || !strings.Contains(got.Root.Message, "unprivileged") {
			t.Errorf("a command as root: %+v", got.Root)
		}
		if got.Read != "hello files" || got.Nested != "nested" || got.CodeSees != "hello files hello files" || got.CommandSees != "hello files" ||
			got.MadeByCommand != "from a command\n" || got.Tmp != "in tmp" {
			t.Errorf("files: read %q nested %q code %q command %q made %q tmp %q", got.Read, got.Nested, got.CodeSees, got.CommandSees, got.MadeByCommand, got.Tmp)
		}
		if !slices.Contains(got.List, "data.txt:file") || !slices.Contains(got.List, "sub:dir") {
			t.Errorf("files.list: %v", got.List)
		}
		if !slices.Equal(got.Exists, []bool{true, false}) || got.Missing.Error != "FileNotFoundError" || !slices.Equal(got.MakeDir, []bool{true, false}) ||
			got.Renamed != "/home/user/renamed.txt" || got.AfterRemove {
			t.Errorf("exists %v, missing %+v, makeDir %v, renamed %q, after remove %v", got.Exists, got.Missing, got.MakeDir, got.Renamed, got.AfterRemove)
		}
		if got.EnvInCode != "everywhere" || got.CallEnv != "for this call" {
			t.Errorf("the sandbox's envs in code: %q; a call's: %q", got.EnvInCode, got.CallEnv)
		}
		if !got.BytesRoundTrip || got.Streamed != "a stream" || !slices.Equal(got.Multi, []string{"/home/user/m1.txt", "/home/user/m2.txt"}) {
			t.Errorf("bytes %v, a stream %q, many files %v", got.BytesRoundTrip, got.Streamed, got.Multi)
		}
		if f := got.FileInfo; f.Name != "data.bin" || f.Type != "file" || f.Size != 300_000 || f.Path != "/home/user/bin/data.bin" {
			t.Errorf("files.getInfo: %+v", f)
		}
		if !slices.Equal(got.Deep, []string{"/home/user/bin", "/home/user/bin/data.bin"}) {
			t.Errorf("files.list at depth 2: %v", got.Deep)
		}
		if got.ConnectCommand.Stdout != "typed\nend\n" || got.ConnectCommand.ExitCode != 0 || strings.Join(got.StderrSeen, "") != "to-err\n" {
			t.Errorf("commands.connect with stdin closed: %+v; onStderr %q", got.ConnectCommand, got.StderrSeen)
		}
	})

	t.Run("connect, list, timeout, kill", func(t *testing.T) {
		var got struct {
			SandboxID string `json:"sandboxId"`
			Connected string `json:"connected"`
			Info      struct {
				SandboxID  string            `json:"sandboxId"`
				Metadata   map[string]string `json:"metadata"`
				State      string            `json:"state"`
				TemplateID string            `json:"templateId"`
			} `json:"info"`
			EndAfterTimeout  int             `json:"endAfterTimeout"`
			Listed           []string        `json:"listed"`
			Running          bool            `json:"running"`
			Network          json.RawMessage `json:"network"`
			Template         e2bThrown       `json:"template"`
			Killed           bool            `json:"killed"`
			RunningAfterKill bool            `json:"runningAfterKill"`
			CodeAfterKill    e2bThrown       `json:"codeAfterKill"`
			CommandAfterKill e2bThrown       `json:"commandAfterKill"`
			KillAgain        bool            `json:"killAgain"`
			ConnectAfterKill e2bThrown       `json:"connectAfterKill"`
			WaitAfterKill    e2bThrown       `json:"waitAfterKill"`
		}
		drive(t, "lifecycle", &got)
		if got.Connected != "42" {
			t.Errorf("Sandbox.connect: %q", got.Connected)
		}
		if got.Info.SandboxID != got.SandboxID || got.Info.State != "running" || got.Info.TemplateID != "code-interpreter-v1" || !strings.HasPrefix(got.Info.Metadata["test"], "run-") {
			t.Errorf("getInfo: %+v", got.Info)
		}
		if got.EndAfterTimeout < 590_000 || got.EndAfterTimeout > 610_000 {
			t.Errorf("setTimeout(600 s): ends in %d ms", got.EndAfterTimeout)
		}
		if !slices.Equal(got.Listed, []string{got.SandboxID}) || !got.Running {
			t.Errorf("list by metadata %v, running %v", got.Listed, got.Running)
		}
		if string(got.Network) != "false" {
			t.Errorf("internet access under a tenant without an allow-list: %s", got.Network)
		}
		if !strings.Contains(got.Template.Message, "no-such-template") || !strings.Contains(got.Template.Message, "environment") {
			t.Errorf("an unknown template: %+v", got.Template)
		}
		if !got.Killed || got.RunningAfterKill || got.KillAgain {
			t.Errorf("kill %v, running after %v, kill again %v", got.Killed, got.RunningAfterKill, got.KillAgain)
		}
		// As E2B's SDKs report a sandbox that is gone.
		if got.CodeAfterKill.Error != "TimeoutError" || got.CommandAfterKill.Error != "SandboxNotFoundError" {
			t.Errorf("after kill: runCode %+v, commands.run %+v", got.CodeAfterKill, got.CommandAfterKill)
		}
		if got.ConnectAfterKill.Error != "SandboxNotFoundError" {
			t.Errorf("connect after kill: %+v", got.ConnectAfterKill)
		}
		if w := got.WaitAfterKill; w.Error == "" || strings.Contains(w.Message, "still waiting") || !strings.Contains(w.Message, "killed") {
			t.Errorf("a command's wait after its sandbox was killed: %+v", w)
		}
	})

	t.Run("another tenant gets nothing", func(t *testing.T) {
		var got struct {
			Mine          string    `json:"mine"`
			Connect       e2bThrown `json:"connect"`
			Info          e2bThrown `json:"info"`
			Kill          bool      `json:"kill"`
			List          []string  `json:"list"`
			ForgedCode    e2bThrown `json:"forgedCode"`
			ForgedCommand e2bThrown `json:"forgedCommand"`
			ForgedFile    e2bThrown `json:"forgedFile"`
			NoToken       int       `json:"noToken"`
			StillMine     string    `json:"stillMine"`
			TokenAsKey    []int     `json:"tokenAsKey"`
		}
		drive(t, "tenants", &got)
		if got.Connect.Error != "SandboxNotFoundError" || got.Info.Error != "SandboxNotFoundError" || got.Kill {
			t.Errorf("with their key: connect %+v, getInfo %+v, kill %v", got.Connect, got.Info, got.Kill)
		}
		if slices.Contains(got.List, got.Mine) {
			t.Errorf("their list shows mine: %v", got.List)
		}
		if !strings.Contains(got.ForgedCode.Message, "401") {
			t.Errorf("runCode with their token: %+v", got.ForgedCode)
		}
		for name, e := range map[string]e2bThrown{"commands.run": got.ForgedCommand, "files.read": got.ForgedFile} {
			if e.Error != "AuthenticationError" {
				t.Errorf("%s with their token: %+v", name, e)
			}
		}
		if got.NoToken != 401 || got.StillMine != "mine" {
			t.Errorf("no token: %d; still mine: %q", got.NoToken, got.StillMine)
		}
		if !slices.Equal(got.TokenAsKey, []int{401, 401}) {
			t.Errorf("a sandbox's token as an API key (/v1/jobs, the control plane): %v, want 401s", got.TokenAsKey)
		}
	})
}
