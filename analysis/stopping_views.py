"""Researcher pages of issue #17: how the stopping verdicts are made (the README's section), and
"Plan from another study or published MOS" (embedded in the study's settings page by htmx, and a
page of its own without JavaScript). The dashboard's stopping panel is part of its live block."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from analysis import planning_sources_page
from analysis.planning_sources_forms import PlanningSourceForm
from analysis.stopping_panel import README_HEADING
from tasks.models import Study
from tasks.research_access import researcher_required


def readme_section(heading: str = README_HEADING) -> list[str]:
    """The README's paragraphs under ``heading`` up to the next heading of any level."""
    text = (Path(settings.BASE_DIR) / "README.md").read_text(encoding="utf-8").splitlines()
    try:
        start = text.index(heading) + 1
    except ValueError:
        return []
    lines = []
    for line in text[start:]:
        if line.startswith("#"):
            break
        lines.append(line)
    return [" ".join(p.split("\n")) for p in "\n".join(lines).strip().split("\n\n") if p.strip()]


@researcher_required
def stopping_method(request: HttpRequest) -> HttpResponse:
    return render(request, "research/stopping_method.html",
                  {"heading": README_HEADING.lstrip("# "), "paragraphs": readme_section()})


@researcher_required
def study_planning_sources(request: HttpRequest, slug: str) -> HttpResponse:
    """Plan from a finished study or published MOS. GET with ``source`` set computes; a bad value
    gets the form back with its error (400)."""
    study = Study.objects.visible_or_404(request.user, slug)
    bound = "source" in request.GET
    form = PlanningSourceForm(request.GET if bound else None, user=request.user, study=study)
    result, status = None, 200
    if bound:
        if form.is_valid():
            data = form.cleaned_data
            result = planning_sources_page.plan_from(data["components"], halfwidth=data.get("halfwidth"),
                                                     gap=data.get("gap"), alpha_width=data.get("alpha_width"),
                                                     units=data["units"])
        elif not request.htmx:  # htmx swaps only 2xx answers: the form with its errors replaces the card
            status = 400
    context = {"study": study, "form": form, "result": result, "targets": form.cleaned_data if result else None}
    template = "research/_planning_sources.html" if request.htmx else "research/planning_sources.html"
    return render(request, template, context, status=status)
