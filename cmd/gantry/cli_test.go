package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestEvents(t *testing.T) {
	in := ": keep-alive\n\nevent: stdout\ndata: {\"data\":\"a\"}\n\nevent: status\ndata: {\"status\":\r\ndata: \"ok\"}\r\n\r\n"
	var got []string
	if err := events(strings.NewReader(in), func(e sseEvent) error {
		got = append(got, e.name+"="+string(e.data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{`stdout={"data":"a"}`, "status={\"status\":\n\"ok\"}"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events = %q, want %q", got, want)
	}
}

// FuzzEvents: whatever a server sends, the log stream reader neither
// panics nor hands over more than it read.
func FuzzEvents(f *testing.F) {
	f.Add([]byte("event: stdout\ndata: {\"data\":\"x\"}\n\n"))
	f.Add([]byte("data:\ndata:\n\n:\n\nevent:\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		total := 0
		_ = events(bytes.NewReader(in), func(e sseEvent) error {
			total += len(e.data) + len(e.name)
			return nil
		})
		if total > len(in) {
			t.Fatalf("events handed over %d bytes from %d", total, len(in))
		}
	})
}
