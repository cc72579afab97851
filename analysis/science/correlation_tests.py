"""Comparing correlations measured on the same items, and intervals on single correlations. No Django.

Two judges scored against the same human scores (or a judge against the human ceiling) give
*dependent* correlations: they share the human variable and the items, so the usual test for
two independent correlations is wrong (too conservative when the judges agree with each other).
This module gives

* the closed-form tests for two Pearson correlations with one variable in common, r_jk and r_jh
  (j = the human scores, k and h = two judges, r_kh = the judges' correlation with each other):
  Williams' t (Williams 1959, as recommended by Steiger 1980, eq. 11; df = n - 3), Steiger's Z
  (Steiger 1980, eq. 14, Fisher z with the pooled correlation) and Zou's (2007) confidence interval
  for r_jk - r_jh. They assume bivariate normal scores, so the report gives them for Pearson only.
* a paired bootstrap that works for any of the report's correlations (Spearman included) and for
  averages over models: items are resampled *jointly* (one draw serves both correlations), so the
  dependence is kept without a formula. A resample is a vector of counts per item (how often each
  item was drawn); the correlation of a resample equals the count-weighted correlation of the
  distinct items, with average ranks for ties computed from the counts, so every replicate is a few
  vector operations over the items (:func:`weighted_correlations`) instead of a copy of the data.
* Fisher-z intervals on one correlation: Pearson (SE 1/sqrt(n-3)), Spearman (Bonett & Wright 2000:
  SE sqrt((1 + r^2/2)/(n-3))), Kendall (Fieller, Hartley & Pearson 1957: SE sqrt(0.437/(n-4))).
* Holm's step-down adjustment for a family of p-values.

Bootstrap p-values are two-sided: ``p`` from the bootstrap standard error (normal approximation,
fine-grained enough for Holm's adjustment over many comparisons) and ``p_counted`` = 2 (k + 1) / (B + 1)
with k of the B replicates on the far side of zero (never 0, but no smaller than 2/(B+1)); a replicate whose statistic is undefined (a model whose
resampled scores are constant) is left out and counted, never dropped silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from analysis.science.correlation import snap

_R_CLIP = 1.0 - 1e-12


@dataclass(frozen=True)
class DependentTest:
    """One test of r_jk = r_jh: the difference r_jk - r_jh, the statistic, its df (None for a z) and
    the two-sided p-value; ``reason`` says why the statistic is undefined (then None)."""

    difference: float | None
    statistic: float | None
    df: float | None
    p_value: float | None
    reason: str | None = None


def _check(r_jk: float, r_jh: float, r_kh: float, n: int) -> str | None:
    values = (r_jk, r_jh, r_kh)
    if any(v is None or not np.isfinite(v) for v in values):
        return "a correlation is undefined"
    if any(abs(v) > 1 for v in values):
        return "a correlation lies outside [-1, 1]"
    if n is None or n < 4:
        return f"only {n} items: need at least 4"
    return None


def williams_t(r_jk: float, r_jh: float, r_kh: float, n: int) -> DependentTest:
    """Williams' t for r_jk = r_jh (one variable j in common), Steiger (1980) eq. 11, df = n - 3:
    t = (r_jk - r_jh) sqrt((n-1)(1+r_kh) / (2 (n-1)/(n-3) |R| + rbar^2 (1-r_kh)^3)),
    |R| = 1 - r_jk^2 - r_jh^2 - r_kh^2 + 2 r_jk r_jh r_kh (the determinant of the 3x3 correlation
    matrix), rbar = (r_jk + r_jh)/2."""
    why = _check(r_jk, r_jh, r_kh, n)
    if why:
        return DependentTest(None, None, None, None, why)
    det = 1 - r_jk**2 - r_jh**2 - r_kh**2 + 2 * r_jk * r_jh * r_kh
    rbar = (r_jk + r_jh) / 2
    denominator = 2 * (n - 1) / (n - 3) * det + rbar**2 * (1 - r_kh) ** 3
    if denominator <= 0:
        return DependentTest(r_jk - r_jh, None, None, None, "singular correlation matrix: Williams' t undefined")
    t = (r_jk - r_jh) * math.sqrt((n - 1) * (1 + r_kh) / denominator)
    df = n - 3
    return DependentTest(r_jk - r_jh, t, float(df), float(2 * stats.t.sf(abs(t), df)))


def steiger_z(r_jk: float, r_jh: float, r_kh: float, n: int) -> DependentTest:
    """Steiger's (1980, eq. 14) Z for r_jk = r_jh: Fisher z of both correlations, their covariance
    from the pooled rbar = (r_jk + r_jh)/2 (eqs. 3 and 10):
    psi = r_kh (1 - 2 rbar^2) - rbar^2 (1 - 2 rbar^2 - r_kh^2) / 2, c = psi / (1 - rbar^2)^2,
    Z = (z_jk - z_jh) sqrt(n - 3) / sqrt(2 - 2c)."""
    why = _check(r_jk, r_jh, r_kh, n)
    if why:
        return DependentTest(None, None, None, None, why)
    rbar = (r_jk + r_jh) / 2
    if abs(rbar) >= 1:
        return DependentTest(r_jk - r_jh, None, None, None, "both correlations are ±1: Steiger's Z undefined")
    psi = r_kh * (1 - 2 * rbar**2) - 0.5 * rbar**2 * (1 - 2 * rbar**2 - r_kh**2)
    c = psi / (1 - rbar**2) ** 2
    if 2 - 2 * c <= 0:
        return DependentTest(r_jk - r_jh, None, None, None, "the two correlations are identical variables")
    z_jk, z_jh = (math.atanh(np.clip(r, -_R_CLIP, _R_CLIP)) for r in (r_jk, r_jh))
    z = (z_jk - z_jh) * math.sqrt(n - 3) / math.sqrt(2 - 2 * c)
    return DependentTest(r_jk - r_jh, z, None, float(2 * stats.norm.sf(abs(z))))


def fisher_interval(r: float | None, n: int, *, method: str = "plcc", confidence: float = 0.95
                    ) -> tuple[float, float] | None:
    """Fisher-z interval for one correlation; ``method`` "plcc" (SE 1/sqrt(n-3)), "srcc" (Bonett &
    Wright 2000) or "krcc" (Fieller et al. 1957, needs n > 4). None when undefined or n too small."""
    if r is None or not np.isfinite(r) or n is None:
        return None
    if method == "krcc":
        if n <= 4:
            return None
        se = math.sqrt(0.437 / (n - 4))
    else:
        if n <= 3:
            return None
        se = math.sqrt((1 + r**2 / 2) / (n - 3)) if method == "srcc" else 1 / math.sqrt(n - 3)
    z = math.atanh(float(np.clip(r, -_R_CLIP, _R_CLIP)))
    half = stats.norm.ppf(0.5 + confidence / 2) * se
    return math.tanh(z - half), math.tanh(z + half)


def zou_interval(r_jk: float, r_jh: float, r_kh: float, n: int, *, confidence: float = 0.95
                 ) -> tuple[float, float] | None:
    """Zou's (2007) interval for r_jk - r_jh with one variable in common (his eqs. 13-15): the two
    Fisher-z intervals (l1, u1), (l2, u2) combined with the correlation of the two estimates,
    c = ((r_kh - r_jk r_jh / 2)(1 - r_jk^2 - r_jh^2 - r_kh^2) + r_kh^3) / ((1 - r_jk^2)(1 - r_jh^2)):
    L = d - sqrt((r_jk - l1)^2 + (u2 - r_jh)^2 - 2c (r_jk - l1)(u2 - r_jh)),
    U = d + sqrt((u1 - r_jk)^2 + (r_jh - l2)^2 - 2c (u1 - r_jk)(r_jh - l2))."""
    if _check(r_jk, r_jh, r_kh, n) or abs(r_jk) >= 1 or abs(r_jh) >= 1:
        return None
    l1, u1 = fisher_interval(r_jk, n, confidence=confidence)
    l2, u2 = fisher_interval(r_jh, n, confidence=confidence)
    c = ((r_kh - 0.5 * r_jk * r_jh) * (1 - r_jk**2 - r_jh**2 - r_kh**2) + r_kh**3) / ((1 - r_jk**2) * (1 - r_jh**2))
    d = r_jk - r_jh
    low = d - math.sqrt(max(0.0, (r_jk - l1) ** 2 + (u2 - r_jh) ** 2 - 2 * c * (r_jk - l1) * (u2 - r_jh)))
    high = d + math.sqrt(max(0.0, (u1 - r_jk) ** 2 + (r_jh - l2) ** 2 - 2 * c * (u1 - r_jk) * (r_jh - l2)))
    return low, high


def holm(p_values) -> list[float | None]:
    """Holm's (1979) step-down adjusted p-values, in the input order; None stays None (not part of
    the family). Controls the family-wise error rate under any dependence between the tests."""
    values = list(p_values)
    present = [i for i, p in enumerate(values) if p is not None and np.isfinite(p)]
    m = len(present)
    adjusted: list[float | None] = [None] * len(values)
    running = 0.0
    for rank, i in enumerate(sorted(present, key=lambda i: values[i])):
        running = max(running, min(1.0, (m - rank) * float(values[i])))
        adjusted[i] = running
    return adjusted


# ----------------------------------------------------------------- bootstrap by counts


def bootstrap_counts(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) counts (floats in Fortran order: each item's counts contiguous, as the weighted sums
    read them): how often each of n items is drawn in each resample of n items with
    replacement (a multinomial draw, the same distribution as n integer draws)."""
    if n == 0:
        return np.zeros((n_boot, 0))
    return np.asfortranarray(rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float))


