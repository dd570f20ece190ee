package agent

import (
	"testing"

	"github.com/gantryhq/gantry/agent/wire"
)

func TestLeanCovers(t *testing.T) {
	w := &warm{roots: map[string]bool{"os": true, "sys": true, "json": true, "typing": true, "collections": true, "__future__": true}}
	cases := []struct {
		src  string
		want bool
	}{
		{"print(6*7)", true},
		{"import os\nimport sys, json\nprint(1)", true},
		{"from typing import List\nfrom collections.abc import Mapping\n", true},
		{"import os.path as p, json as j  # a comment: import numpy", true},
		{"from __future__ import annotations\nx = 1; import os", true},
		{"def f():\n    import json\n    return json\n", true},
		{"try: import json\nexcept ImportError: pass\n", true},
		{"import numpy", false},
		{"import os, numpy as np", false},
		{"from pandas import DataFrame", false},
		{"from . import helper", false},
		{"from .helper import x", false},
		{"import helper", false},
		{"m = __import__('numpy')", false},
		{"import importlib\nimportlib.import_module('numpy')", false},
		{"s = 'import numpy'", false},
		{"import os, \\\n    numpy", false},
		{"from os import (path,\n    sep)", true},
		{"important = 1", false},
		{"x = 1; import numpy", false},
		{"if True: import numpy", false},
	}
	for _, c := range cases {
		if got := w.covers([]byte(c.src)); got != c.want {
			t.Errorf("covers(%q) = %v, want %v", c.src, got, c.want)
		}
	}
	if (&warm{}).covers([]byte("print(1)")) {
		t.Error("an interpreter not ready covers a program")
	}
	if w.covers(nil) {
		t.Error("covers a program it was not given")
	}
	big := make([]byte, maxLeanScan+1)
	for i := range big {
		big[i] = '\n'
	}
	if w.covers(big) {
		t.Error("covers a program beyond maxLeanScan")
	}
}

func TestProgramOf(t *testing.T) {
	req := wire.Request{Argv: []string{"python3", wire.ProgramDir + "/main.py"},
		Files: []wire.File{{Path: wire.ProgramDir + "/other.py", Data: []byte("a")}, {Path: wire.ProgramDir + "/main.py", Data: []byte("b")}}}
	if got := string(programOf(req)); got != "b" {
		t.Fatalf("programOf = %q", got)
	}
	req.Files = req.Files[:1]
	if programOf(req) != nil {
		t.Fatal("programOf found a file the request does not carry")
	}
}
