package ingress_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// holdLive plays the runner holding a session's live sandbox: the session
// gets a live sandbox named here, and control requests for it are answered
// as a runner under gVisor would (with a checkpoint that is only bytes).
func (h *harness) holdLive(t *testing.T, sid string) {
	t.Helper()
	if err := storetest.QueryRow(h.st, `UPDATE sessions SET live_id = 'holder/1' WHERE id = $1 RETURNING id`, sid).Scan(new(string)); err != nil {
		t.Fatal(err)
	}
	sub, err := h.nc.Subscribe(queue.ControlSubject(sid, "holder/1"), func(m *nats.Msg) {
		var req queue.ControlRequest
		_ = json.Unmarshal(m.Data, &req)
		reply := h.control(t, sid, req)
		data, _ := json.Marshal(reply)
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
}

func (h *harness) control(t *testing.T, sid string, req queue.ControlRequest) queue.ControlReply {
	ctx := context.Background()
	owner := "holder/" + jobs.NewID("own")
	st, ok, err := h.st.AcquireSession(ctx, sid, owner, time.Minute)
	if err != nil || !ok {
		return queue.ControlReply{Error: &queue.ControlError{Code: "busy", Message: "not ours"}}
	}
	defer func() { _, _, _ = h.st.ReleaseSession(ctx, sid, owner, true) }()
	cp := store.Checkpoint{ID: jobs.NewID("chk"), TenantID: st.TenantID, Image: "img", Runtime: "runsc test", Version: st.Version}
	cp.Key = blob.CheckpointKey(st.TenantID, cp.ID)
	if err := h.blobs.Put(ctx, cp.Key, strings.NewReader("state"), 5, "application/zstd"); err != nil {
		t.Error(err)
	}
	cp.Bytes = 5
	switch req.Op {
	case queue.ControlPause:
		if err := h.st.PauseSession(ctx, sid, owner, cp); err != nil {
			t.Error(err)
		}
		return queue.ControlReply{}
	case queue.ControlSnapshot:
		snap, err := h.st.CreateSnapshot(ctx, jobs.Snapshot{ID: req.SnapshotID, Name: req.Name, SessionID: sid, Language: st.Language,
			DiskMB: st.DiskMB, Bytes: cp.Bytes}, cp, "")
		if err != nil {
			t.Error(err)
		}
		return queue.ControlReply{Snapshot: &snap}
	case queue.ControlFork:
		var children []store.ForkChild
		for _, id := range req.ChildIDs {
			children = append(children, store.ForkChild{ID: id})
		}
		sessions, err := h.st.ForkSession(ctx, sid, owner, cp, req.TTLSeconds, children)
		if err != nil {
			t.Error(err)
		}
		return queue.ControlReply{Sessions: sessions}
	}
	return queue.ControlReply{Error: &queue.ControlError{Code: "invalid", Message: "what?"}}
}

// TestLiveStateAPI: the pause, resume, snapshot and fork routes, over the
// runner's part played here; another tenant reaches none of it.
func TestLiveStateAPI(t *testing.T) {
	h := newHarness(t)
	r := h.do(t, h.keyA, "POST", "/v1/sessions", `{"stateful": true, "on_timeout": "pause"}`)
	var sess jobs.Session
	r.json(t, &sess)
	if r.status != 201 || sess.State != jobs.SessionRunning || sess.OnTimeout != jobs.OnTimeoutPause {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/sessions", `{"on_timeout": "pause"}`); r.status != 400 || !strings.Contains(string(r.body), "on_timeout") {
		t.Errorf("on_timeout pause without stateful: %d %s", r.status, r.body)
	}
	h.holdLive(t, sess.ID)

	if r := h.do(t, h.keyA, "POST", "/v1/sessions/"+sess.ID+"/resume", ""); r.status != 200 {
		t.Errorf("resume a running session: %d %s", r.status, r.body)
	}
	r = h.do(t, h.keyA, "POST", "/v1/sessions/"+sess.ID+"/snapshots", `{"name": "first"}`)
	var snap jobs.Snapshot
	r.json(t, &snap)
	if r.status != 201 || !jobs.ValidID("snp", snap.ID) || snap.Name != "first" || r.header.Get("Location") != "/v1/snapshots/"+snap.ID {
		t.Fatalf("snapshot: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/snapshots", ""); r.status != 200 || !strings.Contains(string(r.body), snap.ID) {
		t.Errorf("list: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/snapshots/"+snap.ID, ""); r.status != 200 {
		t.Errorf("get: %d %s", r.status, r.body)
	}
	r = h.do(t, h.keyA, "POST", "/v1/sessions", `{"snapshot": "`+snap.ID+`"}`)
	var from jobs.Session
	r.json(t, &from)
	if r.status != 201 || !from.Stateful || from.ID == sess.ID {
		t.Errorf("a session from the snapshot: %d %s", r.status, r.body)
	}
	r = h.do(t, h.keyA, "POST", "/v1/sessions/"+sess.ID+"/fork", `{"count": 2}`)
	var fork jobs.Fork
	r.json(t, &fork)
	if r.status != 201 || len(fork.Sessions) != 2 || !fork.Sessions[0].Stateful || fork.Sessions[0].OnTimeout != jobs.OnTimeoutPause {
		t.Fatalf("fork: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/sessions/"+sess.ID+"/fork", `{"count": 1000}`); r.status != 400 {
		t.Errorf("fork 1000: %d %s", r.status, r.body)
	}

	// Another tenant reaches none of it.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/sessions/" + sess.ID + "/pause", ""},
		{"POST", "/v1/sessions/" + sess.ID + "/resume", ""},
		{"POST", "/v1/sessions/" + sess.ID + "/snapshots", "{}"},
		{"POST", "/v1/sessions/" + sess.ID + "/fork", "{}"},
		{"GET", "/v1/snapshots/" + snap.ID, ""},
		{"DELETE", "/v1/snapshots/" + snap.ID, ""},
		{"POST", "/v1/sessions", `{"snapshot": "` + snap.ID + `"}`},
	} {
		if r := h.do(t, h.keyB, c.method, c.path, c.body); r.status != 404 {
			t.Errorf("tenant B %s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	if r := h.do(t, h.keyB, "GET", "/v1/snapshots", ""); r.status != 200 || strings.Contains(string(r.body), snap.ID) {
		t.Errorf("tenant B lists: %d %s", r.status, r.body)
	}

	r = h.do(t, h.keyA, "POST", "/v1/sessions/"+sess.ID+"/pause", "")
	var paused jobs.Session
	r.json(t, &paused)
	if r.status != 200 || paused.State != jobs.SessionPaused {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/sessions/"+sess.ID+"/pause", ""); r.status != 200 {
		t.Errorf("pause again: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "DELETE", "/v1/snapshots/"+snap.ID, ""); r.status != 204 {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/snapshots/"+snap.ID, ""); r.status != 404 {
		t.Errorf("get after delete: %d %s", r.status, r.body)
	}
}
