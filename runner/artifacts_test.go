package runner

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

type memUploader map[string][]byte

func (m memUploader) Put(_ context.Context, key string, r io.Reader, size int64, _ string) error {
	b, err := io.ReadAll(io.LimitReader(r, size+1))
	if err != nil {
		return err
	}
	if int64(len(b)) != size {
		return errors.New("size mismatch")
	}
	m[key] = b
	return nil
}

func tarOf(t testing.TB, entries ...*tar.Header) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write(bytes.Repeat([]byte("a"), int(h.Size)))
		}
	}
	_ = tw.Close()
	return buf.Bytes()
}

var testLimits = ArtifactLimits{MaxFiles: 10, MaxFileBytes: 100, MaxTotal: 150}

func TestReadArtifactTarIgnoresWhatWasNotAskedFor(t *testing.T) {
	data := tarOf(t,
		&tar.Header{Name: "../etc/passwd", Typeflag: tar.TypeReg, Size: 3, Mode: 0o644},
		&tar.Header{Name: "out/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
		&tar.Header{Name: "out/a.txt", Typeflag: tar.TypeReg, Size: 5, Mode: 0o644},
	)
	up := memUploader{}
	arts, _, err := readArtifactTar(context.Background(), bytes.NewReader(data),
		map[string]int64{"out/a.txt": 5, "out/link": 0}, testLimits, up, func(p string) string { return "k/" + p })
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != 1 || arts[0].Path != "out/a.txt" || len(up) != 1 || string(up["k/out/a.txt"]) != "aaaaa" {
		t.Fatalf("arts %+v uploads %v", arts, up)
	}
}

func TestReadArtifactTarCaps(t *testing.T) {
	// A file that grew past the cap since it was listed is omitted; the
	// others are still uploaded.
	data := tarOf(t, &tar.Header{Name: "out/big", Typeflag: tar.TypeReg, Size: 500, Mode: 0o644},
		&tar.Header{Name: "out/small", Typeflag: tar.TypeReg, Size: 5, Mode: 0o644})
	up := memUploader{}
	arts, omitted, err := readArtifactTar(context.Background(), bytes.NewReader(data), map[string]int64{"out/big": 10, "out/small": 5}, testLimits, up, func(p string) string { return p })
	if err != nil || len(arts) != 1 || arts[0].Path != "out/small" || len(omitted) != 1 || omitted[0].Path != "out/big" || len(up) != 1 {
		t.Fatalf("arts %+v omitted %+v err %v", arts, omitted, err)
	}
}

func TestSelectArtifacts(t *testing.T) {
	// Every entry a glob matches is accounted for: collected, or omitted
	// with why (a symlink, a fifo, a name that is not UTF-8 or not clean).
	files, odd := parseListing([]byte("5 out/a.png\x0012 out/x/b.csv\x003 main.py\x004 out/../../x\x00bad\x00" +
		"L out/link\x00X out/fifo\x007 out/caf\xe9.txt\x00L tmp/link\x00"))
	if len(files) != 3 || len(odd) != 5 {
		t.Fatalf("parsed %+v %+v", files, odd)
	}
	sel, omitted := selectArtifacts(files, odd, []string{"out/**"}, testLimits)
	want := map[string]string{"out/link": "symbolic link", "out/fifo": "not a regular file", "out/caf\uFFFD.txt": "not valid UTF-8",
		"out/../../x": "leaves the workspace"}
	if len(sel) != 2 || len(omitted) != 4 {
		t.Fatalf("selected %+v omitted %+v", sel, omitted)
	}
	for _, o := range omitted {
		if !strings.Contains(o.Reason, want[o.Path]) || want[o.Path] == "" {
			t.Errorf("omitted %+v", o)
		}
	}
	// What fits is kept, in path order; the rest is omitted with the reason.
	sel, omitted = selectArtifacts([]workspaceFile{{"out/c", 60}, {"out/a", 101}, {"out/b", 100}}, nil, []string{"out/**"}, testLimits)
	if len(sel) != 1 || sel[0].path != "out/b" || len(omitted) != 2 ||
		omitted[0].Path != "out/a" || !strings.Contains(omitted[0].Reason, "per file") ||
		omitted[1].Path != "out/c" || !strings.Contains(omitted[1].Reason, "all files") {
		t.Errorf("selected %+v omitted %+v", sel, omitted)
	}
	many := make([]workspaceFile, 12)
	for i := range many {
		many[i] = workspaceFile{fmt.Sprintf("out/%02d", i), 1}
	}
	if sel, omitted := selectArtifacts(many, nil, []string{"out/**"}, testLimits); len(sel) != 10 || len(omitted) != 2 || !strings.Contains(omitted[0].Reason, "10 files") {
		t.Errorf("file cap: %d kept, omitted %+v", len(sel), omitted)
	}
}

func TestOutputCap(t *testing.T) {
	var published []string
	o := newOutput("stdout", 5, func(_ string, off int, b []byte) { published = append(published, string(b)) })
	_, _ = o.Write([]byte("abc"))
	_, _ = o.Write([]byte("defg"))
	_, _ = o.Write([]byte("h"))
	got, trunc := o.snapshot()
	if string(got) != "abcde" || !trunc || len(published) != 2 || published[1] != "de" {
		t.Errorf("got %q trunc %v published %q", got, trunc, published)
	}
}

// FuzzArtifactTar feeds arbitrary bytes as the sandbox's tar stream: the
// reader must never panic, and must only upload files it asked for, within
// the caps.
func FuzzArtifactTar(f *testing.F) {
	f.Add(tarOf(f, &tar.Header{Name: "out/a.txt", Typeflag: tar.TypeReg, Size: 5, Mode: 0o644}))
	f.Add(tarOf(f, &tar.Header{Name: "../../x", Typeflag: tar.TypeReg, Size: 5, Mode: 0o644}))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		up := memUploader{}
		want := map[string]int64{"out/a.txt": 5, "out/b": 50}
		arts, _, _ := readArtifactTar(context.Background(), bytes.NewReader(data), want, testLimits, up, func(p string) string { return p })
		var total int64
		for _, a := range arts {
			if a.Path != "out/a.txt" && a.Path != "out/b" {
				t.Fatalf("uploaded unrequested %q", a.Path)
			}
			total += a.Size
		}
		if total > testLimits.MaxTotal {
			t.Fatalf("total %d over cap", total)
		}
	})
}
