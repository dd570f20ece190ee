package ports

import (
	"errors"
	"net"
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/jobs"
)

// target is the port a request is for: a session's, and how the request
// named it.
type target struct {
	sessionID string
	port      int
	// byPath: the request named it in its path (/v1/sessions/{id}/ports/
	// {port}/…); its rest, escaped, is path (and prefix what went before).
	byPath       bool
	path, prefix string
}

// errBadHost is a Host under the sandbox domain that names no sandbox's
// port; errBadPort one whose port is not one.
var (
	errBadHost = errors.New("invalid host")
	errBadPort = errors.New("invalid sandbox port")
)

// hostTarget reads "PORT-SESSIONID.DOMAIN" (any case: browsers lower a
// Host). ok is false for a Host outside the domain (not a sandbox's: the
// API's, the console's); under it, a malformed one is errBadHost or
// errBadPort. A domain with a port matches that port only; one without
// matches any (a proxy in front may or may not pass its port on).
func hostTarget(host, domain string) (t target, ok bool, err error) {
	if domain == "" || host == "" {
		return t, false, nil
	}
	host, domain = strings.ToLower(host), strings.ToLower(domain)
	if !hasPort(domain) {
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
	}
	label, under := strings.CutSuffix(host, "."+domain)
	if !under {
		return t, false, nil
	}
	portText, sid, found := strings.Cut(label, "-")
	switch {
	case !found || strings.Contains(label, "."):
		return t, true, errBadHost
	case !validPort(portText):
		return t, true, errBadPort
	case !jobs.ValidID("ses", sid):
		return t, true, errBadHost
	}
	t.sessionID = sid
	t.port, _ = strconv.Atoi(portText)
	return t, true, nil
}

// hasPort reports whether a domain names a port ("localhost:8080").
func hasPort(domain string) bool {
	_, p, err := net.SplitHostPort(domain)
	return err == nil && p != ""
}

// validPort reports whether s is a port number, 1 to 65535, in plain
// digits.
func validPort(s string) bool {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	n, _ := strconv.Atoi(s)
	return n <= 65535
}

// pathPrefix starts the path form of a port's URL.
const pathPrefix = "/v1/sessions/"

// pathTarget reads "/v1/sessions/{id}/ports/{port}[/rest]" from an
// escaped path: ok is false for any other path; a malformed id or port is
// errBadHost or errBadPort.
func pathTarget(escaped string) (t target, ok bool, err error) {
	rest, found := strings.CutPrefix(escaped, pathPrefix)
	if !found {
		return t, false, nil
	}
	sid, rest, _ := strings.Cut(rest, "/")
	kind, rest, _ := strings.Cut(rest, "/")
	if kind != "ports" {
		return t, false, nil
	}
	portText, rest, more := strings.Cut(rest, "/")
	if !jobs.ValidID("ses", sid) {
		return t, true, errBadHost
	}
	if !validPort(portText) {
		return t, true, errBadPort
	}
	t = target{sessionID: sid, byPath: true, path: "/" + rest, prefix: pathPrefix + sid + "/ports/" + portText}
	if !more {
		t.path = "/"
	}
	t.port, _ = strconv.Atoi(portText)
	return t, true, nil
}
