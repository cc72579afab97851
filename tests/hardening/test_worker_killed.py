"""Kill the Celery worker in the middle of a judge run, start another: the run finishes once.

A real worker in a subprocess (Redis broker from CI_CELERY_BROKER_URL, the test's PostgreSQL
database) runs a VIEScore job against the fake judge server. It is killed with SIGKILL after a few
units; the job was never acknowledged (acks_late), so a new worker gets it again (short
visibility timeout, tests/hardening/worker_settings.py) and finishes the remaining units.
Skipped without a broker or without PostgreSQL (a subprocess cannot share SQLite's in-memory test
database).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

from analysis.judge_services import judge_create, judge_run_start
from analysis.models import JudgeRun, JudgeScore
from tests.factories import make_item, make_study
from tests.judge_server import FakeJudgeServer

BROKER = os.environ.get("CI_CELERY_BROKER_URL")
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.celery_worker,
    pytest.mark.slow,
    pytest.mark.skipif(not BROKER, reason="CI_CELERY_BROKER_URL is not set: no broker for a real worker"),
]


def start_worker(queue: str, media_root: str, **extra_env: str) -> subprocess.Popen:
    db = connection.settings_dict
    env = {
        **os.environ,
        **extra_env,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "tests.hardening.worker_settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "CELERY_BROKER_URL": BROKER,
        "MEDIA_ROOT": str(media_root),
        "LOG_LEVEL": "WARNING",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "annotation_site", "worker", "--pool", "solo", "-Q", queue,
         "--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


def wait_for(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what}")


def test_a_judge_run_whose_worker_is_killed_finishes_on_a_new_worker_without_duplicate_scores(
    transactional_db, settings
):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: the worker subprocess must see the test database")
    from annotation_site.celery import app

    queue = f"kill-test-{uuid.uuid4().hex[:8]}"
    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager", "result_backend", "task_default_queue")}
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.update(broker_url=BROKER, task_always_eager=False, result_backend=None, task_default_queue=queue)
    study = make_study(slug="killed-worker")
    for i in range(16):
        make_item(study, model=f"Model{i % 4}")
    workers = []
    try:
        with FakeJudgeServer(slow_seconds=0.25) as server:
            # the operator's endpoint, here and in the worker processes (their settings read the environment)
            endpoint = {"JUDGE_API_BASE": server.base_url, "JUDGE_MODEL": "fake-slow"}
            settings.JUDGE_ENDPOINTS = server.endpoints()
            judge = judge_create(name="VIEScore (kill test)", kind="viescore", params={
                "model": "fake-slow", "concurrency": 2, "backoff_seconds": 0.01, "timeout_seconds": 10,
            })
            workers.append(start_worker(queue, settings.MEDIA_ROOT, **endpoint))
            run = judge_run_start(judge=judge, study=study)
            wait_for(lambda: JudgeRun.objects.get(pk=run.pk).done >= 3, 60, "the first units")
            os.killpg(workers[0].pid, signal.SIGKILL)
            workers[0].wait(timeout=10)
            done_at_kill = JudgeRun.objects.get(pk=run.pk).done
            assert done_at_kill < run.total, "the run finished before the kill; slow the fake server down"

            workers.append(start_worker(queue, settings.MEDIA_ROOT, **endpoint))
            wait_for(lambda: JudgeRun.objects.get(pk=run.pk).state == JudgeRun.State.DONE, 90, "the run to finish")
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(timeout=30)
        app.conf.update(saved)

    run.refresh_from_db()
    assert (run.done, run.failed, run.total) == (16, 0, 16)
    keys = list(JudgeScore.objects.filter(run=run).values_list("item_id", "dimension"))
    assert len(keys) == len(set(keys)), "a unit was stored twice"
    assert {item for item, _ in keys} == set(study.items.values_list("pk", flat=True))
