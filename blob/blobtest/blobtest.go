// Package blobtest starts a real S3 server (versitygw, posix backend) for
// tests, on a random port with its data in a temporary directory.
package blobtest

import (
	"context"
	"os"
	"path/filepath"
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
