package runner

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
)

// Container labels gantry puts on every sandbox it creates.
const (
	LabelManaged = "dev.gantry.managed"
	LabelRunner  = "dev.gantry.runner"
	LabelSession = "dev.gantry.session"
	// LabelPool marks containers made ahead of demand by the warm pool.
	LabelPool = "dev.gantry.pool"
)

// SandboxUser is the unprivileged uid:gid code runs as.
const SandboxUser = "1000:1000"

// SkillsDir is where a job finds its tenant's skills, read-only.
const SkillsDir = wire.SkillsDir

// agentPids is what the agent itself (its threads, bwrap, the sandbox's
// init, the warm interpreter and the two processes around each of its
// jobs) adds to a container's process count on top of the job's limit.
const agentPids = 24

// Under gVisor the container's pids cgroup on the host holds the sandbox
// itself: runsc's sentry and gofer (their threads) and, on the ptrace
// platform, a stub process with threads for each process inside. Measured
// with runsc 20221219: 44 host tasks for a sandbox running one process,
// about 10 more for each further one. A clone refused there panics the
// sentry ("error initializing first thread: resource temporarily
// unavailable") and the whole sandbox dies with status 2, so the host
// limit is scaled from the processes the sandbox may run, with room.
const (
	runscBasePids       = 64
	runscPidsPerProcess = 12
)

// runscPids is the host pids limit for a gVisor sandbox that may run n
// processes.
func runscPids(n int64) int64 { return runscBasePids + runscPidsPerProcess*n }

// agentTmpMB sizes the container's own /tmp under the Namespaces
// isolation, where the agent keeps the skills and each run's program
// (the program gets a fresh /tmp of disk_mb of its own).
const agentTmpMB = 96

