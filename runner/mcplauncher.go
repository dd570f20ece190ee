package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/gantryhq/gantry/codemode"
)

// LabelMCP marks a container that runs a tenant's stdio MCP server; its
// value is "<tenant>/<server>".
const LabelMCP = "dev.gantry.mcp"

// MCPConfig says how stdio MCP servers' containers are made.
type MCPConfig struct {
	// Image holds the operator's commands ("" means the sandbox image).
	Image string
	// Network is the Docker network the servers join ("" means none: a
	// server that must call out needs the operator to name one).
	Network string
	// MemoryMB, CPUs and Pids bound each server's container.
	MemoryMB int
	CPUs     float64
	Pids     int64
}

// WithDefaults fills in zero fields.
func (c MCPConfig) WithDefaults() MCPConfig {
	if c.MemoryMB == 0 {
		c.MemoryMB = 512
	}
	if c.CPUs == 0 {
		c.CPUs = 1
	}
	if c.Pids == 0 {
		c.Pids = 128
	}
	return c
}

// MCPLauncher starts each stdio MCP server in a hardened container of its
// own, as a job's code is: the sandbox image (or the operator's), uid 1000
// without capabilities, no-new-privileges, Docker's default seccomp
// profile, a read-only root with a small /tmp, memory, CPU and pids caps,
// no network unless the operator names one, and never the Docker socket or
// anything of the runner's host or environment. A container serves one
// tenant's server and is removed when its connection closes.
type MCPLauncher struct {
	sb  *Sandbox
	cfg MCPConfig
}

// NewMCPLauncher returns a launcher making containers with sb's engine,
// runner id and runtime.
func NewMCPLauncher(sb *Sandbox, cfg MCPConfig) *MCPLauncher {
	cfg = cfg.WithDefaults()
	if cfg.Image == "" {
		cfg.Image = sb.cfg.Image
	}
	return &MCPLauncher{sb: sb, cfg: cfg}
}

// Launch implements codemode.Launcher.
func (l *MCPLauncher) Launch(ctx context.Context, req codemode.Launch) (codemode.Process, error) {
	if len(req.Argv) == 0 {
		return nil, errors.New("no command")
	}
	cfg, host := l.containerConfig(req)
	// As for sandboxes: a create cancelled midway would leave a container
	// nobody knows.
	want := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	res, err := l.sb.docker.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("the MCP servers' image %s is not on this runner's Docker host", l.cfg.Image)
		}
		return nil, fmt.Errorf("create container: %w", err)
	}
	p := &mcpProcess{sb: l.sb, id: res.ID}
	att, err := l.sb.docker.ContainerAttach(ctx, res.ID, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("attach to container: %w", err)
	}
	p.att = att.HijackedResponse
	pr, pw := io.Pipe()
	p.stdout = pr
	p.copied = make(chan struct{})
	go func() {
		defer close(p.copied)
		// However the stream ends (the server exited, or Close cut the
		// connection), the server's output has ended: EOF.
		_, _ = stdcopy.StdCopy(pw, &p.stderr, att.Reader)
		pw.Close()
	}()
	if _, err := l.sb.docker.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("start container: %w", err)
	}
	if err := want.Err(); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

func (l *MCPLauncher) containerConfig(req codemode.Launch) (*container.Config, *container.HostConfig) {
	init := true
	mem := int64(l.cfg.MemoryMB) << 20
	pids := l.cfg.Pids
	network := l.cfg.Network
	if network == "" {
		network = "none"
	}
	host := &container.HostConfig{
		NetworkMode:    container.NetworkMode(network),
		ReadonlyRootfs: true,
		Init:           &init,
		CapDrop:        []string{"ALL"},
		// Docker's default seccomp profile and masked paths apply: a
		// server builds no sandboxes of its own.
		SecurityOpt: []string{"no-new-privileges"},
		IpcMode:     "private",
		ShmSize:     16 << 20,
		LogConfig:   container.LogConfig{Type: "none"},
		Runtime:     l.sb.cfg.Runtime,
		Tmpfs:       map[string]string{"/tmp": "rw,nosuid,nodev,size=64m,mode=0700,uid=1000,gid=1000"},
		Resources: container.Resources{
			Memory:     mem,
			MemorySwap: mem,
			NanoCPUs:   int64(l.cfg.CPUs * 1e9),
			PidsLimit:  &pids,
			Ulimits:    []*container.Ulimit{{Name: "nofile", Soft: 1024, Hard: 1024}},
		},
	}
	cfg := &container.Config{
		Image:           l.cfg.Image,
		User:            SandboxUser,
		WorkingDir:      "/tmp",
		Entrypoint:      req.Argv[:1],
		Cmd:             req.Argv[1:],
		Env:             req.Env,
		OpenStdin:       true,
		StdinOnce:       true, // its stdin closes with the runner's connection
		AttachStdin:     true,
		AttachStdout:    true,
		AttachStderr:    true,
		NetworkDisabled: l.cfg.Network == "",
		Labels: map[string]string{
			LabelManaged: "true",
			LabelRunner:  l.sb.cfg.RunnerID,
			LabelMCP:     req.TenantID + "/" + req.Server,
		},
	}
	return cfg, host
}

// mcpProcess is a stdio MCP server's container and its attached streams.
type mcpProcess struct {
	sb     *Sandbox
	id     string
	att    client.HijackedResponse
	stdout *io.PipeReader
	stderr lockedBuffer
	// copied closes when the goroutine copying the server's output ends;
	// Close waits for it.
	copied chan struct{}

	closeOnce sync.Once
	closeErr  error
}

func (p *mcpProcess) Stdin() io.WriteCloser { return hijackedStdin{p.att} }
func (p *mcpProcess) Stdout() io.Reader     { return p.stdout }
func (p *mcpProcess) Stderr() string        { return p.stderr.String() }

// Close removes the container (killing the server) and drops the
// connection. It is idempotent.
func (p *mcpProcess) Close() error {
	p.closeOnce.Do(func() {
		if p.att.Conn != nil {
			p.att.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p.closeErr = p.sb.remove(ctx, p.id)
		if p.copied != nil {
			p.stdout.CloseWithError(io.ErrClosedPipe) // a write nobody reads ends too
			select {
			case <-p.copied:
			case <-ctx.Done():
			}
		}
	})
	return p.closeErr
}

// hijackedStdin writes to the container's stdin; Close half-closes it.
type hijackedStdin struct{ att client.HijackedResponse }

func (w hijackedStdin) Write(b []byte) (int, error) {
	if w.att.Conn == nil {
		return 0, io.ErrClosedPipe
	}
	return w.att.Conn.Write(b)
}

func (w hijackedStdin) Close() error {
	if w.att.Conn == nil {
		return nil
	}
	return w.att.CloseWrite()
}
