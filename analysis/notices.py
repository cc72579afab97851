"""Tell a study's owners, once, when the study is complete or its agreement falls below threshold.

``study_notices_check(study)`` looks at the study and records each event as a
:class:`analysis.models.StudyNotice` row, unique per (study, kind, key): the row is created once
(a concurrent check loses the insert and sends nothing), and only the check that created it
emails the owners through Django's mail settings (``EMAIL_BACKEND``, ``DEFAULT_FROM_EMAIL``).
The dashboard shows the notices as a banner.

When it runs: after a rater's session finishes (``study_notices_schedule``, called on the submit
path after the ratings commit, as a Celery job) and whenever an owner opens the dashboard.
Completion is a count query and is checked every time; α is computed (without bootstrap) at most
once per :data:`ALPHA_CHECK_SECONDS` per study, so a burst of finishing raters costs one
computation, and never inside a rater's request (eager mode: see :func:`study_notices_run`).

α is the study-wide Krippendorff's α of each dimension (the dashboard's "All models" row), at the
dashboard's level (ordinal for ImagenHub, interval for Likert); it is judged only once at least
:data:`MIN_UNITS` items carry two or more ratings, since α over a handful of items is noise.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.cache import cache
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.dispatch import Signal
from django.urls import reverse

from analysis.dashboard import agreement_level, analysis_dimensions, progress, scored_ratings, study_threshold
from analysis.models import StudyNotice
from analysis.science.agreement import agreement_table
from tasks.models import Study

logger = logging.getLogger(__name__)

MIN_UNITS = 10
ALPHA_CHECK_SECONDS = 60


def _complete(study: Study, state=None) -> str | None:
    state = state if state is not None else progress(study)
    if state.units and state.units_complete >= state.units:
        return (f"All {state.units} {study.protocol_def.unit_plural} of "
                f"{study.title} have {state.target_per_unit} ratings ({state.ratings} ratings in total).")
    return None


def _alpha_low(study: Study) -> list[tuple[str, str]]:
    """(dimension, message) for each dimension whose study-wide α is below the study's threshold."""
    ratings = scored_ratings(study)
    if ratings.empty:
        return []
    threshold = study_threshold(study)
    dims = analysis_dimensions(study)
    table = agreement_table(ratings, scores=dims, by=(), levels=(agreement_level(study),), kappa=False, n_boot=0)
    low = []
    for row in table.itertuples():
        if row.value is None or row.n_units < MIN_UNITS or row.value >= threshold:
            continue
        low.append((str(row.dimension), f"Krippendorff's α of {row.dimension} is {row.value:.2f} over "
                                        f"{row.n_units} items, below the study's threshold {threshold:g}."))
    return low


def study_notices_check(study: Study, *, alpha: bool = True, progress=None) -> list[StudyNotice]:
    """Record (and email) the events that have happened and were not recorded yet; returns the new ones.
    ``alpha``: also judge agreement (throttled per study, see the module docstring). ``progress``:
    the study's :class:`analysis.science.progress.Progress` when the caller has it (the dashboard)."""
    found: list[tuple[str, str, str]] = []
    message = _complete(study, progress)
    if message:
        found.append((StudyNotice.Kind.COMPLETE, "", message))
    if alpha and study.protocol_def.has_scales and cache.add(f"notices-alpha:{study.pk}", 1, ALPHA_CHECK_SECONDS):
        found += [(StudyNotice.Kind.ALPHA_LOW, dim, text) for dim, text in _alpha_low(study)]
    known = set(StudyNotice.objects.filter(study=study).values_list("kind", "key"))
    created = []
    for kind, key, text in found:
        if (kind, key) in known:
            continue
        try:
            with transaction.atomic():
                notice = StudyNotice.objects.create(study=study, kind=kind, key=key, message=text)
        except IntegrityError:  # another check recorded it a moment ago: it sends the email
            continue
        _email(study, notice)
        created.append(notice)
    return created


def _email(study: Study, notice: StudyNotice) -> None:
    recipients = sorted({email for email in study.owners.exclude(email="").values_list("email", flat=True)})
    if not recipients:
        return
    link = reverse("research-study", args=[study.slug])
    base = getattr(settings, "SITE_URL", "").rstrip("/")
    try:
        send_mail(
            subject=f"[{study.slug}] {notice.get_kind_display()}",
            message=f"{notice.message}\n\nDashboard: {base}{link}\n",
            from_email=None,  # DEFAULT_FROM_EMAIL
            recipient_list=recipients,
        )
    except Exception:  # a mail server down must not lose the notice: the dashboard still shows it
        logger.exception("could not email the %s notice of study %s", notice.kind, study.slug)
        return
    StudyNotice.objects.filter(pk=notice.pk).update(emailed=True, recipients=len(recipients))


def study_notices_schedule(*, study_id: int) -> None:
    """Queue :func:`analysis.jobs.study_notices_job` after the current transaction commits."""
    transaction.on_commit(lambda: _queue(study_id), robust=True)


def session_ended(*, study_id: int, **kwargs) -> None:
    """Receiver of ``raters.services.session_ended``: the study may just have become complete, or
    its α fallen."""
    study_notices_schedule(study_id=study_id)


# A study's notices are due (``study_id``): its receiver (analysis.jobs, connected in
# analysis.apps) queues the job, which sits above this module.
notices_queued = Signal()


def _queue(study_id: int) -> None:
    try:
        notices_queued.send(sender=StudyNotice, study_id=study_id)
    except Exception:  # broker down: ratings must not fail for it; the dashboard checks too
        logger.exception("could not queue the notices of study %s", study_id)


def study_notices_run(*, study_id: int) -> int | None:
    """The job's body: the number of new notices, None when the study is gone.

    Without a worker (eager mode) the job runs inside the rater's request that ended a session:
    there it checks completion only (one aggregate query, ~0.1 s at 3,000 items × 3 ratings on
    SQLite) and leaves α (~1 s at 9,000 ratings) to the dashboard's check; with a worker it
    judges α too (throttled as above)."""
    study = Study.objects.filter(pk=study_id).first()
    if study is None:
        return None
    return len(study_notices_check(study, alpha=not getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False)))
