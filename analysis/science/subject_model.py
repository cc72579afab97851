"""Subject model: item quality, rater bias and rater inconsistency by maximum likelihood.

ITU-T P.913 (06/2021) clause 12 and SUREAL (Li & Bampis, "Recover subjective quality scores from
noisy measurements", DCC 2017; Li et al., "A simple model for subject behavior in subjective
experiments", 2020). Every rating is

    u_ij = psi_j + Delta_i + v_i * X,    X ~ N(0, 1)

psi_j the quality of item j, Delta_i the bias of rater i (lenient > 0, strict < 0) and v_i their
inconsistency (the spread of their noise, in rating units). Unlike z-MOS, which rescales every
rater by their own spread (so an erratic rater and a careful one weigh the same), the maximum-
likelihood item quality weights each rater by 1 / v_i²: a spammer's votes count little, with no
gold answer needed to find out.

Solver: SUREAL's alternating projection (``MLE_CO_AP``, P.913's algorithm), whose fixed point is
the MLE (the stationarity equations of the log-likelihood):

    psi_j   = sum_i w_i (u_ij - Delta_i) / sum_i w_i,   w_i = 1 / (v_i² + 1e-8)
    Delta_i = mean_j (u_ij - psi_j)
    v_i²    = mean_j (u_ij - psi_j - Delta_i)²          (ddof 0: the MLE)

started from psi = plain MOS, until the largest item change is below ``tol``. Every sum over a
rater's or an item's ratings is a sparse matrix-vector product (rater x item CSR matrices of the
ratings and of their count; no dense item x rater matrix), six per iteration: ~10 ms per
iteration and ~0.15 s of CPU per dimension at EvalMi scale (806K ratings, 13 iterations).

Identifiability: psi + c and Delta - c fit equally well. SUREAL fixes it by giving the biases
mean zero over raters. When raters and items fall apart into groups that share nobody (EvalMi's
four blocks of prompts, each with its own 16 raters) each group has its own free constant; here
the biases have mean zero *within each connected group* (one group: exactly SUREAL's rule).

Standard errors from the Fisher information, as SUREAL reports them: item quality
1 / sqrt(sum_i 1 / v_i²), rater bias v_i / sqrt(n_i), inconsistency v_i / sqrt(2 n_i); the 95 % CI
of quality and bias is ±1.95996 standard errors, that of the inconsistency the chi-square
interval SUREAL reports (v_i sqrt(n_i / chi2_{0.975, n_i}), v_i sqrt(n_i / chi2_{0.025, n_i})).
These are conditional on the other parameters (SUREAL's choice): they leave out the uncertainty
of the biases, so with few raters per item they run somewhat narrow (the simulations in
tests/analysis/test_subject_model.py print their coverage).

Degenerate maximum: the likelihood is unbounded. Item qualities that copy one rater's ratings give
that rater v_i = 0 and an infinite likelihood, and with few raters per item and unequal
inconsistencies the iterations can run into it (SUREAL does too: its most consistent rater ends with
v_i ~ 1e-8 and dictates every item). ``floor_share`` (default 0.2) holds every v_i at or above that
share of the median rater's during the iterations; raters above it (all of them, in a study that
does not collapse) are exactly at SUREAL's fixed point, and ``at_floor`` marks the others. Set
``floor_share=0`` for SUREAL's behaviour.

Raters with fewer than two ratings are left out with a reason (their inconsistency is 0 by
construction and would pin their items): the same rule as z-MOS's single-rating exclusion.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

Z95 = 1.95996  # SUREAL's constant
WEIGHT_EPSILON = 1e-8  # SUREAL: w_i = 1 / (v_i² + 1e-8), so a rater with v_i = 0 does not divide by zero
DEFAULT_TOL = 1e-7  # largest change of any item quality in the last iteration, in rating units
MAX_ITER = 1000  # SUREAL's MAX_ITR
MIN_RATINGS = 2
# No rater's inconsistency goes below this share of the median rater's during the iterations (see
# fit_codes: the likelihood has a degenerate maximum at v_i = 0); 0 turns the floor off (SUREAL).
FLOOR_SHARE = 0.2

# A rater is flagged inconsistent when even the low end of their inconsistency's 95 % CI is this
# many times the study's median inconsistency: their noise variance is > 2.25x a typical rater's.
# In the simulations (tests) a uniform-random spammer on a 1-5 scale sits at 2-3x the median and
# careful raters within 0.6-1.4x.
INCONSISTENCY_FACTOR = 1.5
MIN_RATERS_FOR_FLAG = 3


@dataclass
class SubjectModelFit:
    """Arrays of one fit, indexed by the item and rater codes given to :func:`fit_codes`.

    Items or raters without a rating have NaN everywhere. ``component`` numbers the connected
    groups of raters and items (-1: no rating).
    """

    quality: np.ndarray
    quality_std: np.ndarray
    item_ratings: np.ndarray
    bias: np.ndarray
    bias_std: np.ndarray
    inconsistency: np.ndarray
    inconsistency_std: np.ndarray
    inconsistency_ci: tuple[np.ndarray, np.ndarray]
    rater_ratings: np.ndarray
    item_component: np.ndarray
    rater_component: np.ndarray
    components: int
    iterations: int
    converged: bool
    loglikelihood: float
    at_floor: np.ndarray  # raters held at the inconsistency floor (see FLOOR_SHARE)

    @property
    def quality_ci(self) -> tuple[np.ndarray, np.ndarray]:
        return self.quality - Z95 * self.quality_std, self.quality + Z95 * self.quality_std

    @property
    def bias_ci(self) -> tuple[np.ndarray, np.ndarray]:
        return self.bias - Z95 * self.bias_std, self.bias + Z95 * self.bias_std


class Design:
    """Who rated what: the sparse structure and connected groups of a set of (item, rater) codes,
    which every dimension rated on the same rows shares (EvalMi's perception and correspondence
    are two values of one rating), so :func:`fit_codes` builds it once per set of rows."""

    def __init__(self, item: np.ndarray, rater: np.ndarray, n_items: int, n_raters: int) -> None:
        self.item = np.asarray(item, np.int64)
        self.rater = np.asarray(rater, np.int64)
        if len(self.item) != len(self.rater):
            raise ValueError("item and rater must have the same length")
        self.shape = (n_raters, n_items)
        self.n_item = np.bincount(self.item, minlength=n_items).astype(float)
        self.n_rater = np.bincount(self.rater, minlength=n_raters).astype(float)
        self.by_rater = _row_order(self.rater, self.item, self.n_rater, self.shape)
        self.by_item = _row_order(self.item, self.rater, self.n_item, self.shape[::-1])
        order, indices, indptr = self.by_rater
        self.A = csr_matrix((np.ones(len(order)), indices, indptr), shape=self.shape)
        order, indices, indptr = self.by_item
        self.At = csr_matrix((np.ones(len(order)), indices, indptr), shape=self.shape[::-1])
        self._components: tuple | None = None

    def matrices(self, values: np.ndarray) -> tuple[csr_matrix, csr_matrix]:
        """(X, X transposed): the ratings as rater x item and item x rater matrices."""
        order, indices, indptr = self.by_rater
        X = csr_matrix((values[order], indices, indptr), shape=self.shape)
        order, indices, indptr = self.by_item
        Xt = csr_matrix((values[order], indices, indptr), shape=self.shape[::-1])
        return X, Xt

    def components(self) -> tuple[np.ndarray, np.ndarray, int]:
        if self._components is None:
            self._components = _components(self.A, self.n_item > 0, self.n_rater > 0)
        return self._components


def fit_codes(values: np.ndarray, item: np.ndarray, rater: np.ndarray, n_items: int, n_raters: int, *,
              tol: float = DEFAULT_TOL, max_iter: int = MAX_ITER, zero_mean_bias: bool = True,
              floor_share: float = FLOOR_SHARE, design: Design | None = None) -> SubjectModelFit:
    """The subject model of ratings given as integer codes (``item`` in 0..n_items-1, ``rater`` in
    0..n_raters-1, ``values`` finite; the caller drops the rest). ``tol``: stop when no item
    quality moved more than this in an iteration. ``design``: the :class:`Design` of these same
    codes, when several dimensions share it."""
    values = np.asarray(values, float)
    item = np.asarray(item, np.int64)
    rater = np.asarray(rater, np.int64)
    if not (len(values) == len(item) == len(rater)):
        raise ValueError("values, item and rater must have the same length")
    if len(values) and not np.isfinite(values).all():
        raise ValueError("values must be finite (drop missing ratings first)")
    # Every update is a sum over a rater's or an item's ratings: sparse rater x item matrices of the
    # ratings (X) and of their count (A) turn each into one matrix-vector product (duplicate
    # (rater, item) pairs add up, as repeated ratings should).
    if design is None:
        design = Design(item, rater, n_items, n_raters)
    elif design.shape != (n_raters, n_items) or len(design.item) != len(values):
        raise ValueError("the design is not of these codes")
    n_item, n_rater, A, At = design.n_item, design.n_rater, design.A, design.At
    X, Xt = design.matrices(values)  # duplicates stay as entries: products add them
    sum_rater = np.bincount(rater, weights=values, minlength=n_raters)
    square_rater = np.bincount(rater, weights=values * values, minlength=n_raters)
    has_item, has_rater = n_item > 0, n_rater > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        quality = np.where(has_item, np.bincount(item, weights=values, minlength=n_items) / n_item, 0.0)
    psi_sum = A @ quality  # sum of the item qualities over each rater's ratings
    with np.errstate(divide="ignore", invalid="ignore"):
        bias = np.where(has_rater, (sum_rater - psi_sum) / n_rater, 0.0)

    def rater_variance(quality: np.ndarray, bias: np.ndarray, psi_sum: np.ndarray) -> np.ndarray:
        """mean_j (u_ij - psi_j - Delta_i)² per rater, expanded into sums over the rater's ratings:
        sum u² - 2 sum u psi + sum psi² - 2 Delta (sum u - sum psi) + n Delta²."""
        rss = (square_rater - 2 * (X @ quality) + A @ (quality * quality)
               - 2 * bias * (sum_rater - psi_sum) + n_rater * bias * bias)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean_residual = (sum_rater - psi_sum) / n_rater - bias  # 0 up to rounding (SUREAL's nanstd)
            return np.where(has_rater, np.maximum(rss / n_rater - mean_residual**2, 0.0), 0.0)

    iterations, converged = 0, len(values) == 0
    v2 = np.zeros(n_raters)
    floor2 = 0.0
    while not converged and iterations < max_iter:
        v2 = rater_variance(quality, bias, psi_sum)
        if floor_share and has_rater.any():
            # the likelihood is unbounded: an item quality that copies one rater's ratings sends their
            # v_i to 0 and their weight to infinity. A floor at a share of the median v_i stops that
            # runaway and leaves every rater above it (all, in sane data) exactly at SUREAL's MLE.
            floor2 = (floor_share * float(np.median(np.sqrt(v2[has_rater])))) ** 2
            v2 = np.where(has_rater, np.maximum(v2, floor2), 0.0)
        w = 1.0 / (v2 + WEIGHT_EPSILON)
        with np.errstate(divide="ignore", invalid="ignore"):
            new = np.where(has_item, (Xt @ w - At @ (w * bias)) / (At @ w), 0.0)
        change = np.abs(new - quality)
        quality = new
        psi_sum = A @ quality
        with np.errstate(divide="ignore", invalid="ignore"):
            bias = np.where(has_rater, (sum_rater - psi_sum) / n_rater, 0.0)
        iterations += 1
        converged = not change.size or float(change.max()) < tol

    # standard errors at the v_i of the last iteration (SUREAL computes them after its loop from the
    # v_i of its last iteration too)
    v = np.sqrt(v2)
    with np.errstate(divide="ignore", invalid="ignore"):
        quality_std = 1.0 / np.sqrt(At @ (1.0 / np.where(has_rater, v2, 1.0)))
        bias_std = v / np.sqrt(n_rater)
        inconsistency_std = v / np.sqrt(2.0 * n_rater)
        dof = np.where(has_rater, n_rater, 1.0)
        low = v * np.sqrt(dof / stats.chi2.ppf(0.975, dof))
        high = v * np.sqrt(dof / stats.chi2.ppf(0.025, dof))
        final_v2 = rater_variance(quality, bias, psi_sum)
        loglik = float(np.sum((-0.5 * n_rater * np.log(2 * np.pi * v2) - final_v2 * n_rater / (2 * v2))[has_rater]))
    at_floor = has_rater & (v2 <= floor2) & (floor2 > 0)
    quality[~has_item] = np.nan
    quality_std[~has_item] = np.nan
    bias[~has_rater] = np.nan
    for array in (v, bias_std, inconsistency_std, low, high):
        array[~has_rater] = np.nan

    item_component, rater_component, components = design.components()
    if zero_mean_bias and components:
        # mean of the biases per connected group (unweighted over raters, as SUREAL) moves to the items
        per_group = np.bincount(rater_component[has_rater], minlength=components)
        shift = np.bincount(rater_component[has_rater], weights=bias[has_rater], minlength=components) / per_group
        bias[has_rater] -= shift[rater_component[has_rater]]
        quality[has_item] += shift[item_component[has_item]]
    return SubjectModelFit(
        quality=quality, quality_std=quality_std, item_ratings=n_item.astype(np.int64), bias=bias, bias_std=bias_std,
        inconsistency=v, inconsistency_std=inconsistency_std, inconsistency_ci=(low, high),
        rater_ratings=n_rater.astype(np.int64), item_component=item_component, rater_component=rater_component,
        components=components, iterations=iterations, converged=converged, loglikelihood=loglik,
        at_floor=at_floor,
    )


def _row_order(row: np.ndarray, column: np.ndarray, per_row: np.ndarray, shape: tuple[int, int]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, indices, indptr) of a CSR matrix with entries at (row, column): the entries sorted by
    a stable sort on the row codes (a radix sort when they fit 16 bits: twice as fast as scipy's
    COO conversion at 806K ratings); its data is ``values[order]``."""
    small = np.uint16 if shape[0] <= np.iinfo(np.uint16).max else np.int64
    order = np.argsort(row.astype(small), kind="stable")
    index_type = np.int32 if max(shape) < np.iinfo(np.int32).max else np.int64
    indptr = np.concatenate([[0], np.cumsum(per_row.astype(np.int64))]).astype(index_type)
    return order, column[order].astype(index_type), indptr


