package runner

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// Checkpoints travel as objects: a tar of runsc's image directory
// (checkpoint.img, pages.img, pages_meta.img), compressed with S2 (a
// quarter smaller for a session holding a 100 MB frame of random floats:
// 167 MB to 123 MB in 0.3 s of one core here, where zstd at its fastest
// took 0.7-1.0 s for 116 MB, and so was most of a pause). Checkpoints
// stored as zstd by earlier releases are still read. A runner keeps the checkpoints it took or
// fetched last on disk, uncompressed, so that a fork or a resume on the
// same runner restores without a download (checkpointCache).

// maxCheckpointFile bounds one file of a checkpoint read back: a runner
// only ever restores objects runners wrote, but the store is not trusted
// to hand back what was put.
const maxCheckpointFile = 64 << 30

// checkpointCache holds recent checkpoints on local disk, uncompressed,
// up to max bytes (least recently used out first).
type checkpointCache struct {
	dir string
	max int64

	mu    sync.Mutex
	order []string // ids, least recently used first
	sizes map[string]int64
	total int64
	// busy counts the restores reading each: not evicted while read.
	busy map[string]int
}

func newCheckpointCache(dir string, max int64) (*checkpointCache, error) {
	// What an earlier life left is not known to be whole.
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &checkpointCache{dir: dir, max: max, sizes: map[string]int64{}, busy: map[string]int{}}, nil
}

// path is where checkpoint id lies (or is to be made).
func (cc *checkpointCache) path(id string) string { return filepath.Join(cc.dir, id) }

// scratch is a directory for a checkpoint being made or fetched, renamed
// into place by add.
func (cc *checkpointCache) scratch(id string) (string, error) {
	return os.MkdirTemp(cc.dir, ".tmp-"+id+"-")
}

// add puts the checkpoint made in scratch in the cache as id, evicting the
// least recently used beyond max.
func (cc *checkpointCache) add(id, scratch string) error {
	size := dirSize(scratch)
	if err := os.Rename(scratch, cc.path(id)); err != nil {
		_ = os.RemoveAll(scratch)
		return err
	}
	cc.mu.Lock()
	cc.order = append(cc.order, id)
	cc.sizes[id] = size
	cc.total += size
	var evict []string
	for i := 0; cc.total > cc.max && i < len(cc.order); {
		old := cc.order[i]
		if old == id || cc.busy[old] > 0 {
			i++
			continue
		}
		cc.order = append(cc.order[:i], cc.order[i+1:]...)
		cc.total -= cc.sizes[old]
		delete(cc.sizes, old)
		evict = append(evict, old)
	}
	cc.mu.Unlock()
	for _, old := range evict {
		_ = os.RemoveAll(cc.path(old))
	}
	return nil
}

// hold returns checkpoint id's directory if the cache has it, kept until
// release is called.
func (cc *checkpointCache) hold(id string) (dir string, release func(), ok bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if _, ok := cc.sizes[id]; !ok {
		return "", nil, false
	}
	cc.busy[id]++
	for i, o := range cc.order {
		if o == id {
			cc.order = append(append(cc.order[:i:i], cc.order[i+1:]...), id)
			break
		}
	}
	var once sync.Once
	return cc.path(id), func() {
		once.Do(func() {
			cc.mu.Lock()
			cc.busy[id]--
			cc.mu.Unlock()
		})
	}, true
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// uploadCheckpoint stores the checkpoint in dir as key and returns the
// object's size.
func uploadCheckpoint(ctx context.Context, blobs Blobs, key, dir string) (int64, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(packCheckpoint(pw, dir)) }()
	n, err := blobs.PutStream(ctx, key, pr, "application/x-s2")
	pr.CloseWithError(errors.New("upload ended"))
	return n, err
}

