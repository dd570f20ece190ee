package runner

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/gantryhq/gantry/jobs"
)

// Container labels gantry puts on every sandbox it creates.
const (
	LabelManaged = "dev.gantry.managed"
	LabelRunner  = "dev.gantry.runner"
	LabelJob     = "dev.gantry.job"
	LabelSession = "dev.gantry.session"
)

// SandboxUser is the unprivileged uid:gid code runs as.
const SandboxUser = "1000:1000"

// SkillsDir is where a job finds its tenant's skills, read-only.
const SkillsDir = "/skills"

// Sandbox creates hardened containers from the sandbox image. Each container
// serves one job and is removed after it.
type Sandbox struct {
	docker   *client.Client
	image    string
	runnerID string
}

// NewSandbox returns a Sandbox using the Docker engine at host ("" means the
// environment's DOCKER_HOST or the default socket).
func NewSandbox(host, image, runnerID string) (*Sandbox, error) {
	opts := []client.Opt{client.FromEnv}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	c, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return &Sandbox{docker: c, image: image, runnerID: runnerID}, nil
}

// Close releases the Docker client.
func (s *Sandbox) Close() error { return s.docker.Close() }

// Ping checks that the Docker engine answers.
func (s *Sandbox) Ping(ctx context.Context) error {
	_, err := s.docker.Ping(ctx, client.PingOptions{})
	return err
}

// CheckImage fails with instructions when the sandbox image is missing.
func (s *Sandbox) CheckImage(ctx context.Context) error {
	if err := s.Ping(ctx); err != nil {
		return fmt.Errorf("docker engine not reachable (start it with `make docker` or set DOCKER_HOST): %w", err)
	}
	if _, err := s.docker.ImageInspect(ctx, s.image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("sandbox image %s not found: build it with `make image` (or set GANTRY_IMAGE)", s.image)
		}
		return fmt.Errorf("inspect sandbox image %s: %w", s.image, err)
	}
	return nil
}