// dockerAPI is the part of the Docker engine API the runner uses: one
// narrow interface, so that start failures and dying containers can be
// tested without an engine. *client.Client implements it.
type dockerAPI interface {
	Ping(ctx context.Context, options client.PingOptions) (client.PingResult, error)
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImagePull(ctx context.Context, ref string, options client.ImagePullOptions) (client.ImagePullResponse, error)
	ContainerCreate(ctx context.Context, options client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	ContainerAttach(ctx context.Context, id string, options client.ContainerAttachOptions) (client.ContainerAttachResult, error)
	ContainerStart(ctx context.Context, id string, options client.ContainerStartOptions) (client.ContainerStartResult, error)
	ContainerKill(ctx context.Context, id string, options client.ContainerKillOptions) (client.ContainerKillResult, error)
	ContainerRemove(ctx context.Context, id string, options client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	ContainerInspect(ctx context.Context, id string, options client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerList(ctx context.Context, options client.ContainerListOptions) (client.ContainerListResult, error)
	CopyFromContainer(ctx context.Context, id string, options client.CopyFromContainerOptions) (client.CopyFromContainerResult, error)
	Close() error
}

// SandboxConfig says how sandbox containers are made.
type SandboxConfig struct {
	// Image is the sandbox image (with the agent, see images/sandbox).
	Image string
	// RunnerID labels the containers, so a restarted runner finds its own.
	RunnerID string
	// Runtime is the OCI runtime ("" for Docker's default, "runsc" for
	// gVisor).
	Runtime string
	// Isolation is how the agent runs programs; "" picks Namespaces, or
	// Container under runsc (bubblewrap cannot run inside gVisor).
	Isolation wire.Isolation
	// Warm lists the modules each container's warm interpreter imports
	// (Namespaces only): Python jobs are forked from it. nil means
	// DefaultWarm; an empty list turns the warm interpreter off (Python
	// jobs then start their own, a stateful session's in bubblewrap's sandbox).
	Warm []string
	// WarmMB is added to each container's memory limit for its warm
	// interpreter, so that a job's memory_mb is not shrunk by it
	// (default: DefaultWarmMB).
	WarmMB int
}

// DefaultWarm is what a warm interpreter imports unless configured
// otherwise: docs/PERFORMANCE.md has the memory each module costs.
var DefaultWarm = []string{"numpy", "pandas", "matplotlib.pyplot"}

// DefaultWarmMB covers DefaultWarm's interpreter in a container's memory
// cgroup: about 65 MB of its own memory, 8 MB more of the lean
// interpreter beside it (agent/lean.go), and the pages of the libraries'
// files they read first.
const DefaultWarmMB = 128

// WithDefaults fills in zero fields.
func (c SandboxConfig) WithDefaults() SandboxConfig {
	if c.Isolation == "" {
		c.Isolation = wire.Namespaces
		if c.Runtime == "runsc" {
			c.Isolation = wire.Container
		}
	}
	if c.Warm == nil {
		c.Warm = DefaultWarm
	}
	if c.Isolation != wire.Namespaces {
		c.Warm = []string{} // a container serves one job: nothing to fork from
	}
	if len(c.Warm) == 0 {
		c.WarmMB = 0
	} else if c.WarmMB == 0 {
		c.WarmMB = DefaultWarmMB
	}
	return c
}

// Sandbox creates hardened containers from the sandbox image.
type Sandbox struct {
	docker dockerAPI
	cfg    SandboxConfig
	// awaitWarm has Create wait for every container's warm interpreter
	// (tests that need each Python job forked from it).
	awaitWarm bool

	// languages are the languages the image labels (LabelLanguages), read
	// by CheckImage; nil until then, or when the image says nothing.
	languages atomic.Pointer[[]string]
	// labels caches other images' languages (environments').
	labelsMu sync.Mutex
	labels   map[string]imageLabels
}

// LabelLanguages is the sandbox image's label naming the languages it
// runs, comma-separated (images/sandbox sets it).
const LabelLanguages = "dev.gantry.languages"

// NewSandbox returns a Sandbox using the Docker engine at host ("" means the
// environment's DOCKER_HOST or the default socket).
func NewSandbox(host string, cfg SandboxConfig) (*Sandbox, error) {
	opts := []client.Opt{client.FromEnv}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	c, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return newSandbox(c, cfg), nil
}

func newSandbox(d dockerAPI, cfg SandboxConfig) *Sandbox {
	return &Sandbox{docker: d, cfg: cfg.WithDefaults()}
}

// Isolation is how this sandbox's containers run programs.
func (s *Sandbox) Isolation() wire.Isolation { return s.cfg.Isolation }

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
	img, err := s.docker.ImageInspect(ctx, s.cfg.Image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("sandbox image %s not found: build it with `make image` (or set GANTRY_IMAGE)", s.cfg.Image)
		}
		return fmt.Errorf("inspect sandbox image %s: %w", s.cfg.Image, err)
	}
	if img.Config != nil {
		if v, ok := img.Config.Labels[LabelLanguages]; ok {
			langs := strings.Split(v, ",")
			s.languages.Store(&langs)
		}
	}
	return nil
}

// Languages are the languages the sandbox image runs, as it labels them
// (known once CheckImage succeeded); nil when the image does not say.
func (s *Sandbox) Languages() []string {
	if p := s.languages.Load(); p != nil {
		return *p
	}
	return nil
}

// Runs reports whether the image runs the named language, as far as it
// says.
func (s *Sandbox) Runs(language string) bool {
	langs := s.Languages()
	return langs == nil || slices.Contains(langs, language)
}

// Check makes one container and has its agent report in: the image holds
// an agent of this runner's protocol, (under Namespaces) bubblewrap can
// build a sandbox on this host, and the warm interpreter loads its
// libraries and builds one too. It removes the container after.
func (s *Sandbox) Check(ctx context.Context) error {
	if err := s.CheckImage(ctx); err != nil {
		return err
	}
	c, err := s.Create(ctx, ContainerSpec{Limits: jobs.DefaultPolicy().DefaultLimits})
	if err != nil {
		return err
	}
	err = c.awaitWarm(ctx)
	if rerr := c.Remove(context.WithoutCancel(ctx)); err == nil {
		err = rerr
	}
	return err
}

// awaitWarm waits until the container's warm interpreter has loaded (at
// once without one), so that its Python jobs fork from it: an error means
// it failed to, and the container cannot serve.
func (c *Container) awaitWarm(ctx context.Context) error {
	if !c.warm {
		return nil
	}
	if err := c.conn.Warm(ctx); err != nil {
		return fmt.Errorf("%w: %w: %w (GANTRY_WARM_PRELOAD names what it imports; none turns it off)", errAgent, errWarmFailed, err)
	}
	return nil
}

// errWarmFailed: a container's warm interpreter did not load (the
// container is removed).
var errWarmFailed = errors.New("the warm interpreter failed")

// ContainerSpec says what a container is for and what it may use.
type ContainerSpec struct {
	SessionID string // set for a session's container
	Pool      bool   // made ahead of demand by the warm pool
	// Durable: a durable stateful session's, run under gVisor by the
	// runner where it can checkpoint (gvisor.go); RestoreFrom, when set, is
	// the checkpoint (a directory) it is restored from.
	Durable     bool
	RestoreFrom string
	Limits      jobs.Limits
	// Image is an environment's image ("": the sandbox image).
	Image string
}

// RefusedError is Docker refusing a container for what the job asked (say,
// more CPUs than the host has): no retry can succeed.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "Docker refused the container: " + e.Reason }

// errAgent marks a container whose agent cannot serve: the image or the
// host is wrong, not the job. It is retried no better elsewhere.
var errAgent = errors.New("sandbox agent unusable")

// Create creates and starts a hardened container whose main process is
// the sandbox agent, attached to this runner, and waits for the agent to
// report in. The container stops when the runner goes away: its stdin is
// attached once, so it closes with the runner's connection and the agent
// exits.
func (s *Sandbox) Create(ctx context.Context, cs ContainerSpec) (*Container, error) {
	cfg, host, err := s.containerConfig(cs)
	if err != nil {
		return nil, err
	}
	// Creating and starting are not interrupted midway: a create cancelled
	// after the engine acted on it would leave a container nobody knows.
	want := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	res, err := s.docker.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	if cerrdefs.IsInvalidArgument(err) {
		return nil, &RefusedError{Reason: err.Error()}
	}
	if err != nil {
		return nil, fmt.Errorf("create container: %w", err)
	}
	c := &Container{id: res.ID, host: s, warm: s.cfg.Isolation == wire.Namespaces && len(s.cfg.Warm) > 0,
		born: time.Now(), limits: cs.Limits.Container(), session: cs.SessionID, image: cs.Image}
	// Attach before starting, so that nothing the agent says is lost.
	att, err := s.docker.ContainerAttach(ctx, res.ID, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		c.Remove(ctx) //nolint:errcheck
		return nil, fmt.Errorf("attach to container: %w", err)
	}
	c.attach(att.HijackedResponse)
	if _, err := s.docker.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		c.Remove(ctx) //nolint:errcheck
		return nil, fmt.Errorf("start container: %w", err)
	}
	c.born = time.Now() // running from now on
	helloCtx, cancelHello := context.WithTimeout(ctx, 30*time.Second)
	hello, err := c.conn.Hello(helloCtx)
	cancelHello()
	switch {
	case err != nil:
		err = fmt.Errorf("the sandbox agent did not report in: %w", err)
	case hello.Protocol != wire.Protocol:
		err = fmt.Errorf("%w: image %s has agent protocol %d, this runner speaks %d: rebuild it with `make image` (or set GANTRY_IMAGE; an environment's image, FROM the current sandbox image)",
			errAgent, cmp.Or(cs.Image, s.cfg.Image), hello.Protocol, wire.Protocol)
	case hello.Error != "":
		err = fmt.Errorf("%w: %s (try GANTRY_ISOLATION=container, one container per job, if this host forbids unprivileged user namespaces)", errAgent, hello.Error)
	}
	// A container made ahead of demand is handed out once its warm
	// interpreter has loaded (half a second to a second). One made for a
	// waiting job is not: the job runs at once, in a sandbox of
	// bubblewrap's, the interpreter's loading paused while it runs.
	if err == nil && (cs.Pool || s.awaitWarm) {
		err = c.awaitWarm(ctx)
	}
	if err == nil {
		err = want.Err()
	}
	if err != nil {
		c.Remove(ctx) //nolint:errcheck
		return nil, err
	}
	return c, nil
}

