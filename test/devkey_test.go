package test

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestDevKeyMustBeAKey: gantry dev refuses, at start and naming the
// variable, a GANTRY_DEV_API_KEY that no call could ever use (gantry's
// keys start with gk_; the ingress refuses any other unread), rather than
// storing it, printing it as the API key and answering 401 to every call.
// The key itself is not in the message.
func TestDevKeyMustBeAKey(t *testing.T) {
	bin := gantryBin(t)
	for _, key := range []string{"sk_not_a_gantry_key_0123456789", "gk_short", "gk_with a space_0123456789"} {
		cmd := exec.Command(bin, "dev")
		cmd.Env = append(cmd.Environ(), "GANTRY_DEV_API_KEY="+key, "GANTRY_ADDR=127.0.0.1:0", "GANTRY_DATA_DIR="+t.TempDir(),
			"GANTRY_DEV_NATS_ADDR=127.0.0.1:0", "GANTRY_DEV_S3_ADDR=127.0.0.1:0", "GANTRY_DATABASE_URL=postgres://nobody@127.0.0.1:1/none")
		out, err := runWithin(cmd, 15*time.Second)
		if err == nil || !strings.Contains(out, "GANTRY_DEV_API_KEY") || strings.Contains(out, key) || strings.Contains(out, "API key  ") {
			t.Errorf("GANTRY_DEV_API_KEY=%s: %v\n%s", key, err, out)
		}
	}
}

// runWithin runs cmd and returns its output; a command still running after
// d is killed.
func runWithin(cmd *exec.Cmd, d time.Duration) (string, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		_ = <-done
		return out.String(), errTimedOut
	}
}

var errTimedOut = &timedOut{}

type timedOut struct{}

func (*timedOut) Error() string { return "still running" }
