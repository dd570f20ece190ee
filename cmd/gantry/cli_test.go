package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
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

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-01-02T15:04:05Z":      time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
		"2026-01-02T15:04:05+01:00": time.Date(2026, 1, 2, 14, 4, 5, 0, time.UTC),
		"2026-01-02":                time.Date(2026, 1, 2, 0, 0, 0, 0, time.Local),
		"90m":                       now.Add(-90 * time.Minute),
		"6h":                        now.Add(-6 * time.Hour),
		"7d":                        now.Add(-7 * 24 * time.Hour),
		"1.5d":                      now.Add(-36 * time.Hour),
	} {
		if got, err := parseWhen(in, now); err != nil || !got.Equal(want) {
			t.Errorf("parseWhen(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "yesterday", "-1h", "-2d", "d", "2026-13-01", "1w"} {
		if _, err := parseWhen(in, now); err == nil {
			t.Errorf("parseWhen(%q) accepted", in)
		}
	}
}
