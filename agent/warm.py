# gantry's warm interpreter (after pyrun.py; see warm.go and
# docs/ARCHITECTURE.md, "The warm interpreter"). One per sandbox container,
# started by the agent as uid 1000 without capabilities. Before anything
# else it moves into a user and a pid namespace of its own, uid and gid
# 1000 mapped to themselves (_own_namespaces), where it holds the
# capabilities to give each sandbox a pid namespace and to return from it.
# It imports the data libraries once, then serves the agent on a
# SOCK_SEQPACKET socket (fd 3): each request names a job and carries its
# stdin, stdout and stderr; the interpreter makes the job's sandbox, the way
# bubblewrap makes one for other programs, as two processes (_make):
#
#   init:        pid 1 of a new pid namespace, started first
#                (gantry-sandbox-init, exec'd, execute-only so not
#                dumpable): reaps what the job leaves behind and, with
#                egress, serves the relay on the listener the job's process
#                passes it; it stays in the interpreter's user namespace,
#                out of the job's reach
#   job (P2):    the interpreter's fork, beside the init: the sandbox's
#                mounts in a new mount namespace, as the request's layout
#                lists them (agent/layout.go defines every sandbox's; this
#                file only carries the steps out, and bubblewrap's
#                arguments are rendered from the same layout); then its own
#                user namespace (and net, ipc, uts, cgroup), no further
#                user namespaces (max_user_namespaces 0); every capability
#                dropped (bounding set too), no_new_privs, the job's seccomp
#                filter, only its stdin, stdout and stderr open; random
#                generators re-seeded; then the program runs in this already
#                warm interpreter as `python3 <file>` would, or (for a
#                stateful session) the session's interpreter serves the
#                session's jobs until the session ends.
#
# When the job's process ends, the interpreter kills the init, and the
# kernel everything left in the pid namespace. The interpreter itself never
# runs a job's code and reads nothing a job writes: it only forks, reaps and
# reports to the agent. The agent may ask for a sandbox ahead of its job (a
# spare: the two processes above, the job process locked down and waiting
# for its streams and description on a socket whose other end the agent
# holds); when and how many is the agent's to decide (agent/spare.go).
import json, socket, selectors, signal, ctypes, struct, errno, resource, time

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x2000000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE = 1024, 2048, 4096, 16384, 1 << 18
MS_RELATIME, MS_STRICTATIME = 1 << 21, 1 << 24
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NAME, PR_CAPBSET_DROP = 1, 4, 15, 24
PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 22, 38, 47
SECCOMP_MODE_FILTER, PR_CAP_AMBIENT_CLEAR_ALL = 2, 4
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
# The job's process gets the interpreter's status pipe as fd 3 and a
# socket to its sandbox's init as fd 5 (the egress relay's listener goes
# to the init on it).
_INIT_FD = 5
_WALL = 0x40000000  # waitpid: children of any kind, clones too
NAMESPACES = {"user": CLONE_NEWUSER, "mount": CLONE_NEWNS, "pid": CLONE_NEWPID, "net": CLONE_NEWNET,
              "ipc": CLONE_NEWIPC, "uts": CLONE_NEWUTS, "cgroup": CLONE_NEWCGROUP}


def _check(r, what):
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def _mount(src, dst, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()
    _check(_libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), "mount %s" % dst)


def _prctl(op, a=0, b=0, c=0, d=0):
    _check(_libc.prctl(op, a, b, c, d), "prctl %d" % op)


def _write(path, data):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


def _name(name):
    # The process name ps and /proc/<pid>/comm show (at most 15 bytes).
    buf = ctypes.create_string_buffer(name.encode())
    _libc.prctl(PR_SET_NAME, ctypes.addressof(buf), 0, 0, 0)


def _mount_points():
    """The mount points this process sees, in mount order."""
    import re

    with open("/proc/self/mountinfo") as f:
        # Fields: id, parent, dev, root, mount point, ...; spaces and such
        # in names are octal escapes.
        return [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split(" ")[4]) for line in f]


def _under(path, top):
    return path == top or path.startswith(top + "/")


def _readonly(path, extra=0):
    """Remounts the mount at path read-only, nosuid and nodev, keeping the
    flags the kernel locked when the mount namespace was copied (noexec and
    the atime mode)."""
    f = os.statvfs(path).f_flag
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | extra
    if f & os.ST_NOEXEC:
        flags |= MS_NOEXEC
    if f & os.ST_NODIRATIME:
        flags |= MS_NODIRATIME
    if f & os.ST_NOATIME:
        flags |= MS_NOATIME
    elif f & os.ST_RELATIME:
        flags |= MS_RELATIME
    else:
        flags |= MS_STRICTATIME
    _mount(None, path, None, flags)


def _bind_fd(fd, dst, ro, device=False):
    """Binds what fd (O_PATH) names at dst, read-only or read-write, nosuid
    and (but a device's) nodev, as bubblewrap binds."""
    _mount("/proc/self/fd/%d" % fd, dst, None, MS_BIND)
    if ro:
        _readonly(dst)
    else:
        _mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_NOSUID | (0 if device else MS_NODEV))


