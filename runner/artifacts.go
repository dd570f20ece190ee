package runner

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/glob"
	"github.com/gantryhq/gantry/jobs"
)

// ArtifactLimits cap what one job may hand back as artifacts.
type ArtifactLimits struct {
	MaxFiles     int
	MaxFileBytes int64
	MaxTotal     int64
}

// workspaceFile is a regular file found in the workspace.
type workspaceFile struct {
	path string // relative to /workspace, clean
	size int64
}

// Uploader stores artifact bytes.
type Uploader interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
}

// collectArtifacts finds the workspace files matching the job's globs,
// keeps those within the limits (in path order; the rest are returned as
// omitted, with the reason), and streams them out of the container into
// the object store under keyFor(path). The tar stream from the sandbox is
// untrusted: only regular files that were selected, no larger than listed
// and within the caps, are accepted.
func collectArtifacts(ctx context.Context, ws jobFiles, globs []string, lim ArtifactLimits, up Uploader, keyFor func(string) string) ([]jobs.Artifact, []jobs.OmittedArtifact, error) {
	listing, err := ws.list(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list workspace: %w", err)
	}
	files, odd := parseListing(listing)
	selected, omitted := selectArtifacts(files, odd, globs, lim)
	if len(selected) == 0 {
		return nil, omitted, nil
	}
	want := make(map[string]int64, len(selected))
	paths := make([]string, 0, len(selected))
	for _, f := range selected {
		want[f.path] = f.size
		paths = append(paths, f.path)
	}
	tr, wait, err := ws.tar(ctx, paths)
	if err != nil {
		return nil, omitted, fmt.Errorf("read artifacts: %w", err)
	}
	arts, late, readErr := readArtifactTar(ctx, tr, want, lim, up, keyFor)
	if err := wait(); readErr == nil && err != nil {
		readErr = fmt.Errorf("read artifacts: %w", err)
	}
	return arts, append(omitted, late...), readErr
}

// jobFiles gives the files a job left: a listing (see wire.ParseListing)
// and a tar of chosen paths. Both come from the sandbox and are untrusted.
type jobFiles interface {
	list(ctx context.Context) ([]byte, error)
	// tar streams the paths; wait reports how the stream ended, once the
	// caller has stopped reading.
	tar(ctx context.Context, paths []string) (r io.Reader, wait func() error, err error)
}

// agentWorkspace reads it through the container's agent, which sent the
// listing when the program ended.
type agentWorkspace struct {
	conn    *wire.Conn
	listing []byte
}

func (w agentWorkspace) list(context.Context) ([]byte, error) { return w.listing, nil }

func (w agentWorkspace) tar(ctx context.Context, paths []string) (io.Reader, func() error, error) {
	return w.conn.Tar(ctx, paths, false)
}

// parseListing reads the agent's listing: the regular files whose paths
// can be kept as they are (clean, valid UTF-8), and the other entries
// (symlinks, fifos and the like, and files whose names cannot be kept),
// each with why it cannot be collected.
func parseListing(b []byte) ([]workspaceFile, []jobs.OmittedArtifact) {
	var files []workspaceFile
	var odd []jobs.OmittedArtifact
	for _, e := range wire.ParseListing(b) {
		shown := strings.ToValidUTF8(e.Path, "\uFFFD")
		p, err := jobs.CleanPath(e.Path)
		switch {
		case err == nil && p == e.Path && e.Kind == wire.EntryFile:
			files = append(files, workspaceFile{path: p, size: e.Size})
		case !utf8.ValidString(e.Path):
			odd = append(odd, jobs.OmittedArtifact{Path: shown, Size: e.Size, Reason: "its name is not valid UTF-8 (rename it to collect it)"})
		case err != nil || p != e.Path:
			odd = append(odd, jobs.OmittedArtifact{Path: shown, Size: e.Size, Reason: "its path cannot be kept: " + errText(err)})
		case e.Kind == wire.EntrySymlink:
			odd = append(odd, jobs.OmittedArtifact{Path: p, Reason: "a symbolic link (links are not followed; write the file itself)"})
		default:
			odd = append(odd, jobs.OmittedArtifact{Path: p, Reason: "not a regular file (a fifo, socket or device)"})
		}
	}
	return files, odd
}

func errText(err error) string {
	if err == nil {
		return "it is not in clean form"
	}
	return err.Error()
}

