"""Celery jobs of the analysis app. They take ids, are idempotent and have time limits.

``run_judge_job`` may be delivered twice (acks_late after a worker was killed) or run while a
resumed copy is queued: :func:`analysis.judge_services.judge_run_execute` claims the run with a
conditional UPDATE and skips units already stored, so nothing is counted or stored twice.
"""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from analysis import judge_services

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


@shared_task(acks_late=True, soft_time_limit=SOFT_LIMIT_SECONDS, time_limit=HARD_LIMIT_SECONDS)
def build_release_job(release_id: int) -> dict | None:
    """Build a dataset release (analysis.release_services.release_execute); a failure is recorded."""
    from analysis.release_services import release_execute, release_fail

    try:
        release = release_execute(release_id=release_id)
    except SoftTimeLimitExceeded:
        release_fail(release_id=release_id, error="stopped at the time limit")
        return None
    except Exception as exc:
        release_fail(release_id=release_id, error=f"{type(exc).__name__}: {exc}")
        raise
    return None if release is None else {"release": release.pk, "state": release.state, "size": release.size}