def _components(A: csr_matrix, has_item: np.ndarray, has_rater: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Connected groups of the rater-item graph (``A``: raters x items): (group per item, per rater,
    number of groups), -1 for items and raters without a rating. The graph's nodes are the raters
    then the items; a rater's row lists its items (``A``'s own structure, shifted), and undirected
    search needs no edge back."""
    n_raters, n_items = A.shape
    graph = csr_matrix((np.ones(A.nnz), A.indices + n_raters,  # float64: csgraph would convert
                        np.concatenate([A.indptr, np.full(n_items, A.indptr[-1])])),
                       shape=(n_raters + n_items, n_raters + n_items))
    _, labels = connected_components(graph, directed=False)
    present = np.concatenate([has_rater, has_item])
    out = np.full(n_raters + n_items, -1)
    if present.any():
        _, dense = np.unique(labels[present], return_inverse=True)
        out[present] = dense
    return out[n_raters:], out[:n_raters], int(out.max(initial=-1)) + 1


@dataclass
class SubjectModelResult:
    """A fit with labels.

    ``items``: one row per item (indexed like the item keys: ``model, item`` when the ratings have
    a model) with ``quality, std, ci_low, ci_high, n``. ``raters``: indexed by rater with ``bias,
    bias_std, bias_ci_low, bias_ci_high, inconsistency, inconsistency_std, inconsistency_ci_low,
    inconsistency_ci_high, n, inconsistent`` (the screening flag, see :func:`inconsistent_raters`).
    ``excluded``: rater -> why left out.
    """

    items: pd.DataFrame
    raters: pd.DataFrame
    fit: SubjectModelFit
    excluded: dict[str, str] = field(default_factory=dict)

    def model_table(self) -> pd.DataFrame:
        """Per model (needs a ``model`` level): mean item quality, the Student-t 95 % CI across the
        model's items (items as the sampling unit, as the z-MOS CI) and the standard error of that
        mean from the Fisher information alone (the raters' noise, prompts held fixed)."""
        if "model" not in self.items.index.names:
            raise ValueError("the ratings had no model column")
        grouped = self.items.groupby(level="model", sort=True, observed=True)
        mean = grouped["quality"].mean()
        sd = grouped["quality"].std(ddof=1)
        n = grouped["quality"].count()
        with np.errstate(divide="ignore", invalid="ignore"):
            half = stats.t.ppf(0.975, np.where(n >= 2, n - 1, np.nan)) * sd / np.sqrt(n)
        fisher = np.sqrt((self.items["std"] ** 2).groupby(level="model", sort=True, observed=True).sum()) / n
        return pd.DataFrame({"quality": mean, "ci_low": mean - half, "ci_high": mean + half,
                             "std_fisher": fisher, "items": n})


def subject_model(ratings: pd.DataFrame, *, score: str = "score", rater: str = "rater", item: str = "item",
                  tol: float = DEFAULT_TOL, max_iter: int = MAX_ITER, floor_share: float = FLOOR_SHARE,
                  codes=None, designs: dict | None = None) -> SubjectModelResult:
    """Fit the subject model to a long frame (``rater``, ``item``, optionally ``model``, and the
    ``score`` column). Items are keyed by ``(model, item)`` when a model column exists. Rows with a
    missing score, rater or item are dropped; raters with fewer than two ratings are excluded.
    ``codes``: the frame's :class:`~analysis.science.codes.RatingCodes`, to not code the labels again.
    ``designs``: a dict kept across calls on the same frame and codes (several score columns): fits
    on the same rows share one :class:`Design`."""
    values = ratings[score].to_numpy(float)
    if codes is not None:
        codes.check(ratings, rater=rater, item=item)
        rater_code, rater_names = codes.rater, codes.rater_names
        unit, n_units = codes.unit, codes.n_units
        keys = ["model", item] if codes.model is not None else [item]
    else:
        rater_code, rater_names = pd.factorize(ratings[rater], sort=True)
        keys = [c for c in ("model",) if c in ratings.columns and c != item] + [item]
        unit = np.zeros(len(ratings), np.int64)
        for key in keys:
            key_code, names = pd.factorize(ratings[key], sort=True)
            unit = np.where((unit < 0) | (key_code < 0), -1, unit * max(len(names), 1) + key_code)
        unit = np.where(unit < 0, -1, pd.factorize(unit, sort=True)[0])
        n_units = int(unit.max(initial=-1)) + 1
    rows = np.isfinite(values) & (rater_code >= 0) & (unit >= 0)
    counts = np.bincount(rater_code[rows], minlength=len(rater_names))
    few = (counts > 0) & (counts < MIN_RATINGS)
    excluded = {str(rater_names[k]): "only one rating: inconsistency undefined, left out of the subject model"
                for k in np.flatnonzero(few)}
    if few.any():
        rows &= ~few[np.maximum(rater_code, 0)]
    design = None
    if designs is not None:
        key = (n_units, len(rater_names), len(rows), np.packbits(rows).tobytes())
        design = designs.get(key)
        if design is None:
            design = designs[key] = Design(unit[rows], rater_code[rows], n_units, len(rater_names))
    fit = fit_codes(values[rows], unit[rows], rater_code[rows], n_units, len(rater_names), tol=tol,
                    max_iter=max_iter, floor_share=floor_share, design=design)

    rated = fit.item_ratings > 0
    first = np.full(n_units, -1)
    positions = np.flatnonzero(rows)
    first[unit[positions][::-1]] = positions[::-1]  # each item's first rating
    first = first[rated]
    if codes is not None:  # labels from the codes: no pass over the 1.6M-row label columns
        parts = [(codes.model, codes.model_names)] if codes.model is not None else []
        parts.append((codes.item, codes.item_names))
        if len(parts) > 1:
            index = pd.MultiIndex(levels=[names for _, names in parts], codes=[c[first] for c, _ in parts],
                                  names=keys, verify_integrity=False)
        else:
            index = pd.Index(codes.item_names.take(codes.item[first]), name=item)
    else:
        columns = [ratings[k].take(first).to_numpy() for k in keys]
        index = (pd.MultiIndex.from_arrays(columns, names=keys) if len(keys) > 1
                 else pd.Index(columns[0], name=keys[0]))
    low, high = fit.quality_ci
    items = pd.DataFrame({"quality": fit.quality[rated], "std": fit.quality_std[rated], "ci_low": low[rated],
                          "ci_high": high[rated], "n": fit.item_ratings[rated]}, index=index)

    present = fit.rater_ratings > 0
    bias_low, bias_high = fit.bias_ci
    raters = pd.DataFrame({
        "bias": fit.bias, "bias_std": fit.bias_std, "bias_ci_low": bias_low, "bias_ci_high": bias_high,
        "inconsistency": fit.inconsistency, "inconsistency_std": fit.inconsistency_std,
        "inconsistency_ci_low": fit.inconsistency_ci[0], "inconsistency_ci_high": fit.inconsistency_ci[1],
        "n": fit.rater_ratings, "at_floor": fit.at_floor,
    }, index=pd.Index(np.asarray(rater_names, dtype=object), name=rater))[present]
    raters["inconsistent"] = inconsistent_raters(raters)
    return SubjectModelResult(items=items, raters=raters, fit=fit, excluded=excluded)


def inconsistent_raters(raters: pd.DataFrame, *, factor: float = INCONSISTENCY_FACTOR) -> pd.Series:
    """The no-gold screening signal: True where the low end of a rater's inconsistency CI exceeds
    ``factor`` × the median inconsistency of the raters (needs :data:`MIN_RATERS_FOR_FLAG`)."""
    if len(raters) < MIN_RATERS_FOR_FLAG:
        return pd.Series(False, index=raters.index)
    median = float(np.nanmedian(raters["inconsistency"]))
    return (raters["inconsistency_ci_low"] > factor * median).fillna(False).astype(bool)


def zmos_items(ratings: pd.DataFrame, *, score: str = "score", rater: str = "rater", item: str = "item") -> pd.Series:
    """Plain z-MOS per item on the z scale (mean over raters of (u - mu_i) / sigma_i, ddof 1), for the
    comparisons in tests and planning; the report's z-MOS is :mod:`analysis.science.zmos` (0-100)."""
    frame = ratings.dropna(subset=[score])
    grouped = frame.groupby(rater)[score]
    z = (frame[score] - grouped.transform("mean")) / grouped.transform("std")
    return z.groupby(frame[item]).mean()
