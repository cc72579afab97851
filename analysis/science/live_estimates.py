"""Per-unit estimates and standard errors while a study runs, for the allocation and the verdicts.
No Django.

Three estimators of one unit's quality on the rating scale, each with a standard error:

* ``zmos``: per-rater z-scores (ddof 1; raters with < 2 ratings or no spread left out) averaged per
  unit, put back on the rating scale (grand mean + z × mean rater sd); std = the pooled
  within-unit spread / √n (a unit with one rating has a std too, from the pool);
* ``subject``: the report's subject model (:func:`analysis.science.subject_model.fit_codes`,
  SUREAL's MLE with its floor), Fisher std;
* ``subject_dof`` (default for live decisions): the same model with each rater's inconsistency
  estimated with the degrees of freedom the item qualities use up,

      v_i² = Σ_j r_ij² / Σ_j (1 - h_ij),   h_ij = w_i / Σ_k∈j w_k   (the leverage of rater i on item j)

  (the REML-style correction of a weighted mean's residual variance). Why: the plain MLE divides
  by n_i, and an item's quality is fitted *from* the rater's own rating: on an item rated once the
  residual is 0 by construction. In an adaptive study most units start with one or two ratings, so
  every v_i, and with it every std, comes out too small (overconfident verdicts); in a small fully
  crossed panel the most consistent rater's residuals shrink as the items follow them, the
  degenerate maximum the subject model's floor only bounds (in the simulations its item RMSE then
  loses to z-MOS). With the correction a single-rated item says nothing about its rater's noise,
  and a rater who dominates an item is not rewarded for it. The leverages count the item
  qualities only; the raters' biases use up degrees of freedom too (a rater whose one repeated
  unit is their only link to the others has it absorbed by their bias), so the dof are scaled by
  (ratings - units - raters + connected groups) / (ratings - units), :func:`residual_dof`:
  without it, a study whose first repeats merely chain raters together claimed std ≈ 0 and
  declared every pair separated. Each rater's v_i² is shrunk towards
  the pooled one by ``PRIOR_DOF`` pseudo-observations; until the repeats close cycles between
  raters and units the noise is not identifiable and every std is NaN (verdicts stay open). Biases have mean zero over raters
  (one connected design; adaptive studies, where raters move freely over units, are one).

Cost: O(ratings) per iteration with ``bincount``, ~30 iterations, and one O(ratings) connected-components
pass (``scipy.sparse.csgraph``) for the dof.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from analysis.science.subject_model import fit_codes

METHODS = ("subject_dof", "subject", "zmos")
FLOOR_SHARE = 0.2  # as the subject model: no inconsistency below this share of the median's
TOL = 1e-6
MAX_ITER = 300
PRIOR_DOF = 2.0  # pseudo degrees of freedom at the pooled inconsistency behind every rater's own
MIN_POOLED_DOF = 2.0  # below this, no std at all (NaN: every verdict stays open)


def unit_estimates(values, unit, rater, n_units: int, n_raters: int, method: str = "subject_dof"
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, std, ratings) per unit code, NaN where a unit has no rating. ``unit`` and ``rater``
    are integer codes (0..n_units-1, 0..n_raters-1); ``values`` finite."""
    values, unit, rater = np.asarray(values, float), np.asarray(unit, np.int64), np.asarray(rater, np.int64)
    n = np.bincount(unit, minlength=n_units).astype(float)
    if method == "subject":
        fit = fit_codes(values, unit, rater, n_units, n_raters)
        return fit.quality, fit.quality_std, n
    if method == "subject_dof":
        estimate, std, _, _ = subject_dof(values, unit, rater, n_units, n_raters)
        return estimate, std, n
    if method == "zmos":
        estimate, std = _zmos(values, unit, rater, n_units, n_raters)
        return estimate, std, n
    raise ValueError(f"unknown method {method!r}; one of {METHODS}")


