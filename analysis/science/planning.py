"""Planning a study before launch: how many raters per item and how many items. No Django.

From a pilot (a study's own first ratings) or a published MOS sheet (EvalMi-50K), estimate

* ``noise_sd``: the spread of one rating around its item's quality (rating units): the root mean
  square of the raters' inconsistencies in the subject model (:mod:`analysis.science.subject_model`);
* ``diff_sd``: the spread over prompts of the paired difference between two neighbouring models'
  item scores (median over adjacent pairs in the ranking), split into its true part and the
  measurement noise of the pilot's ``k`` raters (2 noise_sd² / k), so it can be re-projected to
  another number of raters;
* the pilot's Krippendorff α CI width and the number of items it rests on,

and answer:

* raters per item for a target item CI half-width: the smallest k with
  t(0.975, k - 1) · noise_sd / √k ≤ half-width;
* items (prompts) per model to separate a target gap between two models at 5 % with 80 % power in
  the leaderboard's paired comparison (paired t-test power from the noncentral t, with
  diff_sd² = true² + 2 noise_sd² / k at the planned k);
* items for a target α CI width: a bootstrap CI over items narrows as 1 / √items, so
  n = n_pilot · (width_pilot / width_target)².
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from analysis.science.agreement import krippendorff_alpha, reliability_matrix
from analysis.science.subject_model import subject_model

MAX_RATERS = 200
MAX_ITEMS = 1_000_000


@dataclass(frozen=True)
class PlanInputs:
    source: str
    noise_sd: float | None = None  # one rating around its item's quality, rating units
    diff_sd_true: float | None = None  # paired model difference over prompts, without rating noise
    diff_sd_observed: float | None = None  # as measured (with the pilot's rater noise)
    pilot_raters_per_item: float | None = None
    alpha_ci_width: float | None = None
    alpha_items: int | None = None


def raters_per_item(noise_sd: float, halfwidth: float, *, confidence: float = 0.95) -> int | None:
    """Smallest k ≥ 2 whose Student-t half-width t · noise_sd / √k reaches ``halfwidth``; None when
    it would take more than :data:`MAX_RATERS`."""
    if not (noise_sd > 0 and halfwidth > 0):
        raise ValueError("noise_sd and halfwidth must be positive")
    q = 0.5 + confidence / 2
    for k in range(2, MAX_RATERS + 1):
        if stats.t.ppf(q, k - 1) * noise_sd / math.sqrt(k) <= halfwidth:
            return k
    return None


def paired_power(n: int, effect: float, *, alpha: float = 0.05) -> float:
    """Power of a two-sided paired t-test with ``n`` pairs at standardised effect ``effect``."""
    df = n - 1
    crit = stats.t.ppf(1 - alpha / 2, df)
    nc = effect * math.sqrt(n)
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


def items_for_gap(diff_sd: float, gap: float, *, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Smallest number of paired items (prompts) whose paired t-test detects ``gap`` with ``power``."""
    if not (diff_sd > 0 and gap > 0):
        raise ValueError("diff_sd and gap must be positive")
    effect = gap / diff_sd
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    n = max(3, int(math.ceil((z / effect) ** 2)))  # normal approximation, then step up under the t
    while n <= MAX_ITEMS and paired_power(n, effect, alpha=alpha) < power:
        n += max(1, n // 50)
    if n > MAX_ITEMS:
        return None
    while n > 3 and paired_power(n - 1, effect, alpha=alpha) >= power:  # the smallest such n
        n -= 1
    return n


def items_for_alpha_width(width_now: float, items_now: int, width_target: float) -> int:
    if not (width_now > 0 and width_target > 0 and items_now > 0):
        raise ValueError("widths and items must be positive")
    return int(math.ceil(items_now * (width_now / width_target) ** 2))


def diff_sd_at(inputs: PlanInputs, raters: float) -> float | None:
    """The paired-difference spread an item score from ``raters`` raters would have."""
    if inputs.diff_sd_true is None:
        return inputs.diff_sd_observed
    noise = 2 * inputs.noise_sd**2 / raters if inputs.noise_sd else 0.0
    return math.sqrt(inputs.diff_sd_true**2 + noise)


def adjacent_diff_sd(items: pd.DataFrame, *, score: str = "score") -> float | None:
    """Median over neighbouring models (ranked by mean) of the sd over shared prompts of their
    paired item-score difference. ``items``: ``model, instance, <score>``."""
    wide = items.pivot_table(index="instance", columns="model", values=score, aggfunc="mean")
    order = wide.mean(axis=0).sort_values(ascending=False).index
    sds = []
    for a, b in zip(order[:-1], order[1:]):
        pair = wide[[a, b]].dropna()
        if len(pair) >= 3:
            sds.append(float((pair[a] - pair[b]).std(ddof=1)))
    return float(np.median(sds)) if sds else None


def inputs_from_ratings(ratings: pd.DataFrame, dim: str, *, n_boot: int = 200, seed: int = 0) -> PlanInputs:
    """A pilot: the study's own ratings (``rater, item, model, instance, <dim>``) on one dimension."""
    frame = ratings.dropna(subset=[dim])
    if frame["rater"].nunique() < 2 or frame["item"].nunique() < 3:
        return PlanInputs(source=f"pilot: {len(frame)} ratings, too few to plan from")
    fitted = subject_model(frame[["rater", "item", "model", dim]], score=dim)
    v = fitted.raters["inconsistency"].to_numpy(float)
    noise = float(np.sqrt(np.mean(v[np.isfinite(v)] ** 2)))
    per_item = float(fitted.items["n"].mean())
    instances = frame.drop_duplicates("item").set_index("item")["instance"]
    items = fitted.items.reset_index()
    items["instance"] = items["item"].map(instances)
    observed = adjacent_diff_sd(items, score="quality")
    true = math.sqrt(max(observed**2 - 2 * noise**2 / per_item, 0.0)) if observed is not None else None
    estimate = krippendorff_alpha(reliability_matrix(frame, score=dim), level="interval", n_boot=n_boot, seed=seed)
    width = (estimate.ci95[1] - estimate.ci95[0]) if estimate.ci95 else None
    return PlanInputs(
        source=f"this study's {len(frame):,} ratings on {dim} ({frame['item'].nunique():,} items, "
               f"{frame['rater'].nunique()} raters) as a pilot",
        noise_sd=noise, diff_sd_true=true, diff_sd_observed=observed, pilot_raters_per_item=per_item,
        alpha_ci_width=width, alpha_items=int(frame["item"].nunique()),
    )


def inputs_from_mos(mos: pd.DataFrame, dim: str, *, source: str) -> PlanInputs:
    """Published per-image MOS (``model, prompt_number`` or ``instance``, ``<dim>``): the spread of
    paired model differences only (no per-rater data: no noise split, no α)."""
    items = mos.rename(columns={"prompt_number": "instance"})[["model", "instance", dim]]
    return PlanInputs(source=source, diff_sd_observed=adjacent_diff_sd(items, score=dim))


@dataclass(frozen=True)
class Plan:
    inputs: PlanInputs
    raters_per_item: int | None
    items_for_gap: int | None
    items_for_alpha: int | None
    diff_sd_used: float | None


def plan(inputs: PlanInputs, *, halfwidth: float | None = None, gap: float | None = None,
         alpha_width: float | None = None, raters: int | None = None) -> Plan:
    """Every answer the inputs allow; ``raters`` (default: the one the half-width needs, else the
    pilot's) sets the item-score noise in the gap calculation."""
    k = raters_per_item(inputs.noise_sd, halfwidth) if inputs.noise_sd and halfwidth else None
    planned = raters or k or inputs.pilot_raters_per_item
    diff = diff_sd_at(inputs, planned) if planned else inputs.diff_sd_observed
    n_gap = items_for_gap(diff, gap) if diff and gap else None
    n_alpha = (items_for_alpha_width(inputs.alpha_ci_width, inputs.alpha_items, alpha_width)
               if inputs.alpha_ci_width and inputs.alpha_items and alpha_width else None)
    return Plan(inputs=inputs, raters_per_item=k, items_for_gap=n_gap, items_for_alpha=n_alpha, diff_sd_used=diff)