def _apply_layout(layout):
    """Makes the sandbox's mounts, step by step as the layout lists them (in
    the job's process, before it runs the job). agent/layout.go defines the
    layout and what each step means; nothing is mounted here that it does
    not list."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    steps = layout["mounts"]
    # What a step binds may be covered by an earlier one (under /tmp or
    # /dev): every source is held open from the start.
    held = {}
    for m in steps:
        srcs = [m["src"]] if m["kind"] == "bind" else ["/dev/" + d for d in m.get("devices") or ()]
        if m["kind"] == "mask":
            srcs = ["/dev/null"]
        for src in srcs:
            if src not in held:
                held[src] = os.open(src, os.O_PATH)
    for m in steps:
        kind, dst = m["kind"], m["dst"]
        if kind == "root":
            # Every mount the container has, read-only, as bubblewrap's
            # --ro-bind / / makes it (what the later steps cover too).
            for point in _mount_points():
                _readonly(point)
        elif kind == "dev":
            _mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
            for d in m.get("devices") or ():
                os.close(os.open(dst + "/" + d, os.O_CREAT | os.O_WRONLY, 0o666))
                _bind_fd(held["/dev/" + d], dst + "/" + d, False, device=True)
            for name, target in m.get("links") or ():
                os.symlink(target, dst + "/" + name)
            os.mkdir(dst + "/shm", 0o755)
            os.mkdir(dst + "/pts", 0o755)
            _mount("devpts", dst + "/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
        elif kind == "proc":
            _mount("proc", dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            for p in m.get("paths") or ():
                if os.access(p, os.W_OK):
                    _mount(p, p, None, MS_BIND | MS_REC)
                    _readonly(p)
        elif kind == "tmpfs":
            _mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, "size=%dk,mode=0755" % (m["size_mb"] * 1024))
        elif kind == "bind":
            if not os.path.lexists(dst):
                os.mkdir(dst)
            _bind_fd(held[m["src"]], dst, m.get("ro", False))
        elif kind == "mask":
            _bind_fd(held["/dev/null"], dst, True)
        elif kind == "hide":
            _mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, "size=0,mode=0555")
            _readonly(dst)
        else:
            raise ValueError("unknown mount step %r" % kind)
    for fd in held.values():
        os.close(fd)
    global _CWD
    _CWD = layout["chdir"]
    os.chdir(_CWD)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _lock_down(filter_bytes):
    """No capability in any set, no_new_privs, and the job's seccomp filter."""
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        _prctl(PR_CAPBSET_DROP, cap)
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    _check(_libc.capset(ctypes.byref(_CapHeader(0x20080522, 0)), (_CapData * 2)()), "capset")
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    buf = ctypes.create_string_buffer(filter_bytes, len(filter_bytes))
    prog = _SockFprog(len(filter_bytes) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog))


def _status(st):
    """An exit status as a shell reports it: the code, or 128 + the signal."""
    return os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st)


def _arrange(fds):
    """Makes fds[i] descriptor i and closes every other descriptor."""
    import fcntl

    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds]
    for i, fd in enumerate(high):
        os.dup2(fd, i, inheritable=True)
    os.closerange(len(fds), 1 << 20)


def _loopback_up():
    """Brings the new network namespace's loopback up, as bubblewrap does
    for its sandboxes: the job's own servers on 127.0.0.1 and ::1 work,
    and nothing else is there."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        import fcntl

        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def _egress_listener(layout):
    """With egress, the listener of the sandbox's relay to the egress proxy,
    on the layout's address, bound here (before the job can take it) and
    passed to the sandbox's init, which serves the relay on it (the same
    relay a job under bubblewrap runs in front of its program)."""
    host, port = layout["egress"].rsplit(":", 1)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, int(port)))
    ls.listen(128)
    with socket.socket(fileno=os.dup(_INIT_FD)) as init:
        socket.send_fds(init, [b"L"], [ls.fileno()])
    ls.close()


def _fail(what, e):
    # The status pipe (fd 3 in the sandbox's processes) tells the
    # interpreter that the sandbox could not be made: no job code ran.
    try:
        os.write(3, ("E%s: %s" % (what, e)).encode()[:1000])
    except OSError:
        pass
    os._exit(127)


def _sandbox(spec, fds):
    """The job's process (P2), forked in the sandbox's new pid namespace
    beside its init: makes the rest of the sandbox, then runs the job.
    Never returns."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _write("/proc/self/oom_score_adj", "1000")  # the job, never the agent, when memory runs out
        _arrange(fds)
        layout = spec["layout"]
        uid, gid = os.getuid(), os.getgid()
        # The sandbox's mounts, in a mount namespace of its own, with the
        # interpreter's capabilities: its user namespace owns the new pid
        # namespace, whose /proc is mounted here.
        _check(_libc.unshare(CLONE_NEWNS), "unshare")
        _apply_layout(layout)
        # Then the sandbox's own user namespace, and with it the others
        # (network, ipc, uts, cgroup): in it, this process holds no
        # capability over the interpreter's namespaces, the mount namespace
        # included, and the job will hold none at all.
        flags = 0
        for ns in layout["namespaces"]:
            flags |= NAMESPACES[ns]
        _check(_libc.unshare(flags & ~(CLONE_NEWPID | CLONE_NEWNS)), "unshare")
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", "%d %d 1" % (uid, uid))
        _write("/proc/self/gid_map", "%d %d 1" % (gid, gid))
        _loopback_up()
        # Read in this namespace, the limit holds for it and all below it.
        _write("/proc/sys/user/max_user_namespaces", "0")
        os.setsid()
        if layout.get("egress"):
            _egress_listener(layout)
        os.close(_INIT_FD)
    except BaseException as e:
        _fail("sandbox", e)
    _job(spec)


