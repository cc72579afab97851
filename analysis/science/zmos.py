"""z-score MOS as in EvalMi-50K (Wang et al., section 3.3).

For every rater i (and one dimension at a time, e.g. perception):

    z_ij  = (r_ij - mu_i) / sigma_i        mu_i, sigma_i over all items i rated
    z'_ij = 100 (z_ij + 3) / 6             0-100 scale; z = +-3 maps to 100 / 0
    MOS_j = mean over raters of z'_ij

sigma_i uses ddof = 1, as in the paper. Normalising per rater removes each
rater's personal offset and spread, so a strict rater and a lenient one who
rank images alike give the same z.

A rater whose sigma is 0 (every rating identical) or who gave a single rating
has no z-score: they are *excluded* with a reason string, never a crash.

Inputs are long DataFrames with ``rater``, ``item`` (and optionally
``model``) plus one score column named by ``score``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from analysis.science.codes import RatingCodes, dense_rank

# A rater's spread below this (in rating units) counts as zero: their
# ratings are identical up to float noise.
SIGMA_FLOOR = 1e-12


@dataclass
class MosResult:
    """Per-group MOS table plus the raters left out and why.

    ``table`` columns: the group keys, ``mos`` (0-100 after rescale),
    ``std`` (ddof 1), ``n`` and ``ci_low``/``ci_high`` (95 %; NaN when n < 2).
    """

    table: pd.DataFrame
    excluded: dict[str, str] = field(default_factory=dict)


def zscore_by_rater(
    ratings: pd.DataFrame, *, score: str = "score", rater: str = "rater", codes: RatingCodes | None = None
) -> tuple[pd.DataFrame, dict[str, str]]:
    """Add ``z`` and ``z_scaled`` (0-100) columns, per rater.

    Returns (ratings of usable raters with the new columns, excluded) where
    ``excluded`` maps rater -> reason (in rater order). Rows with a missing score are dropped
    first; rows without a rater are dropped too (they belong to nobody's scale). ``codes``: the
    ratings' :class:`~analysis.science.codes.RatingCodes`, to not code the raters again.
    """
    present = ratings[score].notna()
    frame = ratings if present.all() else ratings[present]  # no 1.6M-row copy when nothing is missing
    if codes is not None:
        codes.check(ratings, rater=rater)
        codes, names = codes.take(present.to_numpy()).rater, codes.rater_names
    else:
        codes, names = pd.factorize(frame[rater])
    values = frame[score].to_numpy(float)
    n_raters = len(names)
    valid = codes >= 0
    count = np.bincount(codes[valid], minlength=n_raters)
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = np.bincount(codes[valid], weights=values[valid], minlength=n_raters) / count
        deviation = np.where(valid, values - mu[codes], np.nan)
        sigma = np.sqrt(np.bincount(codes[valid], weights=deviation[valid] ** 2, minlength=n_raters) / (count - 1))

    # sigma NaN (one rating) fails the comparison; count 0: a coded rater without a score here
    bad = (count > 0) & ((count < 2) | ~(sigma > SIGMA_FLOOR))
    excluded: dict[str, str] = {}
    if bad.any():
        first = np.full(n_raters, -1)
        first[codes[valid][::-1]] = np.flatnonzero(valid)[::-1]  # each rater's first rating
        for k in sorted(np.flatnonzero(bad), key=lambda k: names[k]):
            if count[k] < 2:
                excluded[str(names[k])] = "only one rating: spread (sigma) undefined, z-score impossible"
            else:
                excluded[str(names[k])] = (
                    f"all {int(count[k])} ratings identical ({values[first[k]]:g}): sigma = 0, z-score undefined"
                )

    usable = valid & ~bad[np.where(valid, codes, 0)]
    # a shallow copy when every rater is usable: new columns only, the input stays untouched
    out = frame.copy(deep=False) if usable.all() else frame[usable].copy()
    out["z"] = deviation[usable] / sigma[codes[usable]]
    out["z_scaled"] = 100.0 * (out["z"] + 3.0) / 6.0
    return out, excluded


def model_mos_of_subsets(
    ratings: pd.DataFrame, subsets: list[np.ndarray], *, score: str = "score", rater: str = "rater",
    item: str = "item",
) -> list[pd.Series]:
    """Model-level z-MOS (the ``mos`` of :func:`model_mos`) of several row subsets of the same
    ratings (boolean masks, e.g. everyone and the raters kept by screening), coding raters, items
    and models once. Each subset z-scores its own raters afresh. Returns one Series per subset,
    indexed by model (sorted; models without a z-scored rating left out)."""
    if "model" not in ratings.columns:
        raise ValueError("model_mos needs a 'model' column")
    values = ratings[score].to_numpy(float)
    rater_code, rater_names = pd.factorize(ratings[rater])
    model_code, model_names = pd.factorize(ratings["model"], sort=True)
    item_code = model_code.astype(np.int64)
    if item != "model":
        codes, names = pd.factorize(ratings[item])
        item_code = np.where((model_code < 0) | (codes < 0), -1, item_code * max(len(names), 1) + codes)
    item_code = np.where(item_code < 0, -1, pd.factorize(item_code)[0])
    n_items = int(item_code.max(initial=-1)) + 1
    model_of_item = np.full(n_items, -1)
    model_of_item[item_code[item_code >= 0]] = model_code[item_code >= 0]
    out = []
    for subset in subsets:
        rows = np.asarray(subset, bool) & np.isfinite(values) & (rater_code >= 0) & (item_code >= 0)
        r, v, i = rater_code[rows], values[rows], item_code[rows]
        count = np.bincount(r, minlength=len(rater_names))
        with np.errstate(divide="ignore", invalid="ignore"):
            mu = np.bincount(r, weights=v, minlength=len(rater_names)) / count
            deviation = v - mu[r]
            sigma = np.sqrt(np.bincount(r, weights=deviation**2, minlength=len(rater_names)) / (count - 1))
        usable = ((count >= 2) & (sigma > SIGMA_FLOOR))[r]
        z_scaled = 100.0 * (deviation[usable] / sigma[r[usable]] + 3.0) / 6.0
        out.append(model_mos_of_z(z_scaled, i[usable], model_of_item, model_names))
    return out


def model_mos_of_z(z_scaled: np.ndarray, item_code: np.ndarray, model_of_item: np.ndarray,
                   model_names: pd.Index) -> pd.Series:
    """Model-level z-MOS from z' values: the mean per item (``item_code``, 0..len(model_of_item)-1),
    then the mean of a model's item means. Indexed by model (models without a value left out).
    Items are summed in code order: the same codes give the same floats."""
    n_items = len(model_of_item)
    per_item = np.bincount(item_code, minlength=n_items)
    with np.errstate(divide="ignore", invalid="ignore"):
        item_mean = np.bincount(item_code, weights=z_scaled, minlength=n_items) / per_item
    rated = per_item > 0
    models = np.bincount(model_of_item[rated], minlength=len(model_names))
    with np.errstate(divide="ignore", invalid="ignore"):
        mos = np.bincount(model_of_item[rated], weights=item_mean[rated], minlength=len(model_names)) / models
    return pd.Series(mos[models > 0], index=model_names[models > 0], name="mos")


def _t_interval(mean: pd.Series, std: pd.Series, n: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    n_arr = n.to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        half = stats.t.ppf(0.975, np.where(n_arr >= 2, n_arr - 1, np.nan)) * std.to_numpy(float) / np.sqrt(n_arr)
    return mean.to_numpy(float) - half, mean.to_numpy(float) + half


def grouped_bootstrap_ci(
    values: np.ndarray, groups: np.ndarray, *, n_boot: int = 1000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile 95 % CI of the mean of ``values`` within each group.

    Resamples values with replacement inside each group, all groups at once
    (cost ~ n_boot x len(values) array operations, no per-group loop).
    ``groups`` are integer codes 0..G-1. Groups of size 1 get NaN bounds.
    """
    values = np.asarray(values, float)
    groups = np.asarray(groups)
    order = np.argsort(groups, kind="stable")
    values, groups = values[order], groups[order]
    n_groups = int(groups.max()) + 1 if len(groups) else 0
    counts = np.bincount(groups, minlength=n_groups)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rng = np.random.default_rng(seed)
    means = np.empty((n_boot, n_groups))
    for b in range(n_boot):  # loop over replicates, never over items
        draw = starts[groups] + np.floor(rng.random(len(values)) * counts[groups]).astype(np.int64)
        means[b] = np.bincount(groups, weights=values[draw], minlength=n_groups) / np.maximum(counts, 1)
    low, high = np.percentile(means, [2.5, 97.5], axis=0)
    too_small = counts < 2
    low[too_small] = np.nan
    high[too_small] = np.nan
    return low, high


def _summarise(frame: pd.DataFrame, keys: list[str], column: str, ci: str, n_boot: int, seed: int,
               codes: RatingCodes | None = None) -> pd.DataFrame:
    """``keys…, mos, std, n, ci_low, ci_high`` per group, groups in sorted key order (as
    ``groupby(keys, sort=True)``; rows with a missing key are left out). ``n`` counts rows,
    ``mos``/``std`` (ddof 1) the non-missing values. Integer codes and weighted counts: no pandas
    groupby over string keys on the hot path (1.6M ratings). Keys that ``codes`` (of ``frame``'s
    rows) covers are not coded again."""
    if ci not in ("t", "bootstrap", "none"):
        raise ValueError(f"ci must be 't', 'bootstrap' or 'none', got {ci!r}")
    if codes is not None and codes.n_rows != len(frame):
        raise ValueError(f"codes of {codes.n_rows} rows do not fit a frame of {len(frame)} rows")
    key_codes, uniques = [], []
    for key in keys:
        coded = codes.of(key) if codes is not None else None
        key_code, names = coded if coded is not None else pd.factorize(frame[key], sort=True)
        key_codes.append(key_code)
        uniques.append(names)
    grouped, groups = dense_rank(key_codes, [len(names) for names in uniques])  # groups in sorted key order
    valid = grouped >= 0
    group = grouped[valid]
    values = frame[column].to_numpy(float)[valid]
    n_groups = len(groups)
    size = np.bincount(group, minlength=n_groups)
    present = np.isfinite(values)
    count = np.bincount(group[present], minlength=n_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.bincount(group[present], weights=values[present], minlength=n_groups) / count
        deviation = values[present] - mean[group[present]]
        std = np.sqrt(np.bincount(group[present], weights=deviation**2, minlength=n_groups) / (count - 1))
    columns = {}
    remainder = groups
    for key, names in reversed(list(zip(keys, uniques))):  # undo combined = (code_1 * n_2 + code_2) * n_3 …
        width = max(len(names), 1)
        columns[key] = names.take(remainder % width)  # an Index: the key's dtype is kept
        remainder = remainder // width
    table = pd.DataFrame({key: columns[key] for key in keys})
    table["mos"], table["std"], table["n"] = mean, std, size
    if ci == "t":
        table["ci_low"], table["ci_high"] = _t_interval(table["mos"], table["std"], table["n"])
    elif ci == "bootstrap":
        table["ci_low"], table["ci_high"] = grouped_bootstrap_ci(values, group, n_boot=n_boot, seed=seed)
    else:
        table["ci_low"] = table["ci_high"] = np.nan
    return table


def group_means(frame: pd.DataFrame, keys: list[str], column: str, *, codes: RatingCodes | None = None) -> pd.Series:
    """``frame.groupby(keys, sort=True)[column].mean()`` computed on integer codes (fast on 1.6M
    rows with string keys); indexed by the keys (a MultiIndex for several). ``codes``: the
    :class:`~analysis.science.codes.RatingCodes` of ``frame``'s rows, to not code rater, model or item again."""
    return _summarise(frame, list(keys), column, "none", 0, 0, codes).set_index(list(keys))["mos"].rename(column)


def _item_keys(ratings: pd.DataFrame, item: str) -> list[str]:
    return [c for c in ("model", item) if c in ratings.columns and c != item] + [item]


def item_mos(
    ratings: pd.DataFrame,
    *,
    score: str = "score",
    rater: str = "rater",
    item: str = "item",
    ci: str = "t",
    n_boot: int = 1000,
    seed: int = 0,
) -> MosResult:
    """z-MOS per item (0-100), with a 95 % CI across the item's raters.

    ``ci``: 't' (Student t on the raters' z'), 'bootstrap' (percentile,
    resampling raters within item, seeded) or 'none'. Groups by
    ``(model, item)`` when a ``model`` column exists.
    """
    scored, excluded = zscore_by_rater(ratings, score=score, rater=rater)
    table = _summarise(scored, _item_keys(ratings, item), "z_scaled", ci, n_boot, seed)
    return MosResult(table, excluded)


def model_mos(
    ratings: pd.DataFrame,
    *,
    score: str = "score",
    rater: str = "rater",
    item: str = "item",
    ci: str = "t",
    n_boot: int = 1000,
    seed: int = 0,
) -> MosResult:
    """Model-level z-MOS: mean over the model's items of their item MOS.

    The CI treats items as the sampling unit (t across item MOS values, or a
    bootstrap over items). Requires a ``model`` column.
    """
    if "model" not in ratings.columns:
        raise ValueError("model_mos needs a 'model' column")
    items = item_mos(ratings, score=score, rater=rater, item=item, ci="none")
    table = _summarise(items.table, ["model"], "mos", ci, n_boot, seed)
    return MosResult(table, items.excluded)


def mos_from_item_scores(items: pd.DataFrame, *, score: str, ci: str = "t", n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Model-level mean and CI from already aggregated per-item MOS.

    For published MOS files (EvalMi-50K releases MOS, not raw ratings).
    """
    return _summarise(items, ["model"], score, ci, n_boot, seed)
