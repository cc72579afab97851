"""The planning card on a study's page: sample sizes from the study's own ratings as a pilot.

Targets come from the query string (``plan_dim``, ``plan_halfwidth``, ``plan_gap``,
``plan_alpha_width``), each validated and replaced by a default when absent or out of range; the
pilot's inputs are cached per study state like the dashboard's other numbers."""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.core.cache import cache

from analysis import dashboard
from analysis.science.planning import Plan, inputs_from_ratings, plan
from tasks.models import Study

LIMITS = {"plan_halfwidth": (1e-3, 100.0), "plan_gap": (1e-3, 100.0), "plan_alpha_width": (1e-3, 2.0)}


@dataclass(frozen=True)
class PlanningCard:
    dims: list[str]
    dim: str
    halfwidth: float
    gap: float
    alpha_width: float
    result: Plan | None
    scale: str


def _target(query, key: str, default: float) -> float:
    raw = query.get(key, "")
    if len(raw) > 20:
        return default
    try:
        value = float(raw)
    except ValueError:
        return default
    low, high = LIMITS[key]
    return value if math.isfinite(value) and low <= value <= high else default


def card(study: Study, query) -> PlanningCard | None:
    """None for pairwise studies (no rating scale to plan on)."""
    if not study.protocol_def.has_scales:
        return None
    dims = [d for d in dashboard.analysis_dimensions(study) if d != "O"]
    dim = query.get("plan_dim") if query.get("plan_dim") in dims else dims[0]
    targets = study.protocol_def.planning_targets
    halfwidth = _target(query, "plan_halfwidth", targets["halfwidth"])
    gap = _target(query, "plan_gap", targets["gap"])
    alpha_width = _target(query, "plan_alpha_width", 0.1)

    def compute():
        ratings = dashboard.scored_ratings(study)
        return inputs_from_ratings(ratings, dim) if len(ratings) else None

    inputs = cache.get_or_set(f"plan-inputs:{dim}:{dashboard.state_key(study)}", compute, 3600)
    result = plan(inputs, halfwidth=halfwidth, gap=gap, alpha_width=alpha_width) if inputs is not None else None
    scale = study.protocol_def.scale_unit
    return PlanningCard(dims=dims, dim=dim, halfwidth=halfwidth, gap=gap, alpha_width=alpha_width, result=result,
                        scale=scale)
