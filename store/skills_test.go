package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/skills/skillstest"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

func TestSkills(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	b, _ := storetest.Tenant(t, st, "b")
	builtins, err := skills.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := st.SyncBuiltins(ctx, builtins); err != nil || n != len(builtins) {
		t.Fatalf("sync: %d %v", n, err)
	}
	if n, _ := st.SyncBuiltins(ctx, builtins); n != 0 {
		t.Errorf("unchanged built-ins stored again: %d", n)
	}

	mine := skills.Skill{Name: "tidy-logs", Description: "Parse and summarise web server logs", Body: "Use awk.\n", Tags: []string{"logs"}}
	rec, err := st.SaveSkill(ctx, a, mine)
	if err != nil || rec.Version != 1 || rec.Builtin {
		t.Fatalf("save: %+v %v", rec, err)
	}
	mine.Body = "Use awk, then sort.\n"
	if rec, _ = st.SaveSkill(ctx, a, mine); rec.Version != 2 {
		t.Fatalf("second save is version %d", rec.Version)
	}
	stale := mine
	stale.Version = 2
	if _, err := st.SaveSkill(ctx, a, stale); !errors.Is(err, store.ErrConflict) {
		t.Errorf("saving an existing version number: %v", err)
	}
	if got, _ := st.GetSkill(ctx, a, "tidy-logs", 1); got.Body != "Use awk.\n" {
		t.Errorf("old version not readable: %q", got.Body)
	}
	if got, _ := st.GetSkill(ctx, a, "tidy-logs", 0); got.Version != 2 {
		t.Errorf("current version %d", got.Version)
	}
	if _, err := st.GetSkill(ctx, b, "tidy-logs", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("tenant b read a's skill: %v", err)
	}
	if _, err := st.SaveSkill(ctx, a, skills.Skill{Name: "plotting", Description: "mine", Body: "x"}); !errors.Is(err, store.ErrBuiltinSkill) {
		t.Errorf("saving over a built-in: %v", err)
	}
	if err := st.DeleteSkill(ctx, a, "plotting"); !errors.Is(err, store.ErrBuiltinSkill) {
		t.Errorf("deleting a built-in: %v", err)
	}
	vs, err := st.SkillVersions(ctx, a, "tidy-logs")
	if err != nil || len(vs) != 2 || vs[0].Version != 2 {
		t.Errorf("versions: %+v %v", vs, err)
	}
	cur, _ := st.CurrentSkills(ctx, a)
	if len(cur) != len(builtins)+1 || cur[0].Name != "tidy-logs" {
		t.Errorf("current skills of a: %d, first %s", len(cur), cur[0].Name)
	}
	if cur, _ := st.CurrentSkills(ctx, b); len(cur) != len(builtins) {
		t.Errorf("tenant b sees %d skills", len(cur))
	}
	stamp1, _ := st.SkillsStamp(ctx, a)
	if err := st.DeleteSkill(ctx, a, "tidy-logs"); err != nil {
		t.Fatal(err)
	}
	if stamp2, _ := st.SkillsStamp(ctx, a); stamp1 == stamp2 {
		t.Error("stamp did not change after a delete")
	}
	if _, err := st.GetSkill(ctx, a, "tidy-logs", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted skill: %v", err)
	}
}

