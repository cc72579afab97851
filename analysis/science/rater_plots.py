"""Server-rendered plots for the rater pages (matplotlib, Agg backend, no pyplot state)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

RATER_COLOUR = "#2457c5"
OTHERS_COLOUR = "#9aa5b1"


def score_distribution_svg(frame: pd.DataFrame, rater, *, rater_label: str = "this rater") -> str:
    """Grouped bars per dimension: share of the rater's scores at each value vs everyone else's.

    ``frame``: long frame with ``rater, dimension, raw`` (scale units). Returns an inline ``<svg>``
    element (no XML prolog), or '' when there is nothing to plot.
    """
    data = frame.dropna(subset=["raw"])
    if data.empty:
        return ""
    dims = list(dict.fromkeys(data["dimension"]))
    fig = Figure(figsize=(3.2 * len(dims) + 0.6, 2.6), dpi=96)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(dims), squeeze=False)[0]
    for ax, dim in zip(axes, dims):
        part = data[data["dimension"] == dim]
        values = np.sort(part["raw"].unique())
        mine = part[part["rater"] == rater]["raw"]
        others = part[part["rater"] != rater]["raw"]
        x = np.arange(len(values))
        width = 0.4
        for offset, series, colour, label in (
            (-width / 2, mine, RATER_COLOUR, rater_label),
            (width / 2, others, OTHERS_COLOUR, "everyone else"),
        ):
            shares = [(series == v).mean() if len(series) else 0.0 for v in values]
            ax.bar(x + offset, shares, width, color=colour, label=f"{label} (n={len(series)})")
        ax.set_xticks(x, [f"{v:g}" for v in values])
        ax.set_ylim(0, 1)
        ax.set_title(dim, fontsize=10)
        ax.set_ylabel("share of scores", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0].legend(fontsize=7, frameon=False, loc="upper left")
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]
