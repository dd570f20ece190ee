package queue

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// Auth is how gantry's processes prove themselves to NATS, beside a user
// and password in the servers' URLs (nats://user:pass@host:4222, which a
// cluster's discovered servers inherit). At most one of a token, a
// credentials file and a user is set.
type Auth struct {
	// Token is a NATS authorization token (GANTRY_NATS_TOKEN).
	Token string
	// CredsFile is a NATS credentials file: a user JWT and its NKey seed
	// (GANTRY_NATS_CREDS).
	CredsFile string
	// User and Password, for servers whose URLs carry none (gantry dev's
	// embedded server).
	User, Password string
}

// Check says what is wrong with a, naming the variable.
func (a Auth) Check() error {
	n := 0
	for _, s := range []string{a.Token, a.CredsFile, a.User} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return errors.New("GANTRY_NATS_TOKEN and GANTRY_NATS_CREDS: set at most one (or put user:password in GANTRY_NATS_URL)")
	}
	if a.CredsFile != "" {
		if _, err := os.Stat(a.CredsFile); err != nil {
			return fmt.Errorf("GANTRY_NATS_CREDS: %w", err)
		}
	}
	return nil
}

// Empty reports whether a sets nothing.
func (a Auth) Empty() bool { return a.Token == "" && a.CredsFile == "" && a.User == "" }

// Options are the nats.Connect options that send a's credentials.
func (a Auth) Options() []nats.Option {
	switch {
	case a.Token != "":
		return []nats.Option{nats.Token(a.Token)}
	case a.CredsFile != "":
		return []nats.Option{nats.UserCredentials(a.CredsFile)}
	case a.User != "":
		return []nats.Option{nats.UserInfo(a.User, a.Password)}
	}
	return nil
}

// URLHasUser reports whether any URL of a comma-separated server list
// carries a user (and so its own credentials).
func URLHasUser(servers string) bool {
	for _, s := range strings.Split(servers, ",") {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
			return true
		}
	}
	return false
}

// HostPorts are the host:port of each URL in a comma-separated server
// list (a URL without a port: NATS's 4222), without their credentials.
func HostPorts(servers string) []string {
	var out []string
	for _, s := range strings.Split(servers, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		u, err := url.Parse(s)
		if err != nil || u.Hostname() == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			port = strconv.Itoa(nats.DefaultPort)
		}
		out = append(out, net.JoinHostPort(u.Hostname(), port))
	}
	return out
}
