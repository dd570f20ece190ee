package codemode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/gantryhq/gantry/jobs"
)

// Launcher starts a tenant's stdio MCP server in a sandbox of its own. The
// server is an operator-chosen program fed a tenant's input (its env
// values, every tool call's arguments): it never runs in a gantry process's
// own environment, beside the runner's Docker socket or the ingress's
// database credentials. The runner's launcher gives each server a hardened
// container of the tenant's (runner.MCPLauncher); the ingress has none and
// asks a runner to list a stdio server's tools (RemoteTools).
type Launcher interface {
	// Launch starts l.Argv with exactly l.Env as its environment and
	// returns its standard streams. The process is the tenant's alone and
	// is gone when Close returns; Close is idempotent.
	Launch(ctx context.Context, l Launch) (Process, error)
}

// Launch is one stdio server to start.
type Launch struct {
	TenantID string
	Server   string
	Argv     []string
	// Env is the whole environment, NAME=value: PATH and HOME chosen by
	// gantry, then the tenant's names that passed the operator's allow-list.
	Env []string
}

// Process is a started stdio server.
type Process interface {
	// Stdin carries requests to the server; closing it ends the server's
	// input.
	Stdin() io.WriteCloser
	// Stdout carries the server's answers.
	Stdout() io.Reader
	// Stderr is the start of what the server wrote to its stderr, for
	// error messages.
	Stderr() string
	// Close stops the server and releases everything it held.
	Close() error
}

// stdioPath and stdioHome are the PATH and HOME every stdio server gets; a
// tenant can set neither.
const (
	stdioPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	stdioHome = "/tmp"
)

// neverEnv are names a tenant may never set for a stdio server, whatever
// the operator allows: each makes a program load or run something other
// than what the operator chose (the dynamic loader's variables, an
// interpreter's options and startup files, a shell's startup file and
// exported functions, search paths), or send its traffic elsewhere
// (proxies, CA bundles). Compared without regard to case; a trailing '*'
// is a prefix, a leading '*' a suffix.
var neverEnv = []string{
	// the dynamic loader and libc
	"LD_*", "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH",
	"MALLOC_*", "NIS_PATH", "NLSPATH", "RESOLV_*", "RES_OPTIONS", "TZDIR",
	// what gantry sets, and shells
	"PATH", "HOME", "SHELL", "USER", "LOGNAME", "PWD", "OLDPWD", "IFS", "CDPATH", "ENV", "BASH_ENV",
	"BASH_FUNC_*", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "TMPDIR", "GANTRY_*",
	// interpreters and their package managers
	"NODE_*", "NPM_*", "NPX_*", "YARN_*", "COREPACK_*", "DENO_*", "BUN_*", "PYTHON*", "PIP_*", "UV_*",
	"VIRTUAL_ENV", "CONDA_*", "PERL*", "RUBY*", "GEM_*", "BUNDLE_*", "RUSTUP_*", "CARGO_*",
	"GOFLAGS", "GOPATH", "GOROOT", "GOPROXY", "GOTOOLCHAIN", "GOENV", "GODEBUG", "GOCACHE", "GOMODCACHE",
	"GOEXPERIMENT", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOSUMDB", "GOINSECURE",
	"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "JAVA_HOME", "CLASSPATH", "MAVEN_OPTS",
	"GRADLE_*", "LUA_*", "PHP*", "R_*", "TCL*", "GIT_*", "EDITOR", "VISUAL", "PAGER", "BROWSER",
	"XDG_*", "TERMINFO*",
	// where traffic goes and whom it trusts
	"*_PROXY", "SSL_*", "CURL_*", "REQUESTS_CA_BUNDLE", "OPENSSL_*", "GNUTLS_*", "NSS_*", "SSLKEYLOGFILE",
	"KRB5*", "DOCKER_*", "KUBECONFIG",
}

