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

No loop over raters or models: every (group, rater) is one group of pairs in
:func:`analysis.correlation.grouped_correlations` (EvalMi scale: 3,072
rater-model correlations in well under a second, instead of 3,072 scipy calls).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from analysis.correlation import fisher_z_mean, grouped_correlations, sample_correlations

METHODS = ("srcc", "plcc", "krcc")


def rater_vs_rest(matrix: np.ndarray, raters: Iterable[str] | None = None) -> pd.DataFrame:
    """Correlate each row of a raters x items matrix with the mean of the others.

    Returns one row per rater: ``rater, n, srcc, plcc, krcc, reason`` (NaN + reason when
    undefined). All raters are correlated at once (:func:`grouped_correlations`).
    """
    data = np.asarray(matrix, dtype=float)
    names = list(raters) if raters is not None else [str(i) for i in range(data.shape[0])]
    present = np.isfinite(data)
    totals = np.where(present, data, 0.0).sum(axis=0)
    counts = present.sum(axis=0)
    rater_index, item_index = np.nonzero(present)
    own = data[rater_index, item_index]
    with np.errstate(divide="ignore", invalid="ignore"):
        others = np.where(counts[item_index] > 1, (totals[item_index] - own) / (counts[item_index] - 1), np.nan)
    result = grouped_correlations(rater_index, own, others, n_groups=len(names))
    return pd.DataFrame({"rater": names, "n": result.n, "srcc": result.srcc, "plcc": result.plcc,
                         "krcc": result.krcc, "reason": [_rater_reason(r) for r in result.reason]})


def _rater_reason(reason: str | None) -> str | None:
    # grouped_correlations speaks of judge vs human; here it is one rater vs the rest
    if reason:
        reason = reason.replace("judge scores", "this rater's scores").replace("human scores", "the others' mean")
    return reason


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

    Everything is computed on the long frame at once: the others' mean per (group, item) by one
    weighted count (summed in rater order, as the raters x items matrix would be), then every
    (group, rater)'s three correlations by :func:`grouped_correlations`. A rater who rated an item
    twice counts with the mean of the two ratings.
    """
    by = list(by)
    if by:
        grouped = ratings.groupby(by, sort=True)
        group_code = grouped.ngroup().fillna(-1).to_numpy(np.int64)
        keys = [k if isinstance(k, tuple) else (k,) for k in grouped.size().index]
    else:
        group_code = np.zeros(len(ratings), np.int64)
        keys = [()]
    rater_code, rater_names = pd.factorize(ratings[rater], sort=True)
    item_code, item_names = pd.factorize(ratings[item], sort=True)
    scores = list(scores)
    per_dimension = {
        dimension: _per_rater_vs_rest(group_code, rater_code, item_code, ratings[dimension].to_numpy(float),
                                      len(keys), len(rater_names), len(item_names))
        for dimension in scores
    }
    rows = []
    for k, key in enumerate(keys):
        for dimension in scores:
            table = per_dimension[dimension].get(k)
            if table is None or len(table["rater"]) < 2:
                rows.append((*key, dimension, 0, None, None, None, "fewer than 2 raters: no ceiling"))
                continue
            srcc = table["srcc"]
            skipped = np.flatnonzero(np.isnan(srcc))
            reason = "; ".join(f"rater {rater_names[table['rater'][i]]}: {_rater_reason(table['reason'][i])}"
                               for i in skipped) or None
            rows.append((*key, dimension, int(len(srcc) - len(skipped)),
                         *(fisher_z_mean(table[m]) for m in METHODS), reason))
    return pd.DataFrame(rows, columns=[*by, "dimension", "n_raters", *METHODS, "reason"])


def _per_rater_vs_rest(group, rater, item, values, n_groups, n_raters, n_items) -> dict[int, dict]:
    """Group code -> that group's raters (sorted codes) with their correlations and reasons."""
    present = np.isfinite(values) & (group >= 0) & (rater >= 0) & (item >= 0)  # NaN labels: no row, no column
    group, rater, item, values = group[present], rater[present], item[present], values[present]
    cell = (group * n_raters + rater) * n_items + item
    order = np.argsort(cell, kind="stable")  # group, then rater, then item: the matrix's order
    cell, group, rater, item, values = cell[order], group[order], rater[order], item[order], values[order]
    first = np.r_[True, cell[1:] != cell[:-1]] if len(cell) else np.zeros(0, bool)
    if not first.all():  # a rater rated an item twice: the matrix holds their mean
        which = np.cumsum(first) - 1
        values = np.bincount(which, weights=values) / np.bincount(which)
        group, rater, item = group[first], rater[first], item[first]
    column = group * n_items + item
    if n_groups * n_items <= 4 * len(column) + 1024:
        width = n_groups * n_items
    else:  # sparse item codes: compress the (group, item) columns first
        column = np.unique(column, return_inverse=True)[1]
        width = int(column.max()) + 1 if len(column) else 0
    # Weighted counts add in array order, i.e. rater by rater: the same sums as the matrix's column sums.
    totals = np.bincount(column, weights=values, minlength=width)[column]
    counts = np.bincount(column, minlength=width)[column]
    with np.errstate(divide="ignore", invalid="ignore"):
        others = np.where(counts > 1, (totals - values) / (counts - 1), np.nan)
    pair_set = group * n_raters + rater
    set_first = np.r_[True, pair_set[1:] != pair_set[:-1]] if len(pair_set) else np.zeros(0, bool)
    set_code = np.cumsum(set_first) - 1
    result = grouped_correlations(set_code, values, others)
    set_group, set_rater = group[set_first], rater[set_first]
    out: dict[int, dict] = {}
    bounds = np.flatnonzero(np.r_[True, set_group[1:] != set_group[:-1]]) if len(set_group) else []
    for start, stop in zip(bounds, [*bounds[1:], len(set_group)]):
        out[int(set_group[start])] = {
            "rater": set_rater[start:stop], "srcc": result.srcc[start:stop], "plcc": result.plcc[start:stop],
            "krcc": result.krcc[start:stop], "reason": result.reason[start:stop],
        }
    return out


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
