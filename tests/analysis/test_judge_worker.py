"""The same VIEScore run through a real Celery worker (CI: Redis broker, PostgreSQL).

Skipped unless CI_CELERY_BROKER_URL is set (.ci/run sets it). The worker runs in this process
(celery.contrib.testing.worker) and shares the test database through ``transactional_db``.
"""

from __future__ import annotations

import os

import pytest

from analysis.judge_services import judge_create, judge_run_start
from analysis.models import JudgeRun, JudgeScore
from tests.factories import make_item, make_study
from tests.judge_server import FakeJudgeServer

BROKER = os.environ.get("CI_CELERY_BROKER_URL")

pytestmark = [
    pytest.mark.celery_worker,
    pytest.mark.skipif(not BROKER, reason="CI_CELERY_BROKER_URL is not set: no broker for a real worker"),
]


@pytest.fixture
def celery_worker(transactional_db, settings):
    from celery.contrib.testing.worker import start_worker

    from annotation_site.celery import app

    import uuid

    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager", "result_backend", "task_default_queue")}
    settings.CELERY_TASK_ALWAYS_EAGER = False
    # A queue of its own: other test sessions on the same broker must not take this job.
    app.conf.update(broker_url=BROKER, task_always_eager=False, result_backend=None,
                    task_default_queue=f"judges-test-{uuid.uuid4().hex[:8]}")
    # Earlier tests in this process may have built the producer pool and queue map from the old
    # settings; drop them so publishing goes to this broker and queue, as the worker's consuming.
    if app._pool is not None:
        app._pool.force_close_all()
        app._pool = None
    app.amqp._producer_pool = None
    # kombu keeps producer pools per connection in a registry of its own: an earlier worker in
    # this process closed the one for this broker ("Acquire on closed pool" on the next publish)
    from kombu import pools

    pools.reset()
    app.amqp.__dict__.pop("queues", None)  # a cached_property
    app.amqp._rtable = None
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            yield app
    finally:
        app.conf.update(saved)


def test_a_real_worker_runs_a_viescore_job_and_a_rerun_makes_no_calls(celery_worker, settings):
    import time

    study = make_study()
    for i in range(3):
        make_item(study, model=f"Model{i % 2}")
    with FakeJudgeServer() as server:
        settings.JUDGE_ENDPOINTS = server.endpoints()  # the worker runs in this process
        judge = judge_create(name="VIEScore worker", kind="viescore", params={"model": "fake-good"})
        runs = []
        for _ in range(2):
            run = judge_run_start(judge=judge, study=study)  # autocommit: queued to the broker at once
            deadline = time.monotonic() + 60
            while JudgeRun.objects.get(pk=run.pk).state not in ("done", "failed", "cancelled"):
                assert time.monotonic() < deadline, "the worker did not finish the run in 60 s"
                time.sleep(0.1)
            runs.append(JudgeRun.objects.get(pk=run.pk))
        first, second = runs
        assert (first.state, first.done, first.failed, first.calls) == ("done", 3, 0, 6)
        assert (second.state, second.done, second.calls, second.cached) == ("done", 3, 0, 3)
        assert server.requests == 6
        assert JudgeScore.objects.filter(run=first).count() == 9
