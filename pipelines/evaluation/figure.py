"""A figure as PNG bytes, and the figure that says why a declared plot has nothing to draw (matplotlib only: the
light modules that write placeholder plots import this, not the plotting of pipelines/reporting/plots.py)."""

from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


def not_applicable(title: str, reason: str) -> bytes:
    """A placeholder figure that says why the metric does not apply (DVC expects every declared plot)."""
    fig = Figure(figsize=(5, 3))
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, f"not applicable:\n{reason}", ha="center", va="center", wrap=True)
    return png(fig)
