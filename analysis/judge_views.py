"""The judges side-by-side page of a study: runs, human vs judge numbers, scatter, disagreements.

Every number in the summary table comes from ``analysis.report.build_report`` (the one report
builder); this module only adds the item-level views the report does not carry: the scatter
of judge score vs rater-averaged human score per model, and the items where the two rank most
differently. Researchers who own the study (and staff) only.
"""

from __future__ import annotations

import pandas as pd
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from analysis import dashboard, data
from analysis.judge_forms import JudgeRunForm
from analysis.judge_services import (JudgeRunError, judge_endpoint_list, judge_run_cancel, judge_run_request,
                                     judge_run_resume)
from analysis.science.judges.pairwise_agreement import majority_label, pairwise_agreement, single_label
from analysis.models import JudgeRun, JudgeScore, JudgeVerdict
from analysis.report import human_item_scores
from analysis.science.report import QA_DIMENSION
from analysis.science import plots, protocols
from raters.exclusion import analysis_ratings
from tasks.models import Item, Rating, Study

DISAGREEMENTS_SHOWN = 12
SCATTER_MODELS_MAX = 8


def human_item_means(study: Study) -> pd.DataFrame:
    """Human score per item and dimension: ``item, model, dimension, human``, exactly the item
    scores the report correlates judges with (``analysis.report.human_item_scores``): ImagenHub
    rater-averaged SC, PQ and O; EvalMi z-MOS on 0–100 (or the published MOS)."""
    return human_item_scores(study)


def _judge_item_scores(study: Study, judge: str, dimension: str) -> pd.DataFrame:
    scores = data.judge_scores_frame(study)
    return scores[(scores["judge"] == judge) & (scores["dimension"] == dimension)][["item", "model", "value"]]


def _paired(study: Study, judge: str, dimension: str, human_dimension: str) -> pd.DataFrame:
    human = human_item_means(study)
    human = human[human["dimension"] == human_dimension][["item", "human"]]
    return _judge_item_scores(study, judge, dimension).merge(human, on="item", how="inner")


def _scatter_options(report: dict) -> list[tuple[str, str]]:
    """(judge, report key) pairs that have item scores to plot (yes/no answers have their own row)."""
    return [(j, key) for j, block in report.get("judges", {}).items() for key in block if key != QA_DIMENSION]


def _choices(report: dict, request: HttpRequest) -> tuple[str | None, str | None, str | None]:
    """(judge, key in the report, human dimension) chosen with ?judge=&dim=, else the first pair."""
    pairs = _scatter_options(report)
    judge, key = request.GET.get("judge"), request.GET.get("dim")
    if (judge, key) not in pairs:
        judge, key = pairs[0] if pairs else (None, None)
    if judge is None:
        return None, None, None
    block = report["judges"][judge][key]
    human_dim = key.split("~")[-1]
    return judge, block.get("judge_dimension", key), human_dim


def _disagreements(study: Study, judge: str, dimension: str, human_dimension: str) -> list[dict]:
    paired = _paired(study, judge, dimension, human_dimension)
    if paired.empty:
        return []
    lower = bool(data.judge_scores_frame(study).query("judge == @judge")["lower_is_better"].any())
    judge_rank = paired["value"].rank(pct=True, ascending=not lower)
    paired = paired.assign(gap=(judge_rank - paired["human"].rank(pct=True)).abs())
    top = paired.sort_values("gap", ascending=False).head(DISAGREEMENTS_SHOWN)
    items = Item.objects.select_related("image", "gen_model", "instance").in_bulk(top["item"].tolist())
    scores, related = {}, {}
    for s in JudgeScore.objects.filter(run__study=study, run__judge__name=judge, item_id__in=items).order_by("run__created_at", "id"):
        if s.dimension == dimension:
            scores[s.item_id] = s
        # every dimension of the item, so a derived score (VIEScore O) shows the rationales it came from
        related.setdefault(s.item_id, {})[s.dimension] = s
    votes: dict[int, list[dict]] = {}
    # the rater's one label, as on the dashboard and the raters page (crowd id where there is one)
    for rating in Rating.objects.filter(item_id__in=items).select_related("rater__user").order_by("id"):
        votes.setdefault(rating.item_id, []).append({"rater": str(rating.rater), "values": rating.values,
                                                     "answers": rating.answers})
    rows = []
    for record in top.itertuples(index=False):
        item = items[record.item]
        score = scores.get(record.item)
        rows.append({
            "item": item, "judge_value": record.value, "human": record.human, "gap": record.gap,
            "votes": votes.get(record.item, []), "score": score,
            "others": [o for d, o in related.get(record.item, {}).items() if d != dimension and o.rationale],
            "transcript": [_transcript_round(r) for r in ((score.details or {}).get("rounds") or [] if score else [])],
        })
    return rows


