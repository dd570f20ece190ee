package agent

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

// The agent's side of live operations (wire.LiveOp): each KindLive frame
// is served in a goroutine of its own, beside whatever the agent is doing
// for the runner, on the container's current live sandbox.

// maxLiveOps bounds the live operations in progress at once.
const maxLiveOps = 64

// maxListed bounds the entries one OpListDir answers, and maxListedBytes
// their names and link targets (an answer must fit in a NATS message of
// the default 1 MiB).
const (
	maxListed      = 10000
	maxListedBytes = 640 << 10
)

// serveLive serves a KindLive frame in a goroutine of its own, or answers
// busy when too many are in progress.
func (s *server) serveLive(payload []byte) {
	select {
	case s.liveOps <- struct{}{}:
		go func() {
			defer func() { <-s.liveOps }()
			s.liveOp(payload)
		}()
	default:
		var op wire.LiveOp
		_ = json.Unmarshal(payload, &op)
		_ = s.fw.JSON(wire.KindLive, wire.LiveReply{ID: op.ID, Error: &wire.LiveError{Code: wire.LiveErrBusy, Message: "too many live operations in progress"}})
	}
}

// liveOp serves one KindLive frame.
func (s *server) liveOp(payload []byte) {
	var op wire.LiveOp
	if err := json.Unmarshal(payload, &op); err != nil {
		_ = s.fw.JSON(wire.KindLive, wire.LiveReply{Error: &wire.LiveError{Code: wire.LiveErrInvalid, Message: "malformed live operation"}})
		return
	}
	reply, err := s.doLive(op)
	if err != nil {
		var le *wire.LiveError
		if !errors.As(err, &le) {
			le = &wire.LiveError{Code: wire.LiveErrFailed, Message: err.Error()}
		}
		reply = wire.LiveReply{Error: le}
	}
	reply.ID = op.ID
	if err := s.fw.JSON(wire.KindLive, reply); err != nil {
		// Not encodable, or over a frame: the caller still gets an
		// answer rather than waiting for one.
		_ = s.fw.JSON(wire.KindLive, wire.LiveReply{ID: op.ID, Error: &wire.LiveError{Code: wire.LiveErrFailed, Message: "the answer could not be sent: " + err.Error()}})
	}
}

var errNoLive = &wire.LiveError{Code: wire.LiveErrNoSandbox, Message: "this container holds no live sandbox (the session's next job makes one)"}

func (s *server) doLive(op wire.LiveOp) (wire.LiveReply, error) {
	s.liveMu.Lock()
	l := s.live
	s.liveMu.Unlock()
	if l == nil || l.isGone() {
		return wire.LiveReply{}, errNoLive
	}
	switch op.Op {
	case wire.OpSpawn, wire.OpInput, wire.OpCloseInput, wire.OpSignal, wire.OpList, wire.OpStatus:
		ps := l.processes()
		if ps == nil || ps.isGone() {
			return wire.LiveReply{}, errProcessesGone
		}
		switch op.Op {
		case wire.OpSpawn:
			env := make(map[string]string, len(op.SessionEnv)+len(op.Env))
			for k, v := range op.SessionEnv {
				env[k] = v
			}
			for k, v := range op.Env {
				env[k] = v
			}
			pid, err := ps.spawn(op, environ(env))
			return wire.LiveReply{Pid: pid}, err
		case wire.OpInput:
			return wire.LiveReply{}, ps.input(op.Pid, op.Data)
		case wire.OpCloseInput:
			return wire.LiveReply{}, ps.closeInput(op.Pid)
		case wire.OpSignal:
			return wire.LiveReply{}, ps.signal(op.Pid, op.Signal)
		case wire.OpList:
			return wire.LiveReply{Processes: ps.list()}, nil
		default:
			return ps.status(op.Pid)
		}
	case wire.OpStat, wire.OpListDir, wire.OpMkdir, wire.OpMove, wire.OpRemove, wire.OpRead, wire.OpWrite:
		return l.files(op)
	}
	return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrInvalid, Message: fmt.Sprintf("unknown live operation %q", op.Op)}
}

// processes is the sandbox's process service, nil if none was started.
func (l *liveSandbox) processes() *processService {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.procs
}

