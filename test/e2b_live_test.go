package test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/store/storetest"
)

// needsGVisor skips (or, under GANTRY_TEST_REQUIRE, fails) a test of live
// state where gantry's runners cannot run sessions under gVisor: runsc
// and root are needed.
func needsGVisor(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("runsc"); err != nil || os.Geteuid() != 0 {
		storetest.Unavailable(t, "live state needs runsc (scripts/ensure-runsc.sh) and root")
	}
}

// e2bLifecycle is E2B's SandboxLifecycle as the SDK reads it.
type e2bLifecycle struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

// TestE2BLiveState drives E2B's own SDKs (npm e2b 2.51, @e2b/code-interpreter
// 2.8, unmodified) through a sandbox's live state against gantry dev, whose
// runner runs sandboxes under gVisor: pause and connect, lifecycle's pause
// at the timeout with and without autoResume, snapshots, and forks; another
// tenant reaches none of it.
func TestE2BLiveState(t *testing.T) {
	e2bClients(t)
	needsGVisor(t)
	d := startDev(t, "GANTRY_RUNNER_SLOTS=4", "GANTRY_SWEEP_INTERVAL=1s")
	d.cli(t, "tenants", "create", "e2b-live-other")
	otherKey := regexp.MustCompile(`gk_\S+`).FindString(d.cli(t, "keys", "create", "e2b-live-other", "e2b live test"))
	drive := func(t *testing.T, scenario string, out any) {
		t.Helper()
		driveE2B(t, d, otherKey, nil, scenario, out)
	}

	t.Run("pause, connect", func(t *testing.T) {
		var got struct {
			SandboxID       string       `json:"sandboxId"`
			Paused          bool         `json:"paused"`
			PauseMS         int          `json:"pauseMs"`
			PausedAgain     bool         `json:"pausedAgain"`
			State           string       `json:"state"`
			ListedPaused    []string     `json:"listedPaused"`
			ListedRunning   []string     `json:"listedRunning"`
			CallWhilePaused e2bThrown    `json:"callWhilePaused"`
			Lifecycle       e2bLifecycle `json:"lifecycle"`
			ResumeMS        int          `json:"resumeMs"`
			AfterResume     struct {
				Text   string   `json:"text"`
				Stdout []string `json:"stdout"`
			} `json:"afterResume"`
			File          string    `json:"file"`
			StateAfter    string    `json:"stateAfter"`
			SameObject    string    `json:"sameObject"`
			PauseNoMemory e2bThrown `json:"pauseNoMemory"`
		}
		drive(t, "pause", &got)
		if !got.Paused || got.PausedAgain || got.State != "paused" {
			t.Errorf("pause() %v, again %v (want false: it is paused), getInfo state %q", got.Paused, got.PausedAgain, got.State)
		}
		if !slices.Contains(got.ListedPaused, got.SandboxID) || slices.Contains(got.ListedRunning, got.SandboxID) {
			t.Errorf("list by state: paused %v, running %v", got.ListedPaused, got.ListedRunning)
		}
		if !strings.Contains(got.CallWhilePaused.Message, "409") {
			t.Errorf("a call to a paused sandbox without autoResume: %+v", got.CallWhilePaused)
		}
		if got.Lifecycle != (e2bLifecycle{OnTimeout: "kill"}) {
			t.Errorf("lifecycle %+v", got.Lifecycle)
		}
		if got.AfterResume.Text != "42" || strings.Join(got.AfterResume.Stdout, "") != "True\n" || got.File != "kept" || got.StateAfter != "running" {
			t.Errorf("after connect: %+v, file %q, state %q", got.AfterResume, got.File, got.StateAfter)
		}
		if got.SameObject != "42" {
			t.Errorf("the first sandbox object after the resume: %q", got.SameObject)
		}
		if !strings.Contains(got.PauseNoMemory.Message, "501") {
			t.Errorf("pause({keepMemory: false}): %+v", got.PauseNoMemory)
		}
		t.Logf("pause() %d ms; connect() to the first cell's answer %d ms", got.PauseMS, got.ResumeMS)
	})

	t.Run("lifecycle pause at timeout, autoResume", func(t *testing.T) {
		var got struct {
			Lifecycles         []e2bLifecycle `json:"lifecycles"`
			States             []string       `json:"states"`
			AutoCell           string         `json:"autoCell"`
			AutoState          string         `json:"autoState"`
			ManualCall         e2bThrown      `json:"manualCall"`
			ManualState        string         `json:"manualState"`
			ManualAfterConnect string         `json:"manualAfterConnect"`
			FilesystemOnly     e2bThrown      `json:"filesystemOnly"`
		}
		drive(t, "autopause", &got)
		if !slices.Equal(got.Lifecycles, []e2bLifecycle{{"pause", true}, {"pause", false}}) {
			t.Errorf("lifecycles %+v", got.Lifecycles)
		}
		if !slices.Equal(got.States, []string{"paused", "paused"}) {
			t.Fatalf("states at the timeout: %v", got.States)
		}
		if got.AutoCell != "10" || got.AutoState != "running" {
			t.Errorf("autoResume: a cell answered %q, state after %q", got.AutoCell, got.AutoState)
		}
		if !strings.Contains(got.ManualCall.Message, "409") || got.ManualState != "paused" || got.ManualAfterConnect != "12" {
			t.Errorf("without autoResume: a cell %+v, state %q, after connect %q", got.ManualCall, got.ManualState, got.ManualAfterConnect)
		}
		if !strings.Contains(got.FilesystemOnly.Message, "501") {
			t.Errorf("keepMemory: false: %+v", got.FilesystemOnly)
		}
	})

	t.Run("snapshots", func(t *testing.T) {
		var got struct {
			SandboxID  string `json:"sandboxId"`
			SnapshotMS int    `json:"snapshotMs"`
			Snapshot   struct {
				SnapshotID string   `json:"snapshotId"`
				Names      []string `json:"names"`
			} `json:"snapshot"`
			FromSnapshot    string   `json:"fromSnapshot"`
			RestoreMS       int      `json:"restoreMs"`
			FileFrom        string   `json:"fileFrom"`
			FromTemplate    string   `json:"fromTemplate"`
			ByName          string   `json:"byName"`
			Original        string   `json:"original"`
			Listed          []string `json:"listed"`
			ListedOfSandbox []string `json:"listedOfSandbox"`
			ListedOfOther   []string `json:"listedOfOther"`
			OtherTenant     struct {
				Create   e2bThrown `json:"create"`
				List     []string  `json:"list"`
				Delete   bool      `json:"delete"`
				Snapshot e2bThrown `json:"snapshot"`
			} `json:"otherTenant"`
			Deleted           bool      `json:"deleted"`
			DeletedAgain      bool      `json:"deletedAgain"`
			CreateAfterDelete e2bThrown `json:"createAfterDelete"`
		}
		drive(t, "snapshot", &got)
		id := got.Snapshot.SnapshotID
		if !strings.HasPrefix(id, "snp_") || len(got.Snapshot.Names) != 1 || !strings.HasPrefix(got.Snapshot.Names[0], "snap-") {
			t.Fatalf("createSnapshot: %+v", got.Snapshot)
		}
		if got.FromSnapshot != "at the snapshot" || got.FileFrom != "snapped" || got.FromTemplate != id || got.ByName != "at the snapshot" {
			t.Errorf("Sandbox.create(snapshot): %q, file %q, template %q; by name %q", got.FromSnapshot, got.FileFrom, got.FromTemplate, got.ByName)
		}
		if got.Original != "after it" {
			t.Errorf("the snapshotted sandbox went on: %q", got.Original)
		}
		if !slices.Contains(got.Listed, id) || !slices.Equal(got.ListedOfSandbox, []string{id}) || len(got.ListedOfOther) != 0 {
			t.Errorf("listSnapshots: all %v, the sandbox's %v, another's %v", got.Listed, got.ListedOfSandbox, got.ListedOfOther)
		}
		o := got.OtherTenant
		if !strings.Contains(o.Create.Message, "404") && o.Create.Error != "NotFoundError" || slices.Contains(o.List, id) || o.Delete ||
			o.Snapshot.Error != "SandboxNotFoundError" {
			t.Errorf("another tenant: %+v", o)
		}
		if !got.Deleted || got.DeletedAgain || got.CreateAfterDelete.Error == "" {
			t.Errorf("deleteSnapshot %v, again %v; create after %+v", got.Deleted, got.DeletedAgain, got.CreateAfterDelete)
		}
		t.Logf("createSnapshot %d ms; Sandbox.create(snapshot) to the first cell's answer %d ms", got.SnapshotMS, got.RestoreMS)
	})

	t.Run("fork", func(t *testing.T) {
		var got struct {
			ForkMS      int                  `json:"forkMs"`
			Forks       []any                `json:"forks"`
			InForks     []string             `json:"inForks"`
			Values      []string             `json:"values"`
			OnlyA       []string             `json:"onlyA"`
			OnlyB       []string             `json:"onlyB"`
			Shared      string               `json:"shared"`
			TooMany     e2bThrown            `json:"tooMany"`
			Fork4MS     int                  `json:"fork4Ms"`
			Four        []any                `json:"four"`
			OtherTenant map[string]e2bThrown `json:"otherTenant"`
		}
		drive(t, "fork", &got)
		if len(got.Forks) != 2 || !slices.Equal(got.InForks, []string{"parent", "parent"}) {
			t.Fatalf("fork({count: 2}): %v, v in them %v", got.Forks, got.InForks)
		}
		if !slices.Equal(got.Values, []string{"parent", "a", "b"}) || !slices.Equal(got.OnlyA, []string{"no", "yes", "no"}) ||
			!slices.Equal(got.OnlyB, []string{"no", "no", "yes"}) || got.Shared != "from the parent" {
			t.Errorf("apart: values %v, a's file %v, b's /tmp file %v, the parent's file %q", got.Values, got.OnlyA, got.OnlyB, got.Shared)
		}
		if !strings.Contains(got.TooMany.Message, "400") {
			t.Errorf("fork({count: 1000}): %+v", got.TooMany)
		}
		if !slices.Equal(got.Four, []any{"sandbox", "sandbox", "sandbox", "sandbox"}) {
			t.Errorf("fork of 4: %v", got.Four)
		}
		for op, e := range got.OtherTenant {
			if e.Error != "SandboxNotFoundError" {
				t.Errorf("another tenant's %s: %+v", op, e)
			}
		}
		t.Logf("fork N=2 %d ms, N=4 %d ms", got.ForkMS, got.Fork4MS)
	})
}
