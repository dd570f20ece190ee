"""Call tools of the job's MCP servers from Python ("code mode").

    import gantry
    gantry.list_servers()                      # [{"name", "description", "transport", "tools"}]
    gantry.search_tools("weather", limit=5)    # [{"server", "name", "description"}]
    gantry.describe("weather", "forecast")     # full tool object with input/output schema
    r = gantry.call("weather", "forecast", city="Oslo", days=2)

call() returns the tool's structured result if it has one, else its text (str), else
the raw MCP content blocks (list). Failures raise gantry.ToolError (subclasses:
ToolDenied, BudgetExceeded, ToolTimeout, UnknownTool); .code names the reason.
"""

import json
import os
import socket

__all__ = [
    "search_tools", "list_servers", "describe", "list_tools", "call",
    "ToolError", "ToolDenied", "BudgetExceeded", "ToolTimeout", "UnknownTool",
]

_MAX_REQUEST = 1 << 20  # the bridge reads at most 1 MiB per request line
_MAX_RESPONSE = 64 << 20


class ToolError(Exception):
    """A tool call or lookup failed. Attributes: code, message, server, tool.

    code is the bridge's reason (e.g. "upstream_error", "bad_request", "too_large",
    "unavailable"); message is its text (for upstream_error, the upstream's own text).
    """

    def __init__(self, code, message, server=None, tool=None):
        """Create the error; str() is the message, prefixed with "server.tool: " when known."""
        super().__init__(code, message, server, tool)
        self.code = code
        self.message = message
        self.server = server
        self.tool = tool

    def __str__(self):
        """Return the message prefixed with "server.tool: " (or "server: ") when known."""
        if self.server and self.tool:
            return "%s.%s: %s" % (self.server, self.tool, self.message)
        if self.server:
            return "%s: %s" % (self.server, self.message)
        return str(self.message)


class ToolDenied(ToolError):
    """The job's policy does not allow this call (code "denied")."""


class BudgetExceeded(ToolError):
    """The job's tool-call budget is used up (code "budget_exceeded")."""


class ToolTimeout(ToolError):
    """The tool did not answer in time (code "timeout")."""


class UnknownTool(ToolError):
    """No such server or tool in this job (code "unknown_server" or "unknown_tool")."""


_CLASSES = {
    "denied": ToolDenied,
    "budget_exceeded": BudgetExceeded,
    "timeout": ToolTimeout,
    "unknown_server": UnknownTool,
    "unknown_tool": UnknownTool,
}


def _error(code, message, server=None, tool=None):
    """Build the ToolError subclass that matches code."""
    return _CLASSES.get(code, ToolError)(code, message, server, tool)


def _unavailable(why, server, tool):
    """Build the ToolError raised when the bridge cannot be reached or misbehaves."""
    return ToolError("unavailable", "code mode is not available in this job: " + why, server, tool)


def _request(req, server=None, tool=None):
    """Send one request to the bridge on a new connection; return its result or raise ToolError."""
    try:
        line = json.dumps(req, allow_nan=False, separators=(",", ":")).encode() + b"\n"
    except (TypeError, ValueError) as e:
        raise ToolError("bad_request", "arguments are not JSON-serializable: %s" % e, server, tool) from None
    if len(line) > _MAX_REQUEST:
        raise ToolError("too_large", "request is %d bytes, more than the bridge's limit of %d"
                        % (len(line), _MAX_REQUEST), server, tool)
    path = os.environ.get("GANTRY_BRIDGE")
    if not path:
        raise _unavailable("GANTRY_BRIDGE is not set", server, tool)
    buf = bytearray()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(path)
            except (FileNotFoundError, ConnectionRefusedError) as e:
                raise _unavailable("cannot connect to the bridge at %s (%s)" % (path, e.strerror), server, tool) from None
            s.sendall(line)
            while True:
                start = len(buf)
                chunk = s.recv(1 << 16)
                if not chunk:
                    raise _unavailable("the bridge closed the connection without a response", server, tool)
                buf += chunk
                if buf.find(b"\n", start) >= 0:
                    break
                if len(buf) > _MAX_RESPONSE:
                    raise ToolError("too_large", "response is larger than %d bytes" % _MAX_RESPONSE, server, tool)
    except OSError as e:
        raise _unavailable("bridge connection failed (%s)" % (e.strerror or e), server, tool) from None
    line = bytes(buf[:buf.index(b"\n")])
    try:
        resp = json.loads(line)
    except ValueError:
        raise _unavailable("the bridge sent an invalid response: %r" % line[:200], server, tool) from None
    if not isinstance(resp, dict):
        raise _unavailable("the bridge sent an invalid response: %r" % line[:200], server, tool)
    if resp.get("ok"):
        return resp.get("result")
    err = resp.get("error")
    if not isinstance(err, dict):
        err = {}
    raise _error(str(err.get("code") or "unavailable"), str(err.get("message") or "unknown error"), server, tool)


def search_tools(query, detail="description", limit=10):
    """Find tools across all servers matching query; return a list of tool objects.

    detail: "name" (server, name), "description" (+ description, input_schema) or
    "full" (+ output_schema). limit caps the number of results.
    """
    return _request({"op": "search", "query": query, "detail": detail, "limit": limit})


def list_servers():
    """Return the job's servers: a list of {"name", "description", "transport", "tools"}."""
    return _request({"op": "servers"})


def describe(server, tool):
    """Return one tool object in full detail, including its input and output schemas."""
    return _request({"op": "describe", "server": server, "tool": tool}, server, tool)


def list_tools(server, detail="description"):
    """Return the tool objects of one server at the given detail ("name", "description", "full")."""
    return _request({"op": "tools", "server": server, "detail": detail}, server)


def call(server, tool, args=None, /, **kwargs):
    """Call server's tool with args (a dict) merged with kwargs; return its result.

    Returns the structured result if the tool gave one; else, if every content block
    is text, their texts joined with "\\n" (a str); else the list of content blocks.
    server, tool and args are positional-only, so kwargs may use those names too.
    Raises ToolError (or a subclass) when the call fails.
    """
    if args is None:
        merged = {}
    elif isinstance(args, dict):
        merged = dict(args)
    else:
        try:
            merged = dict(args)
        except (TypeError, ValueError):
            raise TypeError("gantry.call: args must be a dict, not %s" % type(args).__name__) from None
    merged.update(kwargs)
    result = _request({"op": "call", "server": server, "tool": tool, "args": merged}, server, tool)
    if not isinstance(result, dict):
        return result
    if result.get("structured") is not None:
        return result["structured"]
    content = result.get("content")
    if not isinstance(content, list):
        content = []
    if all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "\n".join(str(b.get("text", "")) for b in content)
    return content
