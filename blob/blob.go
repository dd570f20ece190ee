// Package blob stores the files jobs produce in an S3-compatible object store
// and hands out presigned URLs to download them.
package blob

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Config locates the object store.
type Config struct {
	// Endpoint is the URL gantry itself uses, e.g. http://127.0.0.1:7070.
	Endpoint string
	// PublicEndpoint is the URL presigned links point at, the one clients
	// can reach. Defaults to Endpoint.
	PublicEndpoint string
	AccessKey      string
	SecretKey      string
	Bucket         string
	// Region is fixed so that presigning needs no network round trip.
	Region string
}

// Store is a bucket in an S3-compatible object store.
type Store struct {
	client *minio.Client // talks to Endpoint
	signer *minio.Client // presigns for PublicEndpoint; never dials
	bucket string
}

// New makes a Store. It does not contact the server.
func New(cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("bucket is required")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.PublicEndpoint == "" {
		cfg.PublicEndpoint = cfg.Endpoint
	}
	client, err := newClient(cfg.Endpoint, cfg)
	if err != nil {
		return nil, fmt.Errorf("s3 endpoint: %w", err)
	}
	signer, err := newClient(cfg.PublicEndpoint, cfg)
	if err != nil {
		return nil, fmt.Errorf("s3 public endpoint: %w", err)
	}
	return &Store{client: client, signer: signer, bucket: cfg.Bucket}, nil
}

func newClient(endpoint string, cfg Config) (*minio.Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("%q is not an http(s) URL", endpoint)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("%q: path-prefixed endpoints are not supported", endpoint)
	}
	return minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       u.Scheme == "https",
		Region:       cfg.Region,
		BucketLookup: minio.BucketLookupPath,
	})
}

// Bucket is the bucket's name.
func (s *Store) Bucket() string { return s.bucket }

// ErrDenied means the object store refused the credentials, or refused
// them this operation.
var ErrDenied = errors.New("access denied")

// ErrNotFound means no object is stored under the key.
var ErrNotFound = errors.New("no such object")

// missing says whether err is the object store's answer that there is no
// such object.
func missing(err error) bool { return err != nil && errorResponse(err).Code == "NoSuchKey" }

// notFound wraps ErrNotFound around a missing object's error, keeping the
// object store's answer in the chain.
func notFound(err error) error {
	if missing(err) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// EnsureBucket creates the bucket if it does not exist. Several processes
// may call it at once. Credentials that may use the bucket but not create
// it are fine once it exists; while it does not, the error wraps ErrDenied
// and says so.
func (s *Store) EnsureBucket(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return failed(fmt.Errorf("check bucket %s: %w", s.bucket, classify(err)))
	}
	if ok {
		return nil
	}
	if err := s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{}); err != nil {
		var resp minio.ErrorResponse
		if errors.As(err, &resp) && (resp.Code == "BucketAlreadyOwnedByYou" || resp.Code == "BucketAlreadyExists") {
			return nil
		}
		if err := classify(err); errors.Is(err, ErrDenied) {
			return fmt.Errorf("bucket %s does not exist and these credentials may not create it: %w", s.bucket, err)
		}
		return failed(fmt.Errorf("create bucket %s: %w", s.bucket, classify(err)))
	}
	return nil
}

// classify wraps ErrDenied around the object store's refusals.
func classify(err error) error {
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled", "InvalidToken", "ExpiredToken":
		return fmt.Errorf("%w (%s: %s)", ErrDenied, resp.Code, resp.Message)
	}
	if resp.StatusCode == 401 || resp.StatusCode == 403 {
		return fmt.Errorf("%w (HTTP %d: %v)", ErrDenied, resp.StatusCode, err)
	}
	return err
}

// errorResponse is the object store's answer in err's chain (minio's
// ToErrorResponse sees only an unwrapped one), or the zero value.
func errorResponse(err error) minio.ErrorResponse {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		return resp
	}
	return minio.ToErrorResponse(err)
}

// storeError marks an error of an operation on the object store, so that a
// caller several layers up can tell the object store's failure from
// another's: a network error of the database looks just the same.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// failed marks err as the object store's.
func failed(err error) error {
	if err == nil {
		return nil
	}
	return &storeError{err}
}

// Down reports whether err holds a failure of an operation of this package
// on the object store that a retry may fix (Unavailable): the object
// store, not another dependency, is what is down.
func Down(err error) bool {
	var se *storeError
	return errors.As(err, &se) && Unavailable(se.err)
}

// Unavailable reports whether err means the object store could not be
// reached or answered that it is unavailable (a 5xx): a retry may succeed.
// Refusals and other answers are not.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, ErrDenied) {
		return false
	}
	resp := errorResponse(err)
	if resp.StatusCode >= 500 {
		return true
	}
	var netErr net.Error
	var opErr *net.OpError
	return resp.StatusCode == 0 && (errors.As(err, &netErr) || errors.As(err, &opErr) || errors.Is(err, io.ErrUnexpectedEOF))
}

// Ping checks that the bucket is reachable with the configured credentials.
func (s *Store) Ping(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return failed(err)
	}
	if !ok {
		return fmt.Errorf("bucket %s does not exist", s.bucket)
	}
	return nil
}

