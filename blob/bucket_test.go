package blob_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/blob/blobtest"
)

// TestEnsureBucket is what ingress and runner do at start against a fresh
// object store: create the bucket when the credentials allow it, and say
// clearly when they do not.
func TestEnsureBucket(t *testing.T) {
	// versitygw keeps user accounts only with an IAM directory; its
	// environment variable reaches the child devstack starts.
	t.Setenv("VGW_IAM_DIR", t.TempDir())
	s3 := blobtest.Server(t)
	ctx := context.Background()
	open := func(access, secret, bucket string) *blob.Store {
		st, err := blob.New(blob.Config{Endpoint: s3.Endpoint, AccessKey: access, SecretKey: secret, Bucket: bucket})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	root := open(s3.AccessKey, s3.SecretKey, "fresh")
	if err := root.Ping(ctx); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("ping before the bucket exists: %v", err)
	}
	// Two replicas starting at once.
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- root.EnsureBucket(ctx) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("ensure bucket: %v", err)
		}
	}
	if err := root.Ping(ctx); err != nil {
		t.Fatalf("ping after: %v", err)
	}
	if err := root.EnsureBucket(ctx); err != nil {
		t.Fatalf("ensure an existing bucket: %v", err)
	}

	// An account that may use buckets but not create them.
	admin := exec.Command(blobtest.Bin(t), "admin", "-a", s3.AccessKey, "-s", s3.SecretKey, "--er", s3.Endpoint,
		"create-user", "-a", "plainuser", "-s", "plainsecret123", "-r", "user")
	if out, err := admin.CombinedOutput(); err != nil {
		t.Fatalf("create a versitygw user: %v\n%s", err, out)
	}
	err := open("plainuser", "plainsecret123", "another").EnsureBucket(ctx)
	if !errors.Is(err, blob.ErrDenied) || !strings.Contains(err.Error(), "bucket another does not exist and these credentials may not create it") {
		t.Errorf("ensure bucket without the right to create it: %v", err)
	}
	if blob.Unavailable(err) {
		t.Errorf("a refusal counted as unavailable: %v", err)
	}

	err = open(s3.AccessKey, "wrong-secret", "fresh").EnsureBucket(ctx)
	if !errors.Is(err, blob.ErrDenied) || blob.Unavailable(err) {
		t.Errorf("ensure bucket with a wrong secret: %v", err)
	}

	// Nothing listens: worth waiting for.
	s3.Stop()
	down, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = root.EnsureBucket(down)
	if err == nil || !blob.Unavailable(err) {
		t.Errorf("ensure bucket with the server down: %v (unavailable: %t)", err, blob.Unavailable(err))
	}
}
