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
		{"from json import loads\rimport numpy\r", false},
		{"import os\r\nimport json\r\n", true},
		{"x = \"\"\"a\nb#\"\"\"; import numpy", false},
		{"import os  # it's fine", false},
		{"# -*- coding: utf-7 -*-\nimport os", false},
		{"#!/usr/bin/env python3\n# coding=latin-1\nimport os", false},
		{"# -*- coding: utf-8 -*-\nimport os", true},
		{"# coding: UTF_8\nimport os", true},
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

func TestLeanShadowed(t *testing.T) {
	w := &warm{roots: map[string]bool{"json": true, "random": true, "os": true}}
	main := wire.File{Path: wire.ProgramDir + "/main.py", Data: []byte("import json")}
	req := func(env map[string]string, files ...wire.File) wire.Request {
		return wire.Request{Argv: []string{"python3", wire.ProgramDir + "/main.py"}, Env: env, Files: append([]wire.File{main}, files...)}
	}
	cases := []struct {
		name string
		req  wire.Request
		want bool
	}{
		{"the program alone", req(nil), false},
		{"a helper module", req(nil, wire.File{Path: wire.ProgramDir + "/helper.py"}), false},
		{"a json.py beside it", req(nil, wire.File{Path: wire.ProgramDir + "/json.py"}), true},
		{"a package random/", req(nil, wire.File{Path: wire.ProgramDir + "/random/__init__.py"}), true},
		{"an extension module", req(nil, wire.File{Path: wire.ProgramDir + "/json.cpython-311-x86_64-linux-gnu.so"}), true},
		{"json.py deeper down, not on the path", req(nil, wire.File{Path: wire.ProgramDir + "/lib/json.py"}), false},
		{"json.py on its PYTHONPATH", req(map[string]string{"PYTHONPATH": wire.ProgramDir + "/lib"}, wire.File{Path: wire.ProgramDir + "/lib/json.py"}), true},
		{"a workspace file beside nothing on the path", req(nil, wire.File{Path: wire.Workspace + "/json.py"}), false},
	}
	for _, c := range cases {
		if got := w.shadowed(c.req); got != c.want {
			t.Errorf("%s: shadowed = %v, want %v", c.name, got, c.want)
		}
	}
}
