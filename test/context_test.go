package test

import (
	"context"
	"testing"

	"github.com/gantryhq/gantry/codemode/codemodetest"
)

// TestContextSaved is the toolsets issue's target: on a task over an
// upstream MCP server with 60 tools and large results (three customers'
// order histories, about 100 KB each, joined in code), an agent on
// gantry's code toolset puts at most 1% of what direct tool calls put into
// the model's context. The counts are bytes, so the test is exact.
func TestContextSaved(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	shop := codemodetest.ServeHTTP(t, codemodetest.Shop())
	cost, err := codemodetest.MeasureContext(context.Background(), d.url, d.key, shop)
	if err != nil {
		t.Fatal(err)
	}
	for name, ex := range map[string]codemodetest.Exchange{"direct": cost.Direct, "gantry (toolsets=code)": cost.Gantry} {
		t.Logf("%s: %d bytes for the model, %d on the wire", name, ex.ModelBytes, ex.WireBytes)
		for _, s := range ex.Steps {
			t.Logf("  %-24s %7d %7d", s.Name, s.ModelBytes, s.WireBytes)
		}
	}
	t.Logf("saved: %.2f%% of the model's context, %.2f%% on the wire; gantry's tools/list without toolsets: %d bytes for the model",
		100*cost.Saved(), 100*cost.SavedWire(), cost.AllTools)
	if cost.Saved() < 0.99 {
		t.Errorf("gantry's exchange is %d bytes, %.2f%% of the direct one's %d; the target is at most 1%%",
			cost.Gantry.ModelBytes, 100*(1-cost.Saved()), cost.Direct.ModelBytes)
	}
}
