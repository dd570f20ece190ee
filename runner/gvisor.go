package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
)

// gVisor, run by the runner itself. A stateful session's container runs
// under gVisor's runsc, started here rather than through Docker, so that
// its whole live state — the interpreter's memory, its processes, /tmp and
// the workspace — can be checkpointed (pause, snapshot) and restored, on
// this runner or another, once (resume) or many times (fork). Docker only
// provides the image: its layers are mounted read-only as the container's
// root. The container is hardened as Docker's are (runner/sandbox.go): no
// network, a read-only root, no capabilities, no_new_privs, uid 1000,
// memory without swap, CPU and pids limits, a size-capped /workspace and
// /tmp; the agent runs under an init of its own (`gantry-agent init`, as
// Docker's --init runs tini), with the Container isolation (gVisor is the
// sandbox). The agent speaks to the
// runner on the runsc process's stdin and stdout, as on Docker's attach
// stream; a restored copy speaks on its restorer's, after a resume.
//
// It needs runsc 2024-07 or later (scripts/ensure-runsc.sh installs it),
// and root (runsc makes sandboxes and cgroups; the layers are mounted).

// GVisorConfig enables running stateful sessions under gVisor directly.
type GVisorConfig struct {
	// Runsc is runsc's path; "" turns it off.
	Runsc string
	// StateDir holds runsc's state, the containers' bundles and the
	// images' mounted roots.
	StateDir string
	// Platform is gVisor's platform (systrap; kvm hangs at boot on the
	// VMs gantry was measured on, and a checkpoint restores only on the
	// platform that made it).
	Platform string
	// DebugLog, when set, is a directory runsc writes its debug logs to.
	DebugLog string
}

// minRunscDate is the oldest runsc that checkpoints and restores a
// container that goes on running (Debian 12's 2022-12 panics).
const minRunscDate = 20240729

// gvisor runs containers under runsc for one runner.
type gvisor struct {
	cfg GVisorConfig
	sb  *Sandbox
	// version is runsc's (its date).
	version string

	mu    sync.Mutex
	roots map[string]*imageRoot // image reference -> its mounted layers
	seq   int
}

// imageRoot is an image's layers, mounted read-only.
type imageRoot struct {
	id  string
	dir string
	env []string
}

var runscVersionRE = regexp.MustCompile(`runsc version (?:0\.0~)?(\d{8})`)

// newGVisor checks that runsc can checkpoint here and prepares its
// directories. An error says why live state cannot be kept.
func newGVisor(cfg GVisorConfig, sb *Sandbox) (*gvisor, error) {
	if cfg.Runsc == "" {
		return nil, errors.New("no runsc configured")
	}
	if cfg.Platform == "" {
		cfg.Platform = "systrap"
	}
	out, err := exec.Command(cfg.Runsc, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("runsc --version: %w", err)
	}
	m := runscVersionRE.FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("runsc --version said %q", strings.TrimSpace(string(out)))
	}
	if d, _ := strconv.Atoi(string(m[1])); d < minRunscDate {
		return nil, fmt.Errorf("runsc %s is older than 2024-07-29, which checkpointing needs (scripts/ensure-runsc.sh installs bookworm-backports')", m[1])
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("running containers under runsc itself needs root")
	}
	for _, d := range []string{"state", "bundles", "roots"} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, d), 0o700); err != nil {
			return nil, err
		}
	}
	return &gvisor{cfg: cfg, sb: sb, version: string(m[1]), roots: map[string]*imageRoot{}}, nil
}

// runtime names what a checkpoint made here restores on: runsc's version
// and platform (a checkpoint of another version, or of another platform,
// does not load).
func (g *gvisor) runtime() string { return "runsc " + g.version + " " + g.cfg.Platform }

// imageID is the id of the image a container runs ("" if unknown).
func (g *gvisor) imageID(image string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.roots[image]; r != nil {
		return r.id
	}
	return ""
}

// runsc runs runsc with the runner's state root and flags.
func (g *gvisor) runsc(args ...string) *exec.Cmd {
	base := []string{"--root", filepath.Join(g.cfg.StateDir, "state"), "--network=none", "--platform=" + g.cfg.Platform}
	if g.cfg.DebugLog != "" {
		base = append(base, "--debug", "--debug-log="+g.cfg.DebugLog+"/")
	}
	return exec.Command(g.cfg.Runsc, append(base, args...)...)
}

// root mounts image's layers read-only (once per image), as the root of
// its containers.
func (g *gvisor) root(ctx context.Context, image string) (*imageRoot, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.roots[image]; r != nil {
		return r, nil
	}
	res, err := g.sb.docker.ImageInspect(ctx, image)
	if err != nil {
		return nil, fmt.Errorf("inspect image %s: %w", image, err)
	}
	if res.GraphDriver == nil || res.GraphDriver.Name != "overlay2" {
		return nil, fmt.Errorf("image %s is not on Docker's overlay2 storage: its layers cannot be mounted", image)
	}
	layers := res.GraphDriver.Data["UpperDir"]
	if lower := res.GraphDriver.Data["LowerDir"]; lower != "" {
		layers += ":" + lower
	}
	dir := filepath.Join(g.cfg.StateDir, "roots", strings.TrimPrefix(res.ID, "sha256:")[:24])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if !mounted(dir) {
		if err := syscall.Mount("overlay", dir, "overlay", syscall.MS_RDONLY, "lowerdir="+layers); err != nil {
			return nil, fmt.Errorf("mount image %s's layers: %w", image, err)
		}
	}
	var env []string
	if res.Config != nil {
		env = res.Config.Env
	}
	r := &imageRoot{id: res.ID, dir: dir, env: env}
	g.roots[image] = r
	return r, nil
}

