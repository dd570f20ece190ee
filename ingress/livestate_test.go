package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/secret"
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

// TestE2BLiveStateRoutes: E2B's pause, snapshots and forks, as E2B's SDK
// 2.51 sends and reads them, over the runner's part played here; another
// tenant reaches none of it; a runner that keeps live state in memory
// only answers 501, passed on.
func TestE2BLiveStateRoutes(t *testing.T) {
	box, _ := secret.New(bytes.Repeat([]byte{7}, secret.KeySize))
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.Box = box })
	e2b := func(key, method, path, body string) response {
		t.Helper()
		return h.do(t, "", method, "/compat/e2b"+path, body, "X-API-Key", key)
	}
	var sess jobs.Session
	h.do(t, h.keyA, "POST", "/v1/sessions", `{"stateful": true, "durable": true}`).json(t, &sess)
	h.holdLive(t, sess.ID)

	r := e2b(h.keyA, "POST", "/sandboxes/"+sess.ID+"/snapshots", `{"name": "first"}`)
	var snap struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	r.json(t, &snap)
	if r.status != 201 || !jobs.ValidID("snp", snap.SnapshotID) || !slices.Equal(snap.Names, []string{"first"}) {
		t.Fatalf("createSnapshot: %d %s", r.status, r.body)
	}
	r = e2b(h.keyA, "GET", "/snapshots?sandboxID="+sess.ID, "")
	if r.status != 200 || !strings.Contains(string(r.body), snap.SnapshotID) {
		t.Errorf("listSnapshots of the sandbox: %d %s", r.status, r.body)
	}
	if r := e2b(h.keyA, "GET", "/snapshots?sandboxID=ses_other", ""); r.status != 200 || strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("listSnapshots of another sandbox: %d %s", r.status, r.body)
	}
	r = e2b(h.keyA, "POST", "/sandboxes/"+sess.ID+"/fork", `{"count": 2, "timeout": 60}`)
	var forks []struct {
		Sandbox *struct {
			SandboxID       string `json:"sandboxID"`
			EnvdAccessToken string `json:"envdAccessToken"`
		} `json:"sandbox"`
		Error *struct{ Code int } `json:"error"`
	}
	r.json(t, &forks)
	if r.status != 201 || len(forks) != 2 || forks[0].Sandbox == nil || forks[0].Sandbox.EnvdAccessToken == "" || forks[1].Sandbox == nil {
		t.Fatalf("fork: %d %s", r.status, r.body)
	}
	if r := e2b(h.keyA, "POST", "/sandboxes/"+sess.ID+"/fork", `{"count": 0}`); r.status != 400 {
		t.Errorf("fork of 0: %d %s", r.status, r.body)
	}

	// Another tenant reaches none of it.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/sandboxes/" + sess.ID + "/pause", "{}"},
		{"POST", "/v2/sandboxes/" + sess.ID + "/connect", "{}"},
		{"POST", "/sandboxes/" + sess.ID + "/snapshots", "{}"},
		{"POST", "/sandboxes/" + sess.ID + "/fork", "{}"},
		{"DELETE", "/templates/" + snap.SnapshotID, ""},
		{"POST", "/v2/sandboxes", `{"templateID": "` + snap.SnapshotID + `"}`},
	} {
		if r := e2b(h.keyB, c.method, c.path, c.body); r.status != 404 {
			t.Errorf("tenant B %s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	if r := e2b(h.keyB, "GET", "/snapshots", ""); r.status != 200 || strings.Contains(string(r.body), snap.SnapshotID) {
		t.Errorf("tenant B lists: %d %s", r.status, r.body)
	}

	if r := e2b(h.keyA, "POST", "/sandboxes/"+sess.ID+"/pause", `{"memory": false}`); r.status != 501 {
		t.Errorf("a pause without memory: %d %s", r.status, r.body)
	}
	if r := e2b(h.keyA, "POST", "/sandboxes/"+sess.ID+"/pause", `{}`); r.status != 204 {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	var info struct {
		State           string `json:"state"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	e2b(h.keyA, "GET", "/sandboxes/"+sess.ID, "").json(t, &info)
	if info.State != "paused" {
		t.Errorf("getInfo after pause: %q", info.State)
	}
	// A call inside it (no autoResume) answers as E2B's proxy does.
	r = h.do(t, "", "GET", "/compat/e2b/sandbox/health", "", "E2b-Sandbox-Id", sess.ID, "X-Access-Token", info.EnvdAccessToken)
	var proxy struct {
		SandboxID     string `json:"sandboxId"`
		Code          int    `json:"code"`
		CanAutoResume *bool  `json:"canAutoResume"`
	}
	r.json(t, &proxy)
	if r.status != 409 || proxy.SandboxID != sess.ID || proxy.Code != 409 || proxy.CanAutoResume == nil || *proxy.CanAutoResume {
		t.Errorf("a call inside a paused sandbox: %d %s", r.status, r.body)
	}
	if r := e2b(h.keyA, "POST", "/sandboxes/"+sess.ID+"/pause", `{}`); r.status != 409 {
		t.Errorf("pause a paused sandbox: %d %s (the SDK's pause() answers false on 409)", r.status, r.body)
	}
	if r := e2b(h.keyA, "POST", "/v2/sandboxes/"+sess.ID+"/connect", `{"memory": false}`); r.status != 501 {
		t.Errorf("connect resuming without memory: %d %s", r.status, r.body)
	}
	if r := e2b(h.keyA, "DELETE", "/templates/"+snap.SnapshotID, ""); r.status != 204 {
		t.Errorf("deleteSnapshot: %d %s", r.status, r.body)
	}
	if r := e2b(h.keyA, "DELETE", "/templates/"+snap.SnapshotID, ""); r.status != 404 {
		t.Errorf("deleteSnapshot again: %d %s (the SDK answers false on 404)", r.status, r.body)
	}
	if r := e2b(h.keyA, "DELETE", "/templates/base", ""); r.status != 501 {
		t.Errorf("delete a template: %d %s", r.status, r.body)
	}

	// A session that is not durable: refused before any runner is asked,
	// E2B's way (400: its SDK reads a pause's 409 as already paused) and
	// gantry's (409).
	var plain jobs.Session
	h.do(t, h.keyA, "POST", "/v1/sessions", `{"stateful": true}`).json(t, &plain)
	for _, path := range []string{"/pause", "/snapshots", "/fork"} {
		r := e2b(h.keyA, "POST", "/sandboxes/"+plain.ID+path, "{}")
		if r.status != 400 || !strings.Contains(string(r.body), "gantry.durable") {
			t.Errorf("%s of a sandbox that is not durable: %d %s", path, r.status, r.body)
		}
	}
	if r := h.do(t, h.keyA, "POST", "/v1/sessions/"+plain.ID+"/pause", ""); r.status != 409 || !strings.Contains(string(r.body), "durable") {
		t.Errorf("the native pause of a session that is not durable: %d %s", r.status, r.body)
	}

	// A durable session on a runner that keeps live state in memory only.
	var mem jobs.Session
	h.do(t, h.keyA, "POST", "/v1/sessions", `{"stateful": true, "durable": true}`).json(t, &mem)
	if err := storetest.QueryRow(h.st, `UPDATE sessions SET live_id = 'memory/1' WHERE id = $1 RETURNING id`, mem.ID).Scan(new(string)); err != nil {
		t.Fatal(err)
	}
	sub, err := h.nc.Subscribe(queue.ControlSubject(mem.ID, "memory/1"), func(m *nats.Msg) {
		data, _ := json.Marshal(queue.ControlReply{Error: &queue.ControlError{Code: "not_supported", Message: "the runner holding this session keeps live state in memory only"}})
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	for _, path := range []string{"/pause", "/snapshots", "/fork"} {
		r := e2b(h.keyA, "POST", "/sandboxes/"+mem.ID+path, "{}")
		if r.status != 501 || !strings.Contains(string(r.body), "in memory only") {
			t.Errorf("%s on a runner without gVisor: %d %s", path, r.status, r.body)
		}
	}
	if r := h.do(t, h.keyA, "POST", "/v1/sessions/"+mem.ID+"/pause", ""); r.status != 501 {
		t.Errorf("the native pause on a runner without gVisor: %d %s", r.status, r.body)
	}
}