// startProcesses starts the live sandbox's process service unless it
// runs: a request to the session's interpreter, which must be idle (it is
// asked before a job's request). A failure is left for the operations to
// report.
func (s *server) startProcesses(l *liveSandbox) {
	if ps := l.processes(); ps != nil && !ps.isGone() {
		return
	}
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "processes"), os.NewFile(uintptr(pair[1]), "processes-child")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return
	}
	select {
	case <-l.answers: // written by the session's own code between jobs: not an answer
	default:
	}
	body, _ := json.Marshal(liveRequest{Mode: "processes"})
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, _, err := l.conn.WriteMsgUnix(append(msg, body...), syscall.UnixRights(int(theirs.Fd())), nil); err != nil {
		fc.Close()
		return
	}
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case a := <-l.answers:
		if a.Code != 0 {
			fc.Close()
			return
		}
	case <-l.gone:
		fc.Close()
		return
	case <-t.C:
		fc.Close()
		return
	}
	ps := newProcessService(fc.(*net.UnixConn), s.fw)
	l.mu.Lock()
	l.procs = ps
	l.mu.Unlock()
}

// files serves a file operation on the sandbox's filesystem as the
// sandbox sees it: through an os.Root at its root directory (the root of
// one of its processes), so that no path, .. or symbolic link reaches
// outside it, with the agent's uid, which is the sandbox's.
func (l *liveSandbox) files(op wire.LiveOp) (wire.LiveReply, error) {
	dir := "/"
	switch {
	case l.rootPid > 0:
		dir = "/proc/" + strconv.Itoa(l.rootPid) + "/root"
	case !l.agentRoot:
		return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrNoSandbox, Message: "the sandbox's root is not known (its init was never reported)"}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return wire.LiveReply{}, errNoLive
	}
	defer root.Close()
	rel, err := relPath(op.Path)
	if err != nil {
		return wire.LiveReply{}, err
	}
	if dir == "/" && (rel == "proc" || strings.HasPrefix(rel, "proc/")) {
		// The Container isolation: the sandbox's /proc is the agent's,
		// whose own files (/proc/self) the session's code may not reach.
		return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrPermission, Message: fmt.Sprintf("path '%s' is not available to file operations here", op.Path)}
	}
	switch op.Op {
	case wire.OpStat:
		e, err := entryOf(root, rel, newOwners(root))
		return wire.LiveReply{Entry: &e}, err
	case wire.OpListDir:
		entries, err := listDir(root, rel, max(op.Depth, 1))
		return wire.LiveReply{Entries: entries}, err
	case wire.OpMkdir:
		if _, err := root.Lstat(rel); err == nil {
			return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrExists, Message: fmt.Sprintf("%s already exists", op.Path)}
		}
		if err := root.MkdirAll(rel, 0o755); err != nil {
			return wire.LiveReply{}, fileError(op.Path, err)
		}
		e, err := entryOf(root, rel, newOwners(root))
		return wire.LiveReply{Entry: &e}, err
	case wire.OpMove:
		dest, err := relPath(op.Dest)
		if err != nil {
			return wire.LiveReply{}, err
		}
		if rel == "." || dest == "." {
			return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrInvalid, Message: "cannot move the root"}
		}
		if err := root.Rename(rel, dest); err != nil {
			return wire.LiveReply{}, fileError(op.Path, err)
		}
		e, err := entryOf(root, dest, newOwners(root))
		return wire.LiveReply{Entry: &e}, err
	case wire.OpRemove:
		if _, err := root.Lstat(rel); err != nil {
			return wire.LiveReply{}, fileError(op.Path, err)
		}
		if rel == "." {
			return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrInvalid, Message: "cannot remove the root"}
		}
		return wire.LiveReply{}, fileError(op.Path, root.RemoveAll(rel))
	case wire.OpRead:
		return readChunk(root, rel, op)
	case wire.OpWrite:
		return writeChunk(root, rel, op)
	}
	return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrInvalid, Message: "unknown file operation " + string(op.Op)}
}

// relPath turns an absolute sandbox path into one relative to its root.
func relPath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return "", &wire.LiveError{Code: wire.LiveErrInvalid, Message: fmt.Sprintf("path %q must be absolute", p)}
	}
	if c := path.Clean(p); c != "/" {
		return c[1:], nil
	}
	return ".", nil
}

