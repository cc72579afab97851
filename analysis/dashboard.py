"""What a study's dashboard shows, read from the database; the numbers come from pure modules.

Agreement and α-over-time are cached per study state (rating count + last change), so the
dashboard's 10-second refresh recomputes them only when ratings arrived.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import pandas as pd
from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Max
from django.utils import timezone

from analysis import data
from analysis.science.agreement import agreement_table, krippendorff_alpha, reliability_matrix
from analysis.importers import HUMAN_REFERENCE
from analysis.models import Judge, JudgeRun, JudgeScore
from analysis.science.progress import Progress, study_progress
from analysis.report import build_report
from analysis.science.report import QA_DIMENSION
from analysis.science import protocols
from raters.models import Rater, RaterAction
from raters.quality import rater_rows
from tasks.models import Comparison, Item, Rating, Study

DASHBOARD_BOOTSTRAP = 200  # replicates for agreement CIs on the live dashboard (the report uses more)
ALPHA_CHECKPOINTS = 8


def agreement_level(study: Study) -> str:
    """ImagenHub's 3-point scales are ordinal (as its Table 4); Likert MOS scales are interval."""
    return study.protocol_def.agreement_level


def analysis_dimensions(study: Study) -> list[str]:
    return study.protocol_def.analysis_dimensions(study.protocol_settings)


def study_threshold(study: Study) -> float:
    """The study's own ``agreement_threshold`` when a researcher set one, else the site default.

    Only a value stored in ``Study.settings`` counts (not the protocol default filled in by
    ``protocol_settings``), so studies nobody configured follow ``AGREEMENT_THRESHOLD``.
    """
    stored = (study.settings or {}).get("agreement_threshold")
    if isinstance(stored, (int, float)) and not isinstance(stored, bool) and 0 < stored <= 1:
        return float(stored)
    return float(getattr(settings, "AGREEMENT_THRESHOLD", protocols.DEFAULT_AGREEMENT_THRESHOLD))


def agreement_threshold(raw: str | None = None, study: Study | None = None) -> float:
    """``?threshold=`` when it is a number in [-1, 1] (this view only), else the study's, else the site's."""
    try:
        value = float(raw) if raw not in (None, "") else None
    except ValueError:
        value = None
    if value is None or not -1 <= value <= 1:
        if study is not None:
            return study_threshold(study)
        return float(getattr(settings, "AGREEMENT_THRESHOLD", protocols.DEFAULT_AGREEMENT_THRESHOLD))
    return value


def state_key(study: Study) -> str:
    stats = Rating.objects.filter(study=study).aggregate(n=Count("id"), last=Max("updated_at"))
    return f"{study.pk}:{stats['n']}:{stats['last'].timestamp() if stats['last'] else 0}"


def cached_report(study: Study, **options) -> dict:
    """``build_report(study, **options)``, kept while nothing it reads has changed: the judges page
    and the leaderboard open it on every view, and its bootstraps (items and raters) take seconds.

    The key holds what the report reads: the ratings (count, last change), the study's judge scores
    (count, last id), every rater decision (last action id, blocked raters: a site-wide block may
    log no action), the study's own fields (sampling, settings, protocol version) and the options."""
    scores = JudgeScore.objects.filter(run__study=study).aggregate(n=Count("id"), last=Max("id"))
    decisions = RaterAction.objects.aggregate(last=Max("id"))["last"]
    blocked = Rater.objects.filter(state=Rater.State.BLOCKED).count()
    state = json.dumps([state_key(study), scores["n"], scores["last"], decisions, blocked, study.rater_sampling,
                        study.current_protocol_version_id, study.settings, sorted(options.items())],
                       sort_keys=True, default=str)
    key = f"report:{study.pk}:{hashlib.sha256(state.encode()).hexdigest()}"  # stable across processes
    return cache.get_or_set(key, lambda: build_report(study, **options), REPORT_CACHE_SECONDS)


REPORT_CACHE_SECONDS = 600


def scored_ratings(study: Study) -> pd.DataFrame:
    """The ratings frame with the protocol's derived scores (ImagenHub O): what every dashboard card reads."""
    frame = data.ratings_frame(study)
    return study.protocol_def.derived_scores(frame) if len(frame) else frame


def progress(study: Study) -> Progress:
    if study.protocol_def.unit_kind == protocols.COMPARISON:
        units = Comparison.objects.filter(study=study).annotate(n=Count("ratings")).values_list("n", flat=True)
    else:
        units = Item.objects.filter(study=study).annotate(n=Count("ratings")).values_list("n", flat=True)
    stamps = list(Rating.objects.filter(study=study).order_by("-created_at").values_list("created_at", flat=True)[:500])
    return study_progress(list(units), study.raters_per_item, stamps, timezone.now())


@dataclass(frozen=True)
class AgreementCell:
    value: float | None
    ci: tuple[float, float] | None
    reason: str | None
    n_units: int
    status: str  # "ok" (≥ threshold), "low", "undefined"


def agreement_grid(study: Study, threshold: float) -> tuple[list[str], list[tuple[str, list[AgreementCell]]]]:
    """Rows of (model, one cell per dimension), plus the study as a whole as the last row."""
    dims = analysis_dimensions(study)
    if not study.protocol_def.has_scales:
        return [], []
    level = agreement_level(study)

    def compute():
        ratings = scored_ratings(study)
        if ratings.empty:
            return pd.DataFrame()
        per_model = agreement_table(ratings, scores=dims, by=("model",), levels=(level,), kappa=False,
                                    n_boot=DASHBOARD_BOOTSTRAP)
        overall = agreement_table(ratings, scores=dims, by=(), levels=(level,), kappa=False, n_boot=DASHBOARD_BOOTSTRAP)
        return pd.concat([per_model, overall.assign(model="All models")], ignore_index=True)

    table = cache.get_or_set(f"dash-agreement:{state_key(study)}", compute, 3600)
    rows = []
    for model, group in (table.groupby("model", sort=False) if len(table) else []):
        cells = []
        for dim in dims:
            row = group[group["dimension"] == dim].iloc[0]
            value = row["value"]
            ci = (row["ci_low"], row["ci_high"]) if row["ci_low"] is not None else None
            status = "undefined" if value is None else ("ok" if value >= threshold else "low")
            cells.append(AgreementCell(value, ci, row["reason"], int(row["n_units"]), status))
        rows.append((str(model), cells))
    return dims, rows


