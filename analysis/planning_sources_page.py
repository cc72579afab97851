"""Planning a study from another study or from published MOS, for the study's settings page.

Sources: a finished (closed) study the researcher can see (``Study.objects.visible_to``), read
through its subject-model fit, or a published MOS sheet the operator configured in
``PUBLISHED_MOS_SOURCES`` (name → local file path, or name → ``{"path", "noise_sd",
"raters_per_item"}``; never fetched from the internet). The numbers come from
:mod:`analysis.science.planning_sources`; this module only finds and reads the sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd
from django.conf import settings
from django.core.cache import cache

from analysis import dashboard
from analysis.science import protocols
from analysis.science.formats import read_mos_table
from analysis.science.planning import Plan
from analysis.science.planning_sources import (VarianceComponents, components_from_fit, expected_alpha,
                                               plan_from_components)
from analysis.science.subject_report import fit_dimensions
from tasks.models import Study

STUDY, MOS = "study", "mos"
MOS_KEYS = ("model", "instance", "prompt_number", "image", "answer", "item")
DEFAULT_NOISE_SD = 10.0  # one rater's spread on a 0-100 MOS sheet (EvalMi's z-MOS): a starting guess
DEFAULT_RATERS_PER_ITEM = 15.0


class SourceUnavailable(Exception):
    """The chosen source cannot be read: a clear message for the form."""


@dataclass(frozen=True)
class PublishedSource:
    name: str
    path: Path
    noise_sd: float
    raters_per_item: float

    @property
    def present(self) -> bool:
        return self.path.is_file()


def published_sources() -> dict[str, PublishedSource]:
    """The operator's ``PUBLISHED_MOS_SOURCES`` (relative paths from the project's directory)."""
    out = {}
    for name, entry in (getattr(settings, "PUBLISHED_MOS_SOURCES", None) or {}).items():
        spec = entry if isinstance(entry, dict) else {"path": entry}
        path = Path(spec["path"])
        if not path.is_absolute():
            path = Path(settings.BASE_DIR) / path
        out[str(name)] = PublishedSource(
            name=str(name), path=path,
            noise_sd=float(spec.get("noise_sd", DEFAULT_NOISE_SD)),
            raters_per_item=float(spec.get("raters_per_item", DEFAULT_RATERS_PER_ITEM)),
        )
    return out


def finished_studies(user, study: Study):
    """Closed rating-scale studies the user can see, newest first (never the study itself)."""
    rated = [key for key, definition in protocols.PROTOCOLS.items() if definition.has_scales]
    return (Study.objects.visible_to(user).filter(state=Study.State.CLOSED, protocol__in=rated).exclude(pk=study.pk)
            .order_by("-created_at"))


def study_dimensions(study: Study) -> list[str]:
    return [d for d in dashboard.analysis_dimensions(study) if d != "O"]


@lru_cache(maxsize=4)
def _read_mos(path: str, mtime: float) -> pd.DataFrame:
    """A published sheet, read once per file version (EvalMi's 50,400-row workbook takes seconds)."""
    source = Path(path)
    frame = read_mos_table(source)
    if "model" not in frame or not {"prompt_number", "instance"} & set(frame.columns):
        raise SourceUnavailable(f"{source.name} has no model and prompt columns")
    return frame


def mos_sheet(source: PublishedSource) -> pd.DataFrame:
    if not source.present:
        raise SourceUnavailable(f"The file of “{source.name}” is not on this server ({source.path}); "
                                "the operator sets it in PUBLISHED_MOS_SOURCES")
    try:
        return _read_mos(str(source.path), source.path.stat().st_mtime)
    except (ValueError, KeyError, OSError) as exc:
        raise SourceUnavailable(f"The file of “{source.name}” cannot be read: {exc}") from exc


def mos_dimensions(frame: pd.DataFrame) -> list[str]:
    """Numeric score columns of a MOS sheet (EvalMi: perception, correspondence)."""
    return [c for c in frame.columns if c not in MOS_KEYS and not str(c).startswith("YN_")
            and pd.api.types.is_numeric_dtype(frame[c])]


def components_of_study(source: Study, dim: str) -> VarianceComponents:
    """Variance components from a finished study's subject model on ``dim`` (cached per its ratings)."""

    def compute():
        ratings = dashboard.scored_ratings(source)
        if ratings.empty or dim not in ratings:
            return None
        fits = fit_dimensions(ratings, [dim])
        if dim not in fits:
            return None
        fit = fits[dim]
        items = fit.items.reset_index()
        instance = ratings.drop_duplicates("item").set_index("item")["instance"]
        items["instance"] = instance.reindex(items["item"]).to_numpy()
        return components_from_fit(items, fit.raters, source=f"the finished study “{source.title}”")

    components = cache.get_or_set(f"plan-source:{dim}:{dashboard.state_key(source)}", compute, 3600)
    if components is None:
        raise SourceUnavailable(f"“{source.title}” has no ratings on {dim}")
    return components


def rater_noise(components: VarianceComponents) -> float:
    """A new rater's spread around an item (noise and bias), as the plan uses it; NaN when unknown."""
    return math.hypot(components.noise_sd, components.bias_sd)


@dataclass(frozen=True)
class SourcePlan:
    components: VarianceComponents
    plan: Plan
    expected_alpha: float
    units: str


def plan_from(components: VarianceComponents, *, halfwidth=None, gap=None, alpha_width=None, units: str) -> SourcePlan:
    result = plan_from_components(components, halfwidth=halfwidth, gap=gap, alpha_width=alpha_width)
    alpha = expected_alpha(components)
    return SourcePlan(components=components, plan=result, expected_alpha=alpha if math.isfinite(alpha) else None,
                      units=units)