def _job(spec):
    """The job's process (P2). Never returns."""
    try:
        _name("python3")
        _prctl(PR_SET_DUMPABLE, 1)
        _lock_down(_FILTER)
    except BaseException as e:
        _fail("lock down", e)
    try:
        # This fork's own generators, as every job's are; a spare's before
        # its job arrives, off the job's time.
        _reseed()
        if spec.get("kind") == "spare":
            # So is matplotlib's font cache, seeded into the image's
            # MPLCONFIGDIR, which is the job's (a job that sets its own runs
            # in a new interpreter: jobs.StartupVariable).
            _seed_mplconfig(os.environ)
            _await_job()
        if spec.get("kind") in ("spare", "job"):
            # What the job is (argv, environment) comes from the agent on
            # its own pipe, fd 4: the interpreter never reads it, so no
            # job's data is ever in what it forks.
            spec = dict(spec, **json.loads(_read_all(4)))
        # Started, with what this process holds resident before the job's
        # code runs (the interpreter's pages: the job's peak counts from
        # there). The job's code never sees this pipe.
        os.write(3, b"S%d %d" % (_rss_kb(), time.process_time_ns()))
        os.close(3)
    except BaseException as e:
        _fail("start", e)
    if spec.get("kind") == "session":
        _kernel(4, _job_env(spec))
    if spec.get("kind") == "probe":
        os._exit(0)
    _run_job(spec)


def _await_job():
    """A spare sandbox's job process waits, locked down, for its job: its
    stdin, stdout, stderr and the pipe its description comes on arrive on
    fd 4 (from the interpreter), and take fds 0 to 4."""
    sock = socket.socket(fileno=4)
    try:
        msg, fds, _, _ = socket.recv_fds(sock, 16, 4)
    except OSError:
        os._exit(0)
    if not msg:
        os._exit(0)  # the interpreter went away before a job came
    sock.close()  # fd 4
    if len(fds) != 4:
        raise ValueError("%d descriptors with the job" % len(fds))
    for i, f in zip((0, 1, 2, 4), fds):
        os.dup2(f, i)
        os.close(f)


def _read_all(fd):
    data = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    os.close(fd)
    return data


# The sandbox's working directory (its layout's), where processes start.
_CWD = None

# Generators whose state fork copies, found once the libraries are loaded
# (_find_generators), re-seeded from the kernel's entropy in every job.
_GENERATORS = []


def _find_generators():
    import gc, random

    np_random = sys.modules.get("numpy.random")
    kinds = (random.Random,)
    if np_random is not None:
        kinds += (np_random.RandomState, np_random.Generator)
    _GENERATORS[:] = [o for o in gc.get_objects() if isinstance(o, kinds)]
    if np_random is not None and not any(g is np_random.mtrand._rand for g in _GENERATORS):
        _GENERATORS.append(np_random.mtrand._rand)


def _reseed():
    import random

    np_random = sys.modules.get("numpy.random")
    for g in _GENERATORS:
        if isinstance(g, random.Random):
            g.seed()
        elif isinstance(g, np_random.RandomState):
            g.seed()
        else:
            g.bit_generator.state = type(g.bit_generator)().state
    random.seed()
    mp = sys.modules.get("multiprocessing.process")
    if mp is not None:
        mp.current_process().authkey = os.urandom(32)


