# gantry sandbox agent: the main process of a pooled container. It serves
# one job for the runner over the container's attached stdin/stdout, so a
# job costs no `docker exec` round trips. It runs as the sandbox user with
# the container's limits; it exits when its stdin closes or it is left idle.
#
# Requests (runner -> agent): 4-byte big-endian length, then JSON.
#   {"op": "run", "files": [{"path", "data" (base64)}], "argv", "env",
#    "stdin" (base64 or null), "cap": bytes per stream,
#    "bridge": unix socket path for code mode (optional), "clean": [dirs]}
#   {"op": "tar", "paths": [...]}  (relative to /workspace; null: all of it)
#   {"op": "reply", "id", "body"}  (answer to a bridge request; during a run)
# Frames (agent -> runner): 1 type byte, 4-byte big-endian length, payload.
#   o/e: stdout/stderr bytes; x: exit JSON {"code", "signal", "oom_kills"};
#   l: workspace listing ("size path\0"...); t: tar bytes; d: tar done;
#   c: bridge request JSON {"id", "req"}; E: agent error text.
#
# Code mode: with "bridge" set, the agent listens on that unix socket while
# the program runs. A client (the gantry library) connects, writes one JSON
# line, and reads one JSON line back; the agent relays the request to the
# runner as a 'c' frame and the runner's reply back. The runner makes every
# upstream call and holds every credential; nothing here is trusted.
import base64, json, os, select, selectors, shutil, socket, struct, subprocess, sys, tarfile, threading

WORKSPACE = "/workspace"
# An agent left without requests this long has lost its runner (which
# retires idle containers well before): it exits, stopping the container.
IDLE_SECONDS = 40 * 60
MAX_BRIDGE_REQUEST = 1 << 20  # bytes in one request line
MAX_BRIDGE_PENDING = 64  # requests waiting for the runner at once
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


def read_request(idle=None):
    head = read_exact(4, idle)
    if head is None:
        return None
    body = read_exact(struct.unpack(">I", head)[0])
    if body is None:
        return None
    return json.loads(body)


class Bridge:
    """Relays the program's tool requests on a unix socket to the runner."""

    def __init__(self, path, sel):
        self.path, self.sel = path, sel
        self.pending, self.bufs, self.next_id = {}, {}, 0
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(128)
        self.sock.setblocking(False)
        sel.register(self.sock, selectors.EVENT_READ, b"accept")

    def accept(self):
        try:
            conn, _ = self.sock.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        self.bufs[conn] = b""
        self.sel.register(conn, selectors.EVENT_READ, b"conn")

    def answer(self, conn, body):
        try:
            conn.setblocking(True)
            conn.settimeout(10)
            conn.sendall(body + b"\n")
        except OSError:
            pass
        conn.close()

    def fail(self, conn, code, message):
        self.answer(conn, json.dumps({"ok": False, "error": {"code": code, "message": message}}).encode())

    def readable(self, conn):
        try:
            data = conn.recv(65536)
        except OSError:
            data = b""
        buf = self.bufs[conn] + data
        line, nl, _ = buf.partition(b"\n")
        if not nl:
            if not data:  # closed before a whole request
                self.sel.unregister(conn)
                del self.bufs[conn]
                conn.close()
            elif len(buf) > MAX_BRIDGE_REQUEST:
                self.sel.unregister(conn)
                del self.bufs[conn]
                self.fail(conn, "too_large", "a request may be at most %d bytes" % MAX_BRIDGE_REQUEST)
            else:
                self.bufs[conn] = buf
            return
        self.sel.unregister(conn)
        del self.bufs[conn]
        if len(line) > MAX_BRIDGE_REQUEST:
            return self.fail(conn, "too_large", "a request may be at most %d bytes" % MAX_BRIDGE_REQUEST)
        if len(self.pending) >= MAX_BRIDGE_PENDING:
            return self.fail(conn, "busy", "more than %d tool requests are waiting; wait for some to finish" % MAX_BRIDGE_PENDING)
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("not an object")
        except ValueError as e:
            return self.fail(conn, "bad_request", "request is not a JSON object: %s" % e)
        self.next_id += 1
        self.pending[self.next_id] = conn
        frame(b"c", json.dumps({"id": self.next_id, "req": req}).encode())

    def reply(self, msg):
        conn = self.pending.pop(msg.get("id"), None)
        if conn is not None:
            self.answer(conn, json.dumps(msg.get("body")).encode())

    def close(self):
        self.sel.unregister(self.sock)
        self.sock.close()
        for conn in list(self.bufs) + list(self.pending.values()):
            conn.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def run(req):
    for d in req.get("clean") or []:
        shutil.rmtree(d, ignore_errors=True)
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
    # While a program runs the runner sends only bridge replies: stdin at
    # EOF means the runner died. Then leave at once; the container, and the
    # program with it, stops.
    sel.register(0, selectors.EVENT_READ, b"in")
    bridge = Bridge(req["bridge"], sel) if req.get("bridge") else None
    open_streams = 2
    while open_streams:
        for key, _ in sel.select():
            if key.data == b"in":
                msg = read_request()
                if msg is None:
                    os._exit(1)
                if bridge is not None and msg.get("op") == "reply":
                    bridge.reply(msg)
                continue
            if key.data == b"accept":
                bridge.accept()
                continue
            if key.data == b"conn":
                bridge.readable(key.fileobj)
                continue
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
    if bridge is not None:
        bridge.close()
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
        req = read_request(IDLE_SECONDS)
        if req is None:
            return
        if req.get("op") == "reply":  # late answer to a finished run's request
            continue
        try:
            {"run": run, "tar": tar}[req["op"]](req)
        except Exception as e:  # report, keep serving
            frame(b"E", repr(e).encode())


main()
