# gantry: run a Python program file in this interpreter exactly as
# `python3 <file>` would: the script's directory first on sys.path, then
# PYTHONPATH; a fresh __main__ module whose globals hold the module builtins;
# the code compiled from the file's bytes (so its encoding declaration
# counts); a traceback trimmed to the program's own frames. Shared by the
# spare sandbox's interpreter (zygote.py) and the warm interpreter's forked
# jobs (warm.py), which both prepend this file.
import os, sys


def _gantry_run_main(path, argv, env):
    """Runs the program; returns normally or raises SystemExit as a script would end."""
    import builtins

    os.environ.clear()
    os.environ.update(env)
    sys.argv = argv[1:]
    sys.path[0] = os.path.dirname(path)
    sys.path[1:1] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    # runpy would do the same but imports pkgutil and typing: half as much
    # again as the interpreter's own start.
    main = type(sys)("__main__")
    main.__file__, main.__builtins__, main.__spec__, main.__cached__ = path, builtins, None, None
    sys.modules["__main__"] = main
    try:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec", dont_inherit=True)
        exec(code, main.__dict__)
    except SystemExit:
        raise  # the interpreter reports it as it would the script's
    except BaseException as e:
        # The traceback as the script alone would show it: drop this
        # file's frames. (None for a syntax error, shown without one.)
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        e = e.with_traceback(tb)
        sys.excepthook(type(e), e, tb)
        sys.exit(1)