// packCheckpoint writes dir's files (runsc's image) to w as an S2 tar.
func packCheckpoint(w io.Writer, dir string) error {
	zw := s2.NewWriter(w)
	tw := tar.NewWriter(zw)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := addCheckpointFile(tw, dir, e.Name()); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func addCheckpointFile(tw *tar.Writer, dir, name string) error {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: info.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// fetchCheckpoint reads checkpoint key from the store into dir.
func fetchCheckpoint(ctx context.Context, blobs Blobs, key, dir string) error {
	rc, err := blobs.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	zr, err := checkpointReader(rc)
	if err != nil {
		return fmt.Errorf("read checkpoint %s: %w", key, err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read checkpoint %s: %w", key, err)
		}
		// Only plain files, in dir itself.
		name := hdr.Name
		if hdr.Typeflag != tar.TypeReg || name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." || hdr.Size > maxCheckpointFile {
			return fmt.Errorf("checkpoint %s holds an entry it should not: %q", key, name)
		}
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, io.LimitReader(tr, hdr.Size))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("read checkpoint %s: %w", key, err)
		}
	}
}

// checkpointReader reads a stored checkpoint's tar: S2, or zstd (as
// stored by releases before S2), told apart by their magic bytes.
func checkpointReader(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(2))
		if err != nil {
			return nil, err
		}
		return zr.IOReadCloser(), nil
	}
	return io.NopCloser(s2.NewReader(br)), nil
}

// takeCheckpoint checkpoints c (leaving it running or not), keeps the
// checkpoint in the cache and stores it for tenantID; the caller records
// it (the returned Checkpoint, its Version left to the caller).
func (r *Runner) takeCheckpoint(ctx context.Context, c *Container, tenantID string, leaveRunning bool) (store.Checkpoint, error) {
	cp, err := r.checkpointHere(ctx, c, tenantID, leaveRunning)
	if err != nil {
		return cp, err
	}
	cp.Bytes, err = r.storeCheckpoint(ctx, cp)
	return cp, err
}

// checkpointHere checkpoints c into this runner's cache only: restores
// here may start from it at once, on another runner only once
// storeCheckpoint has stored it.
func (r *Runner) checkpointHere(ctx context.Context, c *Container, tenantID string, leaveRunning bool) (store.Checkpoint, error) {
	cp := store.Checkpoint{ID: jobs.NewID("chk"), TenantID: tenantID, Image: r.liveImage(c), Runtime: r.gv.runtime()}
	cp.Key = blob.CheckpointKey(tenantID, cp.ID)
	scratch, err := r.checkpoints.scratch(cp.ID)
	if err != nil {
		return cp, err
	}
	if err := r.gv.Checkpoint(ctx, c, scratch, leaveRunning); err != nil {
		_ = os.RemoveAll(scratch)
		return cp, err
	}
	return cp, r.checkpoints.add(cp.ID, scratch)
}

// storeCheckpoint uploads a checkpoint of this runner's cache to cp.Key,
// and says how many bytes it took.
func (r *Runner) storeCheckpoint(ctx context.Context, cp store.Checkpoint) (int64, error) {
	dir, release, ok := r.checkpoints.hold(cp.ID)
	if !ok {
		return 0, errors.New("the checkpoint left the cache before it was stored")
	}
	defer release()
	n, err := uploadCheckpoint(ctx, r.blobs, cp.Key, dir)
	if err != nil {
		return 0, fmt.Errorf("store the checkpoint: %w", err)
	}
	return n, nil
}

// restoreCheckpoint starts a container restored from cp, for spec: from
// this runner's cache if it has it, else fetched from the store.
func (r *Runner) restoreCheckpoint(ctx context.Context, cp store.Checkpoint, spec ContainerSpec) (*Container, error) {
	if want := r.gv.runtime(); cp.Runtime != want {
		return nil, fmt.Errorf("the checkpoint was made with %s, this runner restores with %s", cp.Runtime, want)
	}
	dir, release, ok := r.checkpoints.hold(cp.ID)
	if !ok {
		scratch, err := r.checkpoints.scratch(cp.ID)
		if err != nil {
			return nil, err
		}
		if err := fetchCheckpoint(ctx, r.blobs, cp.Key, scratch); err != nil {
			_ = os.RemoveAll(scratch)
			return nil, err
		}
		if err := r.checkpoints.add(cp.ID, scratch); err != nil {
			return nil, err
		}
		if dir, release, ok = r.checkpoints.hold(cp.ID); !ok {
			return nil, errors.New("the checkpoint left the cache at once")
		}
	}
	defer release()
	spec.Durable, spec.RestoreFrom = true, dir
	return r.fleet.create(ctx, spec)
}
