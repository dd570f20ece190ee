package agent

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/agent/wire"
)

func TestHeader(t *testing.T) {
	head, ok := header("run", []string{"python3", "/tmp/gantry/main.py"}, []string{"A=1", "B=x=y"})
	if !ok {
		t.Fatal("refused")
	}
	n := binary.BigEndian.Uint32(head)
	fields := strings.Split(string(head[4:]), "\x00")
	if int(n) != len(head)-4 || strings.Join(fields, "|") != "run|2|python3|/tmp/gantry/main.py|A=1|B=x=y" {
		t.Fatalf("header %q", head)
	}
	if _, ok := header("exec", []string{"sh", "-c", "a\x00b"}, nil); ok {
		t.Error("a NUL in an argument was accepted")
	}
	if _, ok := header("exec", []string{"true"}, []string{"BIG=" + strings.Repeat("x", maxHeader)}); ok {
		t.Error("a header over one pipe write was accepted")
	}
}

// TestInProcess says which Python jobs a spare's interpreter runs in
// process (inProcess) and which a fork of the warm interpreter runs
// (warmEligible: also nothing the preloaded libraries read at import).
func TestInProcess(t *testing.T) {
	prog := []string{"python3", wire.ProgramDir + "/main.py"}
	for _, tc := range []struct {
		argv        []string
		env         map[string]string
		spare, fork bool
	}{
		{prog, nil, true, true},
		{prog, map[string]string{"SEED": "1", "PYTHONPATH": "/tmp/gantry/gen/python", "GANTRY_BRIDGE": "x", "GANTRY_FIGURES": "0"}, true, true},
		{prog, map[string]string{"PYTHONHASHSEED": "0"}, false, false},
		{prog, map[string]string{"PYTHONIOENCODING": "latin-1"}, false, false},
		{prog, map[string]string{"LANG": "de_DE.UTF-8"}, false, false},
		{prog, map[string]string{"LC_ALL": "C"}, false, false},
		{prog, map[string]string{"HOME": "/workspace"}, false, false},
		{prog, map[string]string{"PATH": "/opt/bin"}, false, false},
		{prog, map[string]string{"LD_PRELOAD": "/x.so"}, false, false},
		{prog, map[string]string{"MPLBACKEND": "Agg"}, true, false},
		{prog, map[string]string{"OPENBLAS_NUM_THREADS": "4"}, true, false},
		{prog, map[string]string{"OMP_NUM_THREADS": "4"}, true, false},
		{[]string{"python3", "main.py"}, nil, false, false},
		{[]string{"python3", "-c", "print(1)"}, nil, false, false},
		{[]string{"node", wire.ProgramDir + "/main.js"}, nil, false, false},
	} {
		if got := inProcess(tc.argv, tc.env); got != tc.spare {
			t.Errorf("inProcess(%q, %v) = %v", tc.argv, tc.env, got)
		}
		if got := warmEligible(tc.argv, tc.env); got != tc.fork {
			t.Errorf("warmEligible(%q, %v) = %v", tc.argv, tc.env, got)
		}
	}
}
