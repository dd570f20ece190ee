package service

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/queue"
)

// A reader that falls behind holds at most maxProcessEventBytes of output:
// what comes past it is dropped and said so once; ends are always kept.
func TestProcessEventsAreBounded(t *testing.T) {
	pe := &ProcessEvents{release: func() {}, ready: make(chan struct{}, 1)}
	msg := func(stream string, data []byte) *nats.Msg {
		m := &nats.Msg{Subject: queue.ProcessSubject("ses_x", 7), Header: nats.Header{}, Data: data}
		m.Header.Set(queue.HeaderStream, stream)
		return m
	}
	chunk := make([]byte, 64<<10)
	for range 2 * maxProcessEventBytes / len(chunk) {
		pe.push(msg(queue.HeaderStreamStdout, chunk))
	}
	pe.push(msg(queue.HeaderStreamExit, []byte(`{"code":0}`)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var data, lost, ends int
	for {
		ev, ok := pe.Next(ctx)
		if !ok {
			break
		}
		switch {
		case ev.Lost:
			lost++
		case ev.Exit != nil:
			ends++
		default:
			data += len(ev.Data)
		}
		if ends == 1 {
			break
		}
	}
	if lost != 1 || ends != 1 || data != maxProcessEventBytes {
		t.Errorf("lost %d, ends %d, data %d (want 1, 1, %d)", lost, ends, data, maxProcessEventBytes)
	}
}

func TestWatchesPerSession(t *testing.T) {
	var w watches
	var releases []func()
	for range 3 {
		r, ok := w.take("ses_a", 3)
		if !ok {
			t.Fatal("refused under the limit")
		}
		releases = append(releases, r)
	}
	if _, ok := w.take("ses_a", 3); ok {
		t.Fatal("a fourth stream admitted")
	}
	if _, ok := w.take("ses_b", 3); !ok {
		t.Fatal("another session refused")
	}
	releases[0]()
	releases[0]() // idempotent
	if _, ok := w.take("ses_a", 3); !ok {
		t.Fatal("refused after a release")
	}
	if _, ok := w.take("ses_a", 3); ok {
		t.Fatal("a double release counted twice")
	}
}
