"""Celery jobs of the analysis app. They take ids, are idempotent and have time limits.

``run_judge_job`` may be delivered twice (acks_late after a worker was killed) or run while a
resumed copy is queued: :func:`analysis.judge_services.judge_run_execute` claims the run with a
conditional UPDATE and skips units already stored, so nothing is counted or stored twice.
"""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from analysis import export_services, judge_services
from analysis.notices import study_notices_run
from analysis.release_services import release_execute, release_fail

# A judge run over a few hundred items with an MLLM takes minutes to an hour; a run cut by the
# limit is marked failed and can be resumed where it stopped.
SOFT_LIMIT_SECONDS = 3 * 3600
HARD_LIMIT_SECONDS = SOFT_LIMIT_SECONDS + 300


@shared_task(bind=True, acks_late=True, soft_time_limit=SOFT_LIMIT_SECONDS, time_limit=HARD_LIMIT_SECONDS)
def run_judge_job(self, run_id: int) -> dict | None:
    try:
        run = judge_services.judge_run_execute(run_id=run_id, task_id=self.request.id or "")
    except SoftTimeLimitExceeded:
        judge_services.judge_run_fail(run_id=run_id, error="stopped at the time limit; resume to continue")
        return None
    except Exception as exc:
        judge_services.judge_run_fail(run_id=run_id, error=f"{type(exc).__name__}: {exc}")
        raise
    if run is None:
        return None
    return {"run": run.pk, "state": run.state, "done": run.done, "failed": run.failed, "calls": run.calls}


# Exporting a study of a few hundred thousand votes takes minutes; the limit is for a stuck worker.
EXPORT_SOFT_LIMIT_SECONDS = 60 * 60
EXPORT_HARD_LIMIT_SECONDS = EXPORT_SOFT_LIMIT_SECONDS + 60


@shared_task(bind=True, acks_late=True, soft_time_limit=EXPORT_SOFT_LIMIT_SECONDS, time_limit=EXPORT_HARD_LIMIT_SECONDS)
def study_export_job(self, export_id: int) -> dict | None:
    try:
        export = export_services.study_export_run(export_id=export_id, task_id=self.request.id or "")
    except SoftTimeLimitExceeded:
        export_services.study_export_fail(export_id=export_id, error="stopped at the time limit; ask for the export again")
        return None
    if export is None:
        return None
    return {"export": export.pk, "state": export.state, "size": export.size}


@shared_task(acks_late=True, soft_time_limit=120, time_limit=180)
def study_notices_job(study_id: int) -> int | None:
    """Completion and low-agreement notices of a study (analysis.notices); idempotent: each event
    is recorded once, so a second delivery sends nothing."""
    try:
        return study_notices_run(study_id=study_id)
    except SoftTimeLimitExceeded:
        return None


@shared_task(acks_late=True, soft_time_limit=SOFT_LIMIT_SECONDS, time_limit=HARD_LIMIT_SECONDS)
def build_release_job(release_id: int) -> dict | None:
    """Build a dataset release (analysis.release_services.release_execute); a failure is recorded."""
    try:
        release = release_execute(release_id=release_id)
    except SoftTimeLimitExceeded:
        release_fail(release_id=release_id, error="stopped at the time limit")
        return None
    except Exception as exc:
        release_fail(release_id=release_id, error=f"{type(exc).__name__}: {exc}")
        raise
    return None if release is None else {"release": release.pk, "state": release.state, "size": release.size}


# Receivers of the services' "queued" signals (connected in analysis.apps): the services sit below
# this module, so they announce the work and the job module queues it.

def run_judge_queue(*, run_id: int, **kwargs) -> None:
    run_judge_job.delay(run_id)


def study_export_queue(*, export_id: int, **kwargs) -> None:
    study_export_job.delay(export_id)


def study_notices_queue(*, study_id: int, **kwargs) -> None:
    study_notices_job.delay(study_id)


def build_release_queue(*, release_id: int, **kwargs) -> None:
    build_release_job.delay(release_id)
