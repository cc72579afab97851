"""Intervals that include the raters: the two-way ("pigeonhole") bootstrap of items and raters.

Every other interval in the report resamples items only. That is right when the raters are
*fixed* (three experts whose verdict is the study's definition of quality, as ImagenHub) and too
narrow when they are a *sample* of a crowd: a model's mean then carries the luck of which raters
came, and every item they rated shares it. Items and raters are crossed random factors, so this
module resamples both, independently, as Owen (2007, "The pigeonhole bootstrap", Ann. Appl. Stat.
1(2)) proposes for crossed data:

* replicate b draws item multiplicities ``W[b, i]`` (items drawn with replacement) and rater
  multiplicities ``V[b, r]`` (raters drawn with replacement), and the rating of item i by rater r
  counts ``W[b, i] * V[b, r]`` times;
* the statistic is recomputed on that weighted data and the interval is the 2.5 / 97.5 percentiles
  of the replicates, moved outwards when there are few raters (:func:`tail_share`: G = min(items,
  raters) clusters, t with G - 1 degrees of freedom). Percentiles never leave the statistic's
  range (a mean of 0-1 scores stays in 0-1, alpha stays <= 1), unlike a normal or t interval.

Owen shows the variance this bootstrap gives for a mean is the crossed-random-effects variance
plus one extra copy of the residual's share, so it errs on the wide side (never the narrow one)
and needs no variance-component fit; :func:`crossed_mean_variance` is that closed form, which the
tests use as the oracle. A mixed model (statsmodels ``MixedLM`` with crossed variance components)
gives nearly the same width for a mean in a balanced design, but has no answer for alpha, a
rank correlation or Bradley–Terry and fits for seconds on ImagenHub-sized data: the bootstrap is
one method for every statistic.

Kinds of interval (the report says which each number has): ``"items"`` (raters fixed: ``V = 1``,
the usual bootstrap over items) and ``"items+raters"``. With ``raters=False`` the functions here
are an item bootstrap of the same statistics, so a fixed-rater study and a crowd study are
computed by the same code.

Agreement with duplicated raters: drawing a rater twice must not make them agree with themselves,
so alpha, kappa and agreement count only pairs of *different* raters, each pair weighted
``V[a] * V[b]`` (:func:`agreement_intervals`). With every weight 1 this is the usual
coefficient, equal to :mod:`analysis.science.agreement` (tested).

Undefined replicates (every drawn rating identical, no drawn item with a rater left, one rater)
are left out of the percentiles and counted in ``Interval.undefined``; when fewer than half the
replicates are defined there is no interval and ``reason`` says why (as the item bootstrap in
:mod:`analysis.science.agreement`). Fewer than 2 items, or fewer than 2 raters for ``items+raters``, gives
no interval either: a resample of one unit has no spread to learn from.

No Django here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Iterable

import numpy as np
import pandas as pd
from scipy import sparse, stats

from analysis.science.agreement import BOOTSTRAP, JACKKNIFE, SNAP_DECIMALS, _alpha_from_sums, use_jackknife_for
from analysis.science.codes import dense_rank, distinct_values
from analysis.science.pairwise import OUTCOMES, _cells, _encode, _tallies, _win_rates, bradley_terry

ITEMS = "items"
ITEMS_RATERS = "items+raters"
KINDS = (ITEMS, ITEMS_RATERS)

# Replicates are processed in chunks so (chunk x items x features) arrays stay around 32 MB.
_CHUNK_CELLS = 4_000_000

# BOOTSTRAP, JACKKNIFE: the interval methods, and "auto"'s rule (agreement.JACKKNIFE_ABOVE:
# 20,000 ratings at 1,000 replicates, ~0.35 s per two-way interval) are analysis.science.agreement's,
# so the item-only and the two-way intervals of one study switch together.


@dataclass(frozen=True)
class Interval:
    """A percentile 95 % interval (``low``/``high`` None when undefined, with ``reason``).

    ``kind``: ``"items"`` or ``"items+raters"``; ``undefined``: replicates where the statistic
    did not exist (left out) of ``total``; ``method``: :data:`BOOTSTRAP` or :data:`JACKKNIFE`
    (see :func:`jackknife_interval`).
    """

    low: float | None
    high: float | None
    kind: str
    undefined: int = 0
    total: int = 0
    reason: str | None = None
    method: str = BOOTSTRAP

    @property
    def ci95(self) -> list[float] | None:
        return None if self.low is None or self.high is None else [self.low, self.high]

    @property
    def undefined_share(self) -> float | None:
        return self.undefined / self.total if self.total else None


def kind_of(raters: bool) -> str:
    return ITEMS_RATERS if raters else ITEMS


@functools.lru_cache(maxsize=1024)
def tail_share(clusters: int | None) -> float:
    """The share of replicates cut off in each tail: 0.025, or for the rater-inclusive interval
    with G = min(items, raters) clusters, the normal tail of t(G - 1, 0.975) * sqrt(G / (G - 1)).

    With few raters the percentile bootstrap is too narrow twice over: resampled clusters vary
    (G - 1)/G as much as the population, and the estimate's spread is a t with G - 1 degrees of
    freedom, not a normal (the cluster-robust convention: Cameron & Miller 2015, section VI). The
    interval stays a percentile interval (inside the statistic's range), with wider percentiles:
    10 raters cut 0.86 % per tail, 30 raters 1.9 %, 3 raters keep the extreme replicates.
    """
    if clusters is None or clusters < 2:
        return 0.025
    z = stats.t.ppf(0.975, clusters - 1) * np.sqrt(clusters / (clusters - 1))
    return float(stats.norm.cdf(-z))


def percentile_interval(replicates: np.ndarray, *, kind: str, n_boot: int, clusters: int | None = None) -> Interval:
    """The 2.5 / 97.5 percentiles of the finite replicates (wider for few ``clusters``, see
    :func:`tail_share`); none when fewer than half are finite."""
    replicates = np.asarray(replicates, dtype=float)
    finite = replicates[np.isfinite(replicates)]
    undefined = int(n_boot - len(finite))
    if n_boot <= 0:
        return Interval(None, None, kind, 0, 0, "n_boot = 0: no bootstrap interval")
    if len(finite) < max(2, n_boot // 2):
        return Interval(None, None, kind, undefined, n_boot,
                        f"bootstrap CI undefined: only {len(finite)} of {n_boot} resamples had a defined value")
    tail = tail_share(clusters if kind == ITEMS_RATERS else None)
    low, high = np.percentile(finite, [100 * tail, 100 * (1 - tail)])
    return Interval(float(low), float(high), kind, undefined, n_boot)


def jackknife_variance(without: np.ndarray) -> float:
    """The delete-one jackknife variance (n - 1)/n * sum (T_(i) - mean)^2 of the finite ``without``
    values (T without unit i); NaN when fewer than two are finite."""
    t = np.asarray(without, dtype=float)
    t = t[np.isfinite(t)]
    if len(t) < 2:
        return float("nan")
    return float((len(t) - 1) / len(t) * ((t - t.mean()) ** 2).sum())


def jackknife_interval(point: float | None, without_items: np.ndarray, without_raters: np.ndarray | None, *,
                       kind: str, clusters: int | None, upper: float | None = None) -> Interval:
    """A 95 % interval from the delete-one jackknife over items plus the one over raters (None:
    raters fixed), for statistics whose two-way bootstrap is too slow at scale (see
    :data:`analysis.science.agreement.JACKKNIFE_ABOVE`).

    Items and raters are crossed random factors: the statistic's variance is (to first order) the
    items' share plus the raters' share, and each jackknife estimates its own share (the
    delete-one jackknife over raters is the cluster jackknife with raters as clusters). By the
    Efron–Stein inequality the jackknife variance errs on the wide side for any statistic
    symmetric in its units, where the first-order (delta-method) variance was 17 % too narrow for
    alpha with raters in simulation (``bench.coverage --method jackknife`` measures coverage). The
    interval is T +- z * se with z = t(G - 1, 0.975) for the rater-inclusive kind (G = min(items,
    raters)) and 1.96 over items only, capped at ``upper`` (1 for alpha and kappa). Not the
    bootstrap's cut (:func:`tail_share`): its extra sqrt(G / (G - 1)) undoes the bootstrap's
    (G - 1)/G shrinkage of the variance, which the jackknife's (G - 1)/G factor already avoids
    (for a mean the jackknife variance is exactly s^2 / G); with it, 10 raters gave 95.9 %.
    """
    if point is None or not np.isfinite(point):
        return Interval(None, None, kind, 0, 0, "the statistic is undefined: no interval", JACKKNIFE)
    variance = jackknife_variance(without_items)
    if without_raters is not None:
        variance += jackknife_variance(without_raters)
    if not np.isfinite(variance):
        return Interval(None, None, kind, 0, 0, "jackknife variance undefined: no interval", JACKKNIFE)
    z = _jackknife_z(clusters if kind == ITEMS_RATERS else None)
    half = z * float(np.sqrt(variance))
    high = point + half if upper is None else min(point + half, upper)
    return Interval(float(point - half), float(high), kind, 0, 0, None, JACKKNIFE)


@functools.lru_cache(maxsize=1024)
def _jackknife_z(clusters: int | None) -> float:
    """The jackknife interval's multiplier: t(G - 1, 0.975) with G clusters, 1.96 without. Unlike
    the bootstrap (:func:`tail_share`), the delete-one jackknife's (G - 1)/G factor already makes
    its variance unbiased for a mean, so no sqrt(G / (G - 1)) on top."""
    if clusters is None or clusters < 2:
        return float(stats.norm.isf(0.025))
    return float(stats.t.isf(0.025, clusters - 1))


def _too_small(n_items: int, n_raters: int, *, kind: str, n_boot: int) -> Interval | None:
    if n_boot <= 0:
        return Interval(None, None, kind, 0, 0, "n_boot = 0: no bootstrap interval")
    if n_items < 2:
        return Interval(None, None, kind, 0, 0, f"{n_items} item(s): no interval")
    if kind == ITEMS_RATERS and n_raters < 2:
        return Interval(None, None, kind, 0, 0,
                        f"{n_raters} rater(s): the rater-inclusive interval needs at least 2 raters")
    return None


def multiplicities(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` x ``n`` counts of how often each of n units is drawn in n draws with replacement
    (multinomial(n, 1/n) rows, drawn as positions and counted: ~10x faster than rng.multinomial)."""
    if n == 0:
        return np.zeros((size, 0))
    draws = rng.integers(0, n, size=(size, n)) + (np.arange(size) * n)[:, None]
    return np.bincount(draws.ravel(), minlength=size * n).reshape(size, n).astype(float)


def _chunks(n_boot: int, width: int) -> Iterable[int]:
    chunk = max(1, min(n_boot, _CHUNK_CELLS // max(width, 1)))
    done = 0
    while done < n_boot:
        size = min(chunk, n_boot - done)
        yield size
        done += size


def _codes(values: pd.Series | np.ndarray) -> tuple[np.ndarray, int]:
    """Codes 0..n-1 of the distinct values in sorted order (``pd.factorize(sort=True)``)."""
    codes, labels = _codes_and_labels(values)
    return codes, len(labels)


def _codes_and_labels(values: pd.Series | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`_codes`, the distinct values in that order). A categorical column (the report's item,
    rater and model labels) is coded from its categories without writing its 800,000 labels out
    (that took 0.9 s of an EvalMi-scale report)."""
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
        category_codes = values.cat.codes.to_numpy()
        if len(category_codes) and category_codes.min() >= 0:
            used = np.unique(category_codes)
            labels = np.asarray(values.cat.categories)[used]
            order = np.argsort(labels, kind="stable")
            rank = np.zeros(len(values.cat.categories), dtype=np.int64)
            rank[used[order]] = np.arange(len(used))
            return rank[category_codes], labels[order]
    codes, uniques = pd.factorize(np.asarray(values), sort=True)
    return codes.astype(np.int64), np.asarray(uniques)


def _largest_group(group_code: np.ndarray, n_groups: int) -> int:
    """The most rows any group has (codes of :func:`_codes`)."""
    return int(np.bincount(group_code, minlength=n_groups).max()) if len(group_code) else 0


def _dense(codes: np.ndarray) -> tuple[np.ndarray, int]:
    """Codes 0..k-1 of the distinct non-negative integer ``codes`` present, in their order (the
    :func:`_codes` of a subset of coded rows, by counting)."""
    dense, present = dense_rank([codes], [int(codes.max(initial=-1)) + 1])
    return dense, len(present)


def _rater_codes(frame: pd.DataFrame, columns: list[str]) -> tuple[np.ndarray, int]:
    """Rater codes in an order fixed by what each rater rated (an order-free hash of their rows'
    ``columns``), not by their labels: a released package, whose raters are pseudonyms, then draws
    the same raters in the same replicates as the site did (``manage.py reproduce`` compares the
    numbers). Raters with identical rows are interchangeable in every statistic; labels break ties."""
    labels, uniques = pd.factorize(np.asarray(frame["rater"]), sort=True)
    n = len(uniques)
    if n == 0:
        return labels.astype(np.int64), 0
    canonical = pd.DataFrame({
        name: (frame[name].to_numpy(float) if pd.api.types.is_numeric_dtype(frame[name])
               else frame[name].astype(str).to_numpy())
        for name in columns})
    rows = pd.util.hash_pandas_object(canonical, index=False).to_numpy(np.uint64)
    by_rater = np.argsort(labels, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(labels[by_rater]) != 0])
    signature = np.add.reduceat(rows[by_rater], starts)  # uint64 sums wrap: the order of rows does not matter
    order = np.lexsort((np.arange(n), signature))  # by signature, then by label
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    return rank[labels], n


def _matrix(rows: np.ndarray, columns: np.ndarray, data: np.ndarray, shape: tuple[int, int]) -> sparse.csr_matrix:
    """Sparse rows x columns matrix summing ``data`` over repeated (row, column) pairs."""
    return sparse.csr_matrix((data, (rows, columns)), shape=shape)


# ------------------------------------------------------------------ means (model MOS)


def crossed_mean_variance(values: np.ndarray) -> float:
    """The exact variance, over the two-way bootstrap's draws, of the mean of a complete
    items x raters matrix (rows items): the oracle the tests hold the bootstrap to.

    With W ~ Mult(I, 1/I) and V ~ Mult(R, 1/R) independent, the replicate mean is
    W'XV / (I R) (the weights sum to I and R exactly), and E[(W'XV)^2] = tr(X' E[WW'] X E[VV'])
    with E[WW'] = Cov(W) + 11', Cov(W) = I_I - 11'/I (and the same for V). Owen (2007) expands
    this as the crossed-random-effects variance plus one extra share of the residual.
    """
    x = np.asarray(values, dtype=float)
    n_items, n_raters = x.shape
    second_w = np.eye(n_items) - 1.0 / n_items + 1.0
    second_v = np.eye(n_raters) - 1.0 / n_raters + 1.0
    second = float(np.trace(x.T @ second_w @ x @ second_v))
    return (second - float(x.sum()) ** 2) / (n_items * n_raters) ** 2


def mean_intervals(ratings: pd.DataFrame, *, value: str, group: str = "model", estimator: str = "item_means",
                   raters: bool = True, n_boot: int = 1000, seed: int = 0, method: str = "auto") -> dict:
    """95 % interval of each group's mean (see :func:`mean_replicates`): ``{group: Interval}``.

    ``method``: ``"percentile bootstrap"``, ``"jackknife"`` (:func:`jackknife_interval`, no draws)
    or ``"auto"``: the jackknife when the largest group's ratings x ``n_boot`` pass
    :data:`analysis.science.agreement.JACKKNIFE_ABOVE`, for every group alike."""
    kind = kind_of(raters)
    rated = ratings[ratings[value].notna()]
    clusters, largest = _clusters_and_largest(rated, group)
    if use_jackknife_for(method, largest, n_boot):
        return _mean_jackknife_intervals(rated, value=value, group=group, estimator=estimator, raters=raters,
                                         n_boot=n_boot, clusters=clusters)
    return {name: reps if isinstance(reps, Interval) else
            percentile_interval(reps, kind=kind, n_boot=n_boot, clusters=int(clusters[name]))
            for name, reps in mean_replicates(ratings, value=value, group=group, estimator=estimator, raters=raters,
                                              n_boot=n_boot, seed=seed).items()}


def _clusters_and_largest(rated: pd.DataFrame, group: str) -> tuple[pd.Series, int]:
    """Per group (sorted labels) min(distinct items, distinct raters), and the most ratings any
    group has: from integer codes (pandas' grouped nunique took ~40 ms per call at EvalMi scale).
    Rows without a group are left out, as grouping leaves them out."""
    if rated[group].hasnans:
        rated = rated[rated[group].notna()]
    if rated.empty:
        return pd.Series(dtype=float), 0
    group_code, labels = _codes_and_labels(rated[group])
    n_groups = len(labels)
    distinct = []
    for column in ("item", "rater"):
        code, n = _codes(rated[column])
        pairs = dense_rank([group_code, code], [n_groups, n])[1]  # the distinct (group, label) pairs
        distinct.append(np.bincount(pairs // max(n, 1), minlength=n_groups))
    return pd.Series(np.minimum(*distinct), index=labels), _largest_group(group_code, n_groups)


def mean_of_means_jackknife(outer: np.ndarray, inner: np.ndarray, x: np.ndarray
                            ) -> tuple[float, np.ndarray, np.ndarray]:
    """The mean over ``outer`` units of their mean ``x`` (``item_means``: outer the items, inner the
    raters; ``rater_means`` the other way round), and its delete-one values: without each outer
    unit, and without each inner unit (whose ratings leave every outer mean they were in; an outer
    unit left with none drops out). Codes are 0..n-1 and all present."""
    n_outer, n_inner = int(outer.max()) + 1, int(inner.max()) + 1
    pair, pairs = dense_rank([outer, inner], [n_outer, n_inner])
    pair_outer = pairs // n_inner
    pair_inner = pairs % n_inner
    pair_sum = np.bincount(pair, x, len(pairs))
    pair_n = np.bincount(pair, minlength=len(pairs)).astype(float)
    outer_sum = np.bincount(outer, x, n_outer)
    outer_n = np.bincount(outer, minlength=n_outer).astype(float)
    mean = outer_sum / outer_n
    total, k = mean.sum(), float(n_outer)
    without_outer = (total - mean) / (k - 1) if n_outer > 1 else np.full(n_outer, np.nan)
    left = outer_n[pair_outer] - pair_n
    with np.errstate(divide="ignore", invalid="ignore"):
        change = np.where(left > 0, (outer_sum[pair_outer] - pair_sum) / left, 0.0) - mean[pair_outer]
    lost = np.bincount(pair_inner, (left <= 0).astype(float), n_inner)
    with np.errstate(divide="ignore", invalid="ignore"):
        without_inner = (total + np.bincount(pair_inner, change, n_inner)) / (k - lost)
    return total / k, without_outer, np.where(k - lost > 0, without_inner, np.nan)


def _mean_jackknife_intervals(rated: pd.DataFrame, *, value: str, group: str, estimator: str, raters: bool,
                              n_boot: int, clusters: pd.Series) -> dict:
    if estimator not in ("item_means", "rater_means"):
        raise ValueError(f"estimator must be 'item_means' or 'rater_means', got {estimator!r}")
    kind = kind_of(raters)
    items_all, _ = _codes(rated["item"])
    raters_all, _ = _codes(rated["rater"])
    x_all = rated[value].to_numpy(float)
    out = {}
    for name, rows in rated.groupby(group, sort=True, observed=True).indices.items():
        item, n_items = _dense(items_all[rows])
        rater, n_raters = _dense(raters_all[rows])
        small = _too_small(n_items, n_raters, kind=kind, n_boot=n_boot)
        if small is not None:
            out[name] = small
            continue
        x = x_all[rows]
        if estimator == "item_means":
            point, without_items, without_raters = mean_of_means_jackknife(item, rater, x)
        else:
            point, without_raters, without_items = mean_of_means_jackknife(rater, item, x)
        interval = jackknife_interval(point, without_items, without_raters if raters else None, kind=kind,
                                      clusters=int(clusters[name]))
        if interval.low is not None:  # a mean stays inside the scores it averages
            interval = replace(interval, low=max(interval.low, float(x.min())), high=min(interval.high, float(x.max())))
        out[name] = interval
    return out


def mean_replicates(ratings: pd.DataFrame, *, value: str, group: str = "model", estimator: str = "item_means",
                    raters: bool = True, n_boot: int = 1000, seed: int = 0) -> dict:
    """Percentile 95 % interval of each group's mean score (model MOS), resampling items and
    (``raters=True``) raters. ``ratings``: long ``rater, item, <group>, <value>`` rows (missing
    values dropped); items are nested in groups (an item is one image), raters are crossed with
    them and drawn once per replicate for every group, as the same crowd rated every model.

    ``estimator``: ``"item_means"`` (mean over items of the mean of their raters: EvalMi z-MOS) or
    ``"rater_means"`` (mean over raters of their mean over items: ImagenHub Table 4). Returns
    ``{group: replicates}`` (NaN where undefined), or an undefined :class:`Interval` for a group
    too small to resample.
    """
    if estimator not in ("item_means", "rater_means"):
        raise ValueError(f"estimator must be 'item_means' or 'rater_means', got {estimator!r}")
    kind = kind_of(raters)
    frame = ratings.loc[ratings[value].notna(), ["rater", "item", group, value]]
    rater_code, n_raters = _rater_codes(frame, ["item", value])
    rng = np.random.default_rng(seed)
    rater_weights = multiplicities(n_raters, n_boot, rng) if raters else np.ones((max(n_boot, 0), n_raters))
    out = {}
    for name, rows in frame.groupby(group, sort=True, observed=True).indices.items():
        item_code, n_items = _codes(frame["item"].to_numpy()[rows])
        raters_here = rater_code[rows]
        present, local = np.unique(raters_here, return_inverse=True)
        small = _too_small(n_items, len(present), kind=kind, n_boot=n_boot)
        if small is not None:
            out[name] = small
            continue
        x = frame[value].to_numpy(float)[rows]
        sums = _matrix(local, item_code, x, (len(present), n_items))
        counts = _matrix(local, item_code, np.ones(len(x)), (len(present), n_items))
        item_weights = multiplicities(n_items, n_boot, rng)
        v_all = rater_weights[:, present]
        replicates = np.empty(n_boot)
        done = 0
        for size in _chunks(n_boot, n_items + len(present)):
            w, v = item_weights[done:done + size], v_all[done:done + size]
            replicates[done:done + size] = _weighted_mean(sums, counts, w, v, estimator)
            done += size
        out[name] = replicates
    return out


def _weighted_mean(sums: sparse.csr_matrix, counts: sparse.csr_matrix, w: np.ndarray, v: np.ndarray,
                   estimator: str) -> np.ndarray:
    """The estimator on weighted data (rows of ``w``: item weights, of ``v``: rater weights)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if estimator == "item_means":
            total = (sums.T @ v.T).T  # replicates x items: sum over raters of v_r x_ir
            n = (counts.T @ v.T).T
            mean = np.where(n > 0, total / n, 0.0)
            weight = w * (n > 0)
        else:
            total = (sums @ w.T).T  # replicates x raters
            n = (counts @ w.T).T
            mean = np.where(n > 0, total / n, 0.0)
            weight = v * (n > 0)
        denominator = weight.sum(axis=1)
        return np.where(denominator > 0, (weight * mean).sum(axis=1) / denominator, np.nan)


# ------------------------------------------------------------------ agreement


AGREEMENT_MEASURES = ("alpha_nominal", "alpha_ordinal", "alpha_interval", "fleiss_kappa")


def _snap(values: np.ndarray) -> np.ndarray:
    return np.round(np.asarray(values, dtype=float), SNAP_DECIMALS)


def _unit_category_indicator(unit: np.ndarray, category: np.ndarray, n_values: int, n_units: int) -> sparse.csr_matrix:
    """ratings x (unit, category) 0/1 matrix: a replicate's rater weights times it are its n_uc."""
    flat = unit * n_values + category
    return _matrix(np.arange(len(flat)), flat, np.ones(len(flat)), (len(flat), n_units * n_values))


def _unit_terms(n: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Each unit's share of the agreement totals, from its weighted category counts ``n`` and
    squared-weight counts ``q`` (both ``(..., units, values)``; any leading axes): the features
    ``(..., units, T + 2 + values)`` are its T = V(V+1)/2 coincidences (upper triangle, the order
    of ``np.triu_indices``), its Fleiss agreement and 1 if it has a pair of different raters, and
    its counts, the last three times that 1. See :func:`agreement_statistics`."""
    n_values = n.shape[-1]
    m = n.sum(axis=-1)
    q_sum = q.sum(axis=-1)
    pairs = m ** 2 - q_sum
    pairable = pairs > 0.5  # counts are integers: at least one pair of different raters
    safe = np.where(pairable, pairs, 1.0)
    row, column = np.triu_indices(n_values)
    coincidence = n[..., row] * n[..., column]
    coincidence[..., row == column] -= q
    coincidence *= (np.where(pairable, m, 0.0) / safe)[..., None]
    agree = ((n ** 2).sum(axis=-1) - q_sum) / safe
    flag = pairable.astype(float)
    return np.concatenate([coincidence, (flag * agree)[..., None], flag[..., None], flag[..., None] * n], axis=-1)


def _measures(totals: np.ndarray, categories: np.ndarray) -> dict[str, np.ndarray]:
    """Alpha (three levels) and Fleiss' kappa of each row of summed :func:`_unit_terms` (NaN where
    undefined)."""
    n_values = len(categories)
    n_pairs = n_values * (n_values + 1) // 2
    out = {f"alpha_{level}": _alpha_from_sums(totals[:, :n_pairs], categories, level)
           for level in ("nominal", "ordinal", "interval")}
    agree, pairable, counts = totals[:, n_pairs], totals[:, n_pairs + 1], totals[:, n_pairs + 2:]
    with np.errstate(divide="ignore", invalid="ignore"):
        p_bar = agree / pairable
        shares = counts / counts.sum(axis=1, keepdims=True)
        p_e = (shares ** 2).sum(axis=1)
        kappa = (p_bar - p_e) / (1.0 - p_e)
    out["fleiss_kappa"] = np.where(np.isclose(p_e, 1.0) | (pairable == 0), np.nan, kappa)
    return out


def agreement_statistics(unit: np.ndarray, rater_weight_of_rating: np.ndarray, category: np.ndarray,
                         categories: np.ndarray, unit_weights: np.ndarray, n_units: int,
                         indicator: sparse.csr_matrix | None = None) -> dict[str, np.ndarray]:
    """Alpha (three levels) and Fleiss' kappa for each replicate, counting only pairs of different
    raters. ``rater_weight_of_rating``: replicates x ratings, the multiplicity of each rating's
    rater; ``unit_weights``: replicates x units. Values NaN where undefined.

    Per unit, with n_uc = sum of the weights of its ratings in category c, m_u = sum_c n_uc and
    q_uc = sum of squared weights: pairs of different raters in (c, k) number
    n_uc n_uk - [c = k] q_uc, of P_u = m_u^2 - sum_c q_uc in all. The unit's coincidences are
    m_u times their shares (each pairable value contributes one, as in Krippendorff's matrix) and
    Fleiss' P_u is the share of agreeing pairs. With every weight 1 this is the textbook
    coincidence matrix (n_uc n_uk - [c = k] n_uc) / (m_u - 1).

    ``indicator``: :func:`_unit_category_indicator` of these ratings, when the caller reuses it over
    chunks of replicates (building it is a third of a chunk's time at EvalMi scale).
    """
    n_values = len(categories)
    n_rep = rater_weight_of_rating.shape[0]
    if indicator is None:
        indicator = _unit_category_indicator(unit, category, n_values, n_units)
    n = (rater_weight_of_rating @ indicator).reshape(n_rep, n_units, n_values)
    q = ((rater_weight_of_rating ** 2) @ indicator).reshape(n_rep, n_units, n_values)
    totals = np.einsum("bu,buf->bf", unit_weights, _unit_terms(n, q))
    return _measures(totals, categories)


def _gradient(function, at: np.ndarray) -> dict[str, np.ndarray]:
    """Central-difference gradient of each of ``function``'s outputs (a dict of arrays over rows)
    at the vector ``at``, steps relative to each coordinate's size."""
    step = 1e-6 * (np.abs(at) + np.abs(at).mean() + 1e-12)
    probes = np.vstack([at + np.diag(step), at - np.diag(step)])
    values = function(probes)
    k = len(at)
    return {name: (v[:k] - v[k:]) / (2 * step) for name, v in values.items()}


def _cell_changes(flat: np.ndarray, n0: np.ndarray, terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each rating's cell among the used (unit, category) cells, the change of its unit's terms when
    one rating of that cell leaves): a rating's removal changes its unit's terms by an amount that
    depends only on its cell, so there is one change per used cell (not per unit x category)."""
    n_values = n0.shape[1]
    cell, used = dense_rank([flat], [len(n0) * n_values])
    unit, category = used // n_values, used % n_values
    fewer = n0[unit].copy()
    fewer[np.arange(len(used)), category] -= 1.0
    return cell.ravel(), _unit_terms(fewer, fewer.copy()) - terms[unit]


def _jackknife_parts(unit: np.ndarray, category: np.ndarray, n_values: int, n_units: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each unit's terms, each rating's used cell, each used cell's change of its unit's terms when
    one of its ratings leaves): what every delete-one value below is summed from."""
    flat = unit * n_values + category
    n0 = np.bincount(flat, minlength=n_units * n_values).astype(float).reshape(n_units, n_values)
    terms = _unit_terms(n0, n0.copy())
    cell, cell_change = _cell_changes(flat, n0, terms)
    return terms, cell, cell_change


def agreement_jackknife(unit: np.ndarray, rater: np.ndarray, category: np.ndarray, categories: np.ndarray,
                        n_units: int, n_raters: int, parts: tuple | None = None
                        ) -> tuple[dict[str, float | None], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Point values of alpha and kappa and their delete-one values: ``{measure: (without each unit,
    without each rater)}``, for :func:`jackknife_interval`. The totals are sums of unit terms, so
    leaving a unit out subtracts its terms; leaving a rater out takes each of their ratings out of
    its unit's counts and replaces that unit's terms. O(ratings x values^2), no draws. ``parts``:
    :func:`_jackknife_parts` of these ratings, when the caller has them."""
    terms, cell, cell_change = parts or _jackknife_parts(unit, category, len(categories), n_units)
    totals = terms.sum(axis=0)
    point = _measures(totals[None, :], categories)
    values = {name: float(v[0]) if np.isfinite(v[0]) else None for name, v in point.items()}
    without_units = _measures(totals[None, :] - terms, categories)
    # one change per used (unit, category) cell, summed over each rater's ratings by a sparse product
    per_rater = _matrix(rater, cell, np.ones(len(cell)), (n_raters, len(cell_change)))
    without_raters = _measures(totals[None, :] + per_rater @ cell_change, categories)
    return values, {name: (without_units[name], without_raters[name]) for name in values}


def agreement_jackknife_by(ratings: pd.DataFrame, *, value: str, group: str = "model", raters: bool = True
                           ) -> dict:
    """:func:`agreement_intervals` by the jackknife for all of ``ratings`` (key None) and for each
    ``group`` (a model: its items are its own), in one pass: ``{None | group: ({measure: value},
    {measure: Interval})}``. Every unit's terms are computed once and summed per group; alpha and
    kappa do not change with categories a group never used, so one category list serves all.
    At EvalMi scale this is 50 intervals from one set of array passes instead of 50 calls."""
    kind = kind_of(raters)
    frame = ratings.loc[ratings[value].notna(), ["rater", "item", group, value]]
    if frame[group].isna().any():  # ratings of no group count for the study only (as a groupby leaves them out)
        grouped = agreement_jackknife_by(frame[frame[group].notna()], value=value, group=group, raters=raters)
        grouped[None] = agreement_jackknife_by(frame.assign(**{group: "all"}), value=value, group=group,
                                               raters=raters)[None]
        return grouped
    unit, n_units = _codes(frame["item"])
    rater, n_raters = _codes(frame["rater"])
    group_code, labels = _codes_and_labels(frame[group])
    n_groups = len(labels)
    categories, category = distinct_values(_snap(frame[value].to_numpy()))
    parts = _jackknife_parts(unit, category, len(categories), n_units)
    terms, cell, cell_change = parts
    unit_group = np.zeros(n_units, dtype=np.int64)
    unit_group[unit] = group_code
    by_group = np.zeros((n_groups, terms.shape[1]))
    np.add.at(by_group, unit_group, terms)  # n_groups rows: cheap
    points = _measures(by_group, categories)
    pair, pairs = dense_rank([group_code, rater], [n_groups, n_raters])
    pair_group = pairs // n_raters
    per_pair = _matrix(pair, cell, np.ones(len(cell)), (len(pairs), len(cell_change))) @ cell_change
    without_units = _measures(by_group[unit_group] - terms, categories)
    without_raters = _measures(by_group[pair_group] + per_pair, categories)

    def block(values: dict, units: np.ndarray, rater_rows: np.ndarray, deleted: dict):
        small = _too_small(len(units), len(rater_rows), kind=kind, n_boot=1)
        if small is not None:
            return values, {name: small for name in AGREEMENT_MEASURES}
        clusters = min(len(units), len(rater_rows))
        return values, {name: jackknife_interval(values[name], deleted[name][0][units],
                                                 deleted[name][1][rater_rows] if raters else None,
                                                 kind=kind, clusters=clusters, upper=1.0)
                        for name in AGREEMENT_MEASURES}

    study_values, study_deleted = agreement_jackknife(unit, rater, category, categories, n_units, n_raters, parts)
    out = {None: block(study_values, np.arange(n_units), np.arange(n_raters), study_deleted)}
    deleted = {name: (without_units[name], without_raters[name]) for name in AGREEMENT_MEASURES}
    units_of = np.argsort(unit_group, kind="stable")
    unit_bounds = np.searchsorted(unit_group[units_of], np.arange(n_groups + 1))
    pairs_of = np.argsort(pair_group, kind="stable")
    pair_bounds = np.searchsorted(pair_group[pairs_of], np.arange(n_groups + 1))
    for g in range(n_groups):
        values = {name: float(v[g]) if np.isfinite(v[g]) else None for name, v in points.items()}
        out[labels[g]] = block(values, units_of[unit_bounds[g]:unit_bounds[g + 1]],
                               pairs_of[pair_bounds[g]:pair_bounds[g + 1]], deleted)
    return out


def use_jackknife(ratings: pd.DataFrame, *, value: str, group: str | None, n_boot: int, method: str = "auto") -> bool:
    """Whether ``method`` means the jackknife for ``ratings`` (per ``group``: the largest decides)."""
    rated = ratings.loc[ratings[value].notna()]
    if group:
        rated = rated[rated[group].notna()]
        size = _largest_group(*_codes(rated[group])) if len(rated) else 0
    else:
        size = len(rated)
    return use_jackknife_for(method, size, n_boot)


def agreement_intervals(ratings: pd.DataFrame, *, value: str, raters: bool = True, n_boot: int = 1000,
                        seed: int = 0, method: str = "auto") -> tuple[dict[str, float | None], dict[str, Interval]]:
    """Point estimates and 95 % intervals of alpha (nominal, ordinal, interval) and Fleiss' kappa
    among the raters of ``ratings`` (``rater, item, <value>``; the unit is the item), resampling
    items and (``raters=True``) raters. Returns ``({measure: value}, {measure: Interval})``.

    ``method``: ``"percentile bootstrap"`` (``n_boot`` draws), ``"jackknife"`` (delete-one over items
    and over raters, :func:`jackknife_interval`; no draws) or ``"auto"``: the jackknife above
    :data:`analysis.science.agreement.JACKKNIFE_ABOVE` ratings x replicates, where the bootstrap would take seconds per interval.
    """
    kind = kind_of(raters)
    frame = ratings.loc[ratings[value].notna(), ["rater", "item", value]]
    unit, n_units = _codes(frame["item"])
    categories, category = distinct_values(_snap(frame[value].to_numpy()))
    jackknife = use_jackknife_for(method, len(frame), n_boot)
    if jackknife:
        rater, n_raters = _codes(frame["rater"])
        values, without = agreement_jackknife(unit, rater, category, categories, n_units, n_raters)
    else:
        rater, n_raters = _rater_codes(frame, ["item", value])
        point = agreement_statistics(unit, np.ones((1, len(frame))), category, categories, np.ones((1, n_units)),
                                     n_units)
        values = {name: (float(v[0]) if np.isfinite(v[0]) else None) for name, v in point.items()}
    small = _too_small(n_units, n_raters, kind=kind, n_boot=n_boot)
    if small is not None:
        return values, {name: small for name in AGREEMENT_MEASURES}
    clusters = min(n_units, n_raters)
    if jackknife:
        return values, {name: jackknife_interval(values[name], units, by_rater if raters else None, kind=kind,
                                                 clusters=clusters, upper=1.0)
                        for name, (units, by_rater) in without.items()}
    rng = np.random.default_rng(seed)
    replicates = {name: np.empty(n_boot) for name in AGREEMENT_MEASURES}
    indicator = _unit_category_indicator(unit, category, len(categories), n_units)
    done = 0
    for size in _chunks(n_boot, n_units * (len(categories) * (len(categories) + 3)) + len(frame)):
        v = multiplicities(n_raters, size, rng) if raters else np.ones((size, n_raters))
        w = multiplicities(n_units, size, rng)
        for name, reps in agreement_statistics(unit, v[:, rater], category, categories, w, n_units,
                                               indicator=indicator).items():
            replicates[name][done:done + size] = reps
        done += size
    return values, {name: percentile_interval(reps, kind=kind, n_boot=n_boot, clusters=clusters)
                    for name, reps in replicates.items()}


# ------------------------------------------------------------------ judge-human correlation


def _weighted_ranks(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Midranks of x (replicates x items) in the sample where item i appears w[b, i] times: the
    ranks scipy would give the expanded sample, read back per item (no loop over replicates)."""
    order = np.argsort(x, axis=-1, kind="stable")
    xs = np.take_along_axis(x, order, axis=-1)
    ws = np.take_along_axis(w, order, axis=-1)
    cum = np.cumsum(ws, axis=-1)
    positions = np.broadcast_to(np.arange(xs.shape[-1]), xs.shape)
    new_run = np.ones(xs.shape, dtype=bool)
    new_run[..., 1:] = xs[..., 1:] != xs[..., :-1]
    end_run = np.ones(xs.shape, dtype=bool)
    end_run[..., :-1] = new_run[..., 1:]
    first = np.maximum.accumulate(np.where(new_run, positions, 0), axis=-1)  # where each run starts
    last = np.flip(np.minimum.accumulate(np.flip(np.where(end_run, positions, xs.shape[-1]), axis=-1), axis=-1),
                   axis=-1)  # and ends
    below = np.take_along_axis(cum - ws, first, axis=-1)
    run_weight = np.take_along_axis(cum, last, axis=-1) - below
    ranks = np.empty(xs.shape)
    np.put_along_axis(ranks, order, below + (run_weight + 1.0) / 2.0, axis=-1)
    return ranks


def _fixed_order_ranks(x: np.ndarray, order: np.ndarray, w: np.ndarray) -> np.ndarray:
    """:func:`_weighted_ranks` of one vector ``x`` (sorted by ``order``) under every row of weights:
    the sort and the runs of ties are shared, only the cumulative weights differ."""
    xs = x[order]
    ws = w[:, order]
    cum = np.cumsum(ws, axis=1)
    new_run = np.ones(len(xs), dtype=bool)
    new_run[1:] = xs[1:] != xs[:-1]
    starts = np.flatnonzero(new_run)
    run_of = np.cumsum(new_run) - 1
    ends = np.append(starts[1:], len(xs)) - 1
    below = (cum - ws)[:, starts]
    run_weight = cum[:, ends] - below
    ranks = np.empty(w.shape)
    ranks[:, order] = (below + (run_weight + 1.0) / 2.0)[:, run_of]
    return ranks


def _weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pearson r of each row with frequency weights (rows: replicates); NaN if a side is constant.
    From weighted sums (six passes, no centred copies): the arrays are replicates x items."""
    total = w.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        wx, wy = w * x, w * y
        sx, sy = wx.sum(axis=-1), wy.sum(axis=-1)
        sxx = np.einsum("bi,bi->b", wx, x) - sx * sx / total
        syy = np.einsum("bi,bi->b", wy, y) - sy * sy / total
        sxy = np.einsum("bi,bi->b", wx, y) - sx * sy / total
        r = sxy / np.sqrt(sxx * syy)
        # a side with (numerically) no spread has no correlation
        flat_x = sxx <= 1e-10 * np.maximum(1.0, sx * sx / total)
        flat_y = syy <= 1e-10 * np.maximum(1.0, sy * sy / total)
    return np.where(flat_x | flat_y | ~np.isfinite(r), np.nan, np.clip(r, -1.0, 1.0))


class HumanReplicates:
    """The human side of :func:`correlation_intervals` kept between calls: the resampled item
    weights, human item means and their ranks depend on the ratings, the items, the seed and the
    kind, not on the judge, so every judge compared on the same items reuses them. Holds at most
    ``budget_bytes`` (oldest dropped first); a report keeps one for its judges section."""

    def __init__(self, budget_bytes: int = 128 * 2**20) -> None:
        self.budget = budget_bytes
        self._store: dict[tuple, list] = {}

    def get(self, key: tuple) -> list | None:
        return self._store.get(key)

    def put(self, key: tuple, chunks: list) -> None:
        size = sum(a.nbytes for chunk in chunks for a in chunk)
        if size > self.budget:
            return
        while self._store and sum(a.nbytes for c in self._store.values() for ch in c for a in ch) + size > self.budget:
            self._store.pop(next(iter(self._store)))
        self._store[key] = chunks


def _human_chunks(frame: pd.DataFrame, item_code: np.ndarray, n_items: int, value: str, raters: bool, n_boot: int,
                  seed: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per chunk of replicates: (item weights, human item means, their weighted ranks)."""
    rater_code, n_raters = _rater_codes(frame, ["item", value])
    sums = _matrix(rater_code, item_code, frame[value].to_numpy(float), (n_raters, n_items))
    counts = _matrix(rater_code, item_code, np.ones(len(frame)), (n_raters, n_items))
    rng = np.random.default_rng(seed)
    chunks = []
    for size in _chunks(n_boot, 4 * n_items + n_raters):
        v = multiplicities(n_raters, size, rng) if raters else np.ones((size, n_raters))
        w = multiplicities(n_items, size, rng)
        total = (sums.T @ v.T).T
        n = (counts.T @ v.T).T
        human = np.where(n > 0, total / np.where(n > 0, n, 1.0), 0.0)
        w = w * (n > 0)  # an item none of the drawn raters rated drops out of this replicate
        chunks.append((w, human, _weighted_ranks(human, w)))
    return chunks


def correlation_intervals(ratings: pd.DataFrame, judge: pd.Series, *, value: str, raters: bool = True,
                          lower_is_better: bool = False, n_boot: int = 1000, seed: int = 0,
                          reuse: HumanReplicates | None = None) -> dict[str, Interval]:
    """Percentile 95 % intervals of the Spearman and Pearson correlation between a judge's score
    per item (``judge``: indexed by item) and the human item score (the mean of the item's
    ratings), resampling items and (``raters=True``) the raters behind the human means.

    ``lower_is_better`` negates the judge (a distance), as the report does. Items without a judge
    score or without ratings are left out. ``reuse``: human replicates kept from earlier calls on
    the same ``ratings`` (see :class:`HumanReplicates`). Returns ``{"spearman": Interval,
    "pearson": Interval}``.
    """
    kind = kind_of(raters)
    frame = ratings.loc[ratings[value].notna() & ratings["item"].isin(judge.index), ["rater", "item", value]]
    item_code, items = pd.factorize(frame["item"], sort=True)
    small = _too_small(len(items), frame["rater"].nunique(), kind=kind, n_boot=n_boot)
    if small is not None:
        return {"spearman": small, "pearson": small}
    x = judge.groupby(level=0).mean().reindex(items).to_numpy(float)
    if lower_is_better:
        x = -x
    order = np.argsort(x, kind="stable")  # the judge's scores do not change between replicates
    key = (value, raters, n_boot, seed, len(frame), tuple(items))
    chunks = reuse.get(key) if reuse is not None else None
    if chunks is None:
        chunks = _human_chunks(frame, item_code, len(items), value, raters, n_boot, seed)
        if reuse is not None:
            reuse.put(key, chunks)
    spearman = np.concatenate([_weighted_pearson(_fixed_order_ranks(x, order, w), ranks, w) for w, _, ranks in chunks])
    pearson = np.concatenate([_weighted_pearson(np.broadcast_to(x, w.shape), human, w) for w, human, _ in chunks])
    clusters = min(len(items), int(frame["rater"].nunique()))
    return {"spearman": percentile_interval(spearman, kind=kind, n_boot=n_boot, clusters=clusters),
            "pearson": percentile_interval(pearson, kind=kind, n_boot=n_boot, clusters=clusters)}


# ------------------------------------------------------------------ pairwise


def pairwise_intervals(comparisons: pd.DataFrame, *, raters: bool = True, both_bad: str = "exclude",
                       n_boot: int = 1000, seed: int = 0, prior: float = 0.5) -> dict[str, dict[str, Interval]]:
    """Percentile 95 % intervals of each model's win rate and Bradley–Terry score (the policies of
    :func:`analysis.science.pairwise.pairwise_summary`), resampling the compared items (``item``: the
    comparison, i.e. the prompt and its pair of images) and (``raters=True``) the raters: a
    judgement of item i by rater r counts ``W[i] * V[r]`` times. ``comparisons``: ``model_a,
    model_b, preference, item, rater``. Returns ``{model: {"win_rate": Interval, "bt": Interval}}``.
    """
    kind = kind_of(raters)
    models, encoded = _encode(comparisons)
    k = len(models)
    item, n_items = _codes(comparisons["item"])
    rater, n_raters = _rater_codes(comparisons, ["item", "model_a", "model_b", "preference"])
    small = _too_small(n_items, n_raters, kind=kind, n_boot=n_boot)
    if small is not None:
        return {m: {"win_rate": small, "bt": small} for m in models}
    cells, inverse = _cells(encoded, k)
    to_cells = _matrix(np.arange(len(inverse)), inverse, np.ones(len(inverse)), (len(inverse), len(cells)))
    rng = np.random.default_rng(seed)
    rates, scores = [], []
    for size in _chunks(n_boot, len(encoded) + k * k * 4):
        v = multiplicities(n_raters, size, rng) if raters else np.ones((size, n_raters))
        w = multiplicities(n_items, size, rng)
        weights = np.asarray(((w[:, item] * v[:, rater]) @ to_cells))
        wins, _ = _tallies(cells, weights, k, both_bad)
        rates.append(_win_rates(wins))
        scores.append(bradley_terry(wins, prior=prior))  # the point estimate's tolerance: a degenerate interval holds it
    rate_reps, score_reps = np.concatenate(rates), np.concatenate(scores)
    clusters = min(n_items, n_raters)
    return {m: {"win_rate": percentile_interval(rate_reps[:, j], kind=kind, n_boot=n_boot, clusters=clusters),
                "bt": percentile_interval(score_reps[:, j], kind=kind, n_boot=n_boot, clusters=clusters)}
            for j, m in enumerate(models)}


__all__ = ["ITEMS", "ITEMS_RATERS", "KINDS", "Interval", "agreement_intervals", "agreement_jackknife_by", "use_jackknife", "correlation_intervals",
           "crossed_mean_variance", "mean_intervals", "mean_replicates", "pairwise_intervals", "percentile_interval", "OUTCOMES"]