// RemoveLeftovers removes containers this runner id created in an earlier
// life (a crash leaves them behind). It returns how many it removed.
func (s *Sandbox) RemoveLeftovers(ctx context.Context) (int, error) {
	res, err := s.docker.ContainerList(ctx, client.ContainerListOptions{
		All: true,
		Filters: make(client.Filters).
			Add("label", LabelManaged+"=true").
			Add("label", LabelRunner+"="+s.runnerID),
	})
	if err != nil {
		return 0, fmt.Errorf("list leftover containers: %w", err)
	}
	n := 0
	for _, c := range res.Items {
		if err := s.remove(ctx, c.ID); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// ContainerSpec says what a container is for and what it may use.
type ContainerSpec struct {
	JobID     string // the job it serves (or the session's first job)
	SessionID string // set for a session's container
	Pool      bool   // made ahead of demand by the warm pool
	// Agent makes the container's main process the sandbox agent, which
	// serves one job over the attach stream instead of docker exec.
	Agent  bool
	Limits jobs.Limits
	// Lifetime bounds how long the container lives if nobody removes it.
	Lifetime time.Duration
}

// RemoveSession removes every container of a closed session on this Docker
// host, whichever runner made it (one made by a runner that died is
// nobody's to remove otherwise).
func (s *Sandbox) RemoveSession(ctx context.Context, sessionID string) error {
	res, err := s.docker.ContainerList(ctx, client.ContainerListOptions{
		All: true,
		Filters: make(client.Filters).
			Add("label", LabelManaged+"=true").
			Add("label", LabelSession+"="+sessionID),
	})
	if err != nil {
		return err
	}
	for _, c := range res.Items {
		if err := s.remove(ctx, c.ID); err != nil {
			return err
		}
	}
	return nil
}

// Create creates and starts a hardened container. Its main process is the
// sandbox agent (agent.py), attached to this runner: jobs run through it,
// without docker exec, and the container stops when the runner goes away.
func (s *Sandbox) Create(ctx context.Context, cs ContainerSpec) (*Container, error) {
	lim := cs.Limits
	pids := int64(lim.Pids)
	init := true
	tmpfs := fmt.Sprintf("rw,exec,nosuid,nodev,size=%dm,mode=0755,uid=1000,gid=1000", lim.DiskMB)
	mem := int64(lim.MemoryMB) << 20
	// Creating and starting are not interrupted midway: a create cancelled
	// after the engine acted on it would leave a container nobody knows.
	want := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	res, err := s.docker.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:      s.image,
			User:       SandboxUser,
			WorkingDir: jobs.WorkspaceDir,
			Cmd:        []string{"python3", "-c", agentSource},
			OpenStdin:  true,
			// Stdin closes when the runner's attach connection does (the
			// runner died): the agent sees EOF and the container stops.
			StdinOnce:       true,
			AttachStdin:     true,
			AttachStdout:    true,
			AttachStderr:    true,
			NetworkDisabled: true,
			Labels: map[string]string{
				LabelManaged: "true",
				LabelRunner:  s.runnerID,
				LabelJob:     cs.JobID,
				LabelSession: cs.SessionID,
				LabelPool:    strconv.FormatBool(cs.Pool),
			},
		},
		HostConfig: &container.HostConfig{
			NetworkMode:    "none",
			ReadonlyRootfs: true,
			Init:           &init,
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges"},
			IpcMode:        "private",
			ShmSize:        16 << 20,
			LogConfig:      container.LogConfig{Type: "none"},
			Tmpfs: map[string]string{
				jobs.WorkspaceDir: tmpfs,
				"/tmp":            tmpfs,
				// Owned by root: the job (uid 1000) can read skills, not change them.
				SkillsDir: "rw,nosuid,nodev,noexec,size=64m,mode=0755",
			},
			Resources: container.Resources{
				Memory:     mem,
				MemorySwap: mem, // equal to Memory: no swap
				NanoCPUs:   int64(lim.CPUs * 1e9),
				PidsLimit:  &pids,
				Ulimits:    []*container.Ulimit{{Name: "nofile", Soft: 1024, Hard: 1024}},
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("create container: %w", err)
	}
	c := &Container{id: res.ID, sb: s}
	// Attach before starting, so that nothing the agent says is lost.
	att, err := s.docker.ContainerAttach(ctx, res.ID, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		c.Remove(ctx) //nolint:errcheck
		return nil, fmt.Errorf("attach to container: %w", err)
	}
	c.agent = newAgentConn(att.HijackedResponse)
	if _, err := s.docker.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		c.Remove(ctx) //nolint:errcheck
		return nil, fmt.Errorf("start container: %w", err)
	}
	if err := want.Err(); err != nil {
		c.Remove(ctx) //nolint:errcheck
		return nil, err
	}
	return c, nil
}

func (s *Sandbox) remove(ctx context.Context, id string) error {
	var err error
	for try := 0; try < 5; try++ {
		_, err = s.docker.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		if !cerrdefs.IsConflict(err) { // a conflict: a removal is already under way
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("remove container %s: %w", shortID(id), err)
}

// Container is one job's sandbox.
type Container struct {
	id     string
	sb     *Sandbox
	killed sync.Once
	// skills is the stamp of the skills in /skills ("" for none).
	skills string
	// agent runs the job (see agent.py).
	agent *agentConn
}

// ID is the Docker container id.
func (c *Container) ID() string { return c.id }

// Kill kills every process in the container. It is idempotent.
func (c *Container) Kill(ctx context.Context) {
	c.killed.Do(func() {
		_, _ = c.sb.docker.ContainerKill(ctx, c.id, client.ContainerKillOptions{Signal: "KILL"})
	})
}

// Remove kills and removes the container.
func (c *Container) Remove(ctx context.Context) error {
	c.agent.close()
	return c.sb.remove(ctx, c.id)
}

// exec runs argv in the container as user in /workspace, feeding it stdin
// (if not nil) and copying its output to stdout and stderr. When ctx ends
// first, the whole container is killed and ctx's error returned. gantry
// uses it for its own chores (skills, restoring snapshots); jobs run
// through the agent.
func (c *Container) exec(ctx context.Context, user string, argv, env []string, stdin io.Reader, stdout, stderr io.Writer) (exitCode int, err error) {
	created, err := c.sb.docker.ExecCreate(ctx, c.id, client.ExecCreateOptions{
		User:         user,
		WorkingDir:   jobs.WorkspaceDir,
		Env:          env,
		Cmd:          argv,
		AttachStdin:  stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return 0, fmt.Errorf("exec create: %w", err)
	}
	att, err := c.sb.docker.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return 0, fmt.Errorf("exec attach: %w", err)
	}
	defer att.Close()

	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			c.Kill(context.WithoutCancel(ctx))
			att.Close()
		case <-done:
		}
	}()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(att.Conn, stdin)
			_ = att.CloseWrite()
		}()
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	_, copyErr := stdcopy.StdCopy(stdout, stderr, att.Reader)
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if copyErr != nil {
		return 0, fmt.Errorf("exec output: %w", copyErr)
	}
	insp, err := c.sb.docker.ExecInspect(context.WithoutCancel(ctx), created.ID, client.ExecInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("exec inspect: %w", err)
	}
	return insp.ExitCode, nil
}

