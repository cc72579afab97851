"""Celery jobs of the tasks app. They take ids, are idempotent and have time limits.

``study_build_job`` may be delivered twice (acks_late after a worker was killed):
:func:`tasks.build_services.study_build_run` claims the build with a conditional UPDATE, so a
build runs once; a build whose worker died is claimed again once its progress is stale, or at
once by the same task delivered again. That relies on the broker not handing a task that is still
running to a second worker: Redis's visibility timeout (1 h by default) must exceed
HARD_LIMIT_SECONDS.
"""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from tasks import build_services
from tasks.assignment import adaptive

# Checking and storing 7,000 images takes about a minute; the limit is for a stuck worker.
SOFT_LIMIT_SECONDS = 30 * 60
HARD_LIMIT_SECONDS = SOFT_LIMIT_SECONDS + 60


@shared_task(bind=True, acks_late=True, soft_time_limit=SOFT_LIMIT_SECONDS, time_limit=HARD_LIMIT_SECONDS)
def study_build_job(self, build_id: int) -> dict | None:
    try:
        build = build_services.study_build_run(build_id=build_id, task_id=self.request.id or "")
    except SoftTimeLimitExceeded:
        build_services.study_build_fail(build_id=build_id, error="stopped at the time limit; upload the bundle again")
        return None
    if build is None:
        return None
    return {"build": build.pk, "state": build.state, "study": build.study_id}


@shared_task(acks_late=True, soft_time_limit=300, time_limit=360)
def adaptive_recompute_job(study_id: int, round_id: int, trigger: str) -> int | None:
    """A new allocation round of an adaptive study whose list went stale (at EvalMi scale a few
    seconds of estimation, off the rater's request); idempotent (tasks.assignment.adaptive)."""
    try:
        return adaptive.recompute_if_stale(study_id, round_id, trigger)
    except SoftTimeLimitExceeded:
        return None


def adaptive_recompute_queue(*, study_id: int, round_id: int, trigger: str, **kwargs) -> None:
    """Receiver of ``tasks.assignment.adaptive.recompute_queued``."""
    adaptive_recompute_job.delay(study_id, round_id, trigger)


def study_build_queue(*, build_id: int, **kwargs) -> None:
    """Receiver of ``tasks.build_services.build_queued``."""
    study_build_job.delay(build_id)
