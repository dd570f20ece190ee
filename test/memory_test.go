package test

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// procMemKB reads a VmRSS/VmHWM-style field (in KiB) of a process.
func procMemKB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// sessionWriteRSSBound is what the ingress may peak at (VmHWM, the whole
// `gantry dev` process without a runner: ingress and embedded NATS) while
// 20 session files are written at once. Before bounded uploads each write
// reserved a 576 MiB part buffer and 6 writes took it past 1.6 GB.
const sessionWriteRSSBound = 128 << 10 // KiB

// TestSessionWritesBoundedMemory writes small files into 20 sessions at
// once, three rounds, and checks the ingress's peak resident memory.
func TestSessionWritesBoundedMemory(t *testing.T) {
	d := startDev(t, "GANTRY_DEV_RUNNER=false")
	pid := d.cmd.Process.Pid
	const n = 20
	ids := make([]string, n)
	for i := range ids {
		r := d.call(t, "POST", "/v1/sessions", `{"language":"python"}`)
		var s struct{ ID string }
		if err := json.Unmarshal(r.body, &s); err != nil || r.status != 201 {
			t.Fatalf("create session: %d %s", r.status, r.body)
		}
		ids[i] = s.ID
	}
	before := procMemKB(t, pid, "VmRSS")
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		errs := make(chan string, n)
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				content := fmt.Sprintf("round %d of session %d\n", round, i)
				r, err := d.try("PUT", "/v1/sessions/"+id+"/files/notes/a.txt", content)
				if err != nil || r.status != 200 {
					errs <- fmt.Sprintf("PUT %s: %v %d %s", id, err, r.status, r.body)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
	// What was written is there: the uploads were not cut short.
	for i, id := range ids {
		r := d.call(t, "GET", "/v1/sessions/"+id+"/files/notes/a.txt", "")
		if want := fmt.Sprintf("round 2 of session %d\n", i); r.status != 200 || string(r.body) != want {
			t.Errorf("file of session %d: %d %q, want %q", i, r.status, r.body, want)
		}
	}
	peak := procMemKB(t, pid, "VmHWM")
	t.Logf("ingress RSS before the writes %d MiB, peak %d MiB (bound %d MiB)", before>>10, peak>>10, sessionWriteRSSBound>>10)
	if peak > sessionWriteRSSBound {
		t.Errorf("ingress peaked at %d MiB resident during 20 concurrent session writes; bound %d MiB", peak>>10, sessionWriteRSSBound>>10)
	}
}
