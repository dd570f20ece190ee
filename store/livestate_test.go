package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestForkRecordedBeforeItsCheckpoint: a fork whose children all live on
// the runner that forked them is recorded before its checkpoint is
// stored; the checkpoint then becomes the live state of the children that
// have none of their own, and not of one paused meanwhile.
func TestForkRecordedBeforeItsCheckpoint(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	req, err := jobs.SessionRequest{Stateful: true, Durable: new(true)}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	parent, err := st.CreateSession(ctx, a, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.AcquireSession(ctx, parent.ID, "r1", time.Minute); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	ids := []string{jobs.NewID("ses"), jobs.NewID("ses"), jobs.NewID("ses")}
	var children []store.ForkChild
	for i, id := range ids {
		children = append(children, store.ForkChild{ID: id, Live: "ctr" + string(rune('0'+i)) + "/1"})
	}
	if _, err := st.ForkSession(ctx, parent.ID, "r1", store.Checkpoint{}, 0, children); err != nil {
		t.Fatal(err)
	}
	checkpointOf := func(id string) string {
		t.Helper()
		state, ok, err := st.AcquireSession(ctx, id, "r2", time.Minute)
		if err != nil || !ok {
			t.Fatalf("acquire %s: %v %v", id, ok, err)
		}
		if released, _, err := st.ReleaseSession(ctx, id, "r2", false); err != nil || !released {
			t.Fatalf("release %s: %v %v", id, released, err)
		}
		return state.Checkpoint.ID
	}
	for _, id := range ids {
		if got := checkpointOf(id); got != "" {
			t.Fatalf("%s names checkpoint %q before it is stored", id, got)
		}
	}

	// One child pauses (its own checkpoint), one closes, before the fork's
	// checkpoint is stored.
	own := store.Checkpoint{ID: jobs.NewID("chk"), TenantID: a, Key: blob.CheckpointKey(a, "own"), Image: "i", Runtime: "r", Version: 1}
	if _, ok, err := st.AcquireSession(ctx, ids[1], "r1", time.Minute); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if err := st.PauseSession(ctx, ids[1], "r1", own); err != nil {
		t.Fatal(err)
	}
	if released, _, err := st.ReleaseSession(ctx, ids[1], "r1", false); err != nil || !released {
		t.Fatalf("release: %v %v", released, err)
	}
	if _, err := st.CloseSession(ctx, a, ids[2]); err != nil {
		t.Fatal(err)
	}

	cp := store.Checkpoint{ID: jobs.NewID("chk"), TenantID: a, Key: blob.CheckpointKey(a, "fork"), Image: "i", Runtime: "r", Version: 1, Bytes: 5}
	n, err := st.ForkCheckpoint(ctx, cp, ids)
	if err != nil || n != 1 {
		t.Fatalf("fork checkpoint: took %d, %v; want 1", n, err)
	}
	if got := checkpointOf(ids[0]); got != cp.ID {
		t.Errorf("the child with none: %q, want the fork's %q", got, cp.ID)
	}
	if got := checkpointOf(ids[1]); got != own.ID {
		t.Errorf("the paused child: %q, want its own %q", got, own.ID)
	}
}