def _exit_code(e):
    """The exit status the interpreter gives a SystemExit, printing its message as it does."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


def _finish(code):
    """Ends the job as the interpreter ends a script (threads, atexit, then the
    program's objects, flushing), without tearing the preloaded libraries down
    one by one: that would cost more than the job."""
    import atexit, gc

    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            pass
    atexit._run_exitfuncs()
    main = sys.modules.pop("__main__", None)
    if main is not None:
        main.__dict__.clear()  # files the program left open are flushed and closed
    gc.collect()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass
    os._exit(code)


def _job_env(spec):
    return dict(kv.split("=", 1) for kv in spec["env"] if "=" in kv)


def _run_job(spec):
    env = _job_env(spec)
    _seed_mplconfig(env)
    sys.orig_argv = list(spec["argv"])
    try:
        _gantry_run_main(spec["argv"][1], spec["argv"], env)
        code = 0
    except SystemExit as e:
        code = _exit_code(e)
    _finish(code)


def _seed_mplconfig(env):
    # As the image's sitecustomize does at every interpreter start: the
    # prebuilt font cache in MPLCONFIGDIR (the job's /tmp is new).
    dst = env.get("MPLCONFIGDIR", "").rstrip("/")
    if not dst or os.path.isdir(dst):
        return
    try:
        src = "/usr/share/gantry/matplotlib"
        os.makedirs(dst, 0o700)
        for n in os.listdir(src):
            with open(os.path.join(src, n), "rb") as f, open(os.path.join(dst, n), "wb") as g:
                g.write(f.read())
    except OSError:
        pass


# --- the stateful session's interpreter -------------------------------------
#
# It serves the session's jobs one after another on a stream socket (fd 4
# when forked here, fd 3 when the agent starts it directly): each request is
# a 4-byte big-endian length and a JSON object, sent with the job's stdin,
# stdout and stderr; each answer the same framing. Python code runs as a
# notebook cell in the session's globals (its last expression's value is
# sent back as a notebook shows it); anything else runs as a process of the
# session's sandbox.

# What a value may take in the answer: the rest is left out (text/plain is
# cut instead). jobs.MaxValueBytes checks it again.
MAX_VALUE = 1 << 20
MAX_TEXT = 64 << 10
# What a cell's displays may take (jobs.MaxDisplays, MaxDisplayBytes).
MAX_DISPLAYS = 32
MAX_DISPLAY_BYTES = 4 << 20


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            os._exit(0)  # the agent went away: so does the session
        buf += chunk
    return buf


def _send(sock, obj):
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()
    sock.sendall(struct.pack(">I", len(body)) + body)


def _kernel(fd, env):
    import io

    global _CWD
    if _CWD is None:
        _CWD = os.getcwd()  # started in its sandbox's working directory

    os.environ.clear()
    os.environ.update(env)
    _seed_mplconfig(env)
    sock = socket.socket(fileno=fd)
    sock.set_inheritable(False)
    main = type(sys)("__main__")
    import builtins

    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    ns = main.__dict__
    sys.argv = [""]
    sys.path[0] = ""
    base_path = list(sys.path)
    # Packages installed with pip --user in an earlier job are importable
    # in the next, as they are in a new interpreter: the user's
    # site-packages (under HOME) goes before the system's once it exists.
    import site

    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    null = os.open("/dev/null", os.O_RDWR)
    cells = 0
    while True:
        head, fds, _, _ = socket.recv_fds(sock, 4, 3)
        if not head:
            os._exit(0)
        head += _recv_exact(sock, 4 - len(head))
        req = json.loads(_recv_exact(sock, struct.unpack(">I", head)[0]))
        if req.get("mode") == "processes":
            # The sandbox's process service, on the socket that came with
            # the request (sent before any job, and again if it died).
            code = 127
            if len(fds) == 1:
                code = _start_processes(fds[0], null)
            for f in fds:
                os.close(f)
            _send(sock, {"event": "done", "code": code})
            continue
        if len(fds) != 3:
            for f in fds:
                os.close(f)
            _send(sock, {"event": "done", "code": 127, "error": "a job request without its three streams"})
            continue
        for i, f in enumerate(fds):
            os.dup2(f, i)
            os.close(f)
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                                     encoding=sys.__stdin__.encoding, errors=sys.__stdin__.errors)
        env = _job_env(req)
        value, exc, displays = None, None, []
        if req.get("mode") == "cell":
            cells += 1
            os.environ.update(env)
            path = list(base_path)
            if user_site and user_site not in path and os.path.isdir(user_site):
                at = next((i for i, p in enumerate(path) if p.endswith(("-packages", "-packages/"))), len(path))
                path.insert(at, user_site)
            # Code mode's wrappers are generated for each job.
            sys.path[:] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in path] + path
            for m in [m for m in sys.modules if m == "servers" or m.startswith("servers.")]:
                del sys.modules[m]
            figures = sys.modules.get("gantry_figures")
            if figures is not None:
                figures.configure()
            code, value, exc = _cell(req["path"], cells, ns)
            # The backend may have been loaded by this cell.
            figures = sys.modules.get("gantry_figures")
            if figures is not None:
                figures.save_figures(unsaved_only=True)
                displays = figures.take_displayed()
            # As a notebook's inline backend closes them after each cell;
            # only when a cell loaded pyplot (importing it here would cost
            # a session whose interpreter was not forked from the warm one,
            # and charge the cell, about a second of CPU).
            plt = sys.modules.get("matplotlib.pyplot")
            if plt is not None:
                try:
                    plt.close("all")
                except Exception:
                    pass
        else:
            code = _spawn(req["argv"], env)
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except BaseException:
                pass
        # What runs on after the job (threads, background processes) writes
        # to nothing rather than to a finished job's output.
        for i in range(3):
            os.dup2(null, i)
        answer = {"event": "done", "code": code}
        if value is not None:
            answer["value"] = value
        if exc is not None:
            answer["exception"] = exc
        if displays:
            answer["displays"] = _fit_displays(displays)
        _send(sock, answer)


def _fit_displays(displays):
    """The displays, first ones first, within MAX_DISPLAYS and MAX_DISPLAY_BYTES
    in all (jobs.ParseDisplays checks it again)."""
    out, size = [], 0
    for d in displays[:MAX_DISPLAYS]:
        n = len(json.dumps(d, ensure_ascii=True))
        if size + n > MAX_DISPLAY_BYTES:
            break
        out.append(d)
        size += n
    return out


def _spawn(argv, env):
    pid = os.fork()
    if pid == 0:
        try:
            for s in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
                signal.signal(s, signal.SIG_DFL)
            os.chdir(_CWD or "/")
            os.execvpe(argv[0], argv, env)
        except OSError as e:
            os.write(2, ("gantry: cannot run %s: %s\n" % (argv[0], e.strerror)).encode())
        os._exit(127)
    while True:
        try:
            _, st = os.waitpid(pid, 0)
            return _status(st)
        except InterruptedError:
            continue


# --- the live sandbox's process service ---------------------------------------
#
# Processes that live beside the session's jobs (E2B's commands, started in
# the background or not) are started by a small service of their own in the
# sandbox, forked from the session's interpreter before any job's code ran,
# so that it never waits for a job and holds nothing of one. It serves the
# agent on a stream socket in the interpreter's framing (4-byte big-endian
# length, JSON; descriptors ride on the first bytes): "spawn" (argv, env,
# cwd, with the process's stdin, stdout and stderr) answers the pid, or why
# it could not start; "signal" signals a process it started (its process
# group: each is the leader of a session of its own); an "exit" event
# reports each one's end. The agent holds the other ends of the streams.


def _start_processes(fd, null):
    """Forks the process service; returns 0 once it runs. (It stays the
    interpreter's child: reparenting it to the container's init, under the
    container isolation, is what old gVisor handles worst.)"""
    try:
        pid = os.fork()
    except OSError:
        return 127
    if pid == 0:
        try:
            _arrange([null, null, null, fd])
            _processes(socket.socket(fileno=3))
        except BaseException:
            pass
        os._exit(1)
    return 0


def _processes(sock):
    """The process service's loop (never returns)."""
    import subprocess, threading

    _name("gantry-procs")
    sock.set_inheritable(False)
    # What the processes leave behind when they end is reparented here,
    # not to the sandbox's init or the container's, and reaped.
    PR_SET_CHILD_SUBREAPER = 36
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    send_lock = threading.Lock()
    # children: pid -> whether its start was answered; early: the ends of
    # those that ended before (sent after the answer). Under lock.
    lock = threading.Lock()
    children, early = {}, {}
    some = threading.Condition(lock)

    def send(obj):
        with send_lock:
            _send(sock, obj)

    def ended(pid, st):
        if os.WIFSIGNALED(st):
            return {"event": "exit", "pid": pid, "code": -1, "signal": os.WTERMSIG(st)}
        return {"event": "exit", "pid": pid, "code": os.WEXITSTATUS(st)}

    def reap():
        # One thread waits for every child (no signal handling, which not
        # every kernel, gVisor's, gets right under load) and reports the
        # ends of the processes the service started.
        while True:
            try:
                pid, st = os.waitpid(-1, 0)
            except InterruptedError:
                continue
            except ChildProcessError:
                with some:
                    some.wait(1)
                continue
            with lock:
                if pid not in children:
                    continue  # one a process left behind
                if not children[pid]:
                    early[pid] = ended(pid, st)
                    continue
                del children[pid]
            send(ended(pid, st))

    threading.Thread(target=reap, daemon=True).start()

    def spawn(req, fds):
        # vfork and exec (subprocess's, where it may: no preexec_fn), not
        # fork: a fork copies the page tables of this copy of the session's
        # interpreter (~100 MB mapped) and tears them down at exec, which
        # cost more CPU than the command itself (`node -v`, a shell). The
        # child still becomes the leader of a session of its own, with
        # SIGPIPE and SIGXFSZ back to their defaults (the handlers Python
        # set are reset by exec), the three streams as 0, 1 and 2 and
        # nothing else open. Nothing runs in it before exec, so it holds
        # nothing of this process.
        if len(fds) != 3 or not req.get("argv"):
            return {"error": "a spawn request needs argv and three streams"}, 0
        argv = req["argv"]
        env = dict(kv.split("=", 1) for kv in req.get("env", []) if "=" in kv)
        cwd = req.get("cwd") or _CWD or "/"
        with lock:
            try:
                p = subprocess.Popen(argv, stdin=fds[0], stdout=fds[1], stderr=fds[2], cwd=cwd, env=env,
                                     close_fds=True, restore_signals=True, start_new_session=True)
            except OSError as e:
                what = argv[0]
                if e.filename is not None and e.filename == cwd and e.filename != argv[0]:
                    what = "cwd %s" % cwd
                return {"error": ("%s: %s" % (what, e.strerror))[:1000]}, 0
            except (ValueError, TypeError) as e:
                return {"error": "%s: %s" % (argv[0], e)}, 0
            # Its end is the reaper's to take, never Popen's (which would
            # wait for its pid later, perhaps another process's by then).
            p.returncode = 0
            pid = p.pid
            children[pid] = False
            some.notify()
        return {"pid": pid}, pid

    def dial(port, fd):
        # A connection to the port on the sandbox's own loopback (this
        # process lives in its network namespace), handed to the agent as
        # a descriptor on the socket that came with the request; or why
        # there is none ("E" and the errno's name). IPv4 first, then ::1.
        reply = socket.socket(fileno=fd)
        try:
            why = "ECONNREFUSED"
            for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
                try:
                    c = socket.socket(family, socket.SOCK_STREAM)
                except OSError:
                    continue
                try:
                    c.settimeout(5)
                    c.connect((host, port))
                except OSError as e:
                    c.close()
                    if family == socket.AF_INET:
                        why = errno.errorcode.get(e.errno, "ETIMEDOUT") if e.errno else "ETIMEDOUT"
                    continue
                try:
                    c.setblocking(True)
                    socket.send_fds(reply, [b"ok"], [c.fileno()])
                finally:
                    c.close()
                return
            reply.send(("E" + why).encode())
        except OSError:
            pass
        finally:
            reply.close()

    while True:
        head, fds, _, _ = socket.recv_fds(sock, 4, 3)
        if not head:
            os._exit(0)  # the agent went away
        head += _recv_exact(sock, 4 - len(head))
        req = json.loads(_recv_exact(sock, struct.unpack(">I", head)[0]))
        started = 0
        if req.get("op") == "dial":
            port = req.get("port")
            if len(fds) != 1 or type(port) is not int or not 0 < port < 65536:
                answer = {"error": "a dial needs a port and a socket"}
            else:
                threading.Thread(target=dial, args=(port, os.dup(fds[0])), daemon=True).start()
                answer = {"ok": True}
        elif req.get("op") == "spawn":
            answer, started = spawn(req, fds)
        elif req.get("op") == "signal":
            pid, sig = req.get("pid"), req.get("signal")
            with lock:
                known = pid in children
            if not known or not isinstance(sig, int):
                answer = {"error": "no such process"}
            else:
                answer = {"ok": True}
                try:
                    os.killpg(pid, sig)
                except OSError:
                    try:
                        os.kill(pid, sig)
                    except OSError as e:
                        answer = {"error": e.strerror}
        else:
            answer = {"error": "unknown op %r" % req.get("op")}
        for f in fds:
            os.close(f)
        answer["id"] = req.get("id")
        send(answer)
        if started:
            # Its end goes after its start, if it came first.
            with lock:
                end = early.pop(started, None)
                if end is None:
                    children[started] = True
                else:
                    children.pop(started, None)
            if end is not None:
                send(end)


def _cell(path, n, ns):
    """Runs a file of Python as cell n in ns: its exit code, the bundle of its
    last expression's value, and the exception that ended it (or None)."""
    import ast, linecache, tokenize, io

    name = "<cell %d>" % n
    try:
        with open(path, "rb") as f:
            src = f.read()
        text = io.TextIOWrapper(io.BytesIO(src), tokenize.detect_encoding(io.BytesIO(src).readline)[0]).read()
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
        tree = ast.parse(src, name)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not _silenced(text, tree.body[-1]):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, name, "exec", dont_inherit=True), ns)
        if last is None:
            return 0, None, None
        value = eval(compile(last, name, "eval", dont_inherit=True), ns)
    except SystemExit as e:
        return _exit_code(e), None, None
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell "):
            tb = tb.tb_next
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        return 1, None, _exception(e, tb)
    if value is None:
        return 0, None, None
    ns["_"] = value
    figures = sys.modules.get("gantry_figures")
    if figures is not None:
        figures.shown_as_value(value)
    return 0, _bundle(value), None


