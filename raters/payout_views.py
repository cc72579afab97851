"""The raters page's Prolific decisions download (raters.payouts)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse

from raters.payouts import prolific_csv, prolific_decisions
from tasks.models import Study


@login_required
def prolific_decisions_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """participant_id, session_id, decision, reason, bonus, … for every Prolific participant."""
    study = Study.objects.visible_or_404(request.user, slug)
    response = HttpResponse(prolific_csv(prolific_decisions(study)), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-prolific-decisions.csv"'
    return response
