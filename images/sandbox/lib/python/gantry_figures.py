"""matplotlib backend of gantry's sandboxes (MPLBACKEND=module://gantry_figures).

It draws like Agg, and makes figures visible to whoever reads the job: plt.show()
saves every open figure as a PNG under /workspace/out/ (collected as artifacts;
an MCP client gets small ones inline) and closes it, and figures still open when
the program exits are saved the same way, unless the program saved them itself
(savefig). Names are figure-1.png, figure-2.png, ..., never overwriting a file of
the program's. GANTRY_FIGURES=0 turns it off (the backend is then plain Agg).
"""
import atexit
import os

from matplotlib import _pylab_helpers
from matplotlib.backends.backend_agg import FigureCanvasAgg, _BackendAgg

_OUT = "/workspace/out"
_on = os.environ.get("GANTRY_FIGURES", "1") not in ("0", "false", "no", "off")


def _next_path():
    n = 1
    while os.path.exists(os.path.join(_OUT, "figure-%d.png" % n)):
        n += 1
    return os.path.join(_OUT, "figure-%d.png" % n)


def save_figures(unsaved_only=False):
    """Saves every open figure as a PNG under /workspace/out/ and closes it."""
    managers = _pylab_helpers.Gcf.get_all_fig_managers()
    if unsaved_only:
        managers = [m for m in managers if not getattr(m.canvas, "_gantry_saved", False)]
    if not managers or not _on:
        return
    try:
        os.makedirs(_OUT, exist_ok=True)
    except OSError:
        return
    for m in managers:
        try:
            m.canvas.figure.savefig(_next_path())
        except Exception:  # a figure that cannot draw must not fail the program
            pass
    _pylab_helpers.Gcf.destroy_all()


class FigureCanvasGantry(FigureCanvasAgg):
    def print_figure(self, *args, **kwargs):
        self._gantry_saved = True  # the program keeps it: not saved again at exit
        return super().print_figure(*args, **kwargs)


@_BackendAgg.export
class _BackendGantry(_BackendAgg):
    FigureCanvas = FigureCanvasGantry

    @staticmethod
    def show(*args, **kwargs):
        save_figures()


atexit.register(save_figures, unsaved_only=True)