def _exception(e, tb):
    """The exception that ended a cell, as a notebook's error output has it:
    its type's name, its message, and the traceback as printed."""
    import traceback

    try:
        text = "".join(traceback.format_exception(type(e), e, tb))
    except Exception:
        text = ""
    try:
        value = str(e)
    except Exception:
        value = ""
    cut = lambda s, n: s if len(s) <= n else s[:n] + "…"
    return {"name": cut(type(e).__name__, 256), "value": cut(value, MAX_TEXT), "traceback": cut(text, MAX_TEXT)}


def _silenced(text, node):
    # A notebook shows no value for a last expression ending in ";".
    lines = text.splitlines()
    if node.end_lineno > len(lines):
        return False
    rest = lines[node.end_lineno - 1].encode()[node.end_col_offset:]  # offsets count UTF-8 bytes
    return rest.lstrip().startswith(b";")


# MIME type -> the IPython display method that gives it.
_REPRS = (("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"), ("text/latex", "_repr_latex_"),
          ("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"), ("image/svg+xml", "_repr_svg_"),
          ("application/json", "_repr_json_"))
_BINARY = ("image/png", "image/jpeg")


def _bundle(obj):
    """The value as a notebook shows it: repr as text/plain, and what the
    object's display methods give (a matplotlib figure as image/png)."""
    import base64, inspect, io

    data = {}
    if not inspect.isclass(obj):
        rich = {}
        meth = getattr(obj, "_repr_mimebundle_", None)
        if callable(meth):
            try:
                got = meth(include=None, exclude=None)
                got = got[0] if isinstance(got, tuple) else got
                if isinstance(got, dict):
                    rich.update(got)
            except Exception:
                pass
        for mime, name in _REPRS:
            if mime in rich:
                continue
            meth = getattr(obj, name, None)
            if callable(meth):
                try:
                    got = meth()
                    rich[mime] = got[0] if isinstance(got, tuple) else got
                except Exception:
                    pass
        mpl = sys.modules.get("matplotlib.figure")
        if mpl is not None and isinstance(obj, mpl.Figure) and "image/png" not in rich:
            try:
                buf = io.BytesIO()
                obj.savefig(buf, format="png", bbox_inches="tight")
                rich["image/png"] = buf.getvalue()
            except Exception:
                pass
        for mime, _ in _REPRS:
            v = rich.get(mime)
            if v is None:
                continue
            if mime in _BINARY:
                v = base64.b64encode(v).decode() if isinstance(v, bytes) else v
            elif mime == "application/json":
                try:
                    v = json.loads(json.dumps(v, allow_nan=False))
                except (TypeError, ValueError):
                    continue
            if mime != "application/json" and not isinstance(v, str):
                continue
            data[mime] = v
    try:
        text = repr(obj)
    except Exception as e:
        text = "<%s object: repr failed: %s>" % (type(obj).__name__, e)
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + "…"
    data["text/plain"] = text
    # Drop the largest representations until it fits.
    size = lambda: len(json.dumps(data, ensure_ascii=True))
    while size() > MAX_VALUE:
        big = max((m for m in data if m != "text/plain"), key=lambda m: len(json.dumps(data[m])), default=None)
        if big is None:
            break
        del data[big]
    return data


