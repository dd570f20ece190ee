package runner

import (
	"context"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestSkillsInTheSandbox runs every example of every built-in skill in the
// sandbox (a skill that teaches broken code is a bug), and checks that a
// job sees exactly its tenant's skills, read-only, importable from Python.
func TestSkillsInTheSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 4)
	ctx := context.Background()
	builtins, err := skills.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.SyncBuiltins(ctx, builtins); err != nil {
		t.Fatal(err)
	}

	for _, sk := range builtins {
		for i, example := range sk.Examples() {
			t.Run(sk.Name, func(t *testing.T) {
				t.Parallel()
				j := h.run(t, jobs.Request{Language: sk.Language, Code: example, TimeoutMS: 120_000})
				if j.Status != jobs.StatusSucceeded {
					t.Fatalf("example %d of %s: %s %+v\nstdout: %s\nstderr: %s", i, sk.Name, j.Status, j.Error, j.Stdout, j.Stderr)
				}
				if j.Stdout == "" {
					t.Errorf("example %d of %s printed nothing", i, sk.Name)
				}
			})
		}
	}

	t.Run("tenant skills are mounted read-only and importable", func(t *testing.T) {
		t.Parallel()
		_, err := h.st.SaveSkill(ctx, h.tenant, skills.Skill{Name: "greeting", Description: "Say hello", Body: "Use greet().\n",
			Files: []skills.File{{Path: "helpers.py", Content: "def greet(name):\n    return 'hello ' + name\n"}}})
		if err != nil {
			t.Fatal(err)
		}
		j := h.run(t, jobs.Request{Language: "python", Code: `
import os
from skills.greeting import helpers
print(helpers.greet("gantry"))
print(sorted(os.listdir("/skills")))
try:
    open("/skills/greeting/helpers.py", "w").write("hacked")
    print("writable")
except OSError as e:
    print("read-only", e.errno)
print(open("/skills/greeting/SKILL.md").read().splitlines()[1])
`})
		lines := strings.Split(strings.TrimSpace(j.Stdout), "\n")
		if j.Status != jobs.StatusSucceeded || len(lines) != 4 || lines[0] != "hello gantry" ||
			!strings.Contains(lines[1], "'greeting'") || !strings.Contains(lines[1], "'plotting'") ||
			!strings.HasPrefix(lines[2], "read-only") || lines[3] != "name: greeting" {
			t.Fatalf("job: %s\n%s\n%s", j.Status, j.Stdout, j.Stderr)
		}
		// Another tenant's job never sees it.
		other, _ := storetest.Tenant(t, h.st, "other")
		files, err := h.r.skills.files(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.Contains(f.Path, "/greeting/") {
				t.Fatal("another tenant's skill would be mounted")
			}
		}
	})
}