def _dense_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, code of each value among them)."""
    distinct, codes = np.unique(values, return_inverse=True)
    return distinct, codes.ravel()


def _group_sums(columns: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Sums of the rows of ``columns`` (k, n_boot) within each group: (n_groups, n_boot). Rows are
    contiguous resample vectors, so the gather and the sums run over contiguous memory."""
    order = np.argsort(group, kind="stable")
    g = group[order]
    first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    out = np.zeros((n_groups, columns.shape[1]))
    out[g[first]] = np.add.reduceat(columns[order], first, axis=0)
    return out


def _average_ranks(per_value: np.ndarray) -> np.ndarray:
    """Average rank of each distinct value (rows, ascending) in each resample (columns), from how
    often it was drawn:
    a value drawn c times after b smaller draws has rank b + (c + 1)/2, as scipy's rankdata gives on
    the resample written out."""
    return np.cumsum(per_value, axis=0) - per_value + (per_value + 1) / 2.0


METHODS = ("srcc", "plcc")


def weighted_correlations(x, y, weights, *, method: str = "srcc") -> np.ndarray:
    """One method of :func:`weighted_correlations_both` (see there)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return weighted_correlations_both(x, y, weights, methods=(method,))[method]


def weighted_correlations_both(x, y, weights, *, methods=METHODS) -> dict[str, np.ndarray]:
    """The correlations (``methods``) of ``x`` and ``y`` in every resample, ``weights`` (n_boot, n)
    giving how often each item was drawn (0 = not drawn, or not part of this comparison): "srcc"
    (Spearman: average ranks within the resample) and/or "plcc" (Pearson), sharing the tie counts,
    as ``{method: (n_boot,) array}``. Values are snapped to 9
    decimals as :func:`analysis.science.correlation.sample_correlations` does, and a pair with a missing
    side counts as not drawn. NaN where the resample has fewer than 3 draws or a constant side
    (the statistic is undefined there; callers count these)."""
    x, y = snap(x), snap(y)
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 2 or weights.shape[1] != len(x) or len(x) != len(y):
        raise ValueError(f"weights must be (n_boot, {len(x)}) for {len(x)} pairs, got {weights.shape}")
    # work on items x resamples: each item's counts are one contiguous row (no copy when the caller
    # keeps its counts in Fortran order, see bootstrap_counts)
    columns = np.ascontiguousarray(weights.T)
    finite = np.isfinite(x) & np.isfinite(y)
    if not finite.all():
        columns, x, y = columns[finite], x[finite], y[finite]
    if len(x) == 0:
        return {method: np.full(weights.shape[0], np.nan) for method in methods}
    # Every statistic depends only on how often each distinct (x, y) cell was drawn: one pass over
    # the items sums the counts per cell, everything else is (cells, n_boot) work. With a Likert judge
    # and a 3-rater mean there are at most 11 x 7 cells however many items.
    x_values, x_code = _dense_codes(x)
    y_values, y_code = _dense_codes(y)
    cell_code = x_code * len(y_values) + y_code
    cells, cell_of_item = np.unique(cell_code, return_inverse=True)
    per_cell = _group_sums(columns, cell_of_item.ravel(), len(cells))
    cell_x, cell_y = cells // len(y_values), cells % len(y_values)
    per_x = _group_sums(per_cell, cell_x, len(x_values))
    per_y = _group_sums(per_cell, cell_y, len(y_values))
    total = per_cell.sum(axis=0)
    undefined = (total < 3) | ((per_x > 0).sum(axis=0) < 2) | ((per_y > 0).sum(axis=0) < 2)
    out = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for method in methods:
            if method == "srcc":
                middle = (total + 1) / 2.0  # the mean rank
                dx, dy = _average_ranks(per_x) - middle, _average_ranks(per_y) - middle
                sxy = np.einsum("ij,ij,ij->j", per_cell, dx[cell_x], dy[cell_y])
                sxx, syy = np.einsum("ij,ij,ij->j", per_x, dx, dx), np.einsum("ij,ij,ij->j", per_y, dy, dy)
            elif method == "plcc":
                xv, yv = x_values - x.mean(), y_values - y.mean()  # centred: the raw moments lose nothing useful
                sx, sy = xv @ per_x, yv @ per_y
                sxy = (xv[cell_x] * yv[cell_y]) @ per_cell - sx * sy / total
                sxx, syy = (xv * xv) @ per_x - sx * sx / total, (yv * yv) @ per_y - sy * sy / total
            else:
                raise ValueError(f"method must be one of {METHODS}, got {method!r}")
            r = np.clip(sxy / np.sqrt(sxx * syy), -1.0, 1.0)
            r[undefined] = np.nan
            out[method] = r
    return out


@dataclass(frozen=True)
class BootstrapSummary:
    """A statistic, its bootstrap percentile interval, two two-sided p-values against zero (for
    differences) and how many of the ``n_boot`` resamples left it undefined (left out).

    ``p_value``: normal approximation with the bootstrap standard error, 2 Phi(-|estimate| / SE);
    its resolution is not limited by the number of resamples, which Holm's adjustment over many
    comparisons needs (36 model pairs x a smallest counting p of 2/1001 would separate nothing).
    ``p_counted``: 2 (k + 1) / (B + 1), k of the B defined resamples on the far side of zero (never 0;
    Davison & Hinkley 1997, eq. 4.11), free of the normal assumption but coarse."""

    estimate: float | None
    ci95: tuple[float, float] | None
    p_value: float | None
    n_boot: int
    undefined: int
    p_counted: float | None = None

    def as_dict(self, *, p: bool = True) -> dict:
        out = {"estimate": self.estimate, "ci95": list(self.ci95) if self.ci95 else None,
               "bootstrap_undefined_share": self.undefined / self.n_boot if self.n_boot else None}
        if p:
            out["p"] = self.p_value
            out["p_counted"] = self.p_counted
        return out


def summarise_replicates(estimate: float | None, replicates: np.ndarray, *, confidence: float = 0.95
                         ) -> BootstrapSummary:
    """Percentile interval and the two p-values of :class:`BootstrapSummary` from ``replicates``;
    NaN replicates are counted as undefined and left out."""
    replicates = np.asarray(replicates, dtype=float)
    defined = replicates[np.isfinite(replicates)]
    undefined = int(len(replicates) - len(defined))
    if estimate is None or not np.isfinite(estimate) or len(defined) == 0:
        return BootstrapSummary(None if estimate is None or not np.isfinite(estimate) else float(estimate),
                                None, None, len(replicates), undefined)
    return _summaries(np.array([float(estimate)]), defined[:, None], len(replicates), undefined, confidence)[0]


def summarise_columns(estimates: np.ndarray, replicates: np.ndarray, *, confidence: float = 0.95
                      ) -> list[BootstrapSummary]:
    """:func:`summarise_replicates` of every column of ``replicates`` (n_boot x statistics) with its
    ``estimates`` entry, the defined columns at once (the hundreds of model pairs of a leaderboard);
    a column with an undefined replicate or estimate goes alone."""
    replicates = np.asarray(replicates, dtype=float)
    estimates = np.asarray(estimates, dtype=float)
    whole = np.isfinite(replicates).all(axis=0) & np.isfinite(estimates) & (len(replicates) > 0)
    out: list[BootstrapSummary | None] = [None] * len(estimates)
    for k in np.flatnonzero(~whole):
        out[k] = summarise_replicates(float(estimates[k]), replicates[:, k], confidence=confidence)
    columns = np.flatnonzero(whole)
    if len(columns):
        for k, summary in zip(columns, _summaries(estimates[columns], replicates[:, columns], len(replicates), 0,
                                                  confidence)):
            out[k] = summary
    return out


def _summaries(estimates: np.ndarray, block: np.ndarray, n_boot: int, undefined: int, confidence: float
               ) -> list[BootstrapSummary]:
    """One summary per column of ``block`` (its defined replicates, finite, at least one row)."""
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(block, [tail, 100 - tail], axis=0)
    # a replicate that is zero up to rounding is zero: sums of the same resample taken in another
    # order (a model pair's difference from the models' sums) must count the same
    zero = 1e-12 * np.maximum(np.maximum(1.0, np.abs(estimates)), np.abs(block).max(axis=0))
    far = np.where(estimates > 0, (block <= zero).sum(axis=0), (block >= -zero).sum(axis=0))
    n = len(block)
    p_counted = np.minimum(1.0, 2 * (far + 1) / (n + 1))
    se = block.std(axis=0, ddof=1) if n > 1 else np.zeros(block.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        p_normal = 2 * special.ndtr(-np.abs(estimates) / se)
    p_value = np.where(se > 0, p_normal, p_counted)
    return [BootstrapSummary(float(est), (float(lo), float(hi)), 1.0 if est == 0 else float(p),
                             n_boot, undefined, 1.0 if est == 0 else float(pc))
            for est, lo, hi, p, pc in zip(estimates, low, high, p_value, p_counted)]


