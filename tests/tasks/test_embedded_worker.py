"""The embedded broker of ``make run``: a real Celery worker in a subprocess takes a judge run
from kombu's filesystem transport (no broker server) and works it through, the way
``manage.py runsite`` runs it beside the web server.

On SQLite the test database lives in memory, which another process cannot open: it is copied
to a file (sqlite3's backup API) after the test's rows are committed, and the worker uses that
file; on PostgreSQL the worker connects to the test database itself. Every wait is on a
condition with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

import pytest
from celery import Celery
from django.core.management import CommandError, call_command
from django.db import connection

from analysis.judge_services import judge_create
from analysis.models import JudgeRun, JudgeScore
from annotation_site.env import celery_filesystem_options
from tasks.management.commands.runsite import stop, worker_command
from tests.factories import make_item, make_study

DEADLINE_SECONDS = 90  # worker start-up plus two items; about 10 s on an idle machine


def _worker_database(tmp_path) -> tuple[str, callable]:
    """(DATABASE_URL for the worker, a function reading (state, done, scores) of a run)."""
    if connection.vendor == "sqlite":
        path = tmp_path / "worker.sqlite3"
        connection.ensure_connection()
        with sqlite3.connect(path) as copy:
            connection.connection.backup(copy)

        def read(run_id: int):
            with sqlite3.connect(path, timeout=20) as db:
                state, done = db.execute("SELECT state, done FROM analysis_judgerun WHERE id = ?", [run_id]).fetchone()
                scores = db.execute("SELECT COUNT(*) FROM analysis_judgescore WHERE run_id = ?", [run_id]).fetchone()[0]
            return state, done, scores

        return f"sqlite:///{path}", read
    s = connection.settings_dict

    def read(run_id: int):
        run = JudgeRun.objects.get(pk=run_id)
        return run.state, run.done, JudgeScore.objects.filter(run_id=run_id).count()

    return f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}", read


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_on_the_embedded_broker_runs_a_judge_job(tmp_path, settings):
    study = make_study()
    for model in ("Alpha", "Beta"):
        make_item(study, model=model)
    judge = judge_create(name="sharp", kind="metric", params={"metrics": ["sharpness", "noise"]})
    # created directly: judge_run_start would queue the job eagerly, in this process
    run = JudgeRun.objects.create(judge=judge, study=study, total=2, config_hash=judge.config_hash)
    database_url, read = _worker_database(tmp_path)

    broker_dir = tmp_path / "broker"
    producer = Celery("probe", broker="filesystem://",
                      broker_transport_options=celery_filesystem_options(str(broker_dir)))
    producer.send_task("analysis.jobs.run_judge_job", args=[run.pk])  # a file in the queue folder, waiting

    env = {**os.environ, "CELERY_BROKER_URL": "filesystem://", "CELERY_FILESYSTEM_DIR": str(broker_dir),
           "DATABASE_URL": database_url, "MEDIA_ROOT": str(settings.MEDIA_ROOT), "DJANGO_SETTINGS_MODULE": "annotation_site.settings"}
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(worker_command(concurrency=1), cwd=settings.BASE_DIR, env=env, stdout=out,
                                  stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + DEADLINE_SECONDS
            state = read(run.pk)
            while state[0] not in ("done", "failed", "cancelled"):
                assert worker.poll() is None, f"the worker exited ({worker.returncode}):\n{log.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"no result in {DEADLINE_SECONDS} s, last {state}:\n{log.read_text()[-3000:]}"
                time.sleep(0.2)
                state = read(run.pk)
        finally:
            stop([worker], grace=15)
    assert state == ("done", 2, 4), log.read_text()[-3000:]  # two items × (sharpness, noise)
    assert not list((broker_dir / "queue").iterdir())  # the message was taken
    assert worker.returncode is not None


def test_runsite_refuses_to_start_without_a_broker(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    with pytest.raises(CommandError, match="eager mode"):
        call_command("runsite")


def test_the_filesystem_broker_folders_are_made(tmp_path):
    options = celery_filesystem_options(str(tmp_path / "b"))
    assert options["data_folder_in"] == options["data_folder_out"] == str(tmp_path / "b" / "queue")
    assert all((tmp_path / "b" / name).is_dir() for name in ("queue", "control", "processed"))


def test_stop_kills_a_process_that_ignores_sigterm(tmp_path):
    stubborn = subprocess.Popen(["python3", "-c", "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                 "print('ready', flush=True)\ntime.sleep(60)"], stdout=subprocess.PIPE)
    assert stubborn.stdout.readline().strip() == b"ready"  # the handler is in place
    started = time.monotonic()
    stop([stubborn], grace=1)
    assert stubborn.returncode == -9 and time.monotonic() - started < 10


@pytest.mark.slow
def test_runsite_serves_with_a_worker_beside_it_and_ctrl_c_stops_both(tmp_path, settings):
    """``make run``'s command: the web server answers, the worker comes up, and Ctrl-C (SIGINT to
    the whole foreground process group, as a terminal sends it) leaves no process behind."""
    import signal
    import socket
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "CELERY_BROKER_URL": "filesystem://", "CELERY_FILESYSTEM_DIR": str(tmp_path / "broker"),
           "DATABASE_URL": f"sqlite:///{tmp_path / 'site.sqlite3'}", "MEDIA_ROOT": str(tmp_path / "media"),
           "DJANGO_SETTINGS_MODULE": "annotation_site.settings", "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "runsite.log"
    with open(log, "wb") as out:
        site = subprocess.Popen([sys.executable, "manage.py", "runsite", f"127.0.0.1:{port}", "--noreload",
                                 "--concurrency", "1"], cwd=settings.BASE_DIR, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + DEADLINE_SECONDS
            answered = False
            while not (answered and "ready." in log.read_text(errors="replace")):
                assert site.poll() is None, f"runsite exited ({site.returncode}):\n{log.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"not up in {DEADLINE_SECONDS} s:\n{log.read_text()[-3000:]}"
                if not answered:
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5) as page:
                            answered = page.status == 200
                    except OSError:
                        pass
                time.sleep(0.2)
            os.killpg(site.pid, signal.SIGINT)  # Ctrl-C
            site.wait(timeout=60)
        finally:
            if site.poll() is None:
                os.killpg(site.pid, signal.SIGKILL)
                site.wait()
    deadline = time.monotonic() + 30
    while True:  # the worker and the server are gone with it (their group is empty)
        try:
            os.killpg(site.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "a process of runsite outlived Ctrl-C"
        time.sleep(0.2)
    assert "Stopping the web server and the worker" in log.read_text()
