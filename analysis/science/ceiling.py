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
:func:`analysis.science.correlation.grouped_correlations` (EvalMi scale: 3,072
rater-model correlations in well under a second, instead of 3,072 scipy calls).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from analysis.science.codes import RatingCodes, group_codes, sort_order
from analysis.science.correlation import fisher_z_mean, grouped_correlations, grouped_correlations_by, sample_correlations

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
    codes: RatingCodes | None = None,
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
    return human_ceilings(ratings, scores=scores, groupings=[by], rater=rater, item=item, codes=codes)[0]


def human_ceilings(
    ratings: pd.DataFrame,
    *,
    scores: Iterable[str],
    groupings: Iterable[Iterable[str]] = (("model",), ()),
    rater: str = "rater",
    item: str = "item",
    codes: RatingCodes | None = None,
) -> list[pd.DataFrame]:
    """:func:`human_ceiling` for several groupings (default: per model, and the whole study), one
    table each. When an item belongs to one group of each grouping (items are (model, prompt)
    images), the rater-vs-rest pairs are the same under every grouping: they are built once, and
    the correlations share their value codes. ``codes``: the ratings'
    :class:`~analysis.science.codes.RatingCodes`, to not code raters, items and models again (same tables)."""
    groupings = [list(by) for by in groupings]
    if codes is not None:
        codes.check(ratings, rater=rater, item=item)
        (rater_code, rater_names), (item_code, item_names) = codes.of(rater), codes.of(item)
    else:
        rater_code, rater_names = pd.factorize(ratings[rater], sort=True)
        item_code, item_names = pd.factorize(ratings[item], sort=True)
    groups = [group_codes(ratings, by, codes) for by in groupings]  # (code per row, keys) per grouping
    n_raters, n_items = len(rater_names), len(item_names)
    finest = max(range(len(groupings)), key=lambda i: len(groups[i][1]))
    same_pairs = [i == finest or _one_group_per_item(groups[finest][0], groups[i][0], item_code, n_items)
                  for i in range(len(groupings))]
    scores = list(scores)
    per_dimension: list[dict] = [{} for _ in groupings]
    for dimension in scores:
        values = ratings[dimension].to_numpy(float)
        shared = [i for i in range(len(groupings)) if same_pairs[i]]
        pairs = _rater_vs_rest_pairs(groups[finest][0], rater_code, item_code, values, len(groups[finest][1]),
                                     n_raters, n_items)
        sets = [groups[i][0][pairs["row"]] * n_raters + pairs["rater"] for i in shared]
        results = grouped_correlations_by(sets, pairs["own"], pairs["others"],
                                          n_groups=[len(groups[i][1]) * n_raters for i in shared])
        for i, set_code, result in zip(shared, sets, results):
            per_dimension[i][dimension] = _per_group(result, set_code, len(groups[i][1]), n_raters)
        for i in range(len(groupings)):
            if not same_pairs[i]:
                own = _rater_vs_rest_pairs(groups[i][0], rater_code, item_code, values, len(groups[i][1]),
                                           n_raters, n_items)
                set_code = groups[i][0][own["row"]] * n_raters + own["rater"]
                result = grouped_correlations(set_code, own["own"], own["others"],
                                              n_groups=len(groups[i][1]) * n_raters)
                per_dimension[i][dimension] = _per_group(result, set_code, len(groups[i][1]), n_raters)
    tables = []
    for by, (_, keys), tables_by_dimension in zip(groupings, groups, per_dimension):
        rows = []
        for k, key in enumerate(keys):
            for dimension in scores:
                table = tables_by_dimension[dimension].get(k)
                if table is None or len(table["rater"]) < 2:
                    rows.append((*key, dimension, 0, None, None, None, "fewer than 2 raters: no ceiling"))
                    continue
                srcc = table["srcc"]
                skipped = np.flatnonzero(np.isnan(srcc))
                reason = "; ".join(f"rater {rater_names[table['rater'][i]]}: {_rater_reason(table['reason'][i])}"
                                   for i in skipped) or None
                rows.append((*key, dimension, int(len(srcc) - len(skipped)),
                             *(fisher_z_mean(table[m]) for m in METHODS), reason))
        tables.append(pd.DataFrame(rows, columns=[*by, "dimension", "n_raters", *METHODS, "reason"]))
    return tables


def _one_group_per_item(fine: np.ndarray, coarse: np.ndarray, item: np.ndarray, n_items: int) -> bool:
    """True when (coarse group, item) and (fine group, item) name the same cells: each item lies
    in one fine group and one coarse group (the groupings then differ only in which raters' pairs
    are pooled)."""
    valid = (fine >= 0) & (coarse >= 0) & (item >= 0)
    for codes in (fine, coarse):
        low = np.full(n_items, np.iinfo(np.int64).max)
        high = np.full(n_items, -1)
        np.minimum.at(low, item[valid], codes[valid])
        np.maximum.at(high, item[valid], codes[valid])
        seen = high >= 0
        if (low[seen] != high[seen]).any():
            return False
    return bool(((fine >= 0) == (coarse >= 0))[item >= 0].all())


