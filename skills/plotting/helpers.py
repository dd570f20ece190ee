"""Chart helpers that save PNG files for gantry to return."""
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _save(fig, path):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def line_chart(x, ys, title, path, xlabel="", ylabel=""):
    """Plot one line per entry of ys (label -> values) against x."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, values in ys.items():
        ax.plot(x, values, marker="o", label=label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if len(ys) > 1:
        ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, path)


def bar_chart(labels, values, title, path):
    """Bar chart of values, one bar per label."""
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar([str(label) for label in labels], values)
    ax.set_title(title)
    return _save(fig, path)


def histogram(values, title, path, bins=20):
    """Histogram of the distribution of values."""
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(values, bins=bins)
    ax.set_title(title)
    return _save(fig, path)


def scatter(x, y, title, path):
    """Scatter plot of y against x."""
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.scatter(x, y, s=12)
    ax.set_title(title)
    return _save(fig, path)