// Put stores size bytes from r under key. r is not read once Put has
// returned.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	// net/http may read a request's body after its response came: past
	// the length, to check that there is no more. The caller's reader
	// (the next file of a tar stream, say) is its own again once Put
	// returns. (minio-go reads a ReaderAt and Seeker through a section
	// of its own, which it can rewind to retry.)
	body := r
	if _, ok := r.(interface {
		io.ReaderAt
		io.Seeker
	}); !ok {
		held := &heldReader{r: r}
		defer held.release()
		body = held
	}
	_, err := s.client.PutObject(ctx, s.bucket, key, body, size, minio.PutObjectOptions{
		ContentType:      contentType,
		DisableMultipart: size >= 0 && size < 64<<20,
		// The payload is sent unsigned, checked by a CRC32C trailer, as
		// minio-go always does over HTTPS. Over plain HTTP it would
		// otherwise sign it in 64 KiB chunks (SHA-256 on both sides): a
		// 115 MB checkpoint took 1.1-1.8 s to store on versitygw, 0.65 s
		// without. Headers stay signed; an S3 reached over plain HTTP is
		// trusted with the data anyway (it is not encrypted).
		DisableContentSha256: true,
	})
	if err != nil {
		return failed(fmt.Errorf("put %s: %w", key, err))
	}
	return nil
}

// streamPartSize is the part size of uploads whose size is not known in
// advance. minio-go buffers one part in memory per upload and, left to
// itself, picks a part size that fits 5 TiB (576 MiB): every session write
// and snapshot reserved that much. 8 MiB parts still allow objects of up
// to 78 GiB (10,000 parts), far beyond any workspace.
const streamPartSize = 8 << 20

// streamParts is how many parts of a large stream are in memory at once:
// one being read while the others upload.
const streamParts = 3

// PutStream stores everything r yields under key, its size unknown in
// advance, and returns how many bytes that was. An object smaller than one
// part is read into memory (only as much as it holds) and stored with one
// PUT; a larger one is uploaded in parts of streamPartSize, streamParts at
// a time, so an upload holds at most streamParts parts in memory whatever
// its size.
func (s *Store) PutStream(ctx context.Context, key string, r io.Reader, contentType string) (int64, error) {
	var head bytes.Buffer
	n, err := head.ReadFrom(io.LimitReader(r, streamPartSize))
	if err != nil {
		return n, failed(fmt.Errorf("put %s: %w", key, err))
	}
	if n < streamPartSize {
		return n, s.Put(ctx, key, bytes.NewReader(head.Bytes()), n, contentType)
	}
	cr := &countingReader{r: io.MultiReader(&head, r)}
	_, err = s.client.PutObject(ctx, s.bucket, key, cr, -1, minio.PutObjectOptions{
		ContentType: contentType,
		PartSize:    streamPartSize,
		// Parts are read (r is often made as it is read: a tar, a
		// compressor) while earlier ones upload.
		ConcurrentStreamParts: true,
		NumThreads:            streamParts,
		// As over HTTPS (below).
		DisableContentSha256: true,
	})
	if err != nil {
		return cr.n, failed(fmt.Errorf("put %s: %w", key, err))
	}
	return cr.n, nil
}

// heldReader reads r until release, and then reads nothing (io.EOF).
type heldReader struct {
	mu       sync.Mutex
	r        io.Reader
	released bool
}

func (h *heldReader) Read(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return 0, io.EOF
	}
	return h.r.Read(p)
}

// release waits for a read under way, and ends the reading.
func (h *heldReader) release() {
	h.mu.Lock()
	h.released = true
	h.mu.Unlock()
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Copy copies the object at src to dst in the store itself (nothing passes
// through gantry) and returns its size.
func (s *Store) Copy(ctx context.Context, src, dst string) (int64, error) {
	info, err := s.client.CopyObject(ctx, minio.CopyDestOptions{Bucket: s.bucket, Object: dst},
		minio.CopySrcOptions{Bucket: s.bucket, Object: src})
	if err != nil {
		return 0, fmt.Errorf("copy %s to %s: %w", src, dst, notFound(err))
	}
	return info.Size, nil
}

// Get opens the object stored under key. The object store answers only
// when it is read: a read of a key with no object fails with an error
// wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, failed(fmt.Errorf("get %s: %w", key, notFound(err)))
	}
	return &object{Object: obj, key: key}, nil
}

// object is an object being read, whose errors say ErrNotFound when there
// is none.
type object struct {
	*minio.Object
	key string
}

func (o *object) Read(p []byte) (int, error) {
	n, err := o.Object.Read(p)
	switch {
	case err == nil || err == io.EOF: // io.EOF as it is: readers compare it
	case missing(err):
		err = failed(fmt.Errorf("get %s: %w", o.key, notFound(err)))
	default:
		err = failed(err)
	}
	return n, err
}