// selectArtifacts keeps the files matching any glob, in path order, while
// they fit the caps; the others are returned as omitted, with the reason,
// as are the matching entries that cannot be collected (odd).
func selectArtifacts(files []workspaceFile, odd []jobs.OmittedArtifact, globs []string, lim ArtifactLimits) ([]workspaceFile, []jobs.OmittedArtifact) {
	match := func(p string) bool {
		for _, g := range globs {
			if glob.Match(g, p) {
				return true
			}
		}
		return false
	}
	var matched []workspaceFile
	for _, f := range files {
		if match(f.path) {
			matched = append(matched, f)
		}
	}
	sort.Slice(matched, func(i, j int) bool { return matched[i].path < matched[j].path })
	var kept []workspaceFile
	var omitted []jobs.OmittedArtifact
	for _, o := range odd {
		if match(o.Path) {
			omitted = append(omitted, o)
		}
	}
	var total int64
	for _, f := range matched {
		reason := ""
		switch {
		case f.size > lim.MaxFileBytes:
			reason = fmt.Sprintf("larger than the %d-byte limit per file", lim.MaxFileBytes)
		case len(kept) >= lim.MaxFiles:
			reason = fmt.Sprintf("past the limit of %d files", lim.MaxFiles)
		case total+f.size > lim.MaxTotal:
			reason = fmt.Sprintf("past the limit of %d bytes for all files", lim.MaxTotal)
		}
		if reason != "" {
			omitted = append(omitted, jobs.OmittedArtifact{Path: f.path, Size: f.size, Reason: reason})
			continue
		}
		total += f.size
		kept = append(kept, f)
	}
	return kept, omitted
}

// readArtifactTar uploads the selected files from a tar stream. A file
// that grew past the caps since it was listed (something still wrote to
// it) is omitted, not trusted.
func readArtifactTar(ctx context.Context, r io.Reader, want map[string]int64, lim ArtifactLimits, up Uploader, keyFor func(string) string) ([]jobs.Artifact, []jobs.OmittedArtifact, error) {
	tr := tar.NewReader(r)
	var arts []jobs.Artifact
	var omitted []jobs.OmittedArtifact
	var total int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return arts, omitted, fmt.Errorf("read artifact archive: %w", err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		listed, ok := want[name]
		if !ok || hdr.Typeflag != tar.TypeReg {
			continue // not something we asked for: ignore it
		}
		delete(want, name)
		switch {
		case hdr.Size > listed && hdr.Size > lim.MaxFileBytes:
			omitted = append(omitted, jobs.OmittedArtifact{Path: name, Size: hdr.Size,
				Reason: fmt.Sprintf("grew past the %d-byte limit per file while it was collected", lim.MaxFileBytes)})
			continue
		case total+hdr.Size > lim.MaxTotal:
			omitted = append(omitted, jobs.OmittedArtifact{Path: name, Size: hdr.Size,
				Reason: fmt.Sprintf("past the limit of %d bytes for all files", lim.MaxTotal)})
			continue
		}
		total += hdr.Size
		br := bufio.NewReaderSize(tr, 512)
		head, _ := br.Peek(512)
		ctype := contentType(name, head)
		h := sha256.New()
		if err := up.Put(ctx, keyFor(name), io.TeeReader(br, h), hdr.Size, ctype); err != nil {
			return arts, omitted, fmt.Errorf("upload artifact %s: %w", name, err)
		}
		arts = append(arts, jobs.Artifact{Path: name, Size: hdr.Size, SHA256: hex.EncodeToString(h.Sum(nil)), ContentType: ctype})
	}
	sort.Slice(arts, func(i, j int) bool { return arts[i].Path < arts[j].Path })
	return arts, omitted, nil
}

var extraTypes = map[string]string{
	".csv":     "text/csv; charset=utf-8",
	".tsv":     "text/tab-separated-values; charset=utf-8",
	".txt":     "text/plain; charset=utf-8",
	".log":     "text/plain; charset=utf-8",
	".md":      "text/markdown; charset=utf-8",
	".py":      "text/x-python; charset=utf-8",
	".json":    "application/json",
	".parquet": "application/vnd.apache.parquet",
	".npy":     "application/octet-stream",
}

func contentType(name string, head []byte) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := extraTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return http.DetectContentType(head)
}
