"""Planning from another study or from published MOS: variance components in, sample sizes out.
No Django.

:mod:`analysis.science.planning` plans from a study's own pilot ratings. This module plans before
any rating exists, from

* a finished study's subject model (:func:`components_from_fit`: item qualities, rater biases and
  inconsistencies), or
* a published per-item MOS sheet such as EvalMi-50K's (:func:`components_from_mos`), which has no
  per-rater data: the rater noise ``noise_sd`` (and ``bias_sd``) are inputs, e.g. from a finished
  study on the same scale, and the sheet's ``raters_per_item`` says how much of its spread is noise;

and answers with :func:`analysis.science.planning.plan` (raters per item for an item CI half-width,
items per model for a model gap at 5 % / 80 % power) plus the items for a target Krippendorff α CI
width without a pilot bootstrap: interval α of single ratings is close to the one-way intraclass
correlation ρ = item_var / (item_var + bias_sd² + noise_sd²), whose large-sample variance with k
raters on n items is 2 (1 - ρ)² (1 + (k - 1) ρ)² / (k (k - 1) (n - 1)) (Fisher 1925; Donner &
Koval 1980), so the 95 % CI width is 2 · 1.96 · √that.

Units are those of the inputs (rating points, or MOS points for a 0-100 sheet).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.science import planning

Z95 = 1.959964


@dataclass(frozen=True)
class VarianceComponents:
    """``item_sd``: spread of true item quality within a model (pooled over models); ``noise_sd``:
    one rating around its item's quality plus its rater's bias; ``bias_sd``: spread of rater biases;
    ``diff_sd_true``: spread over prompts of adjacent models' paired true difference; ``items``:
    items per model in the source."""

    source: str
    item_sd: float
    noise_sd: float
    bias_sd: float = 0.0
    diff_sd_true: float | None = None
    items: int | None = None


def _within_model_sd(items: pd.DataFrame, score: str) -> float:
    centred = items[score] - items.groupby("model")[score].transform("mean")
    return float(np.sqrt(np.nanmean(centred.to_numpy(float) ** 2)))


def components_from_fit(items: pd.DataFrame, raters: pd.DataFrame, *, source: str = "a finished study",
                        score: str = "quality") -> VarianceComponents:
    """From a subject-model fit: ``items`` with ``model, instance, quality`` (and ``std``, the
    Fisher standard error), ``raters`` with ``bias, inconsistency``. The fitted item spread has the
    fit's own noise taken out (mean std²)."""
    noise = float(np.sqrt(np.nanmean(raters["inconsistency"].to_numpy(float) ** 2)))
    bias_sd = float(np.nanstd(raters["bias"].to_numpy(float), ddof=1)) if len(raters) > 1 else 0.0
    error2 = float(np.nanmean(items["std"].to_numpy(float) ** 2)) if "std" in items else 0.0
    item_sd = math.sqrt(max(_within_model_sd(items, score) ** 2 - error2, 0.0))
    observed = planning.adjacent_diff_sd(items[["model", "instance", score]], score=score)
    true = math.sqrt(max(observed**2 - 2 * error2, 0.0)) if observed is not None else None
    return VarianceComponents(source=source, item_sd=item_sd, noise_sd=noise, bias_sd=bias_sd, diff_sd_true=true,
                              items=int(items.groupby("model").size().median()))


def components_from_mos(mos: pd.DataFrame, dim: str, *, noise_sd: float, raters_per_item: float, bias_sd: float = 0.0,
                        source: str = "published MOS") -> VarianceComponents:
    """From per-item MOS (``model``, ``prompt_number`` or ``instance``, ``<dim>``) that averaged
    ``raters_per_item`` raters whose ratings spread ``noise_sd`` around the item (and whose biases
    spread ``bias_sd``; EvalMi's z-scoring removed most of it: pass 0). Units: the sheet's."""
    if not (noise_sd > 0 and raters_per_item >= 1):
        raise ValueError("noise_sd must be positive and raters_per_item at least 1")
    items = mos.rename(columns={"prompt_number": "instance"})[["model", "instance", dim]]
    error2 = (noise_sd**2 + bias_sd**2) / raters_per_item
    item_sd = math.sqrt(max(_within_model_sd(items, dim) ** 2 - error2, 0.0))
    observed = planning.adjacent_diff_sd(items, score=dim)
    true = math.sqrt(max(observed**2 - 2 * error2, 0.0)) if observed is not None else None
    return VarianceComponents(source=source, item_sd=item_sd, noise_sd=noise_sd, bias_sd=bias_sd, diff_sd_true=true,
                              items=int(items.groupby("model").size().median()))


def expected_alpha(components: VarianceComponents) -> float:
    """Interval α of single ratings, as the one-way intraclass correlation of the components."""
    item = components.item_sd**2
    total = item + components.bias_sd**2 + components.noise_sd**2
    return item / total if total > 0 else float("nan")


def alpha_ci_width(alpha: float, raters: float, items: int) -> float:
    """Large-sample 95 % CI width of the intraclass correlation ``alpha`` with ``raters`` per item
    on ``items`` items (inf below two raters or items)."""
    if raters < 2 or items < 2:
        return float("inf")
    var = 2 * (1 - alpha) ** 2 * (1 + (raters - 1) * alpha) ** 2 / (raters * (raters - 1) * (items - 1))
    return 2 * Z95 * math.sqrt(var)


def plan_from_components(components: VarianceComponents, *, raters: int | None = None, halfwidth: float | None = None,
                         gap: float | None = None, alpha_width: float | None = None) -> planning.Plan:
    """:func:`planning.plan` on the components. ``raters``: the raters per item the gap and α
    answers assume (default: what the half-width needs, else 3)."""
    noise = math.sqrt(components.noise_sd**2 + components.bias_sd**2)  # a new rater's bias is noise too
    k = planning.raters_per_item(noise, halfwidth) if halfwidth else None
    planned = raters or k or 3
    items = components.items or 100
    width = alpha_ci_width(expected_alpha(components), planned, items)
    inputs = planning.PlanInputs(
        source=components.source, noise_sd=noise, diff_sd_true=components.diff_sd_true,
        diff_sd_observed=None, pilot_raters_per_item=planned,
        alpha_ci_width=width if math.isfinite(width) else None, alpha_items=items,
    )
    return planning.plan(inputs, halfwidth=halfwidth, gap=gap, alpha_width=alpha_width, raters=planned)
