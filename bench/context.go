package main

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/gantryhq/gantry/codemode/codemodetest"
)

// contextRows measures what an agent's context holds on a task over an
// upstream MCP server with 60 tools and large results (three customers'
// order histories, about 100 KB each, joined): direct tool calls against
// gantry's code toolset (tools/list with toolsets=code, search_tools, the
// program, its output). The figures are byte counts, the same on every run
// (codemodetest.MeasureContext says what is counted).
func contextRows(c *client) ([]row, error) {
	shop := httptest.NewServer(codemodetest.Handler(codemodetest.Shop()))
	defer shop.Close()
	cost, err := codemodetest.MeasureContext(context.Background(), c.url, c.key, shop.URL+"/mcp")
	if err != nil {
		return nil, fmt.Errorf("context measurement: %w", err)
	}
	saved := 100 * cost.Saved()
	kb := func(n int) string { return fmt.Sprintf("%.1f KB", float64(n)/1000) }
	return []row{
		{Name: "context: 60-tool upstream task, model bytes (gantry toolsets=code vs direct tool calls)",
			Gantry: kb(cost.Gantry.ModelBytes), Baseline: kb(cost.Direct.ModelBytes),
			Ratio: fmt.Sprintf("%.2f%% saved", saved), Target: "≥ 99% saved", Met: met(cost.Saved() >= 0.99), Value: saved},
		{Name: "context: same task, bytes on the wire (JSON of tools/list and of every call and result)",
			Gantry: kb(cost.Gantry.WireBytes), Baseline: kb(cost.Direct.WireBytes),
			Ratio: fmt.Sprintf("%.2f%% saved", 100*cost.SavedWire()), Value: 100 * cost.SavedWire()},
		{Name: "context: gantry's tools/list, toolsets=code vs all tools (model bytes)",
			Gantry: kb(cost.Gantry.Steps[0].ModelBytes), Baseline: kb(cost.AllTools), Value: float64(cost.Gantry.Steps[0].ModelBytes)},
	}, nil
}
