package mcpproxy

import (
	"bytes"
	"testing"
)

// FuzzReadSSE feeds arbitrary bytes as the event stream an answer comes in:
// no panic, and no event larger than the input or the message cap.
func FuzzReadSSE(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\"}\n\n"))
	f.Add([]byte("data: a\ndata: b\n\ndata:c"))
	f.Add([]byte(":comment\n\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		_ = readSSE(bytes.NewReader(stream), func(ev []byte) {
			if len(ev) > len(stream) || len(ev) > maxMessage {
				t.Fatalf("event of %d bytes from %d bytes of input", len(ev), len(stream))
			}
		})
	})
}
