"""The subject model on a study's live dashboard: per-model quality beside the agreement grid, and
which raters it finds inconsistent. Cached per study state like the rest of the dashboard."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.cache import cache

from analysis import dashboard
from analysis.science.subject_report import fit_dimensions
from tasks.models import Study


@dataclass(frozen=True)
class QualityCell:
    quality: float | None
    ci: tuple[float, float] | None


@dataclass(frozen=True)
class SubjectSummary:
    dims: list[str]
    rows: list[tuple[str, list[QualityCell]]]  # model, one cell per dimension
    inconsistent: dict[str, list[str]]  # rater id (as text) -> dimensions where flagged
    raters: int


def summary(study: Study) -> SubjectSummary | None:
    """None for pairwise studies and studies without ratings."""
    if not study.protocol_def.has_scales:
        return None

    def compute():
        ratings = dashboard.scored_ratings(study)
        if ratings.empty:
            return None
        fits = fit_dimensions(ratings, dashboard.analysis_dimensions(study))
        dims = list(fits)
        models = sorted({str(m) for fit in fits.values() for m in fit.model_table().index})
        tables = {dim: fit.model_table() for dim, fit in fits.items()}
        rows = []
        for model in models:
            cells = []
            for dim in dims:
                table = tables.get(dim)
                if table is None or model not in table.index:
                    cells.append(QualityCell(None, None))
                    continue
                row = table.loc[model]
                ci = (float(row["ci_low"]), float(row["ci_high"])) if row["ci_low"] == row["ci_low"] else None
                cells.append(QualityCell(float(row["quality"]), ci))
            rows.append((model, cells))
        inconsistent: dict[str, list[str]] = {}
        for dim, fit in fits.items():
            for rater in fit.raters.index[fit.raters["inconsistent"].to_numpy()]:
                inconsistent.setdefault(str(rater), []).append(dim)
        raters = max((len(fit.raters) for fit in fits.values()), default=0)
        return SubjectSummary(dims=dims, rows=rows, inconsistent=inconsistent, raters=raters)

    return cache.get_or_set(f"dash-subject:{dashboard.state_key(study)}", compute, 3600)
