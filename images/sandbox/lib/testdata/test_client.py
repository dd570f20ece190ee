"""Driver: checks the Python gantry client against fake_bridge.py (GANTRY_BRIDGE must point at it).

Prints "ok python" and exits 0 if every check passes; else prints each failure to
stderr and exits 1.
"""

import os
import sys
import threading
import traceback

import gantry

failures = []


def check(name, cond, detail=""):
    if not cond:
        failures.append("%s: %s" % (name, detail))


def raises(name, fn, cls, code, text=None, server=None, tool=None):
    try:
        got = fn()
    except gantry.ToolError as e:
        check(name + " class", type(e) is cls, "want %s, got %s" % (cls.__name__, type(e).__name__))
        check(name + " is ToolError", isinstance(e, gantry.ToolError), repr(e))
        check(name + " code", e.code == code, "want %r, got %r" % (code, e.code))
        check(name + " server/tool", (e.server, e.tool) == (server, tool), "got %r" % ((e.server, e.tool),))
        if text is not None:
            check(name + " str", str(e) == text, "want %r, got %r" % (text, str(e)))
        return e
    except Exception as e:  # noqa: BLE001
        failures.append("%s: want ToolError(%s), got %r" % (name, code, e))
        return None
    failures.append("%s: want ToolError(%s), got result %r" % (name, code, got))
    return None