// memoryMB is the memory limit of a container made for lim: the job's
// memory_mb, and the warm interpreter's share on top, so that the job
// keeps all of its memory_mb (pages it shares with the interpreter count
// once).
func (s *Sandbox) memoryMB(lim jobs.Limits) int64 { return int64(lim.MemoryMB + s.cfg.WarmMB) }

// containerConfig is the hardened container for cs. Under Namespaces the
// seccomp profile also allows what bubblewrap needs and /proc is left
// unmasked (bubblewrap mounts each sandbox's own /proc, which the kernel
// refuses over a masked one); each sandbox hides the same paths again.
func (s *Sandbox) containerConfig(cs ContainerSpec) (*container.Config, *container.HostConfig, error) {
	lim := cs.Limits
	pids := int64(lim.Pids + agentPids)
	if s.cfg.Runtime == "runsc" {
		pids = runscPids(pids)
	}
	init := true
	mem := s.memoryMB(lim) << 20
	tmpfs := func(mb int) string {
		return fmt.Sprintf("rw,exec,nosuid,nodev,size=%dm,mode=0755,uid=1000,gid=1000", mb)
	}
	security := []string{"no-new-privileges"}
	host := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		Init:           &init,
		CapDrop:        []string{"ALL"},
		IpcMode:        "private",
		ShmSize:        16 << 20,
		LogConfig:      container.LogConfig{Type: "none"},
		Runtime:        s.cfg.Runtime,
		Resources: container.Resources{
			Memory:     mem,
			MemorySwap: mem, // equal to Memory: no swap
			NanoCPUs:   int64(lim.CPUs * 1e9),
			PidsLimit:  &pids,
			Ulimits:    []*container.Ulimit{{Name: "nofile", Soft: 1024, Hard: 1024}},
		},
	}
	if s.cfg.Isolation == wire.Namespaces {
		profile, err := seccompProfile()
		if err != nil {
			return nil, nil, fmt.Errorf("seccomp profile: %w", err)
		}
		security = append(security, "seccomp="+profile)
		host.MaskedPaths, host.ReadonlyPaths = []string{}, []string{}
		host.Tmpfs = map[string]string{jobs.WorkspaceDir: tmpfs(lim.DiskMB), "/tmp": tmpfs(agentTmpMB)}
	} else {
		// The program runs directly in the container: /tmp and /var/tmp
		// are its own (as a sandbox's layout makes them) and the agent
		// writes the skills (the container serves one job).
		host.Tmpfs = map[string]string{jobs.WorkspaceDir: tmpfs(lim.DiskMB), "/tmp": tmpfs(lim.DiskMB), "/var/tmp": tmpfs(lim.DiskMB),
			SkillsDir: tmpfs(64)}
	}
	host.SecurityOpt = security
	cmd := []string{"/usr/local/bin/gantry-agent", "-isolation", string(s.cfg.Isolation)}
	if len(s.cfg.Warm) > 0 {
		cmd = append(cmd, "-warm", strings.Join(s.cfg.Warm, ","))
	}
	cfg := &container.Config{
		Image:      cmp.Or(cs.Image, s.cfg.Image),
		User:       SandboxUser,
		WorkingDir: jobs.WorkspaceDir,
		Cmd:        cmd,
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
			LabelRunner:  s.cfg.RunnerID,
			LabelSession: cs.SessionID,
			LabelPool:    strconv.FormatBool(cs.Pool),
		},
	}
	return cfg, host, nil
}

