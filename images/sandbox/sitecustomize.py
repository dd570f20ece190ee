# gantry sandbox: seed matplotlib's prebuilt font cache into MPLCONFIGDIR (a fresh
# tmpfs under /tmp) so "import matplotlib" neither rebuilds it (~1 s) nor warns about
# an unwritable config dir. Runs at every interpreter start: keep it to one stat() in
# the common case and import nothing beyond os (already loaded by site).
import os

_dst = os.environ.get("MPLCONFIGDIR", "").rstrip("/")
if _dst and not os.path.isdir(_dst):
    try:
        _src = "/usr/share/gantry/matplotlib"
        _names = os.listdir(_src)
        _tmp = "%s.%d" % (_dst, os.getpid())
        os.makedirs(_tmp, 0o700)
        for _n in _names:
            with open(os.path.join(_src, _n), "rb") as _f, open(os.path.join(_tmp, _n), "wb") as _g:
                _g.write(_f.read())
        try:
            os.rename(_tmp, _dst)  # atomic: no interpreter ever sees a half-copied dir
        except OSError:  # another interpreter won the race
            for _n in os.listdir(_tmp):
                os.unlink(os.path.join(_tmp, _n))
            os.rmdir(_tmp)
    except OSError:
        pass
