package sandbox

import (
	"context"
	"io/fs"
	"net/http"

	"github.com/gantryhq/gantry/ingress/service"
)

// envd's filesystem service over the session's live file operations:
// files as the sandbox sees them, E2B's /home/user being the workspace.

func (s *Server) fsStat(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	return s.fsEntry(w, r, c, (*service.Live).Stat)
}

func (s *Server) fsMakeDir(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	return s.fsEntry(w, r, c, (*service.Live).Mkdir)
}

// fsEntry serves a call on one path answering its entry: op is the
// operation, a method of service.Live (Stat, Mkdir).
func (s *Server) fsEntry(w http.ResponseWriter, r *http.Request, c caller,
	op func(*service.Live, context.Context, string) (service.FileEntry, error)) *rpcError {
	var req pathRequest
	if e := decodeAsUser(r, &req); e != nil {
		return e
	}
	return s.answerEntry(w, r, c, func(ctx context.Context, l *service.Live) (service.FileEntry, error) {
		return op(l, ctx, toSandbox(req.Path))
	})
}

// answerEntry runs a file operation that yields an entry and answers it.
func (s *Server) answerEntry(w http.ResponseWriter, r *http.Request, c caller,
	op func(ctx context.Context, l *service.Live) (service.FileEntry, error)) *rpcError {
	live, err := s.live(r.Context(), c)
	if err != nil {
		return s.rpcError(c, err)
	}
	entry, err := op(r.Context(), live)
	if err != nil {
		return s.rpcError(c, err)
	}
	writeUnary(w, entryResponse{Entry: entryOf(entry)}, nil)
	return nil
}

func (s *Server) fsListDir(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	var req pathRequest
	if e := decodeAsUser(r, &req); e != nil {
		return e
	}
	depth := int(max(req.Depth, 1))
	live, err := s.live(r.Context(), c)
	if err != nil {
		return s.rpcError(c, err)
	}
	entries, err := live.ListDir(r.Context(), toSandbox(req.Path), min(depth, 64))
	if err != nil {
		return s.rpcError(c, err)
	}
	out := listDirResponse{Entries: make([]entryInfo, 0, len(entries))}
	for _, e := range entries {
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
	return s.answerEntry(w, r, c, func(ctx context.Context, l *service.Live) (service.FileEntry, error) {
		return l.Move(ctx, toSandbox(req.Source), toSandbox(req.Destination))
	})
}

func (s *Server) fsRemove(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	var req pathRequest
	if e := decodeAsUser(r, &req); e != nil {
		return e
	}
	live, err := s.live(r.Context(), c)
	if err == nil {
		err = live.Remove(r.Context(), toSandbox(req.Path))
	}
	if err != nil {
		return s.rpcError(c, err)
	}
	writeUnary(w, struct{}{}, nil)
	return nil
}

// entryOf is envd's EntryInfo of a sandbox entry.
func entryOf(e service.FileEntry) entryInfo {
	mode := fs.FileMode(e.Mode & 0o777)
	out := entryInfo{Name: e.Name, Path: fromSandbox(e.Path), Size: e.Size, Owner: e.Owner, Group: e.Group, ModifiedTime: e.Modified.UTC()}
	switch e.Type {
	case service.FileRegular:
		out.Type = "FILE_TYPE_FILE"
	case service.FileDir:
		out.Type, mode = "FILE_TYPE_DIRECTORY", mode|fs.ModeDir
	case service.FileSymlink:
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
