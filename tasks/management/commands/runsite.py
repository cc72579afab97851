"""``manage.py runsite [addr:port]``: the development server and a Celery worker beside it.

What ``make run`` starts (with ``CELERY_BROKER_URL=filesystem://``, the embedded broker): judge
runs, study builds and exports queued by the pages run in the worker, and the pages watch their
progress, instead of running inside the request that queued them. One command; Ctrl-C (or either
process ending) stops both. A worker stopped mid-job leaves the job resumable: a judge run shows
as stalled (Resume), a build is claimed again, an export can be asked for again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

STOP_GRACE_SECONDS = 10  # a worker finishing its current unit; then it is killed (jobs are resumable)


def worker_command(*, concurrency: int, loglevel: str = "INFO") -> list[str]:
    """The Celery worker's command line (prefork: time limits work; no gossip/mingle: one worker)."""
    return [sys.executable, "-m", "celery", "-A", "annotation_site", "worker", "--loglevel", loglevel,
            "--concurrency", str(concurrency), "--without-gossip", "--without-mingle", "--without-heartbeat"]


def stop(processes: list[subprocess.Popen], *, grace: float = STOP_GRACE_SECONDS) -> None:
    """Ask each running process to stop (SIGTERM), wait up to ``grace`` seconds, then kill it."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Command(BaseCommand):
    help = "Serve the site (runserver) with a Celery worker beside it; Ctrl-C stops both."

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000", help="host:port for runserver")
        parser.add_argument("--concurrency", type=int, default=2, help="worker processes (default 2)")
        parser.add_argument("--noreload", action="store_true", help="pass --noreload to runserver")

    def handle(self, *args, addrport: str, concurrency: int, noreload: bool, **options):
        if settings.CELERY_TASK_ALWAYS_EAGER:
            raise CommandError("Celery is in eager mode (CELERY_BROKER_URL unset): there is nothing for a worker "
                               "to take. Set CELERY_BROKER_URL=filesystem:// for the embedded broker, or a redis:// URL.")
        if concurrency < 1:
            raise CommandError("--concurrency must be at least 1")
        manage = Path(settings.BASE_DIR) / "manage.py"
        server_command = [sys.executable, str(manage), "runserver", addrport] + (["--noreload"] if noreload else [])
        env = os.environ.copy()
        processes = [
            subprocess.Popen(worker_command(concurrency=concurrency), cwd=settings.BASE_DIR, env=env),
            subprocess.Popen(server_command, cwd=settings.BASE_DIR, env=env),
        ]
        names = ["worker", "web server"]
        self.stdout.write(f"Web server on http://{addrport}/ and a Celery worker ({concurrency} processes) on "
                          f"{settings.CELERY_BROKER_URL.split('@')[-1]}; Ctrl-C stops both.")
        code = 0
        try:
            while True:
                ended = [(name, p) for name, p in zip(names, processes) if p.poll() is not None]
                if ended:
                    name, process = ended[0]
                    code = process.returncode or 1
                    self.stderr.write(f"The {name} stopped (exit {process.returncode}); stopping the other.")
                    break
                time.sleep(0.5)
        except KeyboardInterrupt:
            self.stdout.write("Stopping the web server and the worker…")
        finally:
            stop(processes)
        if code:
            raise CommandError(f"stopped with exit code {code}")
