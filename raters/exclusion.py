"""Who is left out of a study's analysis, and why: the one exclusion rule.

The report, the exports, the dashboards, the release package, gold candidates and the persona
test all ask here. A rater is excluded from a study's analysis when blocked site-wide (and they
rated in the study) or rejected or blocked in that study (a ``RaterStanding``). Attention-check
answers were instructed, not judged: they are never analysis data. Excluded ratings stay in the
database; ``include_excluded=True`` reads them back.
"""

from __future__ import annotations

from django.db.models import QuerySet

from raters.models import Rater, RaterStanding
from tasks.models import Rating, Study


def excluded_raters(study: Study) -> dict[int, str]:
    """Rater id → why their ratings are left out of this study's analysis."""
    blocked = (
        Rater.objects.filter(ratings__study=study, state=Rater.State.BLOCKED)
        .distinct()
        .values_list("id", "state_reason")
    )
    reasons = {rater_id: f"blocked{': ' + reason if reason else ''}" for rater_id, reason in blocked}
    # Rater-quality decisions in this study: rejected or blocked here, with the reason.
    standings = RaterStanding.objects.filter(
        study=study, state__in=[RaterStanding.State.REJECTED, RaterStanding.State.BLOCKED]
    ).values_list("rater_id", "state", "reason")
    for rater_id, state, reason in standings:
        reasons.setdefault(rater_id, f"{state}{': ' + reason if reason else ''}")
    return reasons


def analysis_ratings(study: Study, *, include_excluded: bool = False) -> QuerySet[Rating]:
    """The study's ratings analysis uses: no attention-check answers and, unless
    ``include_excluded``, none from an excluded rater."""
    queryset = Rating.objects.filter(study=study).exclude(item__attention_check__isnull=False)
    if not include_excluded:
        queryset = queryset.exclude(rater_id__in=list(excluded_raters(study)))
    return queryset