// RemoveLeftovers removes containers this runner id created in an earlier
// life (a crash leaves them behind). It returns how many it removed.
func (s *Sandbox) RemoveLeftovers(ctx context.Context) (int, error) {
	return s.removeWhere(ctx, make(client.Filters).
		Add("label", LabelManaged+"=true").Add("label", LabelRunner+"="+s.cfg.RunnerID))
}

// RemoveSession removes every container of a closed session on this Docker
// host, whichever runner made it (one made by a runner that died is
// nobody's to remove otherwise).
func (s *Sandbox) RemoveSession(ctx context.Context, sessionID string) error {
	_, err := s.removeWhere(ctx, make(client.Filters).
		Add("label", LabelManaged+"=true").Add("label", LabelSession+"="+sessionID))
	return err
}

// reapAge is how long a stopped gantry container stays before any runner
// on its Docker host removes it: long enough for its own runner to have
// inspected it.
const reapAge = time.Minute

// Reap removes stopped gantry containers of any runner on this Docker
// host that stopped more than reapAge ago: a runner that died leaves its
// containers stopped (their agents exit when its connection closes) and
// nobody else would remove them. It returns how many it removed.
func (s *Sandbox) Reap(ctx context.Context) (int, error) {
	res, err := s.docker.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", LabelManaged+"=true").
			Add("status", "exited").Add("status", "dead").Add("status", "created")})
	if err != nil {
		return 0, fmt.Errorf("list stopped containers: %w", err)
	}
	n := 0
	for _, item := range res.Items {
		insp, err := s.docker.ContainerInspect(ctx, item.ID, client.ContainerInspectOptions{})
		if err != nil || insp.Container.State == nil {
			continue
		}
		// The list is a moment old: a container it saw created may have
		// started since (a slow runtime such as gVisor takes a second),
		// and a running one has no finish time. Judge by its state now.
		var since string
		switch insp.Container.State.Status {
		case container.StateExited, container.StateDead:
			since = insp.Container.State.FinishedAt
		case container.StateCreated:
			since = insp.Container.Created
		default:
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, since)
		if err != nil || time.Since(t) < reapAge {
			continue
		}
		if s.remove(ctx, item.ID) == nil {
			n++
		}
	}
	return n, nil
}

