package codemode_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/gantryhq/gantry/codemode"
)

// emptyRegistry is a Store with no servers: every lookup misses.
type emptyRegistry struct{}

func (emptyRegistry) CreateMCPServer(context.Context, codemode.ServerRecord, []codemode.Tool) (codemode.ServerRecord, error) {
	return codemode.ServerRecord{}, codemode.ErrNotFound
}
func (emptyRegistry) UpdateMCPServer(context.Context, codemode.ServerRecord, []codemode.Tool, func(string) bool) (codemode.ServerRecord, error) {
	return codemode.ServerRecord{}, codemode.ErrNotFound
}
func (emptyRegistry) SetMCPTools(context.Context, string, string, int, []codemode.Tool, string) error {
	return nil
}
func (emptyRegistry) GetMCPServer(context.Context, string, string) (codemode.ServerRecord, error) {
	return codemode.ServerRecord{}, codemode.ErrNotFound
}
func (emptyRegistry) ListMCPServers(context.Context, string) ([]codemode.ServerRecord, error) {
	return nil, nil
}
func (emptyRegistry) DeleteMCPServer(context.Context, string, string) error {
	return codemode.ErrNotFound
}
func (emptyRegistry) ClaimStaleMCPServers(context.Context, time.Duration, int) ([]codemode.ServerRecord, error) {
	return nil, nil
}
func (emptyRegistry) MCPTools(context.Context, string, string) ([]codemode.Tool, error) {
	return nil, nil
}
func (emptyRegistry) GetMCPTool(context.Context, string, string, string) (codemode.Tool, error) {
	return codemode.Tool{}, codemode.ErrNotFound
}
func (emptyRegistry) SearchMCPTools(context.Context, string, string, int) ([]codemode.ToolHit, error) {
	return nil, nil
}

// FuzzBridgeHandle feeds arbitrary requests from a sandbox to the bridge:
// it never panics and always answers one JSON object with ok or an error.
func FuzzBridgeHandle(f *testing.F) {
	for _, s := range []string{`{"op":"servers"}`, `{"op":"search","query":"orders","detail":"full","limit":5}`,
		`{"op":"call","server":"crm","tool":"x","args":{"a":1}}`, `{"op":"describe","server":"s","tool":"t"}`, `[]`, `{"op":1}`} {
		f.Add([]byte(s))
	}
	log := slog.New(slog.DiscardHandler)
	reg := codemode.NewRegistry(emptyRegistry{}, nil, codemode.NewUpstreams(codemode.Config{}, log), log)
	f.Fuzz(func(t *testing.T, req []byte) {
		b := reg.NewBridge("ten_fuzz", 10)
		var out struct {
			OK    *bool           `json:"ok"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(b.Handle(context.Background(), req), &out); err != nil || out.OK == nil || (!*out.OK && len(out.Error) == 0) {
			t.Fatalf("answer to %q: %+v %v", req, out, err)
		}
	})
}