# --- the interpreter ---------------------------------------------------------

_FILTER = b""


# The interpreter's own pid namespace (a descriptor), which it returns to
# after making each sandbox's (_main, _make).
_OWN_PID_NS = None


def _make(spec, fds, init_sock):
    """Makes a sandbox: its init (the layout's, on init_sock as its fd 3)
    first in a new pid namespace, then the job's process (P2) forked beside
    it, which makes the rest of the sandbox with fds as its descriptors
    (_sandbox). (init pid, job process pid), as this process sees them."""
    argv = list(spec["layout"]["init"])
    null = os.open("/dev/null", os.O_RDWR)
    try:
        # Only this process's children go to the new namespace.
        _check(_libc.unshare(CLONE_NEWPID), "unshare")
        try:
            # Every signal blocked from its first instruction: the job may
            # signal it before its Go runtime has started and ignored them,
            # and would otherwise kill it, and with it the sandbox (the Go
            # runtime keeps an inherited mask, but for the signals it must
            # have: SIGCHLD, the synchronous ones).
            init = os.posix_spawn(argv[0], argv, {}, setsid=True, setsigmask=signal.valid_signals(), file_actions=[
                (os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, null, 1),
                (os.POSIX_SPAWN_DUP2, null, 2), (os.POSIX_SPAWN_DUP2, init_sock, 3)])
            try:
                pid = os.fork()
            except OSError:
                os.kill(init, signal.SIGKILL)
                os.waitpid(init, 0)
                raise
            if pid == 0:
                try:
                    os.dup2(fds[3], 3, inheritable=True)  # for _fail until _arrange
                    _sandbox(spec, fds)
                finally:
                    os._exit(127)
        finally:
            if _libc.setns(_OWN_PID_NS, CLONE_NEWPID) != 0:
                # Every later sandbox would be made inside this one's
                # namespace: the interpreter is unfit (the agent hears
                # of its end and retires the container).
                os._exit(1)
    finally:
        os.close(null)
    return init, pid