// run is Exec for gantry's own helper commands: it fails on a non-zero exit
// and reports the command's stderr.
func (c *Container) run(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
	return c.runAs(ctx, SandboxUser, argv, stdin, stdout)
}

func (c *Container) runAs(ctx context.Context, user string, argv []string, stdin io.Reader, stdout io.Writer) error {
	var stderr bytes.Buffer
	code, err := c.exec(ctx, user, argv, nil, stdin, stdout, &limitedBuffer{buf: &stderr, max: 4096})
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("%s exited %d: %s", argv[0], code, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Alive reports whether the container is still running.
func (c *Container) Alive(ctx context.Context) bool {
	insp, err := c.sb.docker.ContainerInspect(ctx, c.id, client.ContainerInspectOptions{})
	return err == nil && insp.Container.State != nil && insp.Container.State.Running
}

// SaveWorkspace streams a tar of /workspace to w.
func (c *Container) SaveWorkspace(ctx context.Context, w io.Writer) error {
	{
		r, finished, err := c.agent.tar(nil)
		if err != nil {
			return fmt.Errorf("save workspace: %w", err)
		}
		stop := context.AfterFunc(ctx, c.agent.close) // a stalled agent must not hang us
		defer stop()
		_, err = io.Copy(w, r)
		r.CloseWithError(io.ErrClosedPipe)
		<-finished
		if err != nil {
			return fmt.Errorf("save workspace: %w", err)
		}
		return nil
	}
}

// RestoreWorkspace unpacks a tar (from SaveWorkspace) into /workspace.
func (c *Container) RestoreWorkspace(ctx context.Context, r io.Reader) error {
	if err := c.run(ctx, []string{"tar", "-x", "-f", "-", "-C", jobs.WorkspaceDir, "--no-same-owner"}, r, nil); err != nil {
		return fmt.Errorf("restore workspace: %w", err)
	}
	return nil
}

// FileEntry is a file to place in a container.
type FileEntry struct {
	Path    string // absolute: under /workspace, /tmp or /skills
	Content []byte
}

// PutSkills replaces what /skills holds with the given files, by piping a
// tar stream into tar run as root (with no capabilities): the files belong
// to root, so the job (uid 1000) can read them but not change them.
// Docker's copy API cannot write to tmpfs mounts under a read-only root.
func (c *Container) PutSkills(ctx context.Context, files []FileEntry) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, files)) }()
	script := "find " + SkillsDir + " -mindepth 1 -delete && exec tar -x -f - -C / --no-same-owner"
	err := c.runAs(ctx, "0:0", []string{"sh", "-c", script}, pr, nil)
	pr.Close()
	if err != nil {
		return fmt.Errorf("write skills: %w", err)
	}
	return nil
}

// writeTar writes files with a directory entry for every parent below the
// mount point.
func writeTar(w io.Writer, files []FileEntry) error {
	tw := tar.NewWriter(w)
	now := time.Now()
	dirs := map[string]bool{}
	for _, f := range files {
		name := strings.TrimPrefix(f.Path, "/")
		var parents []string
		for dir := path.Dir(name); dir != "." && !isMountPoint(dir); dir = path.Dir(dir) {
			parents = append([]string{dir}, parents...)
		}
		for _, dir := range parents {
			if dirs[dir] {
				continue
			}
			dirs[dir] = true
			if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: now}); err != nil {
				return err
			}
		}
		hdr := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.Content)), ModTime: now}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.Content); err != nil {
			return err
		}
	}
	return tw.Close()
}

func isMountPoint(dir string) bool {
	switch "/" + dir {
	case jobs.WorkspaceDir, "/tmp", SkillsDir:
		return true
	}
	return false
}

// limitedBuffer keeps the first max bytes written to it and drops the rest.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

var errShutdown = errors.New("runner is shutting down")
