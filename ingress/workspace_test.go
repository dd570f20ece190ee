package ingress

import (
	"archive/tar"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

// FuzzEntryInfo: whatever a sandbox puts in a snapshot, the files API only
// ever names paths inside the workspace.
func FuzzEntryInfo(f *testing.F) {
	for _, n := range []string{"./a.txt", "../../etc/passwd", "/abs", "a/../../b", "dir/", ".", "a\x00b"} {
		f.Add(n, byte(tar.TypeReg))
	}
	f.Add("link", byte(tar.TypeSymlink))
	f.Add("dev", byte(tar.TypeChar))
	f.Fuzz(func(t *testing.T, name string, typ byte) {
		fi, ok := entryInfo(&tar.Header{Name: name, Typeflag: typ, Linkname: "/etc"})
		if !ok {
			return
		}
		if clean, err := jobs.CleanPath(fi.Path); err != nil || clean != fi.Path {
			t.Fatalf("entry %q gave path %q", name, fi.Path)
		}
		if fi.Type != "file" && fi.Type != "dir" && fi.Type != "symlink" {
			t.Fatalf("entry type %q", fi.Type)
		}
	})
}
