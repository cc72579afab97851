"""Human ceiling: how well one rater agrees with the rest of the panel.

Leave-one-out per group (model) and dimension: each rater's scores are
correlated with the mean of the *other* raters on the items both cover
(Spearman, Pearson, Kendall tau-b), and the raters' correlations are averaged
with the Fisher z transform. A judge whose correlation with the human mean
reaches this value is as good as a typical human rater.

Raters whose scores (or whose peers' means) are constant on the shared items
have no correlation; they are skipped and listed with a reason. Values are
snapped to 9 decimals before ranking (means of sqrt values carry float
noise, which would otherwise break ties at random).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from analysis.correlation import fisher_z_mean, sample_correlations

METHODS = ("srcc", "plcc", "krcc")


def rater_vs_rest(matrix: np.ndarray, raters: Iterable[str] | None = None) -> pd.DataFrame:
    """Correlate each row of a raters x items matrix with the mean of the others.

    Returns one row per rater: ``rater, n, srcc, plcc, krcc, reason``.
    The loop is over raters; each step is vectorised over items.
    """
    data = np.asarray(matrix, dtype=float)
    names = list(raters) if raters is not None else [str(i) for i in range(data.shape[0])]
    present = np.isfinite(data)
    totals = np.where(present, data, 0.0).sum(axis=0)
    counts = present.sum(axis=0)
    rows = []
    for index, name in enumerate(names):
        own = data[index]
        other_counts = counts - present[index]
        with np.errstate(divide="ignore", invalid="ignore"):
            others = np.where(other_counts > 0, (totals - np.where(present[index], own, 0.0)) / other_counts, np.nan)
        result = sample_correlations(own, others, logistic=False)
        reason = result.reason
        if reason:  # sample_correlations speaks of judge vs human; here it is one rater vs the rest
            reason = reason.replace("judge scores", "this rater's scores").replace("human scores", "the others' mean")
        rows.append((name, result.n, result.srcc, result.plcc, result.krcc, reason))
    return pd.DataFrame(rows, columns=["rater", "n", *METHODS, "reason"])


def human_ceiling(
    ratings: pd.DataFrame,
    *,
    scores: Iterable[str],
    by: Iterable[str] = ("model",),
    rater: str = "rater",
    item: str = "item",
) -> pd.DataFrame:
    """Leave-one-out ceiling per group and dimension.

    Returns ``*by, dimension, n_raters`` (raters with a defined value),
    ``srcc, plcc, krcc`` (Fisher-z means over raters; None if no rater had a
    defined correlation) and ``reason`` (why raters were skipped, or None).
    """
    by = list(by)
    groups = ratings.groupby(by, sort=True) if by else [((), ratings)]
    rows = []
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        for dimension in scores:
            table = group.pivot_table(index=rater, columns=item, values=dimension, aggfunc="mean")
            if table.shape[0] < 2:
                rows.append((*key, dimension, 0, None, None, None, "fewer than 2 raters: no ceiling"))
                continue
            per_rater = rater_vs_rest(table.to_numpy(), table.index.astype(str))
            skipped = per_rater[per_rater["srcc"].isna()]
            reason = "; ".join(f"rater {r.rater}: {r.reason}" for r in skipped.itertuples()) or None
            rows.append(
                (
                    *key,
                    dimension,
                    int(per_rater["srcc"].notna().sum()),
                    *(fisher_z_mean(per_rater[m]) for m in METHODS),
                    reason,
                )
            )
    return pd.DataFrame(rows, columns=[*by, "dimension", "n_raters", *METHODS, "reason"])


def pairwise_rater_correlations(
    ratings: pd.DataFrame, *, score: str, rater: str = "rater", item: str = "item"
) -> pd.DataFrame:
    """Correlation of every pair of raters on their shared items.

    An alternative ceiling (mean pairwise agreement) for comparison with
    papers that report it. Returns ``rater_a, rater_b, n, srcc, plcc, krcc``.
    """
    table = ratings.pivot_table(index=rater, columns=item, values=score, aggfunc="mean")
    names = table.index.astype(str).tolist()
    data = table.to_numpy(float)
    rows = []
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            result = sample_correlations(data[a], data[b], logistic=False)
            rows.append((names[a], names[b], result.n, result.srcc, result.plcc, result.krcc))
    return pd.DataFrame(rows, columns=["rater_a", "rater_b", "n", *METHODS])