// fileError words a filesystem error for a path as the sandbox knows it
// (the agent's own path to the sandbox never shows).
func fileError(p string, err error) error {
	if err == nil {
		return nil
	}
	var errno syscall.Errno
	errors.As(err, &errno)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &wire.LiveError{Code: wire.LiveErrNotFound, Message: fmt.Sprintf("path %s does not exist", p)}
	case errors.Is(err, fs.ErrExist):
		return &wire.LiveError{Code: wire.LiveErrExists, Message: fmt.Sprintf("%s already exists", p)}
	case errno == syscall.ENOTDIR:
		return &wire.LiveError{Code: wire.LiveErrNotDir, Message: fmt.Sprintf("a part of %s is not a directory", p)}
	case errno == syscall.EISDIR:
		return &wire.LiveError{Code: wire.LiveErrIsDir, Message: fmt.Sprintf("%s is a directory", p)}
	case errno == syscall.ENOSPC || errno == syscall.EDQUOT:
		return &wire.LiveError{Code: wire.LiveErrNoSpace, Message: "not enough disk space available"}
	case errors.Is(err, fs.ErrPermission) || errno == syscall.EROFS:
		return &wire.LiveError{Code: wire.LiveErrPermission, Message: fmt.Sprintf("permission denied: %s", p)}
	case errno == syscall.ENOTEMPTY:
		return &wire.LiveError{Code: wire.LiveErrInvalid, Message: fmt.Sprintf("%s is not empty", p)}
	case strings.Contains(err.Error(), "escapes"):
		return &wire.LiveError{Code: wire.LiveErrPermission, Message: fmt.Sprintf("%s leads outside the sandbox's root through a symbolic link", p)}
	}
	if errno != 0 {
		return &wire.LiveError{Code: wire.LiveErrFailed, Message: fmt.Sprintf("%s: %s", p, errno.Error())}
	}
	return &wire.LiveError{Code: wire.LiveErrFailed, Message: fmt.Sprintf("%s: the operation failed", p)}
}

// entryOf describes rel (not following a symbolic link at its end).
func entryOf(root *os.Root, rel string, owners *owners) (wire.FileEntry, error) {
	fi, err := root.Lstat(rel)
	if err != nil {
		return wire.FileEntry{}, fileError("/"+strings.TrimPrefix(rel, "."), err)
	}
	return describe(root, rel, fi, owners), nil
}

func describe(root *os.Root, rel string, fi fs.FileInfo, owners *owners) wire.FileEntry {
	abs := "/" + rel
	if rel == "." {
		abs = "/"
	}
	e := wire.FileEntry{Name: path.Base(abs), Path: abs, Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), Modified: encodableTime(fi.ModTime())}
	switch {
	case fi.Mode().IsRegular():
		e.Type = "file"
	case fi.IsDir():
		e.Type = "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = "symlink"
		if t, err := root.Readlink(rel); err == nil {
			e.Target = t
		}
	default:
		e.Type = "other"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = owners.user(st.Uid), owners.group(st.Gid)
	}
	return e
}

// listDir lists rel's entries, depth levels down, by path, at most
// maxListed.
func listDir(root *os.Root, rel string, depth int) ([]wire.FileEntry, error) {
	fi, err := root.Stat(rel)
	if err != nil {
		return nil, fileError("/"+strings.TrimPrefix(rel, "."), err)
	}
	if !fi.IsDir() {
		return nil, &wire.LiveError{Code: wire.LiveErrNotDir, Message: fmt.Sprintf("/%s is not a directory", strings.TrimPrefix(rel, "."))}
	}
	owners := newOwners(root)
	out, size := []wire.FileEntry{}, 0
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		f, err := root.Open(dir)
		if err != nil {
			return fileError("/"+strings.TrimPrefix(dir, "."), err)
		}
		list, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return fileError("/"+strings.TrimPrefix(dir, "."), err)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Name() < list[j].Name() })
		for _, d := range list {
			if len(out) >= maxListed || size >= maxListedBytes {
				return nil
			}
			child := path.Join(dir, d.Name())
			info, err := d.Info()
			if err != nil {
				continue // gone meanwhile
			}
			e := describe(root, child, info, owners)
			size += 2*len(e.Path) + len(e.Target) + 160 // and its other fields, encoded
			out = append(out, e)
			if d.IsDir() && level < depth {
				if err := walk(child, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(rel, 1)
}

// encodableTime is t in UTC within the years JSON's time encoding takes
// (a sandbox may set any file time).
func encodableTime(t time.Time) time.Time {
	lo, hi := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	switch t = t.UTC(); {
	case t.Before(lo):
		return lo
	case t.After(hi):
		return hi
	}
	return t
}

// regular refuses what is not a regular file before it is opened (a FIFO
// would block the open).
func regular(root *os.Root, rel, p string) error {
	fi, err := root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // the open says so, or makes it
	case err != nil:
		return fileError(p, err)
	case fi.IsDir():
		return &wire.LiveError{Code: wire.LiveErrIsDir, Message: fmt.Sprintf("path '%s' is a directory", p)}
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil // the open resolves it within the root; its type is checked after
	case !fi.Mode().IsRegular():
		return &wire.LiveError{Code: wire.LiveErrInvalid, Message: fmt.Sprintf("path '%s' is not a regular file", p)}
	}
	return nil
}

func readChunk(root *os.Root, rel string, op wire.LiveOp) (wire.LiveReply, error) {
	if err := regular(root, rel, op.Path); err != nil {
		return wire.LiveReply{}, err
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return wire.LiveReply{}, fileError(op.Path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return wire.LiveReply{}, fileError(op.Path, err)
	}
	if fi.IsDir() {
		return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrIsDir, Message: fmt.Sprintf("path '%s' is a directory", op.Path)}
	}
	if !fi.Mode().IsRegular() {
		return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrInvalid, Message: fmt.Sprintf("path '%s' is not a regular file", op.Path)}
	}
	n := op.Length
	if n <= 0 || n > wire.MaxLiveChunk {
		n = wire.MaxLiveChunk
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, max(op.Offset, 0))
	if err != nil && !errors.Is(err, io.EOF) {
		return wire.LiveReply{}, fileError(op.Path, err)
	}
	return wire.LiveReply{Data: buf[:got], Size: fi.Size(), EOF: op.Offset+int64(got) >= fi.Size()}, nil
}

