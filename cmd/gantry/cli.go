package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"
)

// The commands for people (run, jobs, sessions, skills) talk to a gantry
// over its HTTP API, like any client, configured by GANTRY_URL and
// GANTRY_API_KEY or a small config file.

const peopleUsage = `
People (talk to the gantry at GANTRY_URL with GANTRY_API_KEY, or the config file):
  run [flags] FILE|-              run a program, stream its output, exit with its exit code
  jobs ls [--status --lang --since --meta K=V]|get ID|logs ID [-f]|cancel ID
  sessions ls|create|rm ID
  skills ls [-q TEXT]|get NAME|push DIR|pull NAME
  (gantry COMMAND -h describes each)
`

// cliConfigFile is what the config file holds.
type cliConfigFile struct {
	URL    string `json:"url"`
	APIKey string `json:"api_key"`
}

// DefaultURL is the gantry the people commands and gantry mcp talk to
// unless told otherwise: the one `gantry dev` starts.
const DefaultURL = "http://127.0.0.1:8080"

// cliConfigPath is GANTRY_CONFIG, else config.json in the user's config
// directory (~/.config/gantry/config.json on Linux).
func cliConfigPath() (path string, explicit bool) {
	if p := os.Getenv("GANTRY_CONFIG"); p != "" {
		return p, true
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "~/.config/gantry/config.json", false
	}
	return filepath.Join(dir, "gantry", "config.json"), false
}

// clientConfig resolves the URL and key: the environment first, then the
// config file, then the default URL. A key is required.
func clientConfig() (base, key, path string, err error) {
	path, explicit := cliConfigPath()
	var file cliConfigFile
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&file); err != nil {
			return "", "", path, fmt.Errorf("config file %s: %v (want {\"url\": \"http://…\", \"api_key\": \"gk_…\"})", path, err)
		}
		if fi, err := os.Stat(path); err == nil && file.APIKey != "" && fi.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(os.Stderr, "gantry: warning: %s holds an API key and others can read it (chmod 600 %s)\n", path, path)
		}
	case !errors.Is(err, os.ErrNotExist) || explicit:
		return "", "", path, fmt.Errorf("GANTRY_CONFIG: %w", err)
	}
	base = firstOf(os.Getenv("GANTRY_URL"), file.URL, DefaultURL)
	u, perr := url.Parse(base)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", path, fmt.Errorf("GANTRY_URL=%q: want the gantry's address, such as %s", base, DefaultURL)
	}
	key = firstOf(os.Getenv("GANTRY_API_KEY"), file.APIKey)
	if key == "" {
		return "", "", path, fmt.Errorf("no API key: set GANTRY_API_KEY, or \"api_key\" in %s (gantry dev prints its key; an operator makes one with gantry keys create TENANT)", path)
	}
	return strings.TrimRight(base, "/"), key, path, nil
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func newAPI() (*api, error) {
	base, key, path, err := clientConfig()
	if err != nil {
		return nil, err
	}
	return &api{base: base, key: key, configPath: path, retries: 4,
		// No overall timeout: log streams and long polls last.
		http: &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: 90 * time.Second, IdleConnTimeout: time.Minute,
		}}}, nil
}

// exitError ends gantry with code, after printing msg (if any).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageError is a people command used wrongly: its usage is printed.
type usageError struct{ msg, usage string }

func (e *usageError) Error() string { return e.msg }

// runPeople runs one of the people commands.
func runPeople(ctx context.Context, cmd string, args []string) error {
	switch cmd {
	case "run":
		return cmdRun(ctx, args)
	case "jobs":
		return cmdJobs(ctx, args)
	case "sessions":
		return cmdSessions(ctx, args)
	case "skills":
		return cmdSkills(ctx, args)
	}
	return errUsage
}

// command is a parsed people command: its flags and positional arguments.
type command struct {
	fs    *flag.FlagSet
	usage string
	json  bool
}

func newCommand(name, usage string) *command {
	c := &command{fs: flag.NewFlagSet(name, flag.ContinueOnError), usage: usage}
	c.fs.SetOutput(io.Discard)
	return c
}

// parse reads flags anywhere among the arguments (gantry run x.py -e A=1)
// and checks the number of positional ones.
func (c *command) parse(args []string, minPos, maxPos int) ([]string, error) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Print(c.usage)
				return nil, &exitError{code: 0}
			}
			return nil, &usageError{msg: err.Error(), usage: c.usage}
		}
		args = c.fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < minPos || (maxPos >= 0 && len(pos) > maxPos) {
		msg := "wrong number of arguments"
		if len(pos) < minPos {
			msg = "missing argument"
		}
		return nil, &usageError{msg: msg, usage: c.usage}
	}
	return pos, nil
}

// fetch makes a read whose answer --json prints as it is (printed is then
// true); otherwise the answer is decoded into out for the command to show.
func (c *command) fetch(ctx context.Context, r request, out any) (printed bool, err error) {
	a, err := newAPI()
	if err != nil {
		return false, apiErr(err)
	}
	r.idempotent = true
	var raw json.RawMessage
	if err := a.json(ctx, r, nil, &raw); err != nil {
		return false, apiErr(err)
	}
	if c.json {
		return true, printJSON(raw)
	}
	return false, json.Unmarshal(raw, out)
}

// printJSON writes v (or raw JSON) indented to stdout.
func printJSON(v any) error {
	var data []byte
	if raw, ok := v.(json.RawMessage); ok {
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return err
		}
		data = buf.Bytes()
	} else {
		var err error
		if data, err = json.MarshalIndent(v, "", "  "); err != nil {
			return err
		}
	}
	_, err := fmt.Println(string(data))
	return err
}

func newTable() *tabwriter.Writer { return tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0) }

// isTerminal reports whether f is a terminal (not a file, pipe or /dev/null).
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// size renders a byte count for people.
func size(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// ago renders a time as how long ago it was.
func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Local().Format("2006-01-02 15:04")
}

func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "help" }

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
