"""Researcher pages: build a study from a bundle, watch it live, rank its models, plot, export.

Typed function views; every write goes through tasks.builder / tasks.study_services, the same
calls the REST API makes. Non-researchers get 403; a study you do not own is a 404.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from analysis import dashboard, planning_page, stopping_panel, subject_dashboard
from analysis.science import subject_report
from analysis.science import plots
from analysis.api import export_response
from analysis.data import item_table, ratings_frame
from analysis.export_services import export_fits_in_a_request
from analysis.science.imagenhub import add_overall, item_scores, per_rater_means
from analysis.science.leaderboard import rank_agreement, rank_models
from analysis.models import DatasetRelease
from analysis.notices import study_notices_check
from analysis.release_services import version_mix
from analysis.science.release import card_rows
from analysis.science.zmos import item_mos
from analysis.science import protocols
from tasks.build_services import study_build_problems, study_build_start
from tasks.builder import BundleInvalid, StudySpec
from tasks.builder_forms import BundleForm
from tasks.lifecycle_views import sample_links
from tasks.models import ScreenReport, Study, StudyBuild
from tasks.research_access import researcher_required
from tasks.study_services import (
    StudyActionRefused,
    study_clone,
    study_close,
    study_publish,
    study_rater_sampling_set,
    study_threshold_set,
)

def plots_for(study: Study) -> list[str]:
    """The plots that apply to the study's protocol: SC/PQ is ImagenHub's; pairwise has none of these."""
    return list(study.protocol_def.plots)


@researcher_required
def study_new(request: HttpRequest) -> HttpResponse:
    """Upload a bundle. The build runs in a job: in eager mode it is done when this continues
    (the study's dashboard, or every problem with its line); with a worker, its progress page."""
    problems, error = [], ""
    form = BundleForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            build = study_build_start(upload=form.cleaned_data["bundle"], spec=StudySpec(**form.spec_fields()),
                                      owner=request.user)
        except BundleInvalid as exc:
            problems = exc.problems
        else:
            build.refresh_from_db()
            if build.state == StudyBuild.State.DONE:
                return _built(request, build)
            if build.state != StudyBuild.State.FAILED:
                return redirect("research-study-build", build_id=build.pk)
            problems, error = study_build_problems(build), build.error
    status = (500 if error else 400) if request.method == "POST" else 200
    return render(request, "research/study_new.html", {"form": form, "problems": problems, "error": error,
                                                       "samples": sample_links()}, status=status)


def _built(request: HttpRequest, build: StudyBuild) -> HttpResponse:
    study = build.study
    messages.success(request, f"Created draft study {study.slug} with {study.items.count()} items.")
    return redirect("research-study", slug=study.slug)


def _get_build_for_user(request: HttpRequest, build_id: int) -> StudyBuild:
    """The build if this user started it (or is staff), else 404."""
    builds = StudyBuild.objects.select_related("study")
    return get_object_or_404(builds if request.user.is_staff else builds.filter(owner=request.user), pk=build_id)


@researcher_required
def study_build(request: HttpRequest, build_id: int) -> HttpResponse:
    """A build's progress; htmx polls its progress block every 2 s while it runs (Refresh without
    JavaScript). A finished build goes to its study; a failed one lists its problems."""
    build = _get_build_for_user(request, build_id)
    if build.state == StudyBuild.State.DONE and build.study is not None:
        response = _built(request, build)
        if request.htmx:  # a redirect would be followed by the poll and swapped into the block
            response = HttpResponse(status=204, headers={"HX-Redirect": response["Location"]})
        return response
    context = {"build": build, "problems": study_build_problems(build)}
    if request.htmx:
        return render(request, "research/study_build.html#progress", context)
    return render(request, "research/study_build.html", context)


def _live_context(request: HttpRequest, study: Study) -> dict:
    threshold = dashboard.agreement_threshold(request.GET.get("threshold"), study)
    dims, agreement = dashboard.agreement_grid(study, threshold)
    standings, raters = dashboard.rater_quality(study)
    subject = subject_dashboard.summary(study)
    flagged = subject.inconsistent if subject else {}
    progress = dashboard.progress(study)
    try:  # a view parameter: an unknown dimension shows the primary one
        stopping = stopping_panel.panel(study, progress, dimension=request.GET.get("stopping_dim"))
    except stopping_panel.UnknownDimension:
        stopping = stopping_panel.panel(study, progress)
    # the live block's refresh keeps the view's parameters
    kept = {key: request.GET[key] for key in ("threshold",) if request.GET.get(key)}
    if stopping.dimension != stopping.primary:
        kept["stopping_dim"] = stopping.dimension
    return {
        "live_url": request.path + (f"?{urlencode(kept)}" if kept else ""),
        "study": study,
        "progress": progress,
        "stopping": stopping,
        "threshold": threshold,
        "study_threshold": dashboard.study_threshold(study),
        "threshold_is_own": "agreement_threshold" in (study.settings or {}),
        "agreement_level": dashboard.agreement_level(study),
        "dims": dims,
        "agreement": agreement,
        "standings": standings,
        "raters": [(rater, flagged.get(str(rater.rater_id), [])) for rater in raters],
        "subject": subject,
        "judge_runs": dashboard.judge_runs(study),
    }


@researcher_required
def study_dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    """The study page; its live block refreshes itself every 10 s via htmx (same URL, partial)."""
    study = Study.objects.visible_or_404(request.user, slug)
    context = _live_context(request, study)
    study_notices_check(study, progress=context["progress"])
    context["notices"] = list(study.notices.all()[:10])
    if request.htmx:
        return render(request, "research/dashboard.html#live", context)
    context["plots"] = plots_for(study)
    context["version_mix"] = _version_mix(study)
    latest = DatasetRelease.objects.filter(study=study, state=DatasetRelease.State.DONE).first()  # newest first
    context["card_release"] = latest
    context["card_rows"] = card_rows(latest.card) if latest and latest.card else []
    context["judge_scatter"] = dashboard.judge_scatter(study)
    context["planning"] = planning_page.card(study, request.GET)
    context["rater_sampling_choices"] = Study.RaterSampling.choices
    reports = ScreenReport.objects.filter(study=study).select_related("rater__user")
    context["screen_reports"] = list(reports[:REPORTS_SHOWN])
    context["screen_reports_total"] = reports.count() if len(context["screen_reports"]) == REPORTS_SHOWN else len(
        context["screen_reports"])
    return render(request, "research/dashboard.html", context)


def _version_mix(study: Study) -> dict:
    mix = version_mix(study)
    return {"mixed": mix["mixed"], "used": sum(1 for v in mix["versions"] if v["votes"])}


REPORTS_SHOWN = 50  # the newest; the rest stay in the database (and the admin)


class ThresholdForm(forms.Form):
    agreement_threshold = forms.FloatField(
        required=False,
        help_text="α at or above this is shown as acceptable; empty = the site default",
    )
    rater_sampling = forms.ChoiceField(choices=Study.RaterSampling.choices, required=False)


@researcher_required
@require_POST
def study_settings(request: HttpRequest, slug: str) -> HttpResponse:
    """Change the study's analysis settings (the agreement threshold, whether its raters are a sampled
    crowd or a fixed panel) from its dashboard."""
    study = Study.objects.visible_or_404(request.user, slug)
    form = ThresholdForm(request.POST)
    if not form.is_valid():
        labels = {"agreement_threshold": "Agreement threshold", "rater_sampling": "Raters"}
        messages.error(request, " ".join(f"{labels.get(name, name)}: {' '.join(errors)}"
                                         for name, errors in form.errors.items()))
        return redirect("research-study", slug=study.slug)
    sampling = form.cleaned_data.get("rater_sampling")
    sampling_changed = bool(sampling) and sampling != study.rater_sampling
    before = study.settings.get("agreement_threshold")
    try:
        study = study_threshold_set(study=study, threshold=form.cleaned_data["agreement_threshold"])
    except StudyActionRefused as exc:
        messages.error(request, str(exc))
    else:
        if not sampling_changed or study.settings.get("agreement_threshold") != before:
            value = dashboard.study_threshold(study)
            messages.success(request, f"Agreement threshold for {study.slug} is now {value:g}.")
    if sampling_changed:
        study = study_rater_sampling_set(study=study, rater_sampling=sampling)
        messages.success(request, f"Raters of {study.slug}: {study.get_rater_sampling_display()}.")
    return redirect("research-study", slug=study.slug)


@researcher_required
@require_POST
def study_action(request: HttpRequest, slug: str, action: str) -> HttpResponse:
    study = Study.objects.visible_or_404(request.user, slug)
    try:
        if action == "publish":
            study = study_publish(study=study)
            messages.success(request, f"{study.slug} is open for rating. Paste the links below into your platform.")
            return redirect("research-study-launch", slug=study.slug)
        elif action == "close":
            study = study_close(study=study)
            messages.success(request, f"{study.slug} is closed.")
        elif action == "clone":
            study = study_clone(study=study, owner=request.user)
            messages.success(request, f"Cloned as draft {study.slug}.")
        else:
            raise Http404("unknown action")
    except StudyActionRefused as exc:
        messages.error(request, str(exc))
    return redirect("research-study", slug=study.slug)


def _item_scores(study: Study, dimension: str) -> pd.DataFrame:
    """Per (model, instance) score for ranking: rater-averaged (ImagenHub) or z-MOS (EvalMi)."""
    ratings = ratings_frame(study)
    if ratings.empty:
        return pd.DataFrame(columns=["model", "instance", "score"])
    if study.protocol_def.score_scale == "raw":
        scores = item_scores(ratings)
        scores["instance"] = scores["item"].map(ratings.drop_duplicates("item").set_index("item")["instance"])
        return scores.rename(columns={dimension: "score"})[["model", "instance", "score"]]
    table = item_mos(ratings.rename(columns={dimension: "score"}), ci="none").table
    table["instance"] = table["item"].map(ratings.drop_duplicates("item").set_index("item")["instance"])
    return table.rename(columns={"mos": "score"})[["model", "instance", "score"]]


def _absolute_ranking(study: Study) -> list[str]:
    dimension = study.protocol_def.headline_dimension
    return [row.model for row in rank_models(_item_scores(study, dimension), n_boot=0)]


@researcher_required
def study_leaderboard(request: HttpRequest, slug: str) -> HttpResponse:
    """Models ranked with the report's numbers; adjacent gaps tested by a paired bootstrap."""
    study = Study.objects.visible_or_404(request.user, slug)
    report = dashboard.cached_report(study, judges=False)
    context: dict = {"study": study, "report": report}
    if not study.protocol_def.has_scales:  # ranked by Bradley–Terry
        ranked = sorted(
            ((m, v) for m, v in report["models"].items() if v.get("bt_score") is not None),
            key=lambda kv: -kv[1]["bt_score"],
        )
        context["pairwise_rows"] = ranked
        pairwise_order = [m for m, _ in ranked]
        comparisons = []
        model_names = set(pairwise_order)
        for other in Study.objects.visible_to(request.user).exclude(protocol=protocols.PAIRWISE).exclude(pk=study.pk):
            if len(model_names & set(other.gen_models.values_list("name", flat=True))) >= 2:
                absolute = _absolute_ranking(other)
                if absolute:
                    comparisons.append({"study": other, "ranking": absolute,
                                        "agreement": rank_agreement(pairwise_order, absolute)})
        context["comparisons"] = comparisons
        context["board"] = report.get("leaderboard", {}).get("bt_score")
    else:
        dims = dashboard.analysis_dimensions(study)
        default = study.protocol_def.headline_dimension
        dimension = request.GET.get("dim") if request.GET.get("dim") in dims else default
        method = "subject" if request.GET.get("method") == "subject" else "report"
        # the report's mean (z-MOS for EvalMi) or the subject model's mean item quality (P.913)
        blocks = ({m: v["dimensions"].get(dimension, {}) for m, v in report["models"].items()} if method == "report"
                  else {m: {"mean": b["quality"], "ci95": b["ci95"]}
                        for m, b in subject_report.model_scores(report, dimension).items()})
        order = sorted((m for m, b in blocks.items() if b.get("mean") is not None), key=lambda m: -blocks[m]["mean"])
        scores = (_item_scores(study, dimension) if method == "report" else subject_report.item_scores(
            report, dimension, item_table(study).set_index("item")["instance"]))
        gaps = {row.model: row for row in rank_models(scores, order=order)}
        clipped = {m for m in order if method == "report" and any(
            r.startswith(f"models.{m}.dimensions.{dimension}.ci95: clipped") for r in report.get("reasons", []))}
        context.update(
            clipped=clipped,
            board=report.get("leaderboard", {}).get(dimension),
            dims=dims,
            dimension=dimension,
            method=method,
            rows=[(rank, m, report["models"][m], blocks[m], gaps.get(m)) for rank, m in enumerate(order, start=1)],
        )
    context["separated_count"] = sum(1 for p in (context.get("board") or {}).get("pairs", []) if p.get("separated"))
    return render(request, "research/leaderboard.html", context)


@researcher_required
def study_plot(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    """One SVG plot of the study (server-rendered with matplotlib)."""
    study = Study.objects.visible_or_404(request.user, slug)
    if name not in plots_for(study):
        raise Http404("No such plot for this study's protocol")
    ratings = ratings_frame(study) if study.protocol_def.has_scales else pd.DataFrame()
    dims = dashboard.analysis_dimensions(study)
    if name == "histograms":
        scales = {d.key: d.choices for d in study.protocol_def.dimensions(study.protocol_settings)}
        svg = plots.score_histograms(ratings, [d for d in dims if d != "O"], scales=scales)
    elif name == "sc-pq":
        if ratings.empty:
            svg = plots.sc_pq_scatter(pd.DataFrame())
        else:
            means = per_rater_means(add_overall(ratings)).groupby(level="model")
            summary = pd.DataFrame({
                "SC_mean": means["SC"].mean(), "SC_std": means["SC"].std(ddof=0),
                "PQ_mean": means["PQ"].mean(), "PQ_std": means["PQ"].std(ddof=0),
            }).reset_index()
            svg = plots.sc_pq_scatter(summary)
    elif name == "mos":
        dimension = study.protocol_def.headline_dimension
        rows = rank_models(_item_scores(study, dimension), n_boot=0)
        table = pd.DataFrame([{"model": r.model, "mean": r.mean, "ci_low": r.ci_low, "ci_high": r.ci_high}
                              for r in rows], columns=["model", "mean", "ci_low", "ci_high"])
        label = "O = √(SC·PQ), mean over items" if dimension == "O" else "correspondence z-MOS (0–100)"
        if dimension == "O":  # O lies on 0–1: a Student-t interval of few items must not leave it
            table[["ci_low", "ci_high"]] = table[["ci_low", "ci_high"]].astype(float).clip(0.0, 1.0)
        svg = plots.mos_with_ci(table.astype({"ci_low": float, "ci_high": float}), label=label)
    else:
        svg = plots.alpha_over_time(stopping_panel.alpha_series_anytime(study),
                                    threshold=dashboard.agreement_threshold(request.GET.get("threshold"), study))
    return HttpResponse(svg, content_type="image/svg+xml")


@researcher_required
def study_export(request: HttpRequest, slug: str) -> HttpResponse:
    study = Study.objects.visible_or_404(request.user, slug)
    if not export_fits_in_a_request(study):  # a large study is prepared in the background
        return redirect("study-exports", slug=study.slug)
    return export_response(study)