// readImageFile reads a file of image (at most max bytes), through its
// mounted layers; a symlink is followed only within them.
func (g *gvisor) readImageFile(ctx context.Context, image, path string, max int64) ([]byte, error) {
	r, err := g.root(ctx, image)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(strings.TrimPrefix(path, "/"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// mounted reports whether dir is a mount point.
func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// newID names a container of this runner.
func (g *gvisor) newID() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	return fmt.Sprintf("gv-%s-%s", sanitizeID(g.sb.cfg.RunnerID), strings.ToLower(jobs.NewID("c")[2:]))
}

func sanitizeID(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
}

// spec is the OCI spec of a container for cs, rooted at root.
func (g *gvisor) spec(cs ContainerSpec, root *imageRoot, id string) *specs.Spec {
	lim := cs.Limits
	mem := int64(lim.MemoryMB) << 20
	pids := runscPids(int64(lim.Pids + agentPids))
	period := uint64(100_000)
	quota := int64(lim.CPUs * float64(period))
	tmpfs := func(dst string, mb int) specs.Mount {
		return specs.Mount{Destination: dst, Type: "tmpfs", Source: "tmpfs",
			Options: []string{"rw", "exec", "nosuid", "nodev", fmt.Sprintf("size=%dm", mb), "mode=0755", "uid=1000", "gid=1000"}}
	}
	noCaps := []string{}
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User: specs.User{UID: 1000, GID: 1000},
			Args: []string{"/usr/local/bin/gantry-agent", "init", "--", "/usr/local/bin/gantry-agent", "-isolation", string(wire.Container)},
			Env:  root.env,
			Cwd:  jobs.WorkspaceDir,
			Capabilities: &specs.LinuxCapabilities{Bounding: noCaps, Effective: noCaps, Inheritable: noCaps,
				Permitted: noCaps, Ambient: noCaps},
			NoNewPrivileges: true,
			Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
		},
		Root:     &specs.Root{Path: root.dir, Readonly: true},
		Hostname: id[:min(len(id), 63)],
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=16m"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			tmpfs(jobs.WorkspaceDir, lim.DiskMB),
			tmpfs("/tmp", lim.DiskMB),
			tmpfs(SkillsDir, 64),
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace},
				{Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace}},
			Resources: &specs.LinuxResources{
				Memory: &specs.LinuxMemory{Limit: &mem, Swap: &mem},
				CPU:    &specs.LinuxCPU{Period: &period, Quota: &quota},
				Pids:   &specs.LinuxPids{Limit: pids},
			},
			CgroupsPath: "/gantry/" + id,
		},
	}
}

// bundle writes a container's bundle (its config.json).
func (g *gvisor) bundle(cs ContainerSpec, root *imageRoot, id string) (string, error) {
	dir := filepath.Join(g.cfg.StateDir, "bundles", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	b, err := json.Marshal(g.spec(cs, root, id))
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600)
}

// Create starts a container for cs under runsc and waits for its agent to
// report in (the fleet's create calls start itself, within its memory
// admission).
func (g *gvisor) Create(ctx context.Context, cs ContainerSpec) (*Container, error) {
	return g.start(ctx, cs, "")
}

// start runs a container for cs (image "") or restores a copy of the
// container checkpointed in image (a directory: checkpoint.img and its
// pages), its memory, processes, /tmp and workspace as they were; a
// restored copy's agent is resumed before start returns.
func (g *gvisor) start(ctx context.Context, cs ContainerSpec, image string) (*Container, error) {
	root, err := g.root(ctx, cmp.Or(cs.Image, g.sb.cfg.Image))
	if err != nil {
		return nil, err
	}
	id := g.newID()
	dir, err := g.bundle(cs, root, id)
	if err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	if image == "" {
		cmd = g.runsc("run", "--bundle", dir, id)
	} else {
		cmd = g.runsc("restore", "--image-path", image, "--bundle", dir, id)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &Container{id: id, host: g, born: time.Now(), limits: cs.Limits.Container(), session: cs.SessionID, image: cs.Image}
	cmd.Stderr = &c.stderr
	// The sandbox is the runner's: it dies with it rather than run on
	// unowned (its state is checkpointed or lost, as the session's owner
	// decides).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("runsc %s: %w", map[bool]string{true: "run", false: "restore"}[image == ""], err)
	}
	c.copied = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(c.copied)
	}()
	c.conn = wire.NewConn(stdin, stdout, func() { stdin.Close() }, c.stderr.String)
	if image == "" {
		err = g.hello(ctx, c)
	} else {
		err = c.conn.Resume(ctx)
	}
	if err != nil {
		_ = c.Remove(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%w: %w (%s)", errAgent, err, c.lastWords())
	}
	return c, nil
}