// TestAgentSkillsStored: every standard field and binary files come back
// from Postgres exactly as saved; built-ins that no longer ship go away;
// a tenant's skills as a whole are capped.
func TestAgentSkillsStored(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	for _, name := range []string{skillstest.PDF, skillstest.EveryField} {
		want := skillstest.Skill(t, name)
		rec, err := st.SaveSkill(ctx, a, want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.GetSkill(ctx, a, name, 0)
		if err != nil {
			t.Fatal(err)
		}
		want.Version = rec.Version
		if !reflect.DeepEqual(got.Skill, want) {
			t.Errorf("%s came back changed:\n got %+v\nwant %+v", name, got.Skill, want)
		}
	}

	old := skills.Skill{Name: "old-helper", Description: "d", Body: "b"}
	if err := old.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SyncBuiltins(ctx, []skills.Skill{old}); err != nil {
		t.Fatal(err)
	}
	builtins, _ := skills.Builtins()
	if _, err := st.SyncBuiltins(ctx, builtins); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetSkill(ctx, a, "old-helper", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a built-in that no longer ships is still there: %v", err)
	}

	blob := strings.Repeat("\x00\xff", skills.MaxFileBytes/2)
	var saved int
	for i := 0; ; i++ {
		sk := skills.Skill{Name: fmt.Sprintf("big-%d", i), Description: "d", Body: "b"}
		for j := range 3 {
			sk.Files = append(sk.Files, skills.File{Path: fmt.Sprintf("assets/%d.bin", j), Content: blob})
		}
		_, err := st.SaveSkill(ctx, a, sk)
		var e *skills.Error
		if errors.As(err, &e) {
			if !strings.Contains(e.Message, "at most 33554432") {
				t.Errorf("cap message: %s", e.Message)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		saved += sk.Size()
	}
	if saved > skills.MaxTenantBytes || saved < skills.MaxTenantBytes-4*skills.MaxFileBytes {
		t.Errorf("the cap let %d bytes in", saved)
	}
	// A new version of an existing skill replaces its size, so it fits.
	if _, err := st.SaveSkill(ctx, a, skills.Skill{Name: "big-0", Description: "d", Body: "smaller now"}); err != nil {
		t.Errorf("shrinking a skill under the cap: %v", err)
	}
}

// TestSkillSearchRanking checks the ranking on a fixed corpus: the built-ins
// plus decoys that mention the query words less prominently.
func TestSkillSearchRanking(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	builtins, _ := skills.Builtins()
	if _, err := st.SyncBuiltins(ctx, builtins); err != nil {
		t.Fatal(err)
	}
	decoys := []skills.Skill{
		{Name: "report-writing", Description: "Write a markdown report of findings", Body: "A report may include a chart or a plot made elsewhere.\n"},
		{Name: "statistics-tests", Description: "Hypothesis tests with scipy (t-test, chi-square)", Body: "Check the histogram of residuals first.\n"},
		{Name: "geometry", Description: "Compute areas, distances and angles", Body: "Use math and numpy.\n"},
	}
	for _, d := range decoys {
		if _, err := st.SaveSkill(ctx, a, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ q, first string }{
		{"plot a histogram", "plotting"},
		{"chart", "plotting"},
		{"solve an equation", "symbolic-math"},
		{"derivative of sin", "symbolic-math"},
		{"clean a dataframe and group by", "data-analysis"},
		{"read a csv file", "csv-json-files"},
		{"json lines", "csv-json-files"},
		{"hypothesis test", "statistics-tests"},
	} {
		hits, err := st.SearchSkills(ctx, a, c.q, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || hits[0].Name != c.first {
			var names []string
			for _, h := range hits {
				names = append(names, fmt.Sprintf("%s(%.3f)", h.Name, h.Score))
			}
			t.Errorf("%q ranks %v; want %s first", c.q, names, c.first)
		}
	}
	if hits, _ := st.SearchSkills(ctx, a, "the and of", 5); len(hits) != 0 {
		t.Errorf("stop words matched %d skills", len(hits))
	}
}

// TestSyncBuiltinsConcurrently is several ingresses starting at once against
// a fresh database: each built-in skill is stored once, not once per replica.
func TestSyncBuiltinsConcurrently(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	builtins, err := skills.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	const replicas = 8
	errs := make(chan error, replicas)
	stored := make(chan int, replicas)
	for range replicas {
		go func() {
			n, err := st.SyncBuiltins(ctx, builtins)
			stored <- n
			errs <- err
		}()
	}
	total := 0
	for range replicas {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		total += <-stored
	}
	if total != len(builtins) {
		t.Errorf("%d replicas stored %d versions of %d built-ins, want one each", replicas, total, len(builtins))
	}
	for _, sk := range builtins {
		versions, err := st.SkillVersions(ctx, "", sk.Name)
		if err != nil || len(versions) != 1 {
			t.Errorf("%s: %d versions (%v), want 1", sk.Name, len(versions), err)
		}
	}
}
