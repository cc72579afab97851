"""Server-rendered SVG plots of study results (matplotlib, Agg backend). No Django.

Every function takes plain tables and returns an SVG document as text, ready to be served as
``image/svg+xml`` or inlined. Empty input gives a small SVG that says there is nothing to plot,
never an exception. Fonts are kept as text (svg.fonttype none) so the SVGs stay small.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

# text.parse_math off: model and rater names are data, not mathtext ("$\frac{$" raised a ParseException)
plt.rcParams.update({"text.parse_math": False, "svg.fonttype": "none", "font.size": 9, "axes.spines.top": False, "axes.spines.right": False})
COLOURS = ["#2457c5", "#c5482f", "#1d7a46", "#a86400", "#7b3fb5", "#0f7c8a", "#b3261e", "#5f6b7a"]


def _svg(fig) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def _empty(message: str) -> str:
    fig, ax = plt.subplots(figsize=(4, 1.2))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", color="#5f6b7a")
    return _svg(fig)


def _bin_edges(values: np.ndarray, scale: tuple[float, ...] | None = None):
    """One bar per scale point for discrete scales (≤ 11 points), else 10 bins.

    ``scale`` is the dimension's full list of allowed values: with it every point gets its bar,
    including points nobody chose (an empty 0.5 bar says something; a missing one hides it).
    Without it the points are those observed.
    """
    points = np.unique(np.asarray(scale, float) if scale else values)
    if len(points) == 0:
        return 10
    if len(points) == 1:
        return [points[0] - 0.5, points[0] + 0.5]
    if len(points) <= 11:
        half = np.min(np.diff(points)) / 2
        return list(np.append(points - half, points[-1] + half))
    return 10


def score_histograms(ratings: pd.DataFrame, dimensions: list[str], *, bins: list[float] | None = None,
                     scales: dict[str, tuple[float, ...]] | None = None) -> str:
    """One histogram per model (rows) and dimension (columns) of the raw votes.

    ``scales`` maps a dimension to its allowed values so the x axis shows every scale point.
    """
    if ratings.empty or not dimensions:
        return _empty("No ratings yet")
    models = sorted(ratings["model"].unique(), key=str)
    fig, axes = plt.subplots(len(models), len(dimensions), figsize=(2.6 * len(dimensions), 1.5 * len(models) + 0.4),
                             squeeze=False, sharex="col")
    for col, dim in enumerate(dimensions):
        scale = (scales or {}).get(dim)
        edges = bins or _bin_edges(ratings[dim].dropna().to_numpy(float), scale)
        for row, model in enumerate(models):
            ax = axes[row][col]
            ax.hist(ratings.loc[ratings["model"] == model, dim].dropna(), bins=edges, color=COLOURS[row % len(COLOURS)],
                    rwidth=0.85)
            if scale and len(scale) <= 11:
                ax.set_xticks(list(scale))
            if row == 0:
                ax.set_title(dim)
            if col == 0:
                ax.set_ylabel(str(model), rotation=0, ha="right", va="center")
    fig.supxlabel("score", fontsize=9)
    return _svg(fig)


def sc_pq_scatter(summary: pd.DataFrame) -> str:
    """ImagenHub Fig. 4 style: mean SC (x) against mean PQ (y) per model, ± std between raters as bars.

    ``summary``: columns ``model, SC_mean, SC_std, PQ_mean, PQ_std``.
    """
    if summary.empty:
        return _empty("No ratings yet")
    fig, ax = plt.subplots(figsize=(4.6, 4))
    for index, row in enumerate(summary.itertuples(index=False)):
        colour = COLOURS[index % len(COLOURS)]
        ax.errorbar(row.SC_mean, row.PQ_mean, xerr=row.SC_std, yerr=row.PQ_std, fmt="o", color=colour, capsize=3)
        ax.annotate(str(row.model), (row.SC_mean, row.PQ_mean), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("Semantic consistency (SC)")
    ax.set_ylabel("Perceptual quality (PQ)")
    ax.grid(alpha=0.3)
    return _svg(fig)


def mos_with_ci(table: pd.DataFrame, *, label: str = "MOS") -> str:
    """Horizontal bars: ``mean`` per ``model`` with ``ci_low``–``ci_high`` whiskers, best on top."""
    table = table.dropna(subset=["mean"])
    if table.empty:
        return _empty("No scores yet")
    table = table.sort_values("mean")
    fig, ax = plt.subplots(figsize=(5, 0.45 * len(table) + 0.8))
    low = (table["mean"] - table["ci_low"]).fillna(0).clip(lower=0)
    high = (table["ci_high"] - table["mean"]).fillna(0).clip(lower=0)
    ax.barh(table["model"].astype(str), table["mean"], color="#c9d6f2")
    ax.errorbar(table["mean"], table["model"].astype(str), xerr=[low, high], fmt="o", color="#2457c5", capsize=3)
    ax.set_xlabel(f"{label} (95 % CI)")
    return _svg(fig)


def alpha_over_time(series: pd.DataFrame, *, threshold: float | None = None) -> str:
    """Agreement as ratings arrive: ``ratings`` (count so far) against ``alpha`` per ``dimension``.

    ``ci_low``/``ci_high`` are shaded when present; a dashed line marks ``threshold``.
    """
    series = series.dropna(subset=["alpha"])
    if series.empty:
        return _empty("Agreement needs items with two ratings")
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for index, (dim, group) in enumerate(series.groupby("dimension", sort=True)):
        colour = COLOURS[index % len(COLOURS)]
        ax.plot(group["ratings"], group["alpha"], marker="o", color=colour, label=str(dim))
        if {"ci_low", "ci_high"} <= set(group.columns) and group["ci_low"].notna().any():
            ax.fill_between(group["ratings"], group["ci_low"].astype(float), group["ci_high"].astype(float),
                            color=colour, alpha=0.10, linewidth=0)
    if threshold is not None:
        ax.axhline(threshold, color="#b3261e", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
    ax.set_xlabel("ratings so far")
    ax.set_ylabel("Krippendorff's α")
    lowest = float(series["alpha"].min())
    if "ci_low" in series.columns and series["ci_low"].notna().any():
        lowest = min(lowest, float(series["ci_low"].astype(float).min()))
    ax.set_ylim(max(-1.05, min(-0.1, lowest - 0.05)), 1.02)
    ax.legend(fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=5)
    ax.grid(alpha=0.3)
    return _svg(fig)


def judge_scatter(paired: pd.DataFrame, *, x_label: str, y_label: str, max_models: int) -> str:
    """Judge score (``value``, y) against the rater-averaged human score (``human``, x), one panel
    per ``model`` (the first ``max_models`` by name)."""
    models = sorted(paired["model"].unique())[:max_models] if not paired.empty else []
    cols = max(1, min(4, len(models)))
    rows = max(1, -(-len(models) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.1 * cols, 2.8 * rows), squeeze=False, sharex=True, sharey=True)
    for ax in axes.flat:
        ax.set_visible(False)
    for ax, model in zip(axes.flat, models):
        part = paired[paired["model"] == model]
        ax.set_visible(True)
        ax.scatter(part["human"], part["value"], s=22, alpha=0.75, color="#2457c5", edgecolor="white", linewidth=0.5)
        rho = part["human"].corr(part["value"], method="spearman") if len(part) > 2 else float("nan")
        ax.set_title(f"{model}  (n={len(part)}, SRCC {rho:.2f})" if rho == rho else f"{model}  (n={len(part)})", fontsize=9)
        ax.grid(alpha=0.3)
        ax.set_xlabel(x_label, fontsize=8)
        ax.set_ylabel(y_label, fontsize=8)
        ax.tick_params(labelsize=7)
    if not models:
        axes.flat[0].set_visible(True)
        axes.flat[0].text(0.5, 0.5, "no item scored by both\nthe judge and the raters", ha="center", va="center")
        axes.flat[0].axis("off")
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")  # not _svg: this figure keeps its own tight_layout margins
    plt.close(fig)
    return buffer.getvalue()
