package runner

import (
	"testing"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
)

// TestUsage checks what a job's cpu_time_ms and peak_memory_kb say against
// programs that know what they used: a loop that burns a second of its own
// CPU time reports about a second, 200 MB touched report at least 200 MB,
// and a job of several processes is accounted as a whole (CPU summed, the
// largest process's memory). Under both isolations: bubblewrap sandboxes
// in a reused container, and the program alone in its container.
func TestUsage(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	isolations := []wire.Isolation{wire.Namespaces, wire.Container}
	if testRuntime() == "runsc" {
		isolations = []wire.Isolation{wire.Container} // bubblewrap does not run under gVisor
	}
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			h := newHarnessWith(t, testSandboxWith(t, iso), 1)
			cases := []struct {
				name           string
				req            jobs.Request
				cpuMin, cpuMax int64 // ms
				memMin, memMax int64 // KiB
			}{
				{"python burns 1 s of CPU", jobs.Request{Language: "python",
					Code: "import time\nwhile time.process_time() < 1.0: pass\nprint('done')"},
					1000, 1600, 1 << 10, 64 << 10},
				{"python holds 200 MB", jobs.Request{Language: "python",
					Code: "b = bytearray(200 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('done')"},
					1, 1500, 200 << 10, 260 << 10},
				// Two processes one after the other, and one of 150 MB:
				// CPU adds up, memory is the largest process's.
				{"bash runs two programs", jobs.Request{Language: "bash",
					Code: "python3 -c 'import time\nwhile time.process_time() < 0.6: pass'\n" +
						"python3 -c 'b = bytearray(150 << 20)\nimport time\nwhile time.process_time() < 0.6: pass'\necho done"},
					1200, 2200, 150 << 10, 210 << 10},
			}
			for _, c := range cases {
				j := h.run(t, c.req)
				if j.Status != jobs.StatusSucceeded || j.Stdout != "done\n" {
					t.Fatalf("%s: %s %q %q", c.name, j.Status, j.Stdout, j.Stderr)
				}
				// The upper bound catches CPU counted that is not the
				// program's. A slow host (gVisor paging 200 MB took 2 s
				// of CPU on one) may pass it honestly, so the program's
				// own wall clock also bounds it: one thread at a time
				// cannot use more CPU than its duration.
				if j.CPUTimeMS == nil || *j.CPUTimeMS < c.cpuMin || (*j.CPUTimeMS > c.cpuMax && (j.DurationMS == nil || *j.CPUTimeMS > *j.DurationMS+50)) {
					t.Errorf("%s: cpu_time_ms %v, want %d to %d", c.name, deref(j.CPUTimeMS), c.cpuMin, c.cpuMax)
				}
				if j.PeakMemoryKB == nil || *j.PeakMemoryKB < c.memMin-rssSlackKB || *j.PeakMemoryKB > c.memMax {
					t.Errorf("%s: peak_memory_kb %v, want %d to %d", c.name, deref(j.PeakMemoryKB), c.memMin, c.memMax)
				}
				t.Logf("%s: cpu_time_ms %d, peak_memory_kb %d, duration_ms %d", c.name, *j.CPUTimeMS, *j.PeakMemoryKB, *j.DurationMS)
			}

			// A program killed at its timeout is measured too.
			j := h.run(t, jobs.Request{Language: "python", TimeoutMS: 1500,
				Code: "b = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass"})
			if j.Status != jobs.StatusTimedOut || j.CPUTimeMS == nil || *j.CPUTimeMS < 20 || j.PeakMemoryKB == nil || *j.PeakMemoryKB < 64<<10-rssSlackKB {
				t.Errorf("timed out: %s cpu %v peak %v", j.Status, deref(j.CPUTimeMS), deref(j.PeakMemoryKB))
			}
		})
	}
}
