package jobs

import (
	"errors"
	"testing"
)

// TestSessionRequestDurable: durable needs a stateful session; a session
// made from a snapshot or pausing at its timeout is durable, and cannot be
// asked not to be; absent, a stateful session is not durable (the service
// applies the operator's default before).
func TestSessionRequestDurable(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		name string
		req  SessionRequest
		want bool
		bad  bool
	}{
		{name: "absent", req: SessionRequest{Stateful: true}},
		{name: "asked", req: SessionRequest{Stateful: true, Durable: &yes}, want: true},
		{name: "refused", req: SessionRequest{Stateful: true, Durable: &no}},
		{name: "not stateful", req: SessionRequest{Durable: &yes}, bad: true},
		{name: "not stateful, false", req: SessionRequest{Durable: &no}},
		{name: "snapshot", req: SessionRequest{Snapshot: NewID("snp")}, want: true},
		{name: "snapshot, false", req: SessionRequest{Snapshot: NewID("snp"), Durable: &no}, bad: true},
		{name: "pause", req: SessionRequest{Stateful: true, OnTimeout: OnTimeoutPause}, want: true},
		{name: "pause, false", req: SessionRequest{Stateful: true, OnTimeout: OnTimeoutPause, Durable: &no}, bad: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.req.Normalize()
			var fe *FieldError
			switch {
			case c.bad && (!errors.As(err, &fe) || fe.Field != "durable"):
				t.Fatalf("want a durable field error, got %v", err)
			case c.bad:
			case err != nil:
				t.Fatal(err)
			case got.IsDurable() != c.want:
				t.Errorf("durable %v, want %v", got.IsDurable(), c.want)
			}
		})
	}
}
