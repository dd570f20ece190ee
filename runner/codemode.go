package runner

import (
	"context"
	"maps"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// codeMode prepares a job for code mode: the bridge that answers its
// program's tool requests, the generated per-server modules, and the
// environment that makes them importable. Without a registry (code mode
// not configured) it returns nothing and the job runs without a bridge.
func (r *Runner) codeMode(ctx context.Context, claim store.Claim) (*codemode.Bridge, []wire.File, map[string]string, error) {
	env := claim.Spec.Env
	if r.cfg.CodeMode == nil {
		return nil, nil, env, nil
	}
	gen, err := r.cfg.CodeMode.Wrappers(ctx, claim.TenantID)
	if err != nil {
		return nil, nil, nil, err
	}
	files := make([]wire.File, 0, len(gen))
	for _, f := range gen {
		files = append(files, wire.File{Path: f.Path, Data: f.Content})
	}
	env = maps.Clone(env)
	if env == nil {
		env = map[string]string{}
	}
	env["GANTRY_BRIDGE"] = codemode.SocketPath
	env["PYTHONPATH"] = joinPath(codemode.PythonGenDir, env["PYTHONPATH"])
	env["NODE_PATH"] = joinPath(codemode.NodeGenDir, env["NODE_PATH"])
	b := r.cfg.CodeMode.NewBridge(claim.TenantID, claim.Spec.Limits.ToolCalls)
	return b, files, env, nil
}

func joinPath(dir, rest string) string {
	if rest == "" {
		return dir
	}
	return dir + ":" + rest
}

// toolCalls returns the bridge's record of calls (none without a bridge).
func toolCalls(b *codemode.Bridge) []jobs.ToolCall {
	if b == nil {
		return nil
	}
	return b.Calls()
}
