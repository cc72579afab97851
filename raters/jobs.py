"""Celery jobs of the raters app. They take ids, are idempotent and have time limits.

``apply_quality_rules_job`` runs every rule of a study (gold accuracy, attention checks and the
behaviour flags that need everyone's ratings: too fast, straight-lining, low agreement, BT.500).
It is queued by :func:`raters.services.quality_rules_tick` after a rater finishes a session or
every N ratings (``QualityPolicy``), with ``transaction.on_commit``, through the signals of
``raters.services`` that ``raters.apps`` connects to the receivers below. ``apply_rater_rules_job`` runs
one rater's gold and attention rules after their session when the study runs no rules then. In eager mode (no broker,
the embedded default) it runs right after the rating's commit, in the same request.
"""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from raters import services

# Rules over a study of EvalMi size (tens of thousands of ratings) take seconds; a run cut by the
# limit changes nothing (the rules run in one transaction) and the next trigger runs them again.
SOFT_LIMIT_SECONDS = 300
HARD_LIMIT_SECONDS = SOFT_LIMIT_SECONDS + 60
RATER_SOFT_LIMIT_SECONDS = 60  # one rater's gold and attention tallies: a few indexed queries


@shared_task(acks_late=True, soft_time_limit=SOFT_LIMIT_SECONDS, time_limit=HARD_LIMIT_SECONDS)
def apply_quality_rules_job(study_id: int) -> dict | None:
    try:
        return services.quality_rules_run(study_id=study_id)
    except SoftTimeLimitExceeded:
        return None


@shared_task(acks_late=True, soft_time_limit=RATER_SOFT_LIMIT_SECONDS, time_limit=RATER_SOFT_LIMIT_SECONDS + 30)
def apply_rater_rules_job(rater_id: int, study_id: int) -> dict | None:
    try:
        return services.rater_rules_run(rater_id=rater_id, study_id=study_id)
    except SoftTimeLimitExceeded:
        return None


def rater_rules_queue(*, rater_id: int, study_id: int, **kwargs) -> None:
    """Receiver of ``raters.services.queue_rater_rules``."""
    apply_rater_rules_job.delay(rater_id, study_id)


def study_rules_queue(*, study_id: int, countdown: float, **kwargs) -> None:
    """Receiver of ``raters.services.queue_study_rules``."""
    if countdown:
        apply_quality_rules_job.apply_async(args=[study_id], countdown=countdown)
    else:
        apply_quality_rules_job.delay(study_id)
