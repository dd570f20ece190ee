package agent

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestListingAndTarRoundTrip(t *testing.T) {
	src := t.TempDir()
	write(t, filepath.Join(src, "a.txt"), "alpha")
	write(t, filepath.Join(src, "out/deep/b.bin"), "\x00\x01\x02")
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "out/passwd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}

	// The listing has the regular files with their sizes, and the other
	// entries that are not directories by kind; ParseListing reads it.
	recs := strings.Split(strings.TrimSuffix(string(wire.Listing(src)), "\x00"), "\x00")
	sort.Strings(recs)
	if strings.Join(recs, "|") != "3 out/deep/b.bin|5 a.txt|L out/passwd" {
		t.Fatalf("listing %q", recs)
	}
	got := wire.ParseListing(wire.Listing(src))
	sort.Slice(got, func(i, j int) bool { return got[i].Path < got[j].Path })
	if len(got) != 3 || got[0] != (wire.ListedEntry{Path: "a.txt", Kind: wire.EntryFile, Size: 5}) || got[2] != (wire.ListedEntry{Path: "out/passwd", Kind: wire.EntrySymlink}) {
		t.Fatalf("parsed %+v", got)
	}

	// A tar of chosen files holds just those, and never follows a symlink.
	var buf bytes.Buffer
	if err := writeTar(src, []string{"a.txt", "out/passwd", "missing"}, false, &buf); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name+":"+string(hdr.Typeflag))
	}
	if strings.Join(names, ",") != "a.txt:0,out/passwd:2" {
		t.Fatalf("tar of chosen files: %v", names)
	}

	// The whole workspace restores to the same tree.
	buf.Reset()
	if err := writeTar(src, nil, true, &buf); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := extractTar(dst, &buf, 1<<20); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "out/deep/b.bin")); string(b) != "\x00\x01\x02" {
		t.Errorf("b.bin = %q", b)
	}
	if target, _ := os.Readlink(filepath.Join(dst, "out/passwd")); target != "/etc/passwd" {
		t.Errorf("symlink = %q", target)
	}
	if st, err := os.Stat(filepath.Join(dst, "empty")); err != nil || !st.IsDir() {
		t.Errorf("empty dir: %v", err)
	}
}

// hostileTar is what a program could leave in a session snapshot (or
// what an attacker who can write the object store could plant).
func hostileTar(t *testing.T, outside string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body string) {
		h.Size = int64(len(body))
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	add(&tar.Header{Name: "../escape.txt"}, "x")
	add(&tar.Header{Name: outside + "/abs.txt"}, "x")
	add(&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: outside}, "")
	add(&tar.Header{Name: "link/through.txt"}, "x")
	add(&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}, "")
	add(&tar.Header{Name: "./ok/fine.txt", Mode: 0o4755}, "fine")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExtractNeverLeavesTheWorkspace(t *testing.T) {
	outside := t.TempDir()
	dst := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = extractTar(dst, bytes.NewReader(hostileTar(t, outside)), 1<<20)
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("wrote outside the workspace: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dst), "escape.txt")); err == nil {
		t.Fatal("../ escaped")
	}
	if _, err := os.Lstat(filepath.Join(dst, "dev")); err == nil {
		t.Fatal("device node restored")
	}
	st, err := os.Stat(filepath.Join(dst, "ok/fine.txt"))
	if err != nil || st.Mode()&os.ModeSetuid != 0 {
		t.Fatalf("fine.txt: %v %v", st, err)
	}
}

func TestEmptyDirOpensLockedDirectories(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "locked/inner/f.txt"), "x")
	write(t, filepath.Join(dir, "top.txt"), "x")
	for _, d := range []string{"locked/inner", "locked"} {
		if err := os.Chmod(filepath.Join(dir, d), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := emptyDir(dir); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left %v", entries)
	}
}

func TestCleanRel(t *testing.T) {
	for in, want := range map[string]string{"a": "a", "./a/b": "a/b", "a/": "a", "./": "", "..": "", "../a": "",
		"/etc": "", "a/../../b": "", "a//b": "", "a\x00": ""} {
		got, ok := cleanRel(in)
		if got != want || ok != (want != "") {
			t.Errorf("cleanRel(%q) = %q, %v", in, got, ok)
		}
	}
}

func TestBridgeRelaysOneLine(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "b.sock")
	pr, pw := io.Pipe()
	br, err := openBridge(sock, wire.NewFrameWriter(pw))
	if err != nil {
		t.Fatal(err)
	}
	defer br.close()
	// The runner's side: read the request frame, answer it.
	go func() {
		kind, payload, err := wire.NewFrameReader(pr, wire.MaxFrame).Next()
		var req wire.BridgeRequest
		if err != nil || kind != wire.KindBridge || json.Unmarshal(payload, &req) != nil {
			pr.CloseWithError(io.ErrUnexpectedEOF)
			return
		}
		br.reply(req.ID, append([]byte(`{"ok":true,"echo":`), append(req.Req, '}')...))
	}()
	ask := func(line string) string {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, line); err != nil {
			t.Fatal(err)
		}
		answer, _ := bufio.NewReader(conn).ReadString('\n')
		return answer
	}
	if got := ask(`{"op":"servers"}` + "\n"); got != `{"ok":true,"echo":{"op":"servers"}}`+"\n" {
		t.Errorf("answer %q", got)
	}
	if got := ask("not json\n"); !strings.Contains(got, "bad_request") {
		t.Errorf("junk answered %q", got)
	}
	if got := ask(strings.Repeat("x", maxBridgeRequest+10) + "\n"); !strings.Contains(got, "too_large") {
		t.Errorf("huge line answered %q", got)
	}
}

// FuzzExtractTar unpacks arbitrary bytes: nothing lands outside the
// destination, and nothing panics.
func FuzzExtractTar(f *testing.F) {
	f.Add(hostileTar(&testing.T{}, "/tmp/outside-fuzz"))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "a/b.txt", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "ws")
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = extractTar(dst, bytes.NewReader(data), 1<<20)
		entries, _ := os.ReadDir(parent)
		if len(entries) != 1 {
			t.Fatalf("wrote beside the workspace: %v", entries)
		}
	})
}

// TestBuildRoundTrip: what a compile step built comes back whole, the
// program still executable and packages' directories kept, and a build
// over MaxBuild is not sent at all.
func TestBuildRoundTrip(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "main"), []byte("\x7fELF..."), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(src, "com", "example"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "com", "example", "Main.class"), []byte("cafebabe"), 0o644); err != nil {
		t.Fatal(err)
	}
	tb := tarBuild(src)
	if len(tb) == 0 {
		t.Fatal("no build")
	}
	if err := extractTar(dst, bytes.NewReader(tb), wire.MaxBuild); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "main")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("main: %v %v", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "com", "example", "Main.class")); err != nil || string(b) != "cafebabe" {
		t.Errorf("class: %q %v", b, err)
	}

	big := t.TempDir()
	f, err := os.Create(filepath.Join(big, "main"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(wire.MaxBuild + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if tb := tarBuild(big); tb != nil {
		t.Errorf("a build over MaxBuild: %d bytes", len(tb))
	}
}
