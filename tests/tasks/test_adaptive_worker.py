"""A stale adaptive list recomputed by a real Celery worker (CI: Redis broker, PostgreSQL), off the
claiming rater's request. Skipped unless CI_CELERY_BROKER_URL is set (.ci/run sets it)."""

from __future__ import annotations

import threading
import time

import pytest

from tasks.assignment import adaptive, assignment_batch_claim
from tasks.models import AllocationRound
from tests.analysis import test_judge_worker
from tests.factories import make_rater
from tests.tasks.test_adaptive_assignment import stale_list_study

celery_worker = test_judge_worker.celery_worker  # the in-process worker on the CI broker

pytestmark = [
    pytest.mark.celery_worker,
    pytest.mark.skipif(not test_judge_worker.BROKER, reason="CI_CELERY_BROKER_URL is not set: no broker for a real worker"),
]


def test_a_real_worker_recomputes_the_stale_list_while_claims_go_on(celery_worker, monkeypatch):
    threads = []  # where each recomputation ran
    recompute = adaptive.recompute
    monkeypatch.setattr(adaptive, "recompute", lambda study, *, trigger: (
        threads.append((trigger, threading.current_thread() is threading.main_thread())),
        recompute(study, trigger=trigger))[1])
    study, first = stale_list_study(monkeypatch)
    assert assignment_batch_claim(rater=make_rater(), study=study) == 1  # from the current list; the job queued
    deadline = time.monotonic() + 60
    while AllocationRound.objects.filter(study=study).count() < 2:
        assert time.monotonic() < deadline, "the worker did not recompute the list in 60 s"
        time.sleep(0.1)
    latest = AllocationRound.objects.filter(study=study).first()
    assert latest.pk != first.pk and latest.trigger == "ratings" and latest.ratings_seen == 3
    assert threads == [("first", True), ("ratings", False)]  # the stale list: in the worker, not the claim
