"""Researcher pages to configure, launch and export a study (no admin needed).

* ``configure``: every setting a crowd study needs (codes per outcome, sessions, consent, pay,
  instructions and worked examples, quality policy, collaborators) and the cost estimate;
* ``launch``: publish, then the links to paste into Prolific, MTurk and to invited raters;
* ``export``: what the dataset zip holds, and what it cannot hold for this study, before download.

Access as every research page: ``research_views._get_study_for_user`` (Study.objects.visible_to).
"""

from __future__ import annotations


from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from analysis.science import protocols
from raters.costs import study_cost
from tasks.configure_forms import StudyConfigureForm, WorkedExampleForm, initial_of
from tasks.configure_services import (
    ConfigurationRefused,
    attention_checks_set,
    study_configure,
    worked_example_add,
    worked_example_remove,
)
from tasks.crowd import launch_links
from tasks.models import Study
from tasks.research_views import _get_study_for_user, researcher_required
from tasks.study_services import StudyActionRefused, study_publish


def _form_errors(form, refused: ConfigurationRefused) -> None:
    for name, message in refused.errors.items():
        form.add_error(None if name == "__all__" or name not in form.fields else name, message)


@researcher_required
@require_http_methods(["GET", "POST"])
def study_configure_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The study's settings. While open, fields that may not change are shown disabled, with why."""
    study = _get_study_for_user(request, slug)
    form = StudyConfigureForm(request.POST or None, study=study, lock=True, initial=initial_of(study))
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                study_configure(study=study, changes=form.cleaned_data, actor=request.user)
            except ConfigurationRefused as exc:
                _form_errors(form, exc)
            else:
                messages.success(request, "Settings saved.")
                return redirect("research-study-configure", slug=study.slug)
        status = 400
    return render(request, "research/configure.html", {
        "study": study, "form": form, "cost": study_cost(study),
        "examples": study.worked_examples.select_related("image"),
        "attention_checks": study.attention_checks.select_related("item__instance", "item__gen_model"),
        "example_form": WorkedExampleForm(), "is_draft": study.state == Study.State.DRAFT,
        "is_owner": request.user.is_staff or study.owners.filter(pk=request.user.pk).exists(),
    }, status=status)


@researcher_required
@require_POST
def study_examples(request: HttpRequest, slug: str) -> HttpResponse:
    """Add a worked example (image + caption) or remove one (``remove`` = its id), drafts only."""
    study = _get_study_for_user(request, slug)
    remove = request.POST.get("remove")
    try:
        if remove is not None:
            if not (remove.isascii() and remove.isdigit() and len(remove) < 10):
                raise ConfigurationRefused({"__all__": "No such example in this study."})
            worked_example_remove(study=study, example_id=int(remove))
            messages.success(request, "Example removed.")
        else:
            form = WorkedExampleForm(request.POST, request.FILES)
            if not form.is_valid():
                raise ConfigurationRefused({k: " ".join(v) for k, v in form.errors.items()})
            worked_example_add(study=study, upload=form.cleaned_data["image"], caption=form.cleaned_data["caption"])
            messages.success(request, "Example added.")
    except ConfigurationRefused as exc:
        messages.error(request, "Example not saved: " + str(exc))
    return redirect(reverse("research-study-configure", args=[study.slug]) + "#examples")


def _small_int(value: str | None, *, name: str) -> int:
    if value is None or not (value.isascii() and value.isdigit() and len(value) <= 4):
        raise ConfigurationRefused({name: "A whole number."})
    return int(value)


@researcher_required
@require_POST
def study_attention(request: HttpRequest, slug: str) -> HttpResponse:
    """Set the number of attention checks and their spacing (drafts only)."""
    study = _get_study_for_user(request, slug)
    try:
        checks = attention_checks_set(study=study, count=_small_int(request.POST.get("count"), name="count"),
                                      spacing=_small_int(request.POST.get("spacing"), name="spacing"))
    except ConfigurationRefused as exc:
        messages.error(request, "Attention checks not changed: " + str(exc))
    else:
        messages.success(request, f"{len(checks)} attention check{'s' if len(checks) != 1 else ''} set.")
    return redirect(reverse("research-study-configure", args=[study.slug]) + "#attention")


# ------------------------------------------------------------------ launch


@researcher_required
@require_http_methods(["GET", "POST"])
def study_launch(request: HttpRequest, slug: str) -> HttpResponse:
    """Publish (POST), then the links for Prolific, MTurk and invited raters, each with a copy button."""
    study = _get_study_for_user(request, slug)
    if request.method == "POST":
        try:
            study = study_publish(study=study)
        except StudyActionRefused as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"“{study.title}” is open for rating. Paste the links below into your platform.")
        return redirect("research-study-launch", slug=study.slug)
    start_url = request.build_absolute_uri(reverse("rating:start", args=[study.slug]))
    missing = [label for label, value in (("completion code", study.completion_code),
                                          ("closed code", study.closed_code)) if not value]
    return render(request, "research/launch.html", {
        "study": study, "links": launch_links(start_url), "missing_codes": missing,
    })


# ------------------------------------------------------------------ export


def sparse_layouts(study: Study) -> list[str]:
    """Why the export's per-rater layouts will have gaps for this study ('' list when none).

    The ImagenHub TSVs hold one file per rater with a row per sample only where that rater rated
    every model on it; in balanced mode raters get a share of the items, so most rows are
    missing. The per-vote and per-item tables are complete in every mode.
    """
    notes = []
    if study.protocol == protocols.IMAGENHUB and study.assignment_mode != Study.AssignmentMode.WHOLE_SET:
        notes.append(
            "This study hands each rater a share of the items (balanced assignment), so the ImagenHub TSVs "
            "(one file per rater, a row only where that rater rated every model on a sample) are sparse: "
            "most samples are missing from each rater's file. Use votes.csv or items.csv for analysis; the "
            "TSVs match ImagenHub's layout only for whole-set studies.")
    return notes


@researcher_required
def study_export_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The export page lives with the background exports (analysis.export_views); this address stays."""
    study = _get_study_for_user(request, slug)
    return redirect("study-exports", study.slug)