def subject_dof(values, unit, rater, n_units: int, n_raters: int, *, tol: float = TOL, max_iter: int = MAX_ITER
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(quality, quality std, bias, inconsistency): the subject model with degrees-of-freedom
    corrected inconsistencies (module docstring). Unrated units and raters are NaN."""
    n_unit = np.bincount(unit, minlength=n_units).astype(float)
    n_rater = np.bincount(rater, minlength=n_raters).astype(float)
    has_unit, has_rater = n_unit > 0, n_rater > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        quality = np.bincount(unit, weights=values, minlength=n_units) / n_unit
    quality = np.nan_to_num(quality)
    bias = np.zeros(n_raters)
    pooled = float(np.var(values)) if len(values) > 1 else 1.0
    bias_share = _bias_share(unit, rater, n_units, n_raters)
    v2 = np.full(n_raters, max(pooled, 1e-6))
    previous = v2
    for _ in range(max_iter):
        w = 1.0 / v2[rater]
        weight_sum = np.bincount(unit, weights=w, minlength=n_units)
        with np.errstate(divide="ignore", invalid="ignore"):
            new = np.bincount(unit, weights=w * (values - bias[rater]), minlength=n_units) / weight_sum
        new = np.where(has_unit, new, 0.0)
        change = float(np.max(np.abs(new - quality))) if len(new) else 0.0
        quality = new
        with np.errstate(divide="ignore", invalid="ignore"):
            bias = np.where(has_rater, np.bincount(rater, weights=values - quality[unit], minlength=n_raters)
                            / n_rater, 0.0)
        bias[has_rater] -= bias[has_rater].mean()  # identifiability: biases sum to zero
        residual = values - quality[unit] - bias[rater]
        free = 1.0 - w / weight_sum[unit]  # 1 - leverage of the rating on its unit's quality
        dof = np.bincount(rater, weights=free, minlength=n_raters) * bias_share
        rss = np.bincount(rater, weights=residual**2, minlength=n_raters)
        if dof.sum() < MIN_POOLED_DOF:  # no unit rated twice yet: the noise is not identifiable
            nan = np.full(n_units, np.nan)
            return np.where(has_unit, quality, np.nan), nan, np.where(has_rater, bias, np.nan), np.full(n_raters, np.nan)
        total = float(rss.sum() / dof.sum())  # the pool
        # each rater's own estimate shrunk towards the pool by PRIOR_DOF pseudo-observations: a rater
        # with one repeat item does not get a weight from a single residual
        v2 = np.where(has_rater, (rss + PRIOR_DOF * total) / (dof + PRIOR_DOF), total)
        if has_rater.any():
            floor = (FLOOR_SHARE * float(np.median(np.sqrt(v2[has_rater])))) ** 2
            v2 = np.maximum(v2, max(floor, 1e-12))
        moved = float(np.max(np.abs(np.sqrt(v2) - np.sqrt(previous)))) if len(v2) else 0.0
        previous = v2
        if change < tol and moved < tol:  # the first pass only sets the v_i: quality alone can stand still
            break
    w = 1.0 / v2[rater]
    weight_sum = np.bincount(unit, weights=w, minlength=n_units)
    with np.errstate(divide="ignore"):
        std = np.where(has_unit, 1.0 / np.sqrt(weight_sum), np.nan)
    quality = np.where(has_unit, quality, np.nan)
    return quality, std, np.where(has_rater, bias, np.nan), np.where(has_rater, np.sqrt(v2), np.nan)


def residual_dof(unit, rater, n_units: int, n_raters: int) -> float:
    """Degrees of freedom left for the noise after fitting a quality per rated unit and a bias per
    rater: ratings - rated units - raters + connected groups of the rater-unit graph (its
    independent cycles). Single ratings, and repeats that only tie raters together without closing
    a cycle, are absorbed by the parameters: 0 when no two raters rated two units in common (or
    through a chain)."""
    unit, rater = np.asarray(unit, np.int64), np.asarray(rater, np.int64)
    if not len(unit):
        return 0.0
    graph = sparse.coo_matrix((np.ones(len(unit)), (unit, n_units + rater)),
                              shape=(n_units + n_raters, n_units + n_raters))
    _, label = csgraph.connected_components(graph, directed=False)
    used = np.zeros(n_units + n_raters, bool)
    used[unit] = True
    used[n_units + rater] = True
    components = len(np.unique(label[used]))
    return float(len(unit) - used.sum() + components)


def _bias_share(unit, rater, n_units: int, n_raters: int) -> float:
    """The leverage-based dof (Σ 1 - h = ratings - rated units: it counts the qualities only)
    scaled down to :func:`residual_dof`, which also counts the raters' biases."""
    unit = np.asarray(unit, np.int64)
    quality_only = float(len(unit) - len(np.unique(unit)))
    if quality_only <= 0:
        return 1.0
    return max(0.0, residual_dof(unit, rater, n_units, n_raters)) / quality_only


def _zmos(values, unit, rater, n_units: int, n_raters: int) -> tuple[np.ndarray, np.ndarray]:
    count = np.bincount(rater, minlength=n_raters).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.bincount(rater, weights=values, minlength=n_raters) / count
        sd = np.sqrt(np.bincount(rater, weights=(values - mean[rater]) ** 2, minlength=n_raters) / (count - 1))
    ok = (count >= 2) & (sd > 0)
    if not ok.any():
        return np.full(n_units, np.nan), np.full(n_units, np.nan)
    keep = ok[rater]
    z = (values[keep] - mean[rater[keep]]) / sd[rater[keep]]
    u = unit[keep]
    m = np.bincount(u, minlength=n_units).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        unit_z = np.bincount(u, weights=z, minlength=n_units) / m
        resid = np.bincount(u, weights=(z - unit_z[u]) ** 2, minlength=n_units)
        free = (m - 1)[m > 1].sum()
        pooled = math.sqrt(resid.sum() / free) if free >= MIN_POOLED_DOF else math.nan  # no repeats: unknown
        centre, spread = float(values.mean()), float(np.mean(sd[ok]))
        estimate = np.where(m > 0, centre + unit_z * spread, np.nan)
        std = np.where(m > 0, pooled * spread / np.sqrt(m), np.nan)
    return estimate, std