def _per_group(result, set_code: np.ndarray, n_groups: int, n_raters: int) -> dict[int, dict]:
    """Group code -> its raters that have ratings (codes) with their correlations and reasons."""
    present = np.bincount(set_code, minlength=n_groups * n_raters) > 0
    out: dict[int, dict] = {}
    for k in range(n_groups):
        block = slice(k * n_raters, (k + 1) * n_raters)
        raters = np.flatnonzero(present[block])
        if not len(raters):
            continue
        index = raters + k * n_raters
        out[k] = {"rater": raters, "srcc": result.srcc[index], "plcc": result.plcc[index],
                  "krcc": result.krcc[index], "reason": [result.reason[j] for j in index]}
    return out


def _rater_vs_rest_pairs(group, rater, item, values, n_groups, n_raters, n_items) -> dict[str, np.ndarray]:
    """Every filled (group, rater, item) cell: ``own`` value, ``others`` (mean of the other raters
    on that item, NaN if none), ``rater`` code and a representative ``row`` of the input, in
    (group, rater, item) order. A rater's repeated ratings of an item become their mean."""
    row = np.flatnonzero(np.isfinite(values) & (group >= 0) & (rater >= 0) & (item >= 0))  # NaN labels: no cell
    group, rater, item, values = group[row], rater[row], item[row], values[row]
    cell = (group * n_raters + rater) * n_items + item
    order = sort_order(cell)  # group, then rater, then item: the matrix's order
    cell, group, rater, item, values, row = (a[order] for a in (cell, group, rater, item, values, row))
    first = np.r_[True, cell[1:] != cell[:-1]] if len(cell) else np.zeros(0, bool)
    if not first.all():  # a rater rated an item twice: the matrix holds their mean
        which = np.cumsum(first) - 1
        values = np.bincount(which, weights=values) / np.bincount(which)
        group, rater, item, row = group[first], rater[first], item[first], row[first]
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
    return {"own": values, "others": others, "rater": rater, "row": row}


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


def judge_vs_rest(
    ratings: pd.DataFrame,
    judge: pd.Series,
    *,
    score: str,
    groupings: Iterable[Iterable[str]] = (("model",), ()),
    rater: str = "rater",
    item: str = "item",
    lower_is_better: bool = False,
) -> list[pd.DataFrame]:
    """The judge measured like a rater in the ceiling: for each left-out rater, the judge's scores
    correlated with the mean of the *other* raters on the items that rater rated, then the
    Fisher-z mean over left-out raters, per group.

    The human ceiling correlates one rater with the mean of k - 1 others, while the judge is
    usually correlated with the mean of all k; a mean of more raters is less noisy, so the usual
    comparison flatters the judge. This is the like-for-like number to set beside the ceiling.
    ``judge``: the judge's score per item label (items without a score are left out). Returns one
    table per grouping: ``*by, n_raters, srcc, plcc, krcc`` (Kendall tau-b), ``reason``. The
    whole-study grouping ``()`` pools every model's items, as the study-level ceiling does.
    """
    rater_code, rater_names = pd.factorize(ratings[rater], sort=True)
    item_code, item_names = pd.factorize(ratings[item], sort=True)
    judge_of_item = pd.Series(judge).groupby(level=0).last().reindex(item_names).to_numpy(float)
    if lower_is_better:
        judge_of_item = -judge_of_item
    values = ratings[score].to_numpy(float)
    n_raters, n_items = len(rater_names), len(item_names)
    tables = []
    for by in groupings:
        by = list(by)
        group_code, keys = group_codes(ratings, by)
        pairs = _rater_vs_rest_pairs(group_code, rater_code, item_code, values, len(keys), n_raters, n_items)
        x = judge_of_item[item_code[pairs["row"]]]
        set_code = group_code[pairs["row"]] * n_raters + pairs["rater"]
        result = grouped_correlations(set_code, x, pairs["others"], n_groups=len(keys) * n_raters)
        per_group = _per_group(result, set_code, len(keys), n_raters)
        rows = []
        for k, key in enumerate(keys):
            table = per_group.get(k)
            if table is None or len(table["rater"]) < 2:
                rows.append((*key, 0, None, None, None, "fewer than 2 raters: no leave-one-out mean"))
                continue
            defined = ~np.isnan(table["srcc"])
            reason = None if defined.any() else "no left-out rater gave a defined correlation"
            rows.append((*key, int(defined.sum()), *(fisher_z_mean(table[m]) for m in METHODS), reason))
        tables.append(pd.DataFrame(rows, columns=[*by, "n_raters", *METHODS, "reason"]))
    return tables
