package sandbox

import (
	"path"
	"strings"
)

// E2B's sandboxes have a user, "user", whose home (/home/user) is where
// relative paths lead and commands start; in gantry that is the session's
// /workspace, which outlives the sandbox (the sandbox image links
// /home/user to it, so that code naming /home/user finds it too). Other
// absolute paths are the sandbox's own (its /tmp, its read-only system).
const (
	home      = "/home/user"
	workspace = "/workspace"
	username  = "user"
)

// toSandbox is the path, as the sandbox sees it, an E2B path names:
// relative to the home directory, ~ expanded, and the home directory
// itself in the workspace.
func toSandbox(p string) string {
	switch {
	case p == "" || p == "~":
		p = home
	case strings.HasPrefix(p, "~/"):
		p = home + p[1:]
	case !strings.HasPrefix(p, "/"):
		p = home + "/" + p
	}
	p = path.Clean(p)
	if rest, ok := strings.CutPrefix(p, home); ok && (rest == "" || rest[0] == '/') {
		return workspace + rest
	}
	return p
}

// fromSandbox is the E2B path of a sandbox path.
func fromSandbox(p string) string {
	if rest, ok := strings.CutPrefix(p, workspace); ok && (rest == "" || rest[0] == '/') {
		return home + rest
	}
	return p
}

// e2bEnv is what envd gives every process besides the request's own
// variables: the user's home and name.
func e2bEnv(own map[string]string) map[string]string {
	env := map[string]string{"HOME": home, "USER": username, "LOGNAME": username}
	for k, v := range own {
		env[k] = v
	}
	return env
}
