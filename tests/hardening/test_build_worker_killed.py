"""Kill the Celery worker in the middle of a study build, start another: the build finishes once
and no file is left without a row.

A real worker in a subprocess (Redis broker from CI_CELERY_BROKER_URL, the test's PostgreSQL
database, as tests/hardening/test_worker_killed.py) builds a 2,000-image bundle. It is killed with
SIGKILL while storing images; the job was never acknowledged (acks_late), so the next worker gets
the same task again, claims the build at once (same task id), removes what the killed attempt
stored under the build's folder and builds it. Skipped without a broker or without PostgreSQL.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import time
import uuid
import zipfile
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from PIL import Image

from tasks.build_services import study_build_start
from tasks.builder import StudySpec
from tasks.images import orphan_files_prune
from tasks.models import Item, StoredImage, StudyBuild
from tests.hardening.test_worker_killed import BROKER, start_worker, wait_for

pytestmark = [
    pytest.mark.celery_worker,
    pytest.mark.slow,
    pytest.mark.skipif(not BROKER, reason="CI_CELERY_BROKER_URL is not set: no broker for a real worker"),
]


def big_bundle(count: int) -> io.BytesIO:
    buffer, lines = io.BytesIO(), ["instance,model,output"]
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for n in range(count):
            image = Image.new("RGB", (128, 128), (n % 256, (n // 256) % 256, 77))
            data = io.BytesIO()
            image.save(data, format="PNG")
            archive.writestr(f"out/{n}.png", data.getvalue())
            lines.append(f"s{n // 4},M{n % 4},out/{n}.png")
        archive.writestr("manifest.csv", "\n".join(lines) + "\n")
    buffer.seek(0)
    return buffer


@contextlib.contextmanager
def held_row_once_storing(build_id: int):
    """Wait for the build to store images, lock its row from another connection, wait until the
    worker is blocked on that lock, yield the build as it was, and let go."""
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"],
                         dbname=db["NAME"], password=db.get("PASSWORD") or None) as other:
        seen = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with other.cursor() as cursor:
                cursor.execute("SELECT state, stage, done FROM tasks_studybuild WHERE id = %s FOR UPDATE", [build_id])
                state, stage, done = cursor.fetchone()
            if state in ("done", "failed") or (state == "running" and stage in ("storing", "creating")):
                seen = StudyBuild(pk=build_id, state=state, stage=stage, done=done)
                break  # keep the lock: the transaction stays open
            other.rollback()
            time.sleep(0.02)
        if seen is None:
            raise AssertionError("timed out after 120 s waiting for the build to store images")
        if seen.state == "running":
            wait_for(lambda: blocked_on_lock(other.info.backend_pid), 30, "the worker to wait on the build's row")
        try:
            yield seen
        finally:
            other.rollback()


def blocked_on_lock(holder_pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", [holder_pid])
        return cursor.fetchone()[0] > 0


def images_under(media_root: str, folder: str) -> bool:
    root = Path(media_root)
    return any(path.is_file() for path in root.rglob("*") if folder and folder in str(path.relative_to(root)))


def test_a_build_whose_worker_is_killed_finishes_on_a_new_worker_and_leaves_no_stray_file(transactional_db, settings):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: the worker subprocess must see the test database")
    from annotation_site.celery import app

    queue = f"build-kill-{uuid.uuid4().hex[:8]}"
    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager", "result_backend", "task_default_queue")}
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.update(broker_url=BROKER, task_always_eager=False, result_backend=None, task_default_queue=queue)
    workers = []
    try:
        build = study_build_start(upload=big_bundle(2000), spec=StudySpec(
            slug="killed-build", title="Killed", protocol="imagenhub", task_type="text_to_image"))
        workers.append(start_worker(queue, settings.MEDIA_ROOT))
        # Hold the build's row once it stores images: the worker's next write (progress, at most a
        # second away, or the final one) waits on the lock, so it is killed in the middle whatever
        # the machine's speed (a fast machine stored all 2,000 images between two polls).
        with held_row_once_storing(build.pk) as at_lock:
            os.killpg(workers[0].pid, signal.SIGKILL)
            workers[0].wait(timeout=10)
        assert at_lock.state == "running", "the build finished before the lock"
        at_kill = StudyBuild.objects.get(pk=build.pk)
        assert at_kill.state == "running" and at_kill.study_id is None, "the build finished before the kill"
        assert at_lock.stage in ("storing", "creating") and images_under(settings.MEDIA_ROOT, build.image_folder), \
            "the kill should leave the killed attempt's stored images behind"

        workers.append(start_worker(queue, settings.MEDIA_ROOT))
        wait_for(lambda: StudyBuild.objects.get(pk=build.pk).state in ("done", "failed"), 180, "the build to end")
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(timeout=30)
        app.conf.update(saved)

    build.refresh_from_db()
    assert (build.state, build.problems, build.error) == ("done", [], "")
    assert Item.objects.filter(study=build.study).count() == 2000 and StoredImage.objects.count() == 2000
    assert orphan_files_prune(older_than=timedelta(seconds=-60), dry_run=True) == (0, 0)
