// Package devstack starts the engines gantry needs on one machine, for
// `gantry dev` and for tests: an embedded NATS JetStream server and a
// versitygw S3 server (posix backend) run as a child process. Both are the
// real engines, not imitations; only their deployment is simplified. Both
// take credentials: anything on the machine can connect to a port on
// loopback, sandboxes' egress included (which gantry refuses, but a
// server without a password relies on that alone).
package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartNATS starts an in-process NATS server with JetStream, storing streams
// under dir, listening on addr ("host:port"; port 0 picks a free one). With
// a user, it refuses clients that do not send its name and password;
// without one (tests' own servers), it takes any client.
func StartNATS(dir, addr string, user NATSCredentials) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("nats address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("nats address %q: bad port", addr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ns, err := server.NewServer(&server.Options{
		ServerName: "gantry-dev",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: 8 << 20,
		Username:   user.User,
		Password:   user.Password,
	})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("nats server on %s did not start (is the port taken?)", addr)
	}
	return ns, nil
}

// S3 is a versitygw child process serving a posix directory over S3.
type S3 struct {
	Endpoint  string
	AccessKey string
	SecretKey string
	cmd       *exec.Cmd
	done      chan error
	stopOnce  sync.Once
}

// FindVersityGW locates the versitygw binary: the explicit path if given,
// then bin/versitygw beside the gantry binary or in the working directory,
// then $PATH.
func FindVersityGW(explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("versitygw binary %s: %w", explicit, err)
		}
		return explicit, nil
	}
	var candidates []string
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		candidates = append(candidates, filepath.Join(dir, "versitygw"), filepath.Join(dir, "..", "bin", "versitygw"))
	}
	candidates = append(candidates, filepath.Join("bin", "versitygw"))
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return filepath.Abs(c)
		}
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	return "", errors.New("versitygw (the S3 server gantry dev runs) not found: run `make versitygw`, or set GANTRY_VERSITYGW_BIN")
}

// StartS3 starts versitygw serving dir on addr ("host:port"; port 0 picks a
// free one) with the given root credentials (fresh random ones when empty),
// and waits until it answers. The child dies with this process.
func StartS3(ctx context.Context, bin, dir, addr, accessKey, secretKey string) (*S3, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("s3 address %q: %w", addr, err)
	}
	if port == "0" {
		if port, err = freePort(host); err != nil {
			return nil, err
		}
	}
	addr = net.JoinHostPort(host, port)
	dataDir := filepath.Join(dir, "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, "versitygw.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()

	if accessKey == "" || secretKey == "" {
		accessKey, secretKey = "gantry"+randHex(6), randHex(20)
	}
	s := &S3{Endpoint: "http://" + addr, AccessKey: accessKey, SecretKey: secretKey, done: make(chan error, 1)}
	args := []string{"--port", addr, "--health", "/health", "--quiet", "posix"}
	if !supportsXattr(dataDir) {
		meta := filepath.Join(dir, "meta")
		if err := os.MkdirAll(meta, 0o700); err != nil {
			return nil, err
		}
		args = append(args, "--sidecar", meta)
	}
	args = append(args, dataDir)
	cmd := exec.Command(bin, args...)
	// Credentials go through the environment, never the command line.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	s.cmd = cmd
	go func() { s.done <- cmd.Wait() }()

	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("versitygw exited at start (%v); see %s", err, filepath.Join(dir, "versitygw.log"))
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("versitygw did not answer on %s within 20s; see %s", addr, filepath.Join(dir, "versitygw.log"))
		}
	}
}

// S3Credentials are the root credentials of the dev S3 server.
type S3Credentials struct {
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
}

// LoadOrCreateS3Credentials reads the S3 credentials kept at path, or makes
// random ones and keeps them there (mode 0600). Keeping them makes presigned
// links, which are signed with them, outlive a restart of gantry dev.
func LoadOrCreateS3Credentials(path string) (S3Credentials, error) {
	var c S3Credentials
	err := loadOrCreate(path, &c, func() bool { return c.AccessKey != "" && c.SecretKey != "" },
		func() { c = S3Credentials{AccessKey: "gantry" + randHex(6), SecretKey: randHex(20)} })
	return c, err
}

// NATSCredentials are the user gantry dev's NATS server admits, and no
// other.
type NATSCredentials struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// LoadOrCreateNATSCredentials reads the NATS credentials kept at path, or
// makes random ones and keeps them there (mode 0600), so that processes
// joining gantry dev (a runner, `gantry keys revoke`) can read them.
func LoadOrCreateNATSCredentials(path string) (NATSCredentials, error) {
	var c NATSCredentials
	err := loadOrCreate(path, &c, func() bool { return c.User != "" && c.Password != "" },
		func() { c = NATSCredentials{User: "gantry", Password: randHex(24)} })
	return c, err
}

// ReadNATSCredentials reads the NATS credentials gantry dev keeps at path.
func ReadNATSCredentials(path string) (NATSCredentials, error) {
	var c NATSCredentials
	data, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(data, &c); err != nil || c.User == "" || c.Password == "" {
		return c, fmt.Errorf("%s does not hold NATS credentials (remove it to make new ones)", path)
	}
	return c, nil
}

// loadOrCreate reads the JSON at path into v when it is there (valid
// checks it), else calls create and keeps v there.
func loadOrCreate(path string, v any, valid func() bool, create func()) error {
	data, err := os.ReadFile(path)
	if err == nil {
		if err := json.Unmarshal(data, v); err != nil || !valid() {
			return fmt.Errorf("%s does not hold credentials (remove it to make new ones)", path)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	create()
	data, _ = json.MarshalIndent(v, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Stop terminates the server and waits for it. Calling it again does
// nothing.
func (s *S3) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		// It is stopped on purpose: how it exits does not matter.
		select {
		case err := <-s.done:
			_ = err
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			_ = <-s.done
		}
	})
}

func freePort(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port, nil
}

func supportsXattr(dir string) bool {
	f := filepath.Join(dir, ".xattr-probe")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		return false
	}
	defer os.Remove(f)
	return syscall.Setxattr(f, "user.gantry", []byte("1"), 0) == nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
