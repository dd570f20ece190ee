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


# Skills follow the Agent Skills standard, whose names use hyphens
# (/skills/data-analysis), which Python cannot import. This finder, asked
# only after the normal ones failed, maps skills.<a_b> to the folder
# /skills/<a-b>, so `from skills.data_analysis import helpers` works; a
# folder without __init__.py becomes a namespace package, as a plain folder
# would. It imports nothing until such an import happens.
class _SkillsFinder:
    root = "/skills"

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname == "skills":
            folder = cls.root
        else:
            head, _, name = fullname.partition(".")
            if head != "skills" or not name or "." in name:
                return None
            folder = cls.root + "/" + name.replace("_", "-")
        if not os.path.isdir(folder):
            return None
        import importlib.util

        init = folder + "/__init__.py"
        if os.path.isfile(init):
            return importlib.util.spec_from_file_location(fullname, init, submodule_search_locations=[folder])
        spec = importlib.util.spec_from_loader(fullname, None, is_package=True)
        spec.submodule_search_locations = [folder]
        return spec

    @classmethod
    def invalidate_caches(cls):
        pass


import sys  # noqa: E402  (already loaded: a builtin)

sys.meta_path.append(_SkillsFinder)
