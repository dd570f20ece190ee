package runner

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// derivedImage builds an image FROM the sandbox image with a marker file,
// as an operator builds an environment offline; it is removed when the
// test ends.
func derivedImage(t *testing.T, marker string) string {
	t.Helper()
	tag := "gantry-envtest:" + strings.ToLower(jobs.NewID("t")[2:14])
	cmd := exec.Command("docker", "build", "-q", "-t", tag, "-")
	cmd.Stdin = strings.NewReader("FROM " + testImage() + "\nUSER root\nRUN echo " + marker + " > /etc/gantry-env-marker\nUSER 1000\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() })
	return tag
}

// TestEnvironments: a job or session in an environment runs in its image,
// in the same sandbox as any job; a job without one runs in the sandbox
// image; an environment whose image no host or registry has ends its job
// as error saying so.
func TestEnvironments(t *testing.T) {
	image := derivedImage(t, "datasci")
	h := newHarness(t, 2)
	ctx := context.Background()
	for _, e := range []store.Environment{{Name: "datasci", Image: image}, {Name: "ghost", Image: "gantry-no-such-image:404"}} {
		if _, err := h.st.PutEnvironment(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	probe := "cat /etc/gantry-env-marker 2>/dev/null || echo none; id -u; cat /proc/self/status | grep CapEff"
	j := h.run(t, jobs.Request{Language: "bash", Code: probe, Environment: "datasci"})
	if j.Status != jobs.StatusSucceeded || !strings.HasPrefix(j.Stdout, "datasci\n1000\nCapEff:\t0000000000000000") {
		t.Fatalf("a job in datasci: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
	j = h.run(t, jobs.Request{Language: "bash", Code: probe})
	if j.Status != jobs.StatusSucceeded || !strings.HasPrefix(j.Stdout, "none\n") {
		t.Fatalf("a job in the default: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
	j = h.run(t, jobs.Request{Language: "bash", Code: "echo x", Environment: "ghost"})
	if j.Status != jobs.StatusError || j.Error == nil || !strings.Contains(j.Error.Message, `environment "ghost"`) ||
		!strings.Contains(j.Error.Message, "could not be pulled") || j.Attempt != 1 {
		t.Fatalf("a job whose image nobody has: %s attempt %d %+v", j.Status, j.Attempt, j.Error)
	}

	req, _ := jobs.SessionRequest{DiskMB: 64, Environment: "datasci"}.Normalize()
	sess, err := h.st.CreateSession(ctx, h.tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second job runs in the parked container
		j = h.waitFor(t, h.submitIn(t, sess.ID, jobs.Request{Language: "bash", Code: "cat /etc/gantry-env-marker"}), func(j jobs.Job) bool { return j.Status.Terminal() })
		if j.Status != jobs.StatusSucceeded || j.Stdout != "datasci\n" {
			t.Fatalf("session job %d: %s %q %q", i+1, j.Status, j.Stdout, j.Stderr)
		}
	}
}
