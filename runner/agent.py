# gantry sandbox agent: the main process of a pooled container. It serves
# one job for the runner over the container's attached stdin/stdout, so a
# job costs no `docker exec` round trips. It runs as the sandbox user with
# the container's limits; it exits when its stdin closes or it is left idle.
#
# Requests (runner -> agent): 4-byte big-endian length, then JSON.
#   {"op": "run", "files": [{"path", "data" (base64)}], "argv", "env",
#    "stdin" (base64 or null), "cap": bytes per stream}
#   {"op": "tar", "paths": [...]}  (relative to /workspace; null: all of it)
# Frames (agent -> runner): 1 type byte, 4-byte big-endian length, payload.
#   o/e: stdout/stderr bytes; x: exit JSON {"code", "signal", "oom_kills"};
#   l: workspace listing ("size path\0"...); t: tar bytes; d: tar done;
#   E: agent error text.
import base64, json, os, select, selectors, struct, subprocess, sys, tarfile, threading

WORKSPACE = "/workspace"
# An agent left without requests this long has lost its runner (which
# retires idle containers well before): it exits, stopping the container.
IDLE_SECONDS = 40 * 60
out = sys.stdout.buffer
lock = threading.Lock()


def frame(kind, data):
    with lock:
        out.write(kind + struct.pack(">I", len(data)) + data)
        out.flush()


def read_exact(n, idle=None):
    buf = b""
    while len(buf) < n:
        if idle is not None and not select.select([0], [], [], idle)[0]:
            return None
        chunk = os.read(0, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def oom_kills():
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path) as f:
                for line in f:
                    k, _, v = line.partition(" ")
                    if k == "oom_kill":
                        return int(v)
        except OSError:
            pass
    return 0


def write_files(files):
    for f in files:
        path = f["path"]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(f["data"]))


def run(req):
    write_files(req.get("files") or [])
    env = dict(os.environ)
    env.update(req.get("env") or {})
    stdin_data = req.get("stdin")
    before = oom_kills()
    proc = subprocess.Popen(req["argv"], cwd=WORKSPACE, env=env,
                            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if stdin_data is not None:
        def feed():
            try:
                proc.stdin.write(base64.b64decode(stdin_data))
                proc.stdin.close()
            except OSError:
                pass
        threading.Thread(target=feed, daemon=True).start()
    cap = int(req.get("cap") or (1 << 20)) + 1
    sent = {b"o": 0, b"e": 0}
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, b"o")
    sel.register(proc.stderr, selectors.EVENT_READ, b"e")
    # The runner sends nothing while a program runs: stdin becoming readable
    # means it closed (the runner died). Leave at once; the container, and
    # the program with it, stops.
    sel.register(0, selectors.EVENT_READ, b"in")
    open_streams = 2
    while open_streams:
        for key, _ in sel.select():
            if key.data == b"in":
                os._exit(1)
            data = os.read(key.fileobj.fileno(), 65536)
            if not data:
                sel.unregister(key.fileobj)
                open_streams -= 1
                continue
            room = cap - sent[key.data]
            if room > 0:  # past the cap, output is read and dropped
                frame(key.data, data[:room])
                sent[key.data] += min(room, len(data))
    code = proc.wait()
    frame(b"x", json.dumps({"code": code if code >= 0 else 128 - code,
                            "signal": -code if code < 0 else 0,
                            "oom_kills": oom_kills() - before}).encode())
    listing = bytearray()
    for root, dirs, names in os.walk(WORKSPACE):
        for name in names:
            full = os.path.join(root, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if os.path.isfile(full) and not os.path.islink(full):
                listing += b"%d %s\0" % (st.st_size, os.path.relpath(full, WORKSPACE).encode("utf-8", "surrogateescape"))
    frame(b"l", bytes(listing))


class FrameWriter:
    def write(self, b):
        frame(b"t", bytes(b))
        return len(b)

    def flush(self):
        pass


def tar(req):
    with tarfile.open(fileobj=FrameWriter(), mode="w|", format=tarfile.GNU_FORMAT) as tf:
        paths = req.get("paths")
        if paths is None:  # the whole workspace (a session's snapshot)
            tf.add(WORKSPACE, arcname=".", recursive=True)
        for p in paths or []:
            full = os.path.join(WORKSPACE, p)
            if os.path.isfile(full) and not os.path.islink(full):
                tf.add(full, arcname=p, recursive=False)
    frame(b"d", b"")


def main():
    while True:
        head = read_exact(4, IDLE_SECONDS)
        if head is None:
            return
        req = json.loads(read_exact(struct.unpack(">I", head)[0]))
        try:
            {"run": run, "tar": tar}[req["op"]](req)
        except Exception as e:  # report, keep serving
            frame(b"E", repr(e).encode())


main()