def _outer_pid(pidfd):
    """The pid of pidfd's process in the container's pid namespace (the
    agent's), as the container's /proc shows it."""
    with open("/proc/self/fdinfo/%d" % pidfd) as f:
        for line in f:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    return 0


def _serve(ctl):
    """Serves the agent's requests until it goes away: each asks for a
    sandbox, made from the request's layout, for a job (its stdin, stdout,
    stderr and description attached), a stateful session (its socket
    attached), or a spare (a job's sandbox made ahead: its job process
    waits on the socket attached for the job's streams and description,
    which the agent sends it directly). Events go back on ctl: started or
    failed, then exit with what the sandbox used."""
    sel = selectors.DefaultSelector()
    sel.register(ctl, selectors.EVENT_READ, None)
    want_fds = {"job": 4, "session": 1, "spare": 1}

    def report(obj):
        ctl.send(json.dumps(obj).encode())

    def settle(rec):
        # The status pipe ended: the sandbox reported (S) or failed (E...).
        if rec["status"] is None:
            return
        sel.unregister(rec["status"])
        data = rec["buf"]
        while True:
            chunk = os.read(rec["status"], 4096)
            if not chunk:
                break
            data += chunk
        os.close(rec["status"])
        rec["status"] = None
        if data.startswith(b"S"):
            # What the sandbox used so far was its setup, not the job's;
            # what its job process held then is the interpreter's pages.
            try:
                base_kb, job_ns = data[1:].decode().split()
                rec["base_kb"], job_ns = int(base_kb), int(job_ns)
            except ValueError:
                rec["base_kb"], job_ns = 0, 0
            # The job's process's own setup, and its init's (which runs
            # nothing of the job's but the relay).
            rec["setup_ns"] = job_ns + _tree_cpu_ns(rec["init_cpid"])
            report({"id": rec["id"], "event": "started", "pid": rec["cpid"], "init": rec["init_cpid"]})
        else:
            report({"id": rec["id"], "event": "failed", "error": data[1:].decode("utf-8", "replace") or "the sandbox's process died"})

    def ended(rec):
        # The job is over, nothing of it running: its process and its
        # init are reaped (everything else in its pid namespace was killed
        # with the init, reaped into the init's account).
        if rec["ru"] is None or rec["init_ru"] is None:
            return
        settle(rec)
        ru, iru = rec["ru"], rec["init_ru"]
        cpu_ns = int((ru.ru_utime + ru.ru_stime + iru.ru_utime + iru.ru_stime) * 1e9) - rec.get("setup_ns", 0)
        peak_kb = max(ru.ru_maxrss, iru.ru_maxrss)
        report({"id": rec["id"], "event": "exit", "code": _status(rec["st"]),
                "cpu_us": max(cpu_ns // 1000, 0), "peak_kb": max(peak_kb - rec.get("base_kb", 0), 0)})

    def start(spec, streams, extra):
        """Makes a sandbox with these stdin, stdout and stderr and extra as
        its job process's fd 4; OSError if it cannot."""
        r, w = os.pipe()
        try:
            init_end, job_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError:
            os.close(r)
            os.close(w)
            raise
        try:
            init, pid = _make(spec, list(streams) + [w, extra, job_end.fileno()], init_end.fileno())
        except OSError:  # the container's pids limit, say
            os.close(r)
            raise
        finally:
            os.close(w)
            init_end.close()
            job_end.close()
        rec = {"id": spec["id"], "pid": pid, "init": init, "status": r, "buf": b"",
               "pidfd": os.pidfd_open(pid), "init_pidfd": os.pidfd_open(init), "ru": None, "init_ru": None}
        # As the agent sees them (in the container's pid namespace).
        rec["cpid"], rec["init_cpid"] = _outer_pid(rec["pidfd"]), _outer_pid(rec["init_pidfd"])
        sel.register(r, selectors.EVENT_READ, ("status", rec))
        sel.register(rec["pidfd"], selectors.EVENT_READ, ("exit", rec))
        sel.register(rec["init_pidfd"], selectors.EVENT_READ, ("init", rec))
        return rec

    while True:
        for key, _ in sel.select():
            if key.data is None:
                try:
                    msg, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 4)
                except OSError:
                    os._exit(0)
                if not msg:
                    os._exit(0)  # the agent went away
                req = json.loads(msg)
                if len(os.listdir("/proc/self/task")) != 1:
                    report({"id": req.get("id"), "event": "bad", "error": "the warm interpreter has more than one thread: it cannot fork safely"})
                    os._exit(1)
                for f in fds:
                    os.set_inheritable(f, False)  # only the job's process gets them
                if len(fds) != want_fds.get(req.get("kind"), -1):
                    for f in fds:
                        os.close(f)
                    report({"id": req.get("id"), "event": "failed", "error": "%d descriptors for a %s" % (len(fds), req.get("kind"))})
                    continue
                try:
                    if req["kind"] == "job":
                        start(req, fds[:3], fds[3])
                    else:
                        # A session's interpreter reads its jobs on fd 4, a
                        # spare's job process waits there for its job; their
                        # own streams lead nowhere until then.
                        null = os.open("/dev/null", os.O_RDWR)
                        try:
                            start(req, [null, null, null], fds[0])
                        finally:
                            os.close(null)
                except OSError as e:
                    report({"id": req["id"], "event": "failed", "error": "fork: %s" % e})
                for f in fds:
                    os.close(f)
            elif key.data[0] == "status":
                rec = key.data[1]
                if rec["status"] is None:
                    continue  # settled at its exit, an event of the same select
                chunk = os.read(rec["status"], 4096)
                if chunk:
                    rec["buf"] += chunk
                else:
                    settle(rec)
            elif key.data[0] == "exit":
                # The job's process ended: its init goes, and with it
                # everything left in the sandbox's pid namespace.
                rec = key.data[1]
                sel.unregister(rec["pidfd"])
                os.close(rec["pidfd"])
                _, rec["st"], rec["ru"] = os.wait4(rec["pid"], 0)
                if rec["init_pidfd"] is not None:  # not reaped yet
                    signal.pidfd_send_signal(rec["init_pidfd"], signal.SIGKILL)
                ended(rec)
            else:
                rec = key.data[1]
                sel.unregister(rec["init_pidfd"])
                os.close(rec["init_pidfd"])
                rec["init_pidfd"] = None
                _, _, rec["init_ru"] = os.wait4(rec["init"], 0)
                ended(rec)


def _rss_kb():
    """This process's resident memory, in KiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


def _tree_cpu_ns(pid):
    """The CPU time (ns) pid and its descendants used so far (their own,
    not what they reaped)."""
    cpu, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/schedstat" % p) as f:
                cpu += int(f.read().split()[0])
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                todo += [int(x) for x in f.read().split()]
        except (OSError, ValueError, IndexError):
            pass
    return cpu


def _probe():
    """Makes one empty sandbox, as the agent's probe does with bubblewrap:
    a host that cannot build one is found here, not by every job."""
    spec = {"kind": "probe", "env": [], "layout": json.loads(os.environ.pop("GANTRY_WARM_PROBE"))}
    r, w = os.pipe()
    init_end, job_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    null = os.open("/dev/null", os.O_RDWR)
    try:
        init, pid = _make(spec, [null, null, null, w, null, job_end.fileno()], init_end.fileno())
    finally:
        os.close(w)
        os.close(null)
        init_end.close()
        job_end.close()
    data = _read_all(r)
    _, st = os.waitpid(pid, 0)
    os.kill(init, signal.SIGKILL)
    os.waitpid(init, 0)
    if not data.startswith(b"S") or _status(st) != 0:
        raise OSError(data[1:].decode("utf-8", "replace") or "the probe sandbox exited with status %d" % _status(st))


def _own_namespaces():
    """Moves the interpreter into a user and a pid namespace of its own
    (uid and gid mapped to themselves), where it holds the capabilities to
    make each sandbox's pid namespace and to return from it (_make). The
    process the agent started stays outside: it only waits for the
    interpreter, and ends as it ends."""
    global _OWN_PID_NS
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWPID), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", "%d %d 1" % (uid, uid))
    _write("/proc/self/gid_map", "%d %d 1" % (gid, gid))
    pid = os.fork()
    if pid != 0:
        os.closerange(0, 1 << 20)  # the agent hears of the interpreter's end on its socket
        while True:
            try:
                _, st = os.waitpid(pid, 0)
                break
            except ChildProcessError:
                os._exit(127)
        os._exit(_status(st))
    # The first process of the new pid namespace: its end ends every
    # sandbox (they are all below it).
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _OWN_PID_NS = os.open("/proc/self/ns/pid", os.O_RDONLY)


def _main():
    global _FILTER
    import importlib, time, gc

    ctl = socket.socket(fileno=3)
    ctl.set_inheritable(False)
    try:
        _own_namespaces()
        with open(os.environ.pop("GANTRY_WARM_FILTER"), "rb") as f:
            _FILTER = f.read()
        start = time.monotonic()
        loaded = []
        for m in filter(None, os.environ.pop("GANTRY_WARM_PRELOAD", "").split(",")):
            importlib.import_module(m)
            loaded.append(m)
        if "matplotlib.pyplot" in sys.modules:
            # What drawing needs; the backend itself (gantry_figures, whose
            # import registers saving figures at exit) is chosen by the job,
            # as in a new interpreter.
            importlib.import_module("matplotlib.backends.backend_agg")
        _find_generators()
        # Collections in the forks leave the loaded libraries alone: fewer
        # pages copied, less work per job.
        gc.collect()
        gc.freeze()
        import threading  # noqa: F401  (its fork hooks run in every job)
        _probe()
    except BaseException as e:
        ctl.send(json.dumps({"event": "failed", "error": "%s: %s" % (type(e).__name__, e)}).encode())
        os._exit(1)
    # The top-level modules loaded: the agent sends a job here whose
    # program imports nothing else (a lean interpreter's, below its full one).
    roots = sorted({m.partition(".")[0] for m in sys.modules})
    ctl.send(json.dumps({"event": "ready", "modules": loaded, "roots": roots,
                         "seconds": round(time.monotonic() - start, 3)}).encode())
    _serve(ctl)


if __name__ == "__main__":
    if sys.argv[1:2] == ["kernel"]:
        # A stateful session's interpreter started without the warm
        # interpreter: in a sandbox of bubblewrap's, or directly in the
        # container (the container isolation: the container is the
        # sandbox). Its socket is the descriptor named, or 3.
        _kernel(int(sys.argv[2]) if len(sys.argv) > 2 else 3, dict(os.environ))
    _main()
