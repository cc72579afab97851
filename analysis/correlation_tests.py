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
from scipy import stats

from analysis.correlation import snap

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
    """(n_boot, n) counts (as floats, the form the weighted sums use): how often each of n items is drawn in each resample of n items with
    replacement (a multinomial draw, the same distribution as n integer draws)."""
    if n == 0:
        return np.zeros((n_boot, 0))
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)


def _value_groups(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sort order, first position of each run of equal values in that order, run of each item)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    start = np.ones(len(values), bool)
    start[1:] = ordered[1:] != ordered[:-1]
    run = np.empty(len(values), np.int64)
    run[order] = np.cumsum(start) - 1
    return order, np.flatnonzero(start), run


def _run_counts(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(draws per run of equal values in each resample (n_boot, runs), the run of each item)."""
    order, first, run = _value_groups(values)
    per_run = np.add.reduceat(weights[:, order], first, axis=1) if len(values) else weights[:, :0]
    return per_run, run


def _weighted_ranks(per_run: np.ndarray, run: np.ndarray) -> np.ndarray:
    """Average ranks of every item in each resample, as scipy's rankdata gives them on the resample
    written out: a value drawn c times after b smaller draws has rank b + (c + 1)/2."""
    below = np.cumsum(per_run, axis=1) - per_run
    return (below + (per_run + 1) / 2.0)[:, run]


def _rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise sums of a * b for (n_boot, n) or (n,) operands (a matrix-vector product when one is 1-D)."""
    if a.ndim == 1:
        return b @ a
    if b.ndim == 1:
        return a @ b
    return np.einsum("ij,ij->i", a, b)


def _weighted_pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Pearson's r of each resample from count weights (n_boot, n); ``x``/``y``: (n,) or (n_boot, n).
    Centred on the unweighted item means first, so the raw-moment sums lose no useful precision
    (agrees with scipy on the written-out resample to ~1e-12), and a 1-D side is a matrix product."""
    x = x - x.mean(axis=-1, keepdims=True)
    y = y - y.mean(axis=-1, keepdims=True)
    total = weights.sum(axis=1)
    wx, wy = _rowdot(weights, x), _rowdot(weights, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        sxy = _rowdot(weights, x * y) - wx * wy / total
        sxx = _rowdot(weights, x * x) - wx * wx / total
        syy = _rowdot(weights, y * y) - wy * wy / total
        r = sxy / np.sqrt(sxx * syy)
    return np.clip(r, -1.0, 1.0)


METHODS = ("srcc", "plcc")


def weighted_correlations(x, y, weights, *, method: str = "srcc") -> np.ndarray:
    """The correlation of ``x`` and ``y`` in every resample, ``weights`` (n_boot, n) giving how often
    each item was drawn (0 = not drawn, or not part of this comparison). ``method``: "srcc"
    (Spearman: average ranks within the resample) or "plcc" (Pearson). Values are snapped to 9
    decimals as :func:`analysis.correlation.sample_correlations` does, and a pair with a missing
    side counts as not drawn. NaN where the resample has fewer than 3 draws or a constant side
    (the statistic is undefined there; callers count these)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    x, y = snap(x), snap(y)
    weights = np.asarray(weights, dtype=float)  # no copy when the caller keeps float counts
    if weights.ndim != 2 or weights.shape[1] != len(x) or len(x) != len(y):
        raise ValueError(f"weights must be (n_boot, {len(x)}) for {len(x)} pairs, got {weights.shape}")
    finite = np.isfinite(x) & np.isfinite(y)
    if not finite.all():
        weights = weights * finite
        x, y = np.where(finite, x, 0.0), np.where(finite, y, 0.0)
    (x_runs, x_run), (y_runs, y_run) = _run_counts(x, weights), _run_counts(y, weights)
    if method == "srcc":
        r = _weighted_pearson(_weighted_ranks(x_runs, x_run), _weighted_ranks(y_runs, y_run), weights)
    else:
        r = _weighted_pearson(x, y, weights)
    undefined = (weights.sum(axis=1) < 3) | ((x_runs > 0).sum(axis=1) < 2) | ((y_runs > 0).sum(axis=1) < 2)
    r[undefined] = np.nan
    return r


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
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(defined, [tail, 100 - tail])
    if estimate == 0:
        p_counted = p_value = 1.0
    else:
        far = int((defined <= 0).sum() if estimate > 0 else (defined >= 0).sum())
        p_counted = min(1.0, 2 * (far + 1) / (len(defined) + 1))
        se = float(np.std(defined, ddof=1)) if len(defined) > 1 else 0.0
        p_value = float(2 * stats.norm.sf(abs(estimate) / se)) if se > 0 else p_counted
    return BootstrapSummary(float(estimate), (float(low), float(high)), p_value, len(replicates), undefined,
                            p_counted)