func writeChunk(root *os.Root, rel string, op wire.LiveOp) (wire.LiveReply, error) {
	if len(op.Data) > wire.MaxLiveChunk {
		return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrInvalid, Message: fmt.Sprintf("a write carries at most %d bytes", wire.MaxLiveChunk)}
	}
	if rel == "." {
		return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrIsDir, Message: "path '/' is a directory"}
	}
	flags := os.O_WRONLY
	if op.Truncate {
		if dir := path.Dir(rel); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return wire.LiveReply{}, fileError(op.Path, err)
			}
		}
		flags |= os.O_CREATE | os.O_TRUNC
	}
	if err := regular(root, rel, op.Path); err != nil {
		return wire.LiveReply{}, err
	}
	f, err := root.OpenFile(rel, flags|syscall.O_NONBLOCK, 0o644)
	if errors.Is(err, syscall.ENXIO) { // a FIFO without a reader, through a link
		return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrInvalid, Message: fmt.Sprintf("path '%s' is not a regular file", op.Path)}
	}
	if err != nil {
		return wire.LiveReply{}, fileError(op.Path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrInvalid, Message: fmt.Sprintf("path '%s' is not a regular file", op.Path)}
	}
	if _, err := f.WriteAt(op.Data, max(op.Offset, 0)); err != nil {
		return wire.LiveReply{}, fileError(op.Path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return wire.LiveReply{}, fileError(op.Path, err)
	}
	if err := f.Close(); err != nil {
		return wire.LiveReply{}, fileError(op.Path, err)
	}
	e := describe(root, rel, fi, newOwners(root))
	return wire.LiveReply{Entry: &e, Size: fi.Size()}, nil
}

// owners names uids and gids from the sandbox's /etc/passwd and
// /etc/group, each read when first needed.
type owners struct {
	root  *os.Root
	names map[string]map[uint32]string // by file
}

func newOwners(root *os.Root) *owners {
	return &owners{root: root, names: map[string]map[uint32]string{}}
}

func (o *owners) user(id uint32) string  { return o.name("etc/passwd", id) }
func (o *owners) group(id uint32) string { return o.name("etc/group", id) }

func (o *owners) name(file string, id uint32) string {
	names, ok := o.names[file]
	if !ok {
		names = readIDs(o.root, file)
		o.names[file] = names
	}
	if n, ok := names[id]; ok {
		return n
	}
	return strconv.FormatUint(uint64(id), 10)
}

// readIDs reads name:x:id lines (at most 64 KiB of them).
func readIDs(root *os.Root, name string) map[uint32]string {
	out := map[uint32]string{}
	f, err := root.Open(name)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
	for sc.Scan() {
		parts := bytes.SplitN(sc.Bytes(), []byte(":"), 4)
		if len(parts) < 3 {
			continue
		}
		if id, err := strconv.ParseUint(string(parts[2]), 10, 32); err == nil {
			if _, dup := out[uint32(id)]; !dup {
				out[uint32(id)] = string(parts[0])
			}
		}
	}
	return out
}
