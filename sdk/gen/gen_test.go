package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesAreCurrent fails when ingress/openapi.json changed and
// the SDKs' types were not generated again.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	want, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for path, content := range want {
		got, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Errorf("%s: %v (run make sdk)", path, err)
			continue
		}
		if string(got) != content {
			t.Errorf("%s is not what %s gives: run make sdk", path, Source)
		}
	}
}
