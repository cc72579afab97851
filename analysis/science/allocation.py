"""Adaptive allocation: which units should the next raters get, and why. No Django.

Input is the current state of a study as arrays (one entry per unit, models as integer codes):
ratings so far, the unit's estimate and its standard error (from the subject model's Fisher
information, :mod:`analysis.science.subject_model`, or z-MOS's pooled residual spread). Output is a
ranked list of units plus a recorded reason per unit, so the assignment engine can walk the list
(skipping units a rater already saw, honouring quotas and leases) and store every decision for
audit and replay.

Rules, in order:

1. a unit at its ``cap`` stops;
2. a unit whose CI half-width (fixed-level, ``1.96 std``) reached ``target_halfwidth`` stops
   (item level: a stopping rule for the allocation, not a published verdict);
3. a unit of a *settled* model stops: every adjacent pair the model is in is separated or tied
   (:mod:`analysis.science.stopping`, anytime-valid, so deciding after every batch is sound);
4. units below ``min_ratings`` (burn-in: every unit needs a first estimate) come first, fewest
   ratings first;
5. the rest by the variance one more rating removes, ``std² / (n + 1)`` (least certain first,
   so within a model the least-rated units go first and a model's ratings spread over its
   prompts: its mean's variance falls fastest that way), times the model's weight:

   * ``focus="uncertain"`` (default): the largest, among the model's open adjacent pairs, chance
     that the pair's order is wrong, Φ(-|gap| / std) (plain fixed-n normal: where effort goes is
     not a verdict; close and uncertain pairs first, however far from a verdict);
   * ``focus="ranking"``: the expected number of wrongly ordered pairs that the variance removes
     (:func:`ranking_weight`), over *all* the model's pairs as Kendall τ counts them: the slope of
     Φ(-|gap| / s) with respect to the pair's variance, averaged over its true gap
     (:func:`misorder_slope`), over the model's rated units squared;
   * ``focus="cheapest"``: the largest, among its open adjacent pairs, nearness to an
     (anytime-valid) verdict, n / (n + extra) with ``extra`` the forecast ratings to settle it
     (:func:`analysis.science.stopping.ratings_to_settle`; a pair that may never settle keeps a
     floor of 0.01): pairs that a few more ratings will settle go first, near-ties last.

   On EvalMi-50K perception truth (``python -m analysis.science.simulation --prompts 30 --models 12
   --fixed 4 8 --shares 0.25 0.4 0.6 --seeds 10 … 89 --cap 8 --batches 10 --focus F``) Kendall τ
   at 25 / 40 / 60 % of the 8-per-unit budget: uncertain 0.781 / 0.835 / 0.870, ranking 0.784 /
   0.828 / 0.857, cheapest (the default until 2026-11-24) 0.761 / 0.818 / 0.849 (standard errors
   ~0.008); fixed 4/unit (50 %) 0.842, fixed 8/unit 0.876. "cheapest" separates about twice as
   many adjacent pairs (verdicts) for a lower τ.

Ties are broken by a seeded random draw, so the ranking is deterministic given the seed. Cost:
O(units) (vectorised numpy; with ``limit`` the top is found by ``argpartition``, not a full sort).

Pairwise studies (:func:`next_pairs`): candidates are comparisons (model a vs model b on a
prompt); the next are those with the most information about the ranking, the chance the pair's
order is wrong Φ(-|Δ| / s) times the Bradley–Terry Fisher information p (1 - p) of one judgement,
shared out over how often the comparison was already shown; a comparison the rater saw is never
offered again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from analysis.science import stopping

Z95 = 1.959964
REASONS = (
    "burn-in: below the minimum ratings",  # 0
    "open model: least certain unit first",  # 1
    "stopped: at its cap",  # 2
    "stopped: item CI half-width at target",  # 3
    "stopped: model settled (its adjacent pairs are separated or tied)",  # 4
    "skipped: this rater already rated it",  # 5
)
BURN_IN, OPEN_MODEL, AT_CAP, AT_TARGET, MODEL_SETTLED, SEEN = range(6)
BURN_IN_BOOST = 1e12  # burn-in units rank above every open-model unit
CHEAPEST_FLOOR = 0.01  # focus="cheapest": a pair that may never settle still gets the leftovers


@dataclass(frozen=True)
class UnitState:
    """Per unit: ``model`` code (0..n_models-1), ratings ``n``, ``estimate`` and its standard error
    ``std`` (NaN when unknown: ranked as most uncertain), and the ``cap`` on its ratings."""

    model: np.ndarray
    n: np.ndarray
    estimate: np.ndarray
    std: np.ndarray
    cap: np.ndarray | int

    @classmethod
    def of(cls, model, n, estimate, std, cap) -> "UnitState":
        return cls(model=np.asarray(model, np.int64), n=np.asarray(n, float), estimate=np.asarray(estimate, float),
                   std=np.asarray(std, float), cap=cap)


@dataclass(frozen=True)
class ModelState:
    """Per model code: ``estimate`` (mean of its units' estimates), its standard error ``std``
    (√Σ std² / units: the raters' noise, the model's prompts held fixed, as the subject model's
    ``std_fisher``; NaN when a unit's std is unknown) and ``n`` ratings."""

    estimate: np.ndarray
    std: np.ndarray
    n: np.ndarray


def model_state(units: UnitState, n_models: int) -> ModelState:
    """Model means over their rated units (NaN estimates left out; an unrated model is NaN)."""
    rated = np.isfinite(units.estimate)
    model = units.model[rated]
    count = np.bincount(model, minlength=n_models).astype(float)
    total = np.bincount(model, weights=units.estimate[rated], minlength=n_models)
    var = np.bincount(model, weights=np.nan_to_num(units.std[rated] ** 2, nan=0.0), minlength=n_models)
    unknown = np.bincount(model, weights=~np.isfinite(units.std[rated]), minlength=n_models) > 0
    n = np.bincount(units.model, weights=units.n, minlength=n_models)
    with np.errstate(divide="ignore", invalid="ignore"):
        std = np.where(unknown, np.nan, np.sqrt(var) / count)  # a unit of unknown std: the model's too
        return ModelState(estimate=total / count, std=std, n=n)


@dataclass(frozen=True)
class Allocation:
    """``order``: eligible unit indices, best first (at most ``limit``). ``priority`` (-inf when the
    unit takes no ratings) and ``reason`` (index into :data:`REASONS`) for every unit.
    ``verdicts``: the model pairs behind the model-level rule; ``settled``: per model."""

    order: np.ndarray
    priority: np.ndarray
    reason: np.ndarray
    verdicts: stopping.PairVerdicts
    settled: np.ndarray

    def records(self, units: np.ndarray | None = None) -> list[dict]:
        """Audit rows for the given unit indices (default: the ranked list)."""
        chosen = self.order if units is None else np.asarray(units)
        return [{"unit": int(u), "priority": float(self.priority[u]), "reason": REASONS[self.reason[u]]}
                for u in chosen]

    def reason_counts(self) -> dict[str, int]:
        counts = np.bincount(self.reason, minlength=len(REASONS))
        return {REASONS[k]: int(c) for k, c in enumerate(counts) if c}


def _jitter(size: int, seed: int) -> np.ndarray:
    """A seeded tie-breaker in [0, 1e-9): ranks equal priorities in a reproducible random order."""
    return np.random.default_rng(seed).random(size) * 1e-9


def _top(priority: np.ndarray, eligible: np.ndarray, limit: int | None) -> np.ndarray:
    candidates = np.flatnonzero(eligible)
    if limit is not None and limit <= 0:
        return candidates[:0]
    if limit is not None and limit < len(candidates):
        part = np.argpartition(-priority[candidates], limit - 1)[:limit]
        candidates = candidates[part]
    return candidates[np.argsort(-priority[candidates], kind="stable")]


def misorder_slope(z) -> np.ndarray:
    """E[φ(X) |X|] for X ~ N(z, 1): how fast a pair's chance of being ranked the wrong way round
    falls as its variance falls (∂Φ(-|δ|/s)/∂s² = φ(|δ|/s) |δ|/s / (2 s²)), averaged over the
    pair's true gap δ ~ N(estimated gap, s²) (closed form). 1/2π at z = 0, 0.109 at 2, 0.010 at 4:
    a pair whose order is already clear takes nothing, a coin flip keeps a share."""
    z = np.abs(np.asarray(z, float))
    half = z / 2.0
    return (np.exp(-half * z / 2.0) / (2.0 * np.pi)
            * (np.exp(-half * z / 2.0) + np.sqrt(np.pi) * half * (1.0 - 2.0 * stats.norm.cdf(-z / np.sqrt(2.0)))))


def ranking_weight(models: ModelState, units: UnitState, n_models: int) -> np.ndarray:
    """Per model (``focus="ranking"``): the expected number of wrongly ordered model pairs (all
    pairs, as Kendall τ counts them) removed per unit of variance taken off the model's mean,
    Σ_j misorder_slope(|gap_mj| / s_mj) / (2 s_mj²), divided by the model's rated units squared
    (a unit's variance reaches the model mean as std² / units²). Plain (fixed-n) normal errors:
    this steers effort only; verdicts stay anytime-valid. A model of unknown std: the largest
    known weight (1 when none is known)."""
    estimate, std = models.estimate, models.std
    with np.errstate(invalid="ignore", divide="ignore"):
        pair_var = std[:, None] ** 2 + std[None, :] ** 2
        z = np.abs(estimate[:, None] - estimate[None, :]) / np.sqrt(pair_var)
        term = misorder_slope(z) / (2.0 * pair_var)
    np.fill_diagonal(term, 0.0)
    term = np.where(np.isfinite(estimate)[:, None] & np.isfinite(estimate)[None, :], term, 0.0)
    weight = np.nansum(np.where(np.isfinite(term), term, np.nan), axis=1)
    rated = np.bincount(units.model[np.isfinite(units.estimate)], minlength=n_models).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = weight / rated**2
    known = np.isfinite(std) & (rated > 0) & np.isfinite(weight)
    fill = float(weight[known].max()) if known.any() else 1.0
    return np.where(known, weight, fill)


def allocate(units: UnitState, *, n_models: int | None = None, models: ModelState | None = None,
             target_halfwidth: float | None = None, min_ratings: int = 1, margin: float = 0.0,
             alpha: float = stopping.ALPHA, n_opt=None, anytime: bool = True, seen: np.ndarray | None = None,
             seed: int = 0, limit: int | None = None, focus: str = "uncertain") -> Allocation:
    """Rank units for the next ratings (see the module docstring). ``models``: per-model state
    (default: :func:`model_state` of ``units``). ``n_opt``: the planned ratings per model pair that
    the anytime verdicts are tuned to (needed when ``anytime``). ``seen``: per unit, True when the
    rater asking already rated it (those are skipped with their reason). ``limit``: how many to
    return."""
    n_models = int(units.model.max(initial=-1)) + 1 if n_models is None else n_models
    models = model_state(units, n_models) if models is None else models
    size = len(units.model)
    cap = np.broadcast_to(np.asarray(units.cap, float), (size,))
    verdicts = stopping.pair_verdicts(models.estimate, models.std, models.n, margin=margin, alpha=alpha, n_opt=n_opt,
                                      anytime=anytime)
    settled = verdicts.settled_models(n_models)
    # the model's weight, the largest over its open pairs: the chance the pair's order is wrong
    # ("uncertain"), or how near the pair is to a verdict ("cheapest")
    with np.errstate(divide="ignore", invalid="ignore"):
        wrong = stats.norm.cdf(-np.abs(verdicts.diff) / verdicts.std)
    wrong = np.where(verdicts.open, np.nan_to_num(wrong, nan=0.5), 0.0)
    if focus == "cheapest":
        # the open pairs closest to a verdict first: ratings already there over those still needed
        extra = stopping.ratings_to_settle(verdicts.diff, verdicts.std, verdicts.n, margin=margin, alpha=alpha,
                                           n_opt=n_opt, anytime=anytime)
        with np.errstate(divide="ignore", invalid="ignore"):
            near = np.where(np.isfinite(extra), verdicts.n / (verdicts.n + extra), 0.0)
        wrong = np.where(verdicts.open, np.maximum(np.nan_to_num(near, nan=1.0), CHEAPEST_FLOOR), 0.0)
    elif focus not in ("uncertain", "ranking"):
        raise ValueError(f"unknown focus {focus!r}")
    if focus == "ranking":
        weight = ranking_weight(models, units, n_models)
    else:
        weight = np.zeros(n_models)
        np.maximum.at(weight, verdicts.a, wrong)
        np.maximum.at(weight, verdicts.b, wrong)

    std = np.where(np.isfinite(units.std), units.std, np.inf)
    with np.errstate(invalid="ignore"):
        gain = np.where(np.isinf(std), BURN_IN_BOOST, std**2 / (units.n + 1.0))
    priority = gain * weight[units.model]
    burn_in = units.n < min_ratings
    priority = np.where(burn_in, BURN_IN_BOOST * (1.0 + 1.0 / (1.0 + units.n)), priority)
    priority = priority + _jitter(size, seed)

    reason = np.full(size, OPEN_MODEL, np.int64)
    reason[burn_in] = BURN_IN
    at_target = (Z95 * std <= target_halfwidth) if target_halfwidth else np.zeros(size, bool)
    stopped_model = settled[units.model] & ~burn_in
    reason[stopped_model] = MODEL_SETTLED
    reason[at_target & ~burn_in] = AT_TARGET
    reason[units.n >= cap] = AT_CAP
    if seen is not None:
        reason[np.asarray(seen, bool) & (reason <= OPEN_MODEL)] = SEEN
    eligible = reason <= OPEN_MODEL
    priority = np.where(eligible, priority, -np.inf)
    return Allocation(order=_top(priority, eligible, limit), priority=priority, reason=reason, verdicts=verdicts,
                      settled=settled)


PAIR_REASONS = (
    "close and uncertain pair: most ranking information",  # 0
    "skipped: this rater already saw the pair",  # 1
    "stopped: at its cap",  # 2
)


@dataclass(frozen=True)
class PairAllocation:
    order: np.ndarray
    priority: np.ndarray
    reason: np.ndarray

    def records(self, chosen: np.ndarray | None = None) -> list[dict]:
        chosen = self.order if chosen is None else np.asarray(chosen)
        return [{"comparison": int(c), "priority": float(self.priority[c]), "reason": PAIR_REASONS[self.reason[c]]}
                for c in chosen]


def next_pairs(model_a, model_b, score, std, *, shown=None, seen=None, cap: float | None = None, seed: int = 0,
               limit: int | None = None) -> PairAllocation:
    """Rank candidate comparisons (``model_a``/``model_b`` codes per candidate) given per-model
    Bradley–Terry log-strengths ``score`` and their standard errors ``std``. ``shown``: times each
    candidate was already judged (its information is shared out over them); ``seen``: True for
    candidates this rater already saw (never offered again: pass the model pair's or the
    comparison's history, as the study defines "the same pair"); ``cap``: most judgements per
    candidate."""
    a, b = np.asarray(model_a, np.int64), np.asarray(model_b, np.int64)
    score, std = np.asarray(score, float), np.asarray(std, float)
    delta = score[a] - score[b]
    s = np.sqrt(np.nan_to_num(std[a], nan=1e3) ** 2 + np.nan_to_num(std[b], nan=1e3) ** 2)
    p = 1.0 / (1.0 + np.exp(-delta))
    with np.errstate(divide="ignore", invalid="ignore"):
        wrong = np.where(s > 0, stats.norm.cdf(-np.abs(delta) / s), 0.0)
    shown = np.zeros(len(a)) if shown is None else np.asarray(shown, float)
    priority = wrong * p * (1 - p) / (1.0 + shown) + _jitter(len(a), seed)
    reason = np.zeros(len(a), np.int64)
    if cap is not None:
        reason[shown >= cap] = 2
    if seen is not None:
        reason[np.asarray(seen, bool)] = 1
    eligible = reason == 0
    priority = np.where(eligible, priority, -np.inf)
    return PairAllocation(order=_top(priority, eligible, limit), priority=priority, reason=reason)