// PresignGet returns a URL on the public endpoint that downloads key without
// credentials until it expires. filename, if set, becomes the download's
// suggested name.
func (s *Store) PresignGet(ctx context.Context, key string, expiry time.Duration, filename string) (*url.URL, error) {
	params := url.Values{}
	if filename != "" {
		params.Set("response-content-disposition", `attachment; filename="`+strings.NewReplacer(`"`, "", "\\", "", "\r", "", "\n", "").Replace(filename)+`"`)
	}
	u, err := s.signer.PresignedGetObject(ctx, s.bucket, key, expiry, params)
	if err != nil {
		return nil, fmt.Errorf("presign %s: %w", key, err)
	}
	return u, nil
}

// ArtifactKey is where a job's artifact is stored. Keys are scoped by tenant
// so that a tenant's objects can be listed and removed together.
func ArtifactKey(tenantID, jobID, path string) string {
	return "tenants/" + tenantID + "/jobs/" + jobID + "/artifacts/" + path
}

// OutputKey is where a stream ("stdout", "stderr") of a job's attempt is
// kept when it is too long for the job's row. The attempt is in the key so
// that an attempt that lost its job to a redelivery cannot overwrite the
// output of the attempt that was recorded.
func OutputKey(tenantID, jobID string, attempt int, stream string) string {
	return "tenants/" + tenantID + "/jobs/" + jobID + "/output/" + strconv.Itoa(attempt) + "/" + stream
}

// NewSessionKey is a new key for version of a session's workspace
// snapshot, unique to the call (a random part after the version): no two
// writes share an object. A late writer of a version (a runner that lost
// the session's lease while its job ran on, a retried job) writes an
// object of its own, which the session's row in Postgres never names and
// which its failed commit deletes; it cannot overwrite the version that
// was committed. Which key is a session's current one is the row's
// (sessions.snapshot_key), never derived from its version.
func NewSessionKey(tenantID, sessionID string, version int64) string {
	var r [8]byte
	_, _ = rand.Read(r[:]) // never fails (crypto/rand)
	return fmt.Sprintf("%s%d-%s.tar", SessionPrefix(tenantID, sessionID), version, hex.EncodeToString(r[:]))
}

// CheckpointKey is where checkpoint id (a stateful session's live state,
// docs/ARCHITECTURE.md "Live state") is stored: a zstd tar of runsc's
// image. Not under a session's prefix: a fork's children and snapshots
// name their parent's.
func CheckpointKey(tenantID, id string) string {
	return "tenants/" + tenantID + "/checkpoints/" + id + ".tar.zst"
}

// SnapshotWorkspaceKey is where a snapshot's copy of its session's
// workspace is stored.
func SnapshotWorkspaceKey(tenantID, snapshotID string) string {
	return "tenants/" + tenantID + "/snapshots/" + snapshotID + "/workspace.tar"
}

// SessionPrefix holds every object of a session.
func SessionPrefix(tenantID, sessionID string) string {
	return "tenants/" + tenantID + "/sessions/" + sessionID + "/"
}

// BuildKey is where a tenant's compiled program is kept (the runners'
// compile cache), by its content key.
func BuildKey(tenantID, key string) string { return BuildsPrefix(tenantID) + key }

// BuildsPrefix holds a tenant's compiled programs.
func BuildsPrefix(tenantID string) string { return "tenants/" + tenantID + "/builds/" }

// DeleteOlder removes the objects under prefix last written before
// before, and returns how many it removed.
func (s *Store) DeleteOlder(ctx context.Context, prefix string, before time.Time) (int, error) {
	var keys []string
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return 0, fmt.Errorf("list %s: %w", prefix, obj.Err)
		}
		if obj.LastModified.Before(before) {
			keys = append(keys, obj.Key)
		}
	}
	return len(keys), s.DeleteKeys(ctx, keys)
}

// DeleteKeys removes the objects under keys, a thousand per request (S3's
// multi-object delete); missing objects are not an error.
func (s *Store) DeleteKeys(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	objects := make(chan minio.ObjectInfo, len(keys))
	for _, k := range keys {
		objects <- minio.ObjectInfo{Key: k}
	}
	close(objects)
	var first error
	notDeleted := 0
	for e := range s.client.RemoveObjects(ctx, s.bucket, objects, minio.RemoveObjectsOptions{}) {
		if missing(e.Err) {
			continue
		}
		notDeleted++
		if first == nil {
			first = fmt.Errorf("delete %s: %w", e.ObjectName, e.Err)
		}
	}
	if first != nil {
		return failed(fmt.Errorf("%d of %d objects not deleted: %w", notDeleted, len(keys), first))
	}
	return nil
}

// Delete removes the object under key; a missing object is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		if missing(err) {
			return nil
		}
		return failed(fmt.Errorf("delete %s: %w", key, err))
	}
	return nil
}

// DeletePrefix removes every object whose key starts with prefix and
// returns how many it removed.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	n := 0
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return n, failed(fmt.Errorf("list %s: %w", prefix, obj.Err))
		}
		if err := s.Delete(ctx, obj.Key); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Count returns how many objects start with prefix.
func (s *Store) Count(ctx context.Context, prefix string) (int, error) {
	n := 0
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return n, failed(obj.Err)
		}
		n++
	}
	return n, nil
}