func (s *Sandbox) removeWhere(ctx context.Context, f client.Filters) (int, error) {
	res, err := s.docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, fmt.Errorf("list containers: %w", err)
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

// running lists the ids of this runner's running containers.
func (s *Sandbox) running(ctx context.Context) (map[string]bool, error) {
	res, err := s.docker.ContainerList(ctx, client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", LabelRunner+"="+s.cfg.RunnerID).Add("status", "running"),
	})
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(res.Items))
	for _, c := range res.Items {
		ids[c.ID] = true
	}
	return ids, nil
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

// Container is one sandbox container and its agent. It is bound, from its
// first job, to one tenant and limits profile (or one session) for life.
type Container struct {
	id string
	// host runs it: Docker (the Sandbox), or gVisor itself (gvisor.go).
	host containerHost
	// warm: its agent starts a warm interpreter.
	warm bool
	conn *wire.Conn
	// stderr keeps the start of what the agent itself printed.
	stderr lockedBuffer

	born    time.Time
	limits  jobs.Limits // the container part of the job limits it was made with
	session string
	image   string // an environment's image ("": the sandbox image)
	// live names the stateful session sandbox the container holds
	// ("<container>/<number>", "" for none); only the session's attempt
	// touches it.
	live string
	// restored, when set, says where the live sandbox it holds was
	// restored from, for the next job's live_state (which clears it).
	restored string

	// Set by the fleet under its lock.
	tenant   string // "" while unbound
	epoch    int64  // the tenant's key epoch when bound
	jobs     int
	lastUsed time.Time
	state    ctrState // changed by fleet.setLocked only
	// skills is the stamp of the skills the agent holds ("" for none);
	// only the attempt that owns the container touches it.
	skills string
	// memMB is what the fleet reserved for it (memory.go), released
	// once it is removed.
	memMB int64
	// egress is a stateful session's egress between its runs (egress.go).
	egress liveEgress

	removeOnce sync.Once
	removeErr  error
	// copied closes when the goroutine copying the agent's output ends
	// (the connection closed); Remove waits for it.
	copied chan struct{}
}

