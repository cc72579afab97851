"""Judge-vs-human correlation (VIEScore, EvalMi-50K style).

Sample level (per model, then averaged across models):
SRCC (Spearman), PLCC (Pearson), KRCC (Kendall tau-b), and PLCC after a
4-parameter logistic fit of the judge scores to the human scores (the usual
IQA practice; reported separately, ``None`` with a reason if the fit fails).

Averaging correlations across models uses the Fisher z transform:
``tanh(mean(atanh(r)))`` with |r| clipped below 1. The VIEScore paper instead
reports ``tanh(mean(r))`` (no atanh); :func:`tanh_of_mean` reproduces its
tables but is not a Fisher average.

Model level: Spearman rho and Spearman's footrule between model rankings,
and RMSE between model means on a common scale.

Metrics where lower is better (LPIPS, a distance) are sign-flipped with
``lower_is_better=True`` so that positive always means "agrees with humans".

Float noise: means of sqrt() values differ in the last bits
(0.7071067811865476 vs ...475); values are snapped to 9 decimals before
ranking so such values tie as they should.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, asdict
from typing import Iterable

import numpy as np
import pandas as pd
from scipy import optimize, stats

from analysis.science.codes import distinct_values, sort_order

SNAP_DECIMALS = 9
_R_CLIP = 1.0 - 1e-12


def snap(values) -> np.ndarray:
    """Round to 9 decimals so float-noise duplicates become exact ties."""
    return np.round(np.asarray(values, dtype=float), SNAP_DECIMALS)


@dataclass(frozen=True)
class CorrelationSet:
    """Correlations of one judge/human pairing; None = undefined (see reason)."""

    n: int
    srcc: float | None
    plcc: float | None
    krcc: float | None
    plcc_logistic: float | None = None
    reason: str | None = None
    logistic_reason: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def logistic4(x, b1, b2, b3, b4):
    """4-parameter logistic: b2 + (b1 - b2) / (1 + exp(-(x - b3) / |b4|))."""
    return b2 + (b1 - b2) / (1.0 + np.exp(-(x - b3) / np.abs(b4)))


def _logistic_plcc(x: np.ndarray, y: np.ndarray) -> tuple[float | None, str | None]:
    spread = float(np.std(x)) or 1.0
    p0 = [float(np.max(y)), float(np.min(y)), float(np.mean(x)), spread]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            params, _ = optimize.curve_fit(logistic4, x, y, p0=p0, maxfev=20000)
            fitted = logistic4(x, *params)
    except (RuntimeError, ValueError, optimize.OptimizeWarning, FloatingPointError) as exc:
        return None, f"logistic fit failed: {exc}"
    if not np.all(np.isfinite(fitted)) or np.ptp(fitted) == 0:
        return None, "logistic fit failed: fitted curve is flat or not finite"
    return float(stats.pearsonr(fitted, y)[0]), None


KENDALL_VARIANTS = ("b", "a")


def kendall_tau_a(x, y) -> float:
    """Kendall's tau-a: (concordant - discordant) / (n (n - 1) / 2), tied pairs counting as
    neither (EvalMi-50K's convention where scores tie; tau-b divides by the untied pairs instead)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    total = n * (n - 1) / 2
    if total == 0:
        return float("nan")
    # from scipy's tau-b (O(n log n)): tau-b = (C - D) / sqrt((total - x ties) (total - y ties))
    x_ties, y_ties = (float((c * (c - 1) / 2).sum()) for c in (np.unique(x, return_counts=True)[1],
                                                              np.unique(y, return_counts=True)[1]))
    if x_ties == total or y_ties == total:
        return 0.0
    tau_b = float(stats.kendalltau(x, y)[0])
    return tau_b * np.sqrt((total - x_ties) * (total - y_ties)) / total


def sample_correlations(
    judge, human, *, lower_is_better: bool = False, logistic: bool = True, kendall: str = "b"
) -> CorrelationSet:
    """SRCC, PLCC, KRCC (and logistic PLCC) between paired score arrays.

    ``kendall``: "b" (tau-b, scipy's default, the report's default) or "a" (tau-a, see
    :func:`kendall_tau_a`); they differ only where scores tie.

    Pairs with a missing value on either side are dropped. Undefined (None +
    reason) with fewer than 3 pairs or when either side is constant.
    Symmetric in its arguments apart from the logistic fit, which maps the
    judge onto the human scale.
    """
    x = snap(judge)
    y = snap(human)
    if x.shape != y.shape:
        raise ValueError(f"judge and human must have the same length, got {x.shape} and {y.shape}")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if lower_is_better:
        x = -x
    n = len(x)
    if n < 3:
        return CorrelationSet(n, None, None, None, None, f"only {n} paired samples: need at least 3")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        side = "judge" if np.ptp(x) == 0 else "human"
        return CorrelationSet(n, None, None, None, None, f"{side} scores are constant: correlation undefined")
    srcc = float(stats.spearmanr(x, y)[0])
    plcc = float(stats.pearsonr(x, y)[0])
    if kendall not in KENDALL_VARIANTS:
        raise ValueError(f"unknown Kendall variant {kendall!r}; use one of {KENDALL_VARIANTS}")
    krcc = float(stats.kendalltau(x, y)[0]) if kendall == "b" else kendall_tau_a(x, y)
    fitted, fit_reason = _logistic_plcc(x, y) if logistic else (None, "logistic fit not requested")
    return CorrelationSet(n, srcc, plcc, krcc, fitted, None, fit_reason)


# ----------------------------------------------------------------- many groups at once


@dataclass(frozen=True)
class GroupedCorrelations:
    """SRCC, PLCC and KRCC of many groups of pairs, one array entry per group.

    ``n``: pairs with both values finite; ``srcc``/``plcc``/``krcc``: NaN where undefined, and
    ``reason[g]`` then says why (the wording of :func:`sample_correlations`, "judge" being ``x``).
    """

    n: np.ndarray
    srcc: np.ndarray
    plcc: np.ndarray
    krcc: np.ndarray
    reason: list


def grouped_correlations(groups, x, y, *, n_groups: int | None = None) -> GroupedCorrelations:
    """:func:`sample_correlations` (without the logistic fit) for every group at once.

    ``groups`` are integer codes 0..n_groups-1, one per pair. Values are snapped to 9 decimals
    and pairs with a missing side dropped, exactly as :func:`sample_correlations` does; the results
    agree with scipy's spearmanr, pearsonr and kendalltau (tau-b) to ~1e-15. Cost: two integer
    sorts of all pairs plus a few vector passes per bit of the smaller side's number of distinct
    values (Kendall's discordant pairs), no per-group loop.
    """
    g = np.asarray(groups, dtype=np.int64)
    return grouped_correlations_by([g], x, y, n_groups=[n_groups])[0]


def grouped_correlations_by(groupings, x, y, *, n_groups=None) -> list[GroupedCorrelations]:
    """:func:`grouped_correlations` of the same pairs under several groupings (e.g. per model and
    rater, and per rater over the whole study), sharing the snapping and the value codes."""
    x, y = snap(x) + 0.0, snap(y) + 0.0  # + 0.0 turns -0.0 into 0.0: one value, one sort key
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length, got {x.shape} and {y.shape}")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    codes = (_dense_codes(x), _dense_codes(y)) if len(x) else None
    results = []
    for g, count in zip(groupings, n_groups or [None] * len(groupings)):
        g = np.asarray(g, dtype=np.int64)
        if g.shape != keep.shape:
            raise ValueError(f"groups, x and y must have the same length, got {g.shape} and {keep.shape}")
        if count is None:
            count = int(g.max()) + 1 if len(g) else 0
        results.append(_grouped(g[keep], x, y, count, codes))
    return results


def _grouped(g, x, y, n_groups, codes) -> GroupedCorrelations:
    n = np.bincount(g, minlength=n_groups)
    srcc, plcc, krcc = (np.full(n_groups, np.nan) for _ in range(3))
    constant_x = np.ones(n_groups, bool)
    constant_y = np.ones(n_groups, bool)
    if len(g):
        sorted_pairs = _SortedPairs(g, codes, n_groups)
        constant_x, constant_y = sorted_pairs.constant_x, sorted_pairs.constant_y
    reason: list = [None] * n_groups
    for k in np.flatnonzero((n < 3) | constant_x | constant_y):
        if n[k] < 3:
            reason[k] = f"only {n[k]} paired samples: need at least 3"
        else:
            reason[k] = f"{'judge' if constant_x[k] else 'human'} scores are constant: correlation undefined"
    defined = (n >= 3) & ~constant_x & ~constant_y
    if defined.any():
        # in the pairs' sorted order groups are contiguous: sums per group are reduceat, not bincount
        order, g_sorted = sorted_pairs.order, sorted_pairs.g_sorted
        plcc[:] = _sorted_pearson(g_sorted, x[order], y[order], n_groups)
        srcc[:] = _sorted_pearson(g_sorted, sorted_pairs.x_rank[order], sorted_pairs.y_rank[order], n_groups)
        krcc[:] = sorted_pairs.kendall_tau_b()
        for values in (srcc, plcc, krcc):
            values[~defined] = np.nan
    return GroupedCorrelations(n, srcc, plcc, krcc, reason)


def _dense_codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    """0-based codes in value order (equal values, equal code) and how many distinct values."""
    distinct, codes = distinct_values(values)
    return codes.astype(np.int64, copy=False), len(distinct)


def _run_starts(*sorted_columns: np.ndarray) -> np.ndarray:
    """True where a run of equal rows (over all the columns) begins, in sorted order."""
    start = np.zeros(len(sorted_columns[0]), bool)
    if len(start):
        start[0] = True
        for column in sorted_columns:
            start[1:] |= column[1:] != column[:-1]
    return start


def _first_of_run(start: np.ndarray) -> np.ndarray:
    """For each position, the position where its run begins."""
    return np.maximum.accumulate(np.where(start, np.arange(len(start)), 0))


def _tied_pairs(g_sorted: np.ndarray, start: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group, the number of pairs inside runs (sum of t(t-1)/2 over runs of length t)."""
    first = np.flatnonzero(start)
    length = np.diff(np.r_[first, len(start)]).astype(float)
    return np.bincount(g_sorted[first], weights=length * (length - 1) / 2, minlength=n_groups)


# A side with few distinct values (a Likert rating, one rater's z-scores) is ranked by counting
# (group, value) cells instead of sorting, while the cells stay this many per pair or fewer (plus
# a small allowance).
_CELLS_PER_PAIR = 4
_CELLS_ALLOWANCE = 1024


class _SortedPairs:
    """The pairs sorted by (group, many, few) where ``few`` is the side with fewer distinct values:
    average ranks (Spearman), constant sides, ties and discordant pairs (Kendall tau-b).

    The ``few`` side is ranked by counting its (group, value) cells when there are not many more
    cells than pairs (a Likert rating: 5 values per group), so one sort serves both sides; else it
    gets a sort of its own. Either way the ranks, ties and discordant pairs are the same numbers
    (integer counts and half-integer ranks, exact in floats)."""

    def __init__(self, g: np.ndarray, codes, n_groups: int) -> None:
        self.g, self.n_groups = g, n_groups
        (x_code, n_x), (y_code, n_y) = codes
        swap = n_y < n_x  # rank the side with fewer distinct values by counting
        (few, n_few), (many, n_many) = ((y_code, n_y), (x_code, n_x)) if swap else ((x_code, n_x), (y_code, n_y))
        if n_groups * n_many * n_few < 2**62:
            self.order = sort_order((g * n_many + many) * n_few + few)
        else:  # astronomically many values: lexsort is slower but cannot overflow
            self.order = np.lexsort((few, many, g))
        self.g_sorted = g[self.order]
        many_rank, many_dense, many_runs = _ranks(self.g_sorted, many[self.order], self.order)
        many_constant = _group_max(self.g_sorted, many_dense[self.order], n_groups) == 0
        many_ties = _tied_pairs(self.g_sorted, many_runs, n_groups)
        few_sorted = few[self.order]
        joint = many_runs.copy()  # runs of equal (group, many, few): pairs tied on both sides
        joint[1:] |= few_sorted[1:] != few_sorted[:-1]
        self.joint_ties = _tied_pairs(self.g_sorted, joint, n_groups)
        if n_groups * n_few <= _CELLS_PER_PAIR * len(g) + _CELLS_ALLOWANCE:
            few_rank, few_dense, few_constant, few_ties = _counted_ranks(g, few, n_groups, n_few)
        else:
            by_few = sort_order(g * n_few + few)
            g_by_few = g[by_few]
            few_rank, few_dense, few_runs = _ranks(g_by_few, few[by_few], by_few)
            few_constant = _group_max(g_by_few, few_dense[by_few], n_groups) == 0
            few_ties = _tied_pairs(g_by_few, few_runs, n_groups)
        self.few_dense_sorted = few_dense[self.order]  # the few side read in (group, many, few) order
        (self.x_rank, self.constant_x, self.x_ties), (self.y_rank, self.constant_y, self.y_ties) = (
            ((many_rank, many_constant, many_ties), (few_rank, few_constant, few_ties)) if swap
            else ((few_rank, few_constant, few_ties), (many_rank, many_constant, many_ties)))

    def kendall_tau_b(self) -> np.ndarray:
        """tau-b per group as scipy.stats.kendalltau computes it: (pairs - x ties - y ties +
        joint ties - 2 discordant) / sqrt(pairs - x ties) / sqrt(pairs - y ties)."""
        n_groups = self.n_groups
        # Discordant pairs are the strict inversions of one side read in the other side's order (ties
        # on the other side come in increasing order, so they count nothing); the side with fewer
        # distinct values needs fewer passes (a Likert rating: 4).
        discordant = _grouped_inversions(self.g_sorted, self.few_dense_sorted, n_groups)
        n = np.bincount(self.g, minlength=n_groups).astype(float)
        total = n * (n - 1) / 2
        with np.errstate(divide="ignore", invalid="ignore"):
            tau = ((total - self.x_ties - self.y_ties + self.joint_ties - 2 * discordant)
                   / np.sqrt(total - self.x_ties) / np.sqrt(total - self.y_ties))
        return np.clip(tau, -1.0, 1.0)


def _ranks(g_sorted, code_sorted, order):
    """Average ranks (1-based, scipy's rankdata) and dense 0-based codes within each group, both in
    the caller's original order, and the run starts in sorted order."""
    group_start = _run_starts(g_sorted)
    runs = _run_starts(g_sorted, code_sorted)
    group_first = _first_of_run(group_start)
    run_first = np.flatnonzero(runs)
    run_last = np.r_[run_first[1:], len(runs)] - 1
    run_rank = (run_first + run_last) / 2.0 + 1.0 - group_first[run_first]
    rank = np.empty(len(runs))
    rank[order] = np.repeat(run_rank, run_last - run_first + 1)
    dense_sorted = np.cumsum(runs) - 1
    dense = np.empty(len(runs), np.int64)
    dense[order] = dense_sorted - dense_sorted[group_first]
    return rank, dense, runs


def _counted_ranks(g, code, n_groups, n_values):
    """:func:`_ranks` (and the constant groups and tied pairs) without sorting, from the count of
    every (group, value) cell: a value's average rank in its group is the number of smaller values
    plus (its count + 1) / 2."""
    cell = g * n_values + code
    count = np.bincount(cell, minlength=n_groups * n_values).reshape(n_groups, n_values)
    below = np.cumsum(count, axis=1) - count
    rank = (below + (count + 1) / 2.0).ravel()[cell]
    present = count > 0
    dense = (np.cumsum(present, axis=1) - 1).ravel()[cell]
    constant = present.sum(axis=1) <= 1
    ties = (count * (count - 1) // 2).sum(axis=1).astype(float)
    return rank, dense, constant, ties


def _group_max(g_sorted, values_sorted, n_groups):
    out = np.zeros(n_groups, np.int64)
    first = np.flatnonzero(_run_starts(g_sorted))
    out[g_sorted[first]] = np.maximum.reduceat(values_sorted, first)
    return out


def _sorted_pearson(g_sorted: np.ndarray, x: np.ndarray, y: np.ndarray, n_groups: int) -> np.ndarray:
    """Pearson's r per group of pairs sorted by group (``g_sorted`` non-decreasing, not empty; NaN
    for groups without pairs or with a constant side): sums over each group's contiguous run,
    several times faster than weighted bincounts over unsorted groups."""
    first = np.flatnonzero(_run_starts(g_sorted))
    size = np.diff(np.r_[first, len(g_sorted)])
    r = np.full(n_groups, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = x - np.repeat(np.add.reduceat(x, first) / size, size)
        dy = y - np.repeat(np.add.reduceat(y, first) / size, size)
        r[g_sorted[first]] = (np.add.reduceat(dx * dy, first) / np.sqrt(np.add.reduceat(dx * dx, first))
                              / np.sqrt(np.add.reduceat(dy * dy, first)))
    return np.clip(r, -1.0, 1.0)


def _grouped_inversions(g_sorted: np.ndarray, ranks: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group, pairs i < j (same group, in array order) with ranks[i] > ranks[j].

    ``g_sorted`` is non-decreasing; ``ranks`` are small non-negative integers. Bit by bit from the
    top, each segment of equal (group, higher bits) is stably split into its 0s and 1s (a wavelet
    tree built level by level); a pair is inverted exactly at the highest bit where its ranks
    differ, so counting, for each 0, the 1s before it in its segment counts every inversion once.
    O(N log max rank) vector operations over all groups together.
    """
    size = len(ranks)
    inversions = np.zeros(n_groups)
    if size == 0 or int(ranks.max()) == 0:
        return inversions
    if int(ranks.max()) < _FEW_RANKS:
        return _few_rank_inversions(g_sorted, ranks, n_groups)
    bits = int(ranks.max()).bit_length()
    r = ranks.astype(np.int64)
    position = np.arange(size)
    for b in range(bits - 1, -1, -1):
        bit = (r >> b) & 1
        segment_start = _run_starts(g_sorted, r >> (b + 1))
        first = np.flatnonzero(segment_start)
        segment = np.cumsum(segment_start) - 1
        ones_before = np.cumsum(bit) - bit
        ones_before -= ones_before[first][segment]  # 1s before this element in its segment
        zero = bit == 0
        inversions += np.bincount(g_sorted[zero], weights=ones_before[zero], minlength=n_groups)
        start = first[segment]
        zeros_in_segment = np.diff(np.r_[first, size]) - np.add.reduceat(bit, first)
        target = np.where(zero, position - ones_before, start + zeros_in_segment[segment] + ones_before)
        moved = np.empty_like(r)
        moved[target] = r
        r = moved
    return inversions


_FEW_RANKS = 8


def _few_rank_inversions(g_sorted: np.ndarray, ranks: np.ndarray, n_groups: int) -> np.ndarray:
    """:func:`_grouped_inversions` when ranks take a handful of values (a Likert rating): for each
    value c, every element equal to c counts the elements before it in its group that are above c
    (one running count per value; fewer passes than the bit levels)."""
    first = np.flatnonzero(_run_starts(g_sorted))
    total = np.zeros(len(first), np.int64)  # integer counts: exact
    for value in range(int(ranks.max())):
        above = ranks > value
        before = np.cumsum(above) - above  # elements above `value` strictly before this one ...
        equal = ranks == value
        total += np.add.reduceat(np.where(equal, before, 0), first)
        total -= np.add.reduceat(equal.astype(np.int64), first) * before[first]  # ... in its own group
    out = np.zeros(n_groups)
    out[g_sorted[first]] = total
    return out


def fisher_z_mean(values: Iterable[float | None], weights: Iterable[float] | None = None) -> float | None:
    """tanh(mean(atanh(r))) over the defined values; None if there are none.

    ``weights`` (one per value, e.g. n - 3, the inverse variance of atanh(r) for Pearson's r):
    a weighted mean of the z values; values whose weight is not positive are left out. For
    Kendall's tau atanh is not the variance-stabilising transform: the report says so where it
    averages tau this way.
    """
    values = list(values)
    w = np.ones(len(values)) if weights is None else np.asarray(list(weights), dtype=float)
    if len(w) != len(values):
        raise ValueError(f"{len(values)} values but {len(w)} weights")
    keep = [i for i, v in enumerate(values) if v is not None and np.isfinite(v) and w[i] > 0]
    if not keep:
        return None
    r = np.array([values[i] for i in keep], dtype=float)
    return float(np.tanh(np.average(np.arctanh(np.clip(r, -_R_CLIP, _R_CLIP)), weights=w[keep])))


def tanh_of_mean(values: Iterable[float | None]) -> float | None:
    """tanh(mean(r)): what the VIEScore paper reports as its average.

    Kept only to reproduce published tables; use :func:`fisher_z_mean`.
    """
    r = np.array([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    return float(np.tanh(np.mean(r))) if len(r) else None


def per_group_correlations(
    frame: pd.DataFrame,
    *,
    judge: str,
    human: str,
    by: Iterable[str] = ("model",),
    lower_is_better: bool = False,
    logistic: bool = True,
    kendall: str = "b",
) -> pd.DataFrame:
    """:func:`sample_correlations` for each group (default: per model).

    ``by=()`` gives the pooled sample-level correlation over all rows.

    Returns one row per group: ``*by, n, srcc, plcc, krcc, plcc_logistic,
    reason, logistic_reason``; undefined values are None.
    """
    by = list(by)
    rows = []
    groups = frame.groupby(by, sort=True) if by else [((), frame)]  # by=() -> one pooled row
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        result = sample_correlations(
            group[judge].to_numpy(), group[human].to_numpy(), lower_is_better=lower_is_better, logistic=logistic,
            kendall=kendall,
        )
        rows.append({**dict(zip(by, key)), **result.as_dict()})
    table = pd.DataFrame(rows, columns=[*by, *CorrelationSet.__dataclass_fields__])
    return table.astype(object).where(table.notna(), None)


def summarise_across_groups(table: pd.DataFrame) -> dict[str, float | None]:
    """Fisher-z mean of each correlation column of :func:`per_group_correlations`."""
    return {
        column: fisher_z_mean(table[column]) for column in ("srcc", "plcc", "krcc", "plcc_logistic")
    }


# ----------------------------------------------------------------- model level


@dataclass(frozen=True)
class RankingAgreement:
    """Agreement of model-level scores; None = undefined (see reason)."""

    n_models: int
    spearman_rho: float | None
    footrule: float | None
    rmse: float | None
    reason: str | None = None


def model_level_agreement(
    judge_means: pd.Series, human_means: pd.Series, *, lower_is_better: bool = False, same_scale: bool = True
) -> RankingAgreement:
    """Compare model-level scores (Series indexed by model).

    ``footrule`` = sum |rank_human - rank_judge| over models (average ranks for
    ties; 0 = identical ranking). ``rmse`` assumes both series are on the same
    scale (e.g. 0-100 MOS); it is None when ``same_scale=False`` (a metric such as
    DINO or CLIP-I compared with a human dimension) and for lower-is-better metrics,
    whose scale is not the human one. Only ``lower_is_better`` changes the judge's
    sign: a higher-is-better metric on another scale still ranks in its own direction.
    """
    joined = pd.concat({"judge": judge_means, "human": human_means}, axis=1).dropna()
    n = len(joined)
    judge = snap(joined["judge"]) * (-1 if lower_is_better else 1)
    human = snap(joined["human"])
    if n < 2:
        return RankingAgreement(n, None, None, None, f"only {n} model(s) with both scores: need at least 2")
    judge_rank = stats.rankdata(-judge)
    human_rank = stats.rankdata(-human)
    footrule = float(np.abs(judge_rank - human_rank).sum())
    rmse = None if lower_is_better or not same_scale else float(np.sqrt(np.mean((joined["judge"] - joined["human"]) ** 2)))
    if np.ptp(judge) == 0 or np.ptp(human) == 0:
        return RankingAgreement(n, None, footrule, rmse, "all models tie on one side: rho undefined")
    rho = float(stats.spearmanr(judge, human)[0])
    return RankingAgreement(n, rho, footrule, rmse)


# ----------------------------------------------------------------- VIEScore


def viescore_aspect(scores: pd.Series) -> pd.Series:
    """Per VIEScore: min of the sub-scores / 10, clipped to [0, 1].

    ``scores`` holds lists of numbers (0-10) per sample; an empty list gives
    NaN.
    """
    exploded = pd.to_numeric(scores.explode(), errors="coerce")
    lowest = exploded.groupby(level=0).min().reindex(scores.index)
    return (lowest / 10.0).clip(0.0, 1.0)


def viescore_table(judge_long: pd.DataFrame) -> pd.DataFrame:
    """Judge records (``task, model, uid, aspect, scores``) to one row per sample.

    Returns ``task, model, uid, SC, PQ, O`` with ``O = sqrt(SC * PQ)``;
    O is NaN when either aspect is missing.
    """
    frame = judge_long.reset_index(drop=True)
    frame = frame.assign(value=viescore_aspect(frame["scores"]))
    wide = frame.pivot_table(index=["task", "model", "uid"], columns="aspect", values="value", aggfunc="first")
    wide = wide.reindex(columns=["SC", "PQ"]).reset_index()
    wide.columns.name = None
    wide["O"] = np.sqrt(wide["SC"] * wide["PQ"])
    return wide