def run():
    bridge = os.environ["GANTRY_BRIDGE"]
    print("test_client.py: gantry from %s" % gantry.__file__, file=sys.stderr)

    # The import the runner's generated servers/<name>.py wrappers use.
    from gantry import call as _call
    check("from gantry import call", _call is gantry.call)

    # Lookups.
    servers = gantry.list_servers()
    check("list_servers", [s["name"] for s in servers] == ["math", "text"], repr(servers))
    hits = gantry.search_tools("math", detail="name", limit=1)
    check("search_tools detail/limit", hits == [{"server": "math", "name": "add"}], repr(hits))
    hits = gantry.search_tools("a")
    check("search_tools defaults", len(hits) == 3 and all("input_schema" in h and "output_schema" not in h for h in hits),
          repr(hits))
    d = gantry.describe("math", "add")
    check("describe", d["name"] == "add" and d["output_schema"]["properties"]["sum"]["type"] == "number", repr(d))
    tools = gantry.list_tools("math", detail="full")
    check("list_tools", [t["name"] for t in tools] == ["add", "mul"] and "output_schema" in tools[0], repr(tools))
    tools = gantry.list_tools("text")
    check("list_tools default detail", tools == [{"server": "text", "name": "hello", "description": "Say hello in text.",
                                                  "input_schema": {"type": "object"}}], repr(tools))

    # Result rules.
    r = gantry.call("math", "add", {"a": 2}, b=3)
    check("call structured (args + kwargs)", r == {"sum": 5}, repr(r))
    r = gantry.call("text", "hello")
    check("call text", r == "hello\nworld", repr(r))
    r = gantry.call("mixed", "image")
    check("call mixed content", isinstance(r, list) and [b["type"] for b in r] == ["text", "image"], repr(r))
    r = gantry.call("echo", "args", {"s": "line1\nline2 \u00e9\u6f22 \U0001F600", "n": 1}, server="kw", tool="kw", args=7)
    req, raw = r["request"], r["raw"]
    check("call request object", req == {"op": "call", "server": "echo", "tool": "args",
                                         "args": {"s": "line1\nline2 \u00e9\u6f22 \U0001F600", "n": 1,
                                                  "server": "kw", "tool": "kw", "args": 7}}, repr(req))
    check("request is one line", raw.endswith("\n") and raw.count("\n") == 1, repr(raw))

    # Errors.
    raises("denied", lambda: gantry.call("err", "denied"), gantry.ToolDenied, "denied",
           "err.denied: denied by policy", "err", "denied")
    raises("budget", lambda: gantry.call("err", "budget_exceeded"), gantry.BudgetExceeded, "budget_exceeded",
           None, "err", "budget_exceeded")
    raises("timeout", lambda: gantry.call("err", "timeout"), gantry.ToolTimeout, "timeout",
           "err.timeout: no answer within 30s", "err", "timeout")
    e = raises("upstream", lambda: gantry.call("err", "upstream"), gantry.ToolError, "upstream_error",
               "err.upstream: boom from upstream", "err", "upstream")
    check("message attribute", e is not None and e.message == "boom from upstream", repr(e))
    raises("unknown tool", lambda: gantry.describe("math", "nope"), gantry.UnknownTool, "unknown_tool",
           "math.nope: unknown tool math.nope", "math", "nope")
    raises("unknown server", lambda: gantry.list_tools("nope"), gantry.UnknownTool, "unknown_server",
           "nope: unknown server nope", "nope", None)
    raises("unknown server call", lambda: gantry.call("nope", "x"), gantry.UnknownTool, "unknown_server",
           None, "nope", "x")
    raises("closed without reply", lambda: gantry.call("drop", "now"), gantry.ToolError, "unavailable",
           "drop.now: code mode is not available in this job: the bridge closed the connection without a response",
           "drop", "now")
    raises("partial reply", lambda: gantry.call("drop", "partial"), gantry.ToolError, "unavailable",
           None, "drop", "partial")
    raises("invalid reply", lambda: gantry.call("bad", "json"), gantry.ToolError, "unavailable", None, "bad", "json")
    raises("response over 64 MiB", lambda: gantry.call("big", "response"), gantry.ToolError, "too_large",
           None, "big", "response")
    raises("request over 1 MiB", lambda: gantry.call("echo", "args", s="x" * (1 << 20)), gantry.ToolError,
           "too_large", None, "echo", "args")
    raises("unserializable args", lambda: gantry.call("echo", "args", f=object()), gantry.ToolError,
           "bad_request", None, "echo", "args")
    raises("NaN args", lambda: gantry.call("echo", "args", f=float("nan")), gantry.ToolError,
           "bad_request", None, "echo", "args")
    try:
        gantry.call("echo", "args", 5)
        failures.append("non-dict args: no TypeError")
    except TypeError:
        pass
    e = gantry.ToolDenied("denied", "no", "s", "t")
    import pickle
    e2 = pickle.loads(pickle.dumps(e))
    check("pickle ToolError", type(e2) is gantry.ToolDenied and str(e2) == "s.t: no" and e2.code == "denied", repr(e2))

    # Bridge unavailable.
    try:
        os.environ["GANTRY_BRIDGE"] = bridge + ".missing"
        e = raises("socket missing", gantry.list_servers, gantry.ToolError, "unavailable")
        check("socket missing message", e is not None and str(e).startswith("code mode is not available in this job: "),
              str(e))
        del os.environ["GANTRY_BRIDGE"]
        raises("GANTRY_BRIDGE unset", lambda: gantry.call("math", "add", a=1, b=2), gantry.ToolError, "unavailable",
               "math.add: code mode is not available in this job: GANTRY_BRIDGE is not set", "math", "add")
    finally:
        os.environ["GANTRY_BRIDGE"] = bridge

    # Concurrency: sync.wait only answers once 10 calls are in flight at the same time.
    results, errors = [None] * 10, []

    def worker(i):
        try:
            results[i] = gantry.call("sync", "wait", n=i)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    check("10 concurrent calls", not errors and results == [{"n": i} for i in range(10)], "%r %r" % (errors, results))


def main():
    if not os.environ.get("GANTRY_BRIDGE"):
        print("FAIL python: GANTRY_BRIDGE is not set", file=sys.stderr)
        sys.exit(2)
    try:
        run()
    except Exception:  # noqa: BLE001
        failures.append("unexpected exception:\n" + traceback.format_exc())
    if failures:
        for f in failures:
            print("FAIL python: " + f, file=sys.stderr)
        sys.exit(1)
    print("ok python")


if __name__ == "__main__":
    main()
