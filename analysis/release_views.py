"""Researcher pages of dataset releases: request a release, follow it, download it, read its card."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from analysis.models import export_storage
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from analysis.models import DatasetRelease
from analysis.science.release import LICENSES, card_rows
from analysis.release_services import ReleaseRefused, release_request, version_mix
from tasks.models import Study
from tasks.research_access import researcher_required

RELEASES_SHOWN = 20


class ReleaseForm(forms.Form):
    license = forms.ChoiceField(choices=[(name, name) for name in LICENSES], initial="cc-by-4.0")
    pay_per_item = forms.FloatField(required=False, min_value=0, max_value=10_000,
                                    help_text="What a rater was paid per item: the card computes pay per hour "
                                              "from the measured median time")
    currency = forms.RegexField(regex=r"^[A-Za-z]{0,8}$", required=False, max_length=8, initial="GBP")
    payment_list = forms.BooleanField(required=False, help_text="Add crowd ids in clear (private/payment_list.csv) "
                                                                "to pay raters. Never publish that file.")


@researcher_required
def study_release(request: HttpRequest, slug: str) -> HttpResponse:
    """The study's releases with the newest reporting card and the protocol versions; POST asks for
    a new release (built in the background)."""
    study = Study.objects.visible_or_404(request.user, slug)
    if request.method == "POST":
        form = ReleaseForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                release = release_request(study=study, user=request.user, license=data["license"],
                                          payment_list=data["payment_list"], pay_per_item=data["pay_per_item"],
                                          currency=data["currency"] or "")
            except ReleaseRefused as exc:
                messages.error(request, str(exc))
            else:
                messages.success(request, f"Release {release.pk} of {study.slug} requested: it is built in the "
                                          "background and listed below when ready.")
                return redirect("research-release", slug=study.slug)
    else:
        form = ReleaseForm()
    releases = list(DatasetRelease.objects.filter(study=study)[:RELEASES_SHOWN])
    latest = next((r for r in releases if r.state == DatasetRelease.State.DONE), None)
    return render(request, "research/release.html", {
        "study": study, "form": form, "releases": releases, "latest": latest,
        "card_rows": card_rows(latest.card) if latest and latest.card else [],
        "mix": version_mix(study),
    })


@researcher_required
def study_release_download(request: HttpRequest, slug: str, release_id: int) -> FileResponse:
    study = Study.objects.visible_or_404(request.user, slug)
    release = get_object_or_404(DatasetRelease, pk=release_id, study=study, state=DatasetRelease.State.DONE)
    if not release.file or not export_storage().exists(release.file):
        raise Http404("the release file is gone")
    return FileResponse(export_storage().open(release.file, "rb"), as_attachment=True,
                        filename=f"{study.slug}-release-{release.pk}.zip", content_type="application/zip")