// hello waits for a new container's agent to report in.
func (g *gvisor) hello(ctx context.Context, c *Container) error {
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	hello, err := c.conn.Hello(hctx)
	switch {
	case err != nil:
		return fmt.Errorf("the sandbox agent did not report in: %w", err)
	case hello.Protocol != wire.Protocol:
		return fmt.Errorf("the image's agent speaks protocol %d, this runner %d: rebuild it with `make image`", hello.Protocol, wire.Protocol)
	case hello.Error != "":
		return errors.New(hello.Error)
	}
	return nil
}

// Checkpoint saves the container's whole state into dir: its agent is
// quiesced first (nothing is being written on its stream), and, with
// leaveRunning, resumed after; otherwise the container is gone after it.
func (g *gvisor) Checkpoint(ctx context.Context, c *Container, dir string, leaveRunning bool) error {
	if err := c.conn.Quiesce(ctx); err != nil {
		return fmt.Errorf("quiesce the agent: %w", err)
	}
	args := []string{"checkpoint", "--compression=none", "--image-path", dir}
	if leaveRunning {
		args = append(args, "--leave-running")
	}
	out, err := g.runsc(append(args, c.id)...).CombinedOutput()
	if err != nil {
		if leaveRunning {
			_ = c.conn.Resume(context.WithoutCancel(ctx))
		}
		return fmt.Errorf("runsc checkpoint: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if leaveRunning {
		return c.conn.Resume(ctx)
	}
	return nil
}

func (g *gvisor) kill(ctx context.Context, id string) {
	_ = g.runsc("kill", "--all", id, "KILL").Run()
}

// remove kills and deletes the container and its bundle.
func (g *gvisor) remove(ctx context.Context, id string) error {
	_ = g.runsc("kill", "--all", id, "KILL").Run()
	out, err := g.runsc("delete", "--force", id).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "does not exist") && !strings.Contains(string(out), "not found") {
		return fmt.Errorf("runsc delete %s: %w: %s", id, err, strings.TrimSpace(string(out)))
	}
	return os.RemoveAll(filepath.Join(g.cfg.StateDir, "bundles", id))
}

// diagnose says what became of a container whose agent stopped answering:
// runsc's state says whether it runs; an out-of-memory kill shows in its
// cgroup.
func (g *gvisor) diagnose(ctx context.Context, id string) (fate, error) {
	out, err := g.runsc("state", id).Output()
	if err != nil {
		return fate{gone: true}, nil
	}
	var st struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(out, &st) != nil {
		return fate{gone: true}, nil
	}
	f := fate{running: st.Status == "running"}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory/gantry/" + id + "/memory.oom_control"); err == nil {
		f.oomKilled = strings.Contains(string(b), "oom_kill 1") || regexp.MustCompile(`oom_kill [1-9]`).Match(b)
	}
	return f, nil
}

// running lists the ids of this runner's containers runsc runs.
func (g *gvisor) running() (map[string]bool, error) {
	out, err := g.runsc("list", "--format=json").Output()
	if err != nil {
		return nil, fmt.Errorf("runsc list: %w", err)
	}
	var list []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("runsc list: %w", err)
	}
	running := map[string]bool{}
	for _, c := range list {
		if c.Status == "running" {
			running[c.ID] = true
		}
	}
	return running, nil
}

// RemoveLeftovers deletes the containers an earlier life of this runner
// left under runsc, and unmounts the images' roots it left mounted (a
// runner killed outright does not unmount them, and this life mounts only
// the images it uses: another image's root would stay mounted for good).
func (g *gvisor) RemoveLeftovers(ctx context.Context) (int, error) {
	defer g.unmountLeftovers()
	out, err := g.runsc("list", "--format=json").Output()
	if err != nil {
		return 0, fmt.Errorf("runsc list: %w", err)
	}
	var list []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return 0, fmt.Errorf("runsc list: %w", err)
	}
	prefix := "gv-" + sanitizeID(g.sb.cfg.RunnerID) + "-"
	n := 0
	for _, c := range list {
		if strings.HasPrefix(c.ID, prefix) {
			if err := g.remove(ctx, c.ID); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// unmountLeftovers unmounts the images' roots below the state directory
// that no container of this life uses.
func (g *gvisor) unmountLeftovers() {
	g.mu.Lock()
	defer g.mu.Unlock()
	inUse := map[string]bool{}
	for _, r := range g.roots {
		inUse[r.dir] = true
	}
	entries, _ := os.ReadDir(filepath.Join(g.cfg.StateDir, "roots"))
	for _, e := range entries {
		if dir := filepath.Join(g.cfg.StateDir, "roots", e.Name()); !inUse[dir] && mounted(dir) {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	}
}

// Close unmounts the images' roots (the containers are the fleet's to
// remove first).
func (g *gvisor) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for image, r := range g.roots {
		_ = syscall.Unmount(r.dir, syscall.MNT_DETACH)
		delete(g.roots, image)
	}
}
