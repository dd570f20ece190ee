"""Fake code-mode bridge for testing the in-sandbox client libraries (not in the image).

Usage: python3 fake_bridge.py SOCKET_PATH
Speaks the agent's protocol (one JSON line in, one JSON line out, then close) with
canned answers. Tools used by the drivers (test_client.py, test_client.js):
  math.add      structured result {"sum": a + b}
  text.hello    two text blocks, no structured result
  mixed.image   a text and an image block
  echo.args     structured {"request": <the parsed request>, "raw": <the raw line>}
  err.<code>    error response with that code (upstream -> upstream_error)
  drop.now      closes the connection without a reply
  drop.partial  writes half a response, then closes
  bad.json      replies with a line that is not JSON
  big.response  replies with more than 64 MiB and no newline
  sync.wait     waits until 10 sync.wait calls are in flight at once (threading.Barrier)
"""

import json
import os
import socketserver
import sys
import threading

TOOLS = [
    {"server": "math", "name": "add", "description": "Add two numbers.",
     "input_schema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
     "output_schema": {"type": "object", "properties": {"sum": {"type": "number"}}}},
    {"server": "math", "name": "mul", "description": "Multiply two numbers.",
     "input_schema": {"type": "object"}, "output_schema": None},
    {"server": "text", "name": "hello", "description": "Say hello in text.",
     "input_schema": {"type": "object"}, "output_schema": None},
]
SERVERS = [
    {"name": "math", "description": "Arithmetic.", "transport": "stdio", "tools": 2},
    {"name": "text", "description": "Greetings.", "transport": "http", "tools": 1},
]
ERRORS = {
    "denied": "denied by policy",
    "budget_exceeded": "tool-call budget of 3 used up",
    "timeout": "no answer within 30s",
    "upstream": "boom from upstream",
    "bad_request": "args do not match the input schema",
    "too_large": "result too large",
    "unavailable": "upstream server is down",
}
BARRIER = threading.Barrier(10, timeout=10)


def shape(tool, detail):
    keys = {"name": ("server", "name"),
            "description": ("server", "name", "description", "input_schema")}.get(detail)
    return dict(tool) if keys is None else {k: tool[k] for k in keys}


def error(code, message):
    return {"ok": False, "error": {"code": code, "message": message}}


def ok(result):
    return {"ok": True, "result": result}


def answer(req, raw):
    op = req.get("op")
    if op == "servers":
        return ok(SERVERS)
    if op == "search":
        q = req.get("query", "")
        hits = [t for t in TOOLS if q in t["server"] or q in t["name"] or q in t["description"]]
        return ok([shape(t, req.get("detail")) for t in hits[: req.get("limit", 10)]])
    if op in ("tools", "describe", "call"):
        server, tool = req.get("server"), req.get("tool")
        if op == "tools":
            if server not in {s["name"] for s in SERVERS}:
                return error("unknown_server", "unknown server %s" % server)
            return ok([shape(t, req.get("detail")) for t in TOOLS if t["server"] == server])
        if op == "describe":
            for t in TOOLS:
                if (t["server"], t["name"]) == (server, tool):
                    return ok(dict(t))
            return error("unknown_tool", "unknown tool %s.%s" % (server, tool))
        args = req.get("args")
        if not isinstance(args, dict):
            return error("bad_request", "args must be an object")
        if (server, tool) == ("math", "add"):
            s = args["a"] + args["b"]
            return ok({"content": [{"type": "text", "text": json.dumps({"sum": s})}], "structured": {"sum": s}})
        if (server, tool) == ("text", "hello"):
            return ok({"content": [{"type": "text", "text": "hello"}, {"type": "text", "text": "world"}],
                       "structured": None})
        if (server, tool) == ("mixed", "image"):
            return ok({"content": [{"type": "text", "text": "a chart"},
                                   {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}],
                       "structured": None})
        if (server, tool) == ("echo", "args"):
            return ok({"content": [], "structured": {"request": req, "raw": raw}})
        if server == "err":
            code = "upstream_error" if tool == "upstream" else tool
            return error(code, ERRORS.get(tool, "error " + tool))
        if (server, tool) == ("sync", "wait"):
            try:
                BARRIER.wait()
            except threading.BrokenBarrierError:
                BARRIER.reset()
                return error("timeout", "sync.wait: fewer than 10 calls were in flight at once")
            return ok({"content": [], "structured": {"n": args.get("n")}})
        if server in ("math", "text"):
            return error("unknown_tool", "unknown tool %s.%s" % (server, tool))
        return error("unknown_server", "unknown server %s" % server)
    return error("bad_request", "unknown op %r" % op)


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        try:
            line = self.rfile.readline((1 << 20) + 1)
            if not line.endswith(b"\n"):
                self.wfile.write((json.dumps(error("too_large", "request line too long")) + "\n").encode())
                return
            raw = line.decode()
            req = json.loads(raw)
            tool = (req.get("server"), req.get("tool")) if req.get("op") == "call" else None
            if tool == ("drop", "now"):
                return
            if tool == ("drop", "partial"):
                self.wfile.write(b'{"ok":true,"res')
                return
            if tool == ("bad", "json"):
                self.wfile.write(b"this is not json\n")
                return
            if tool == ("big", "response"):
                chunk = b"x" * (1 << 20)
                for _ in range(65):
                    self.wfile.write(chunk)
                self.wfile.write(b"\n")
                return
            self.wfile.write((json.dumps(answer(req, raw)) + "\n").encode())
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. after too_large)


class Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    request_queue_size = 64


def main():
    path = sys.argv[1]
    if os.path.exists(path):
        os.unlink(path)
    with Server(path, Handler) as srv:
        os.chmod(path, 0o666)
        srv.serve_forever()


if __name__ == "__main__":
    main()
