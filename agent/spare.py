# gantry's spare Python (after pyrun.py): started ahead of time in a job's
# fresh bubblewrap sandbox (see spare.go), it pays the interpreter's
# start-up before the job exists, then waits on stdin for its one job: a
# header (4-byte big-endian length, then NUL-separated fields: mode, argc,
# argv..., env "K=V"...), followed by the job's stdin.
#   mode "run":  argv is ["python3", "/tmp/gantry/<file>.py"]; the program runs
#                in this interpreter as `python3 <file>` would run it (the agent
#                only asks for this when nothing in the job's environment is
#                read at interpreter start-up).
#   mode "exec": any other program replaces this process.


def _gantry_read(n):
    buf = b""
    while len(buf) < n:
        chunk = os.read(0, n - len(buf))
        if not chunk:
            os._exit(0)  # the agent went away before a job came
        buf += chunk
    return buf


def _gantry_job():
    # Everything written before this line is not the job's output.
    os.write(2, b"\0gantry-ready\n")
    fields = _gantry_read(int.from_bytes(_gantry_read(4), "big")).decode("utf-8", "surrogateescape").split("\0")
    mode, argc = fields[0], int(fields[1])
    argv, env = fields[2 : 2 + argc], dict(kv.split("=", 1) for kv in fields[2 + argc :] if "=" in kv)
    if mode != "run":
        try:
            os.execvpe(argv[0], argv, env)
        except OSError as e:
            os.write(2, ("gantry: cannot run %s: %s\n" % (argv[0], e.strerror)).encode())
            os._exit(127)
    # The interpreter's own exit follows: atexit, threads, flushing.
    _gantry_run_main(argv[1], argv, env)


_gantry_job()
