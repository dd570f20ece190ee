package agent

import (
	"bytes"
	"strings"
	"testing"
)

// feedCell passes stream to a cell in chunks of the sizes given (cycled),
// returning what it emitted as the cell's output.
func feedCell(cell *jsCell, stream []byte, sizes []int) string {
	var got strings.Builder
	for i := 0; len(stream) > 0; i++ {
		n := 1
		if len(sizes) > 0 {
			n = max(1, sizes[i%len(sizes)])
		}
		n = min(n, len(stream))
		cell.feed(stream[:n], func(s string) { got.WriteString(s) })
		stream = stream[n:]
	}
	return got.String()
}

func TestJSCellMarkers(t *testing.T) {
	id := "0123456789abcdef"
	stream := []byte("\x1eother:start\nnot ours\n\x1eother:end:{}\x1e\n" +
		"\x1e" + id + ":start\nline one\nbell \x1e in the middle\n" +
		"\x1e" + id + ":end:{\"value\":{\"text/plain\":\"42\"}}\x1e\nafter\n")
	for _, sizes := range [][]int{{1}, {2}, {3, 7}, {5, 1, 11}, {1 << 10}} {
		cell := newJSCell(id)
		got := feedCell(cell, stream, sizes)
		if got != "line one\nbell \x1e in the middle\n" || !cell.done || string(cell.result) != `{"value":{"text/plain":"42"}}` {
			t.Errorf("chunks of %v: output %q, done %v, result %q", sizes, got, cell.done, cell.result)
		}
	}
}

// FuzzJSCell: a kernel's stdout is the cell's own code's to write; reading
// it neither panics nor passes on more than came.
func FuzzJSCell(f *testing.F) {
	f.Add([]byte("\x1eid:start\nhi\n\x1eid:end:{}\x1e\n"), byte(3))
	f.Add([]byte("\x1eid:start\n\x1e\x1eid:end:"), byte(1))
	f.Fuzz(func(t *testing.T, stream []byte, size byte) {
		cell := newJSCell("id")
		got := feedCell(cell, stream, []int{int(size)})
		if len(got) > len(stream) {
			t.Fatalf("emitted %d bytes of %d", len(got), len(stream))
		}
		if cell.done && !bytes.Contains(stream, []byte("\x1eid:end:")) {
			t.Fatalf("done without an end marker")
		}
	})
}

// TestKernelCell: what a stateful session runs as a kernel's cell is a
// Node or TypeScript program as the runner runs it, and nothing else.
func TestKernelCell(t *testing.T) {
	ts := []string{"sh", "-c", `esbuild "$1" --log-level=warning --platform=node --format=cjs --target=node18 --sourcemap=inline --outfile=/tmp/.gantry-ts/main.js && shift && exec node --enable-source-maps /tmp/.gantry-ts/main.js "$@"`,
		"typescript", "/tmp/gantry/main.ts"}
	for _, c := range []struct {
		argv           []string
		language, path string
	}{
		{[]string{"node", "/tmp/gantry/main.js"}, "javascript", "/tmp/gantry/main.js"},
		{ts, "typescript", "/tmp/gantry/main.ts"},
		{[]string{"node", "/tmp/gantry/main.js", "arg"}, "", ""},
		{[]string{"node", "/workspace/main.js"}, "", ""},
		{append(ts, "arg"), "", ""},
		{[]string{"python3", "/tmp/gantry/main.py"}, "", ""},
	} {
		language, path, ok := kernelCell(c.argv)
		if language != c.language || path != c.path || ok != (c.language != "") {
			t.Errorf("%q: %q %q %v", c.argv, language, path, ok)
		}
	}
}
