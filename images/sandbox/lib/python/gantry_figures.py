"""matplotlib backend of gantry's sandboxes (MPLBACKEND=module://gantry_figures).

It draws like Agg, and makes figures visible to whoever reads the job: plt.show()
saves every open figure as a PNG under /workspace/out/ (collected as artifacts;
an MCP client gets small ones inline) and closes it, and figures still open when
the program exits are saved the same way, unless the program saved them itself
(savefig). Names are figure-1.png, figure-2.png, ..., never overwriting a file of
the program's. GANTRY_FIGURES=0 turns it off (the backend is then plain Agg).

GANTRY_FIGURES=display, in a stateful session's Python job (a notebook cell),
shows figures as a notebook's inline backend does instead: plt.show() and the
figures still open when the cell ends become the cell's displays (a PNG each,
with the figure's repr as text), in the job's `displays`, and no file is
written.
"""
import atexit
import base64
import io
import os

from matplotlib import _pylab_helpers
from matplotlib.backends.backend_agg import FigureCanvasAgg, _BackendAgg

_OUT = "/workspace/out"
_on = True
_display = False
# The cell's displays so far (display mode), as MIME bundles.
_displayed = []


def configure():
    """Reads GANTRY_FIGURES (again: a session's interpreter reads it for each cell)."""
    global _on, _display
    mode = os.environ.get("GANTRY_FIGURES", "1")
    _on = mode not in ("0", "false", "no", "off")
    _display = mode == "display"


configure()


def _next_path():
    n = 1
    while os.path.exists(os.path.join(_OUT, "figure-%d.png" % n)):
        n += 1
    return os.path.join(_OUT, "figure-%d.png" % n)


def save_figures(unsaved_only=False):
    """Shows every open figure (saves it as a PNG under /workspace/out/, or in
    display mode makes it a display) and closes it."""
    managers = _pylab_helpers.Gcf.get_all_fig_managers()
    if _display:
        for m in managers:
            _show(m.canvas.figure)
        _pylab_helpers.Gcf.destroy_all()
        return
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


def _show(fig):
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        _displayed.append({"text/plain": repr(fig), "image/png": base64.b64encode(buf.getvalue()).decode()})
    except Exception:  # a figure that cannot draw must not fail the cell
        pass


def shown_as_value(value):
    """A figure that is the cell's value is shown as that value, not again as a
    display (display mode)."""
    if not _display:
        return
    from matplotlib.figure import Figure
    import matplotlib.pyplot as plt

    if isinstance(value, Figure):
        plt.close(value)


def take_displayed():
    """The cell's displays, in the order shown; the list starts again empty."""
    out = list(_displayed)
    del _displayed[:]
    return out


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