// ID is the Docker container id.
func (c *Container) ID() string { return c.id }

// imageRef is the image it runs: its environment's, else def.
func (c *Container) imageRef(def string) string { return cmp.Or(c.image, def) }

func (c *Container) attach(att client.HijackedResponse) {
	pr, pw := io.Pipe()
	c.copied = make(chan struct{})
	go func() {
		defer close(c.copied)
		_, err := stdcopy.StdCopy(pw, &c.stderr, att.Reader)
		pw.CloseWithError(err)
	}()
	c.conn = wire.NewConn(att.Conn, pr, func() { att.Close(); pr.CloseWithError(io.ErrClosedPipe) }, c.stderr.String)
}

// lastWords is the start of what the agent printed, for the log of a
// container that broke: read once the agent's output has been copied to
// its end (for at most a second), so that what it printed as it stopped is
// in.
func (c *Container) lastWords() string {
	if c.copied != nil {
		select {
		case <-c.copied:
		case <-time.After(time.Second):
		}
	}
	return c.stderr.String()
}

// containerHost runs containers: Docker (Sandbox), or runsc itself
// (gvisor, for stateful sessions whose live state is checkpointed).
type containerHost interface {
	// kill kills every process of the container.
	kill(ctx context.Context, id string)
	// remove kills and removes the container; removing one that is gone
	// is no error.
	remove(ctx context.Context, id string) error
	// diagnose says what became of a container whose agent stopped
	// answering.
	diagnose(ctx context.Context, id string) (fate, error)
}

// Kill kills every process in the container; the agent connection breaks.
func (c *Container) Kill(ctx context.Context) {
	c.host.kill(ctx, c.id)
	if c.conn != nil {
		c.conn.Close()
	}
}

func (s *Sandbox) kill(ctx context.Context, id string) {
	_, _ = s.docker.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
}

// Remove kills and removes the container. It is idempotent.
func (c *Container) Remove(ctx context.Context) error {
	c.removeOnce.Do(func() {
		if c.conn != nil {
			c.conn.Close()
		}
		c.removeErr = c.host.remove(ctx, c.id)
		if c.copied != nil {
			select {
			case <-c.copied:
			case <-ctx.Done():
			}
		}
	})
	return c.removeErr
}

// fate says what became of a container whose agent stopped answering.
type fate struct {
	gone      bool // removed, or Docker cannot say: not the program's doing
	oomKilled bool
	exitCode  int
	running   bool
}

// diagnose inspects a container whose agent connection broke.
func (c *Container) diagnose(ctx context.Context) (fate, error) { return c.host.diagnose(ctx, c.id) }

func (s *Sandbox) diagnose(ctx context.Context, id string) (fate, error) {
	insp, err := s.docker.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return fate{gone: true}, nil
	}
	if err != nil || insp.Container.State == nil {
		return fate{gone: true}, err
	}
	st := insp.Container.State
	return fate{oomKilled: st.OOMKilled, exitCode: st.ExitCode, running: st.Running}, nil
}

// lockedBuffer keeps the first 4 KiB written to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := 4096 - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.buf.String())
}

// shortID names a container in logs and live sandbox ids: a Docker id's
// first 12 characters, or a gVisor container's ("gv-RUNNER-ID", gvisor.go)
// "gv-" and the last 9 of its own id, which are random (its first ones,
// the runner and a time, are shared by its neighbours).
func shortID(id string) string {
	if strings.HasPrefix(id, "gv-") && len(id) > 12 {
		return "gv-" + id[len(id)-9:]
	}
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

var errShutdown = errors.New("runner is shutting down")
