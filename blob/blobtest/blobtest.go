// Package blobtest starts a real S3 server (versitygw, posix backend) for
// tests, on a random port with its data in a temporary directory.
package blobtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/devstack"
	"github.com/gantryhq/gantry/store/storetest"
)

// New starts versitygw and returns a Store on a fresh bucket. The server
// stops when the test ends. Without a versitygw binary the test is skipped
// (or fails under GANTRY_TEST_REQUIRE=1).
func New(t testing.TB) *blob.Store {
	t.Helper()
	s3 := Server(t)
	st, err := blob.New(blob.Config{Endpoint: s3.Endpoint, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey, Bucket: "gantry-test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

// Server starts versitygw and returns it.
func Server(t testing.TB) *devstack.S3 {
	t.Helper()
	s3, err := devstack.StartS3(context.Background(), Bin(t), t.TempDir(), "127.0.0.1:0", "", "")
	if err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	t.Cleanup(s3.Stop)
	return s3
}

// Bin is the versitygw binary (the test is skipped, or fails under
// GANTRY_TEST_REQUIRE=1, without one).
func Bin(t testing.TB) string {
	t.Helper()
	bin, err := devstack.FindVersityGW(versityGWBin())
	if err != nil {
		storetest.Unavailable(t, "%v", err)
	}
	return bin
}

// versityGWBin is GANTRY_VERSITYGW_BIN, or bin/versitygw at the root of the
// module the test runs in (where `make versitygw` puts it).
func versityGWBin() string {
	if v := os.Getenv("GANTRY_VERSITYGW_BIN"); v != "" {
		return v
	}
	dir, _ := os.Getwd()
	for dir != "/" && dir != "." {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if p := filepath.Join(dir, "bin", "versitygw"); fileExists(p) {
				return p
			}
			return ""
		}
		dir = filepath.Dir(dir)
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Restartable is an S3 server a test can stop and start again at the same
// address with the same data, for outages.
type Restartable struct {
	// Store is a Store on a fresh bucket of the server.
	Store *blob.Store

	t    testing.TB
	bin  string
	dir  string
	addr string
	key  string
	sec  string

	mu  sync.Mutex
	cur *devstack.S3
}

// NewRestartable starts versitygw (stopped when the test ends) and returns
// it with a Store on a fresh bucket.
func NewRestartable(t testing.TB) *Restartable {
	t.Helper()
	r := &Restartable{t: t, bin: Bin(t), dir: t.TempDir()}
	s3, err := devstack.StartS3(context.Background(), r.bin, r.dir, "127.0.0.1:0", "", "")
	if err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	r.cur, r.key, r.sec = s3, s3.AccessKey, s3.SecretKey
	r.addr = strings.TrimPrefix(s3.Endpoint, "http://")
	t.Cleanup(r.Stop)
	if r.Store, err = blob.New(blob.Config{Endpoint: s3.Endpoint, AccessKey: r.key, SecretKey: r.sec, Bucket: "gantry-test"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Store.EnsureBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

// Stop kills the server; a stopped one stays stopped.
func (r *Restartable) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil {
		r.cur.Stop()
		r.cur = nil
	}
}

// Start starts the server again at its address, with its data.
func (r *Restartable) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil {
		return
	}
	s3, err := devstack.StartS3(context.Background(), r.bin, r.dir, r.addr, r.key, r.sec)
	if err != nil {
		r.t.Errorf("start versitygw again: %v", err)
		return
	}
	r.cur = s3
}