ALPHA_COLUMNS = ["dimension", "ratings", "alpha", "ci_low", "ci_high"]


def alpha_series(study: Study) -> pd.DataFrame:
    """α of each dimension over the first k ratings (by arrival), at up to 8 checkpoints.

    ``ci_low``/``ci_high``: percentile 95 % bootstrap over items (200 replicates, seed 0) of
    the α at that checkpoint; empty where α is undefined.
    """
    if not study.protocol_def.has_scales:
        return pd.DataFrame(columns=ALPHA_COLUMNS)
    dims, level = analysis_dimensions(study), agreement_level(study)

    def compute():
        ratings = scored_ratings(study)
        if ratings.empty:
            return pd.DataFrame(columns=ALPHA_COLUMNS)
        arrival = pd.DataFrame.from_records(
            list(Rating.objects.filter(study=study, item__isnull=False).values_list("rater_id", "item_id", "created_at")),
            columns=["rater", "item", "created_at"],
        ).assign(rater=lambda f: f["rater"].astype(str))
        ordered = ratings.merge(arrival, on=["rater", "item"]).sort_values("created_at", kind="stable")
        ordered = ordered.assign(unit=ordered["model"].astype(str) + "\x1f" + ordered["item"].astype(str))
        total = len(ordered)
        marks = sorted({max(2, round(total * k / ALPHA_CHECKPOINTS)) for k in range(1, ALPHA_CHECKPOINTS + 1)})
        rows = []
        for mark in marks:
            head = ordered.iloc[:mark]
            for dim in dims:
                estimate = krippendorff_alpha(reliability_matrix(head, score=dim, item="unit"), level=level,
                                              n_boot=DASHBOARD_BOOTSTRAP)
                low, high = estimate.ci95 if estimate.ci95 else (None, None)
                rows.append({"dimension": dim, "ratings": mark, "alpha": estimate.value, "ci_low": low, "ci_high": high})
        return pd.DataFrame(rows, columns=ALPHA_COLUMNS)

    return cache.get_or_set(f"dash-alpha-ci:{state_key(study)}", compute, 3600)


@dataclass(frozen=True)
class RaterCard:
    """One rater on the dashboard: the raters page's row (raters.quality.rater_rows), so label,
    standing and flags are the same on both pages."""

    rater_id: int
    label: str
    ratings: int
    median_seconds: float | None
    standing: str
    flagged: list[str]


def rater_quality(study: Study, *, limit: int = 30) -> tuple[dict[str, int], list[RaterCard]]:
    """Standing counts over every rater with work in the study, and its most active raters with
    their flags, from the same rows as the raters page (raters.quality.rater_rows)."""
    rows = rater_rows(study)
    standings: dict[str, int] = {}
    for row in rows:
        standings[row.state] = standings.get(row.state, 0) + 1
    active = sorted(rows, key=lambda row: (-row.items_done, row.rater.pk))[:limit]
    cards = [
        RaterCard(
            rater_id=row.rater.pk,
            label=str(row.rater),
            ratings=row.items_done,
            median_seconds=None if row.median_time_ms is None else row.median_time_ms / 1000,
            standing=row.state,
            flagged=[flag.label for flag in row.flags],
        )
        for row in active
    ]
    return dict(sorted(standings.items())), cards


def judge_runs(study: Study) -> list[JudgeRun]:
    """Runs in progress first, then the five most recent finished ones."""
    active = list(JudgeRun.objects.filter(study=study, state__in=["queued", "running"]).select_related("judge"))
    finished = list(JudgeRun.objects.filter(study=study).exclude(state__in=["queued", "running"])
                    .select_related("judge").order_by("-created_at")[:5])
    return active + finished


@dataclass(frozen=True)
class JudgeScatter:
    """Which judge scatter (analysis.judge_views.scatter_svg, the judges page's plot) to show."""

    judge: str
    dimension: str
    human_dimension: str
    judges: int


def judge_scatter(study: Study) -> JudgeScatter | None:
    """The first judge (by name) with scores on the study, and its first scored dimension.

    A judge dimension named like a human one is plotted against it, any other (CLIP_Score…)
    against the study's first dimension. None when no judge scored the study (yes/no answers
    and published human references do not count) or the study is pairwise.
    """
    if not study.protocol_def.has_scales:
        return None
    human = analysis_dimensions(study)
    judges = [
        (name, params) for name, params in Judge.objects.filter(runs__study=study).distinct().order_by("name")
        .values_list("name", "params") if (params or {}).get("role") != HUMAN_REFERENCE
    ]
    for name, _ in judges:
        dimensions = list(
            JudgeScore.objects.filter(run__study=study, run__judge__name=name, value__isnull=False)
            .exclude(dimension=QA_DIMENSION).order_by("dimension").values_list("dimension", flat=True).distinct()
        )
        if dimensions:
            dimension = next((d for d in human if d in dimensions), dimensions[0])
            return JudgeScatter(name, dimension, dimension if dimension in human else human[0], len(judges))
    return None