// matchEnv reports whether name matches pattern: path.Match globs ('*'
// matching any run of characters, as env names have no '/'), compared
// without regard to case.
func matchEnv(pattern, name string) bool {
	ok, _ := path.Match(strings.ToUpper(pattern), strings.ToUpper(name))
	return ok
}

// Forbidden reports whether a tenant may never set name for a stdio
// server (see neverEnv).
func Forbidden(name string) bool {
	return slices.ContainsFunc(neverEnv, func(p string) bool { return matchEnv(p, name) })
}

// checkEnvName reports why a tenant may not set name for a stdio server
// under the operator's allow-list, or nil.
func (c Config) checkEnvName(name string) error {
	if Forbidden(name) {
		return fmt.Errorf("%q cannot be set for a stdio MCP server: it changes what the server's program loads or runs, or where its traffic goes", name)
	}
	if !slices.ContainsFunc(c.Env, func(p string) bool { return matchEnv(p, name) }) {
		if len(c.Env) == 0 {
			return fmt.Errorf("%q is not allowed: this gantry lets tenants set no environment for stdio MCP servers (the operator allows names with GANTRY_MCP_ENV)", name)
		}
		return fmt.Errorf("%q is not a name the operator allows for stdio MCP servers (GANTRY_MCP_ENV: %s)", name, strings.Join(c.Env, ", "))
	}
	return nil
}

// CheckEnvPatterns validates the operator's allow-list: globs over env
// names, none of which may open a forbidden name wholesale ("*", "LD_*").
func CheckEnvPatterns(pats []string) error {
	for _, p := range pats {
		if _, err := path.Match(p, ""); err != nil || p == "" || strings.ContainsAny(p, "/?[]\\") {
			return fmt.Errorf("%q is not a name or a '*' pattern", p)
		}
		if strings.Trim(p, "*") == "" {
			return fmt.Errorf("%q would allow every name; list the names the servers need", p)
		}
	}
	return nil
}

// stdioEnv is the environment a stdio server starts with: gantry's PATH
// and HOME, then the tenant's values, each name checked again against the
// operator's list as it is now (it may have shrunk since registration).
func (c Config) stdioEnv(env map[string]string) ([]string, error) {
	out := []string{"PATH=" + stdioPath, "HOME=" + stdioHome}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if err := c.checkEnvName(k); err != nil {
			return nil, err
		}
		out = append(out, k+"="+env[k])
	}
	return out, nil
}

// checkCommand checks a registration's command: it must be one of the
// operator's commands exactly, every argument included. Arguments are as
// dangerous as the environment ("node -e …", "npx <any package>").
func (c Config) checkCommand(argv []string) error {
	if len(argv) > maxCommandArgs {
		return &jobs.FieldError{Field: "command", Message: fmt.Sprintf("must have at most %d arguments", maxCommandArgs)}
	}
	for _, a := range argv {
		if len(a) > maxCommandArgBytes || strings.ContainsRune(a, 0) {
			return &jobs.FieldError{Field: "command", Message: fmt.Sprintf("arguments must be at most %d bytes, without NUL", maxCommandArgBytes)}
		}
	}
	if slices.ContainsFunc(c.Commands, func(allowed []string) bool { return slices.Equal(allowed, argv) }) {
		return nil
	}
	if len(c.Commands) == 0 {
		return &jobs.FieldError{Field: "command", Message: "stdio MCP servers are not enabled on this gantry (the operator allows commands with GANTRY_MCP_COMMANDS)"}
	}
	names := make([]string, 0, len(c.Commands))
	for _, cmd := range c.Commands {
		names = append(names, strings.Join(cmd, " "))
	}
	return &jobs.FieldError{Field: "command", Message: fmt.Sprintf("must be exactly one of the commands the operator allows, arguments included (GANTRY_MCP_COMMANDS: %s)", truncate(strings.Join(names, "; "), 1000))}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// ErrNoLauncher is a stdio server asked for where gantry has no sandbox to
// run it in (an ingress: it asks a runner instead).
var errNoLauncher = errors.New("stdio MCP servers run on runners, in sandbox containers; this process has none")
