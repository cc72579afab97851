"""The export page of a study: prepare the dataset in the background, watch it, download it.

Researchers who may see the study (owners, collaborators, staff) only; each sees and downloads
only the exports they asked for. Small studies can also be downloaded at once (streamed).
"""

from __future__ import annotations

from django.contrib import messages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from analysis.export_services import (EXPORT_KINDS, ExportError, export_fits_in_a_request, export_for_download,
                                      exports_for, sparse_layouts, study_export_start,
                                      study_vote_count)
from tasks.models import Study
from tasks.research_access import researcher_required


def _context(request: HttpRequest, study: Study) -> dict:
    exports = exports_for(study=study, user=request.user)
    return {"study": study, "exports": exports, "any_active": any(e.is_active for e in exports),
            "kinds": EXPORT_KINDS}


@researcher_required
def export_page(request: HttpRequest, slug: str) -> HttpResponse:
    study = Study.objects.visible_or_404(request.user, slug)
    context = _context(request, study)
    if request.htmx and request.GET.get("fragment") == "list":
        return render(request, "analysis/exports.html#list", context)
    votes = study_vote_count(study)
    context.update(votes=votes, inline=export_fits_in_a_request(study), sparse=sparse_layouts(study))
    return render(request, "analysis/exports.html", context)


@researcher_required
@require_POST
def export_start(request: HttpRequest, slug: str) -> HttpResponse:
    study = Study.objects.visible_or_404(request.user, slug)
    try:
        export = study_export_start(study=study, user=request.user, kind=request.POST.get("kind", "dataset"))
    except ExportError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, f"Export {export.pk} is being prepared; it appears below when it is ready.")
    return redirect(reverse("study-exports", args=[study.slug]))


@researcher_required
def export_download(request: HttpRequest, slug: str, export_id: int) -> FileResponse:
    study = Study.objects.visible_or_404(request.user, slug)
    export = export_for_download(export_id=export_id, user=request.user)
    if export is None or export.study_id != study.pk:
        raise Http404("no such export")
    kind = EXPORT_KINDS[export.kind]
    return FileResponse(export.file.open("rb"), as_attachment=True, filename=kind.filename(study),
                        content_type=kind.content_type)
