package mcpapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/gantryhq/gantry/jobs"
)

// A stateful session's live state as tools (service.Sandboxes' Pause,
// Snapshot and Fork), in the sessions toolset: an agent pauses a session it
// will come back to, snapshots one to start others from (create_session's
// snapshot), and forks one to try several things from one state. There is
// no resume tool: a paused session's next call resumes it.

// liveNote says what each live state tool keeps, and where it is offered.
const liveNote = " Needs a stateful session on a gantry whose runners keep live state under gVisor (otherwise the call says so)."

type (
	// pauseSessionArgs are pause_session's.
	pauseSessionArgs struct {
		sessionArgs
	}
	// sessionPaused is pause_session's answer.
	sessionPaused struct {
		SessionID string `json:"session_id"`
		State     string `json:"state"`
	}
	// snapshotSessionArgs are snapshot_session's.
	snapshotSessionArgs struct {
		sessionArgs
		Name string `json:"name,omitempty"`
	}
	// sessionSnapshot is snapshot_session's answer.
	sessionSnapshot struct {
		SnapshotID string `json:"snapshot_id"`
		Name       string `json:"name,omitempty"`
		Bytes      int64  `json:"bytes"`
	}
	// forkSessionArgs are fork_session's.
	forkSessionArgs struct {
		sessionArgs
		Count int `json:"count,omitempty"`
	}
	// sessionForked is fork_session's answer.
	sessionForked struct {
		SessionIDs []string `json:"session_ids"`
	}
)

func (s *Server) addLiveStateTools(ms *server.MCPServer, tools *toolCatalog) {
	tools.add(ms, toolsetSessions, mcp.NewTool("pause_session",
		mcp.WithDescription("Pause a stateful session: its whole live state (variables, processes, /tmp, files) is saved and it holds no memory until its next call, which resumes it as it was."+liveNote),
		mcp.WithTitleAnnotation("Pause session"),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[pauseSessionArgs](toolNote{}),
		outputOf[sessionPaused](toolNote{}),
	), s.toolPauseSession)

	tools.add(ms, toolsetSessions, mcp.NewTool("snapshot_session",
		mcp.WithDescription("Save a stateful session's live state and files as a snapshot (it goes on); create_session with the snapshot starts new sessions from it."+liveNote),
		mcp.WithTitleAnnotation("Snapshot session"),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[snapshotSessionArgs](toolNote{props: map[string]js{"name": {"maxLength": 200}}}),
		outputOf[sessionSnapshot](toolNote{}),
	), s.toolSnapshotSession)

	tools.add(ms, toolsetSessions, mcp.NewTool("fork_session",
		mcp.WithDescription("Fork a stateful session into count new ones, each going on from its state now (variables, processes, /tmp, files), apart from it and from each other. Random generators continue alike in each: reseed."+liveNote),
		mcp.WithTitleAnnotation("Fork session"),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[forkSessionArgs](toolNote{props: map[string]js{"count": {"minimum": 1, "maximum": jobs.MaxForks, "description": "default 1"}}}),
		outputOf[sessionForked](toolNote{}),
	), s.toolForkSession)
}

func (s *Server) toolPauseSession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args pauseSessionArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	sess, err := s.svc.Sandboxes().Pause(ctx, p, args.SessionID)
	if err != nil {
		return toolError(err), nil
	}
	return mcp.NewToolResultStructured(sessionPaused{SessionID: sess.ID, State: string(sess.State)},
		"session "+sess.ID+" paused; its next call resumes it"), nil
}

func (s *Server) toolSnapshotSession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args snapshotSessionArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	snap, err := s.svc.Sandboxes().Snapshot(ctx, p, args.SessionID, jobs.SnapshotRequest{Name: args.Name})
	if err != nil {
		return toolError(err), nil
	}
	return mcp.NewToolResultStructured(sessionSnapshot{SnapshotID: snap.ID, Name: snap.Name, Bytes: snap.Bytes},
		fmt.Sprintf("snapshot %s of session %s saved; create_session with snapshot %q starts a session from it", snap.ID, args.SessionID, snap.ID)), nil
}

func (s *Server) toolForkSession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args forkSessionArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	fork, err := s.svc.Sandboxes().Fork(ctx, p, args.SessionID, jobs.ForkRequest{Count: args.Count})
	if err != nil {
		return toolError(err), nil
	}
	out := sessionForked{SessionIDs: make([]string, len(fork.Sessions))}
	for i, sess := range fork.Sessions {
		out.SessionIDs[i] = sess.ID
	}
	return mcp.NewToolResultStructured(out, fmt.Sprintf("session %s forked into %s", args.SessionID, strings.Join(out.SessionIDs, ", "))), nil
}