def _transcript_round(round_: dict) -> dict:
    """One ViCE round for the page: (question, answer, set, answer on the source) rows; the last
    two are empty for text-to-image items (editing rounds ask both images)."""
    questions = round_.get("questions", [])
    sets = round_.get("sets") or [""] * len(questions)
    before = round_.get("source_answers") or [""] * len(questions)
    return {"kind": round_.get("kind", ""),
            "rows": list(zip(questions, round_.get("answers", []), sets, before))}


def _pairwise_block(study: Study) -> list[dict]:
    """Per judge with verdicts: agreement with the human majority, single grading and position bias."""
    votes: dict[int, list[str]] = {}
    # the human side as the report reads it: excluded raters' votes left out (raters.exclusion)
    human = analysis_ratings(study).filter(comparison__isnull=False)
    for comparison_id, values in human.values_list("comparison_id", "values"):
        votes.setdefault(comparison_id, []).append((values or {}).get("preference"))
    blocks = []
    runs = JudgeRun.objects.filter(study=study, verdicts__isnull=False).distinct().select_related("judge")
    for run in runs:
        totals = {
            (s.item_id): s.value
            for s in JudgeScore.objects.filter(run=run, dimension="total")
        }
        rows = []
        for v in JudgeVerdict.objects.filter(run=run).select_related("comparison"):
            c = v.comparison
            rows.append({
                "human": majority_label(votes.get(c.id, [])), "final": v.final or None, "first": v.first or None,
                "second": v.second or None, "single": single_label(totals.get(c.item_a_id), totals.get(c.item_b_id)),
            })
        blocks.append({"run": run, "agreement": pairwise_agreement(rows)})
    return blocks


@login_required
def side_by_side(request: HttpRequest, slug: str) -> HttpResponse:
    study = Study.objects.visible_or_404(request.user, slug)
    if request.htmx and request.GET.get("fragment") == "runs":
        return _runs_fragment(request, study)
    return _page(request, study, JudgeRunForm(endpoint_list=judge_endpoint_list()))


def _runs_context(study: Study) -> dict:
    runs = list(JudgeRun.objects.filter(study=study).select_related("judge").order_by("-created_at", "-id"))
    return {"study": study, "runs": runs, "any_active": any(run.is_active for run in runs),
            "judge_endpoints": judge_endpoint_list()}  # names and models only: URLs and keys stay with the operator


def _runs_fragment(request: HttpRequest, study: Study) -> HttpResponse:
    """The runs table, polled every few seconds while a run is under way. The poll that finds
    every run finished asks htmx to reload the page, so the new scores appear in the tables."""
    context = _runs_context(study)
    response = render(request, "analysis/side_by_side.html#runs", context)
    if not context["any_active"] and request.GET.get("watching") == "1":
        response["HX-Refresh"] = "true"
    return response


