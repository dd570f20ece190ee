package sandbox

import (
	"io/fs"
	"net/http"

	"github.com/gantryhq/gantry/agent/wire"
)

// envd's filesystem service over the session's live file operations:
// files as the sandbox sees them, E2B's /home/user being the workspace.

func (s *Server) fsStat(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	return s.fsEntry(w, r, c, wire.OpStat)
}

func (s *Server) fsMakeDir(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	return s.fsEntry(w, r, c, wire.OpMkdir)
}

// fsEntry serves a call on one path answering its entry.
func (s *Server) fsEntry(w http.ResponseWriter, r *http.Request, c caller, op wire.Op) *rpcError {
	var req pathRequest
	if e := decodeAsUser(r, &req); e != nil {
		return e
	}
	return s.answerEntry(w, r, c, wire.LiveOp{Op: op, Path: toSandbox(req.Path)})
}

// answerEntry runs a file operation that yields an entry and answers it.
func (s *Server) answerEntry(w http.ResponseWriter, r *http.Request, c caller, op wire.LiveOp) *rpcError {
	reply, err := s.sandboxes.LiveOp(r.Context(), c.p, c.session, op)
	if err != nil {
		return s.rpcError(c, err)
	}
	if reply.Entry == nil {
		return errorf(codeInternal, "the sandbox answered no entry")
	}
	writeUnary(w, entryResponse{Entry: entryOf(*reply.Entry)}, nil)
	return nil
}

func (s *Server) fsListDir(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	var req pathRequest
	if e := decodeAsUser(r, &req); e != nil {
		return e
	}
	depth := int(max(req.Depth, 1))
	reply, err := s.sandboxes.LiveOp(r.Context(), c.p, c.session, wire.LiveOp{Op: wire.OpListDir, Path: toSandbox(req.Path), Depth: min(depth, 64)})
	if err != nil {
		return s.rpcError(c, err)
	}
	out := listDirResponse{Entries: make([]entryInfo, 0, len(reply.Entries))}
	for _, e := range reply.Entries {
		out.Entries = append(out.Entries, entryOf(e))
	}
	writeUnary(w, out, nil)
	return nil
}

func (s *Server) fsMove(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	var req moveRequest
	if e := decodeAsUser(r, &req); e != nil {
		return e
	}
	return s.answerEntry(w, r, c, wire.LiveOp{Op: wire.OpMove, Path: toSandbox(req.Source), Dest: toSandbox(req.Destination)})
}

func (s *Server) fsRemove(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	var req pathRequest
	if e := decodeAsUser(r, &req); e != nil {
		return e
	}
	if _, err := s.sandboxes.LiveOp(r.Context(), c.p, c.session, wire.LiveOp{Op: wire.OpRemove, Path: toSandbox(req.Path)}); err != nil {
		return s.rpcError(c, err)
	}
	writeUnary(w, struct{}{}, nil)
	return nil
}

// entryOf is envd's EntryInfo of a sandbox entry.
func entryOf(e wire.FileEntry) entryInfo {
	mode := fs.FileMode(e.Mode & 0o777)
	out := entryInfo{Name: e.Name, Path: fromSandbox(e.Path), Size: e.Size, Owner: e.Owner, Group: e.Group, ModifiedTime: e.Modified.UTC()}
	switch e.Type {
	case "file":
		out.Type = "FILE_TYPE_FILE"
	case "dir":
		out.Type, mode = "FILE_TYPE_DIRECTORY", mode|fs.ModeDir
	case "symlink":
		out.Type, mode = "FILE_TYPE_SYMLINK", mode|fs.ModeSymlink
		target := e.Target
		out.SymlinkTarget = &target
	default:
		out.Type = "FILE_TYPE_UNSPECIFIED"
	}
	out.Mode, out.Permissions = uint32(mode), mode.String()
	if e.Path == workspace {
		out.Name = "user"
	}
	return out
}