def _page(request: HttpRequest, study: Study, form: JudgeRunForm, *, status: int = 200) -> HttpResponse:
    report = dashboard.cached_report(study)
    judge, dimension, human_dimension = _choices(report, request)
    judge_names = list(report.get("judges", {}))
    model_rows = []
    for model, entry in report.get("models", {}).items():
        for dim, block in entry.get("dimensions", {}).items():
            judges = []
            for name in judge_names:
                found = entry.get("judges", {}).get(name, {})
                cell = found.get(dim) or next((v for k, v in found.items() if k.endswith(f"~{dim}")), None)
                judges.append(cell)
            model_rows.append({"model": model, "dimension": dim, "block": block, "judges": judges})
        qa_cells = [entry.get("judges", {}).get(name, {}).get(QA_DIMENSION) for name in judge_names]
        if any(qa_cells):
            model_rows.append({"model": model, "dimension": "yes/no", "qa": True, "judges": qa_cells,
                               "qa_accuracy": entry.get("qa_accuracy")})
    rates_comparisons = study.protocol_def.unit_kind == protocols.COMPARISON
    context = {
        **_runs_context(study),
        "form": form,
        "report": report,
        "judge_names": judge_names,
        "model_rows": model_rows,
        "judge_options": _scatter_options(report),
        "qa_judges": {name: block[QA_DIMENSION] for name, block in report.get("judges", {}).items()
                      if QA_DIMENSION in block},
        "judge": judge,
        "dimension": dimension,
        "human_dimension": human_dimension,
        "selected_key": request.GET.get("dim") if judge and request.GET.get("judge") == judge else (
            next(key for j, key in _scatter_options(report) if j == judge) if judge else None),
        "disagreements": _disagreements(study, judge, dimension, human_dimension) if judge else [],
        "pairwise": _pairwise_block(study) if rates_comparisons else [],
        "is_pairwise": rates_comparisons,
        "pairwise_votes": (Rating.objects.filter(study=study, comparison__isnull=False).count()
                           if rates_comparisons else 0),
        "comparisons": report.get("judge_comparisons", {}).get("comparisons", []),
    }
    return render(request, "analysis/side_by_side.html", context, status=status)


@login_required
@require_POST
def run_start(request: HttpRequest, slug: str) -> HttpResponse:
    """Start a run from the page's form. A run that cannot work on the study (SSIM without
    source images, a single-image judge on a pairwise study, an endpoint that is not the
    operator's) is refused before anything is queued: the page again, 400, with the reason."""
    study = Study.objects.visible_or_404(request.user, slug)
    form = JudgeRunForm(request.POST, endpoint_list=judge_endpoint_list())
    if form.is_valid():
        try:
            run = judge_run_request(user=request.user, study=study, judge_name=form.judge_name(),
                                    kind=form.cleaned_data["kind"], params=form.judge_params())
        except JudgeRunError as exc:
            form.add_error(None, str(exc))
        else:
            items = f"{run.total} item{'s' if run.total != 1 else ''}"
            messages.info(request, f"Run {run.pk} of {run.judge.name} started on {items}.")
            return redirect(f"{reverse('judge_side_by_side', args=[study.slug])}#judge-runs")
    return _page(request, study, form, status=400)


@login_required
def scatter_svg(request: HttpRequest, slug: str) -> HttpResponse:
    """Judge score (y) against the rater-averaged human score (x), one panel per model."""
    study = Study.objects.visible_or_404(request.user, slug)
    judge, dimension, human_dim = request.GET.get("judge"), request.GET.get("dim"), request.GET.get("human")
    if not (judge and dimension and human_dim):
        raise Http404("choose a judge and a dimension")
    paired = _paired(study, judge, dimension, human_dim)
    scale = study.protocol_def.score_scale
    x_label = f"human {human_dim}" + (f" ({scale})" if scale != "raw" else "")
    svg = plots.judge_scatter(paired, x_label=x_label, y_label=f"{judge} {dimension}", max_models=SCATTER_MODELS_MAX)
    return HttpResponse(svg, content_type="image/svg+xml")


@login_required
@require_POST
def run_cancel(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    study = Study.objects.visible_or_404(request.user, slug)
    run = get_object_or_404(JudgeRun, pk=run_id, study=study)
    judge_run_cancel(run=run)
    messages.info(request, f"Run {run.pk} will stop after the items in progress.")
    return redirect("judge_side_by_side", slug=study.slug)


@login_required
@require_POST
def run_resume(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    study = Study.objects.visible_or_404(request.user, slug)
    run = get_object_or_404(JudgeRun, pk=run_id, study=study)
    try:
        judge_run_resume(run=run)
        messages.info(request, f"Run {run.pk} queued again; scored items are kept.")
    except JudgeRunError as exc:
        messages.error(request, str(exc))
    return redirect("judge_side_by_side", slug=study.slug)
