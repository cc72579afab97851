"""Shared benchmark plumbing: a scratch PostgreSQL database, Django setup, timing and percentiles.

Every benchmark creates ``bench_<pid>`` on ``BENCH_PG`` (default postgres://postgres@127.0.0.1:5432),
migrates it, and drops it at the end, even after an error or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
SCRATCH = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_{os.getpid()}"  # media and collected static files


def _admin_connection():
    import psycopg

    return psycopg.connect(f"{PG}/postgres", autocommit=True)


@contextlib.contextmanager
def scratch_database(name: str | None = None):
    """Create an empty database, yield its URL, drop it afterwards (terminating its connections)."""
    name = name or f"bench_{os.getpid()}"
    with _admin_connection() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{PG}/{name}"
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)
        with _admin_connection() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def bench_env(database_url: str, **extra: str) -> dict[str, str]:
    """Environment for this process and for servers it starts: production-like settings."""
    env = dict(os.environ)
    env.update({
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "DEBUG": "false",
        "SECRET_KEY": "bench-only-secret-key-not-for-production",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "LOG_LEVEL": "WARNING",
        "MEDIA_ROOT": str(SCRATCH / "media"),
        "STATIC_ROOT": str(SCRATCH / "static"),
        "PYTHONPATH": str(ROOT),
        # Plain HTTP on loopback: no redirect to HTTPS, cookies sent without TLS.
        "SECURE_SSL_REDIRECT": "false",
        "SESSION_COOKIE_SECURE": "false",
        "CSRF_COOKIE_SECURE": "false",
        # Every simulated rater comes from 127.0.0.1: the per-address limit on new crowd
        # participations (tasks.ratelimit) would stop all but the first 60.
        "CROWD_NEW_PARTICIPATIONS_PER_ADDRESS_HOUR": "1000000",
    })
    env.pop("CELERY_BROKER_URL", None)  # eager Celery unless a benchmark says otherwise
    env.update(extra)
    return env


def django_setup(database_url: str, *, migrate: bool = True, static: bool = False, **extra: str) -> None:
    """Point this process at the scratch database, (optionally) migrate it and collect static files.

    DEBUG is off (production-like), so pages need the collected static manifest: ``static=True``.
    """
    os.environ.update(bench_env(database_url, **extra))
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
    if static:
        from django.core.management import call_command

        call_command("collectstatic", verbosity=0, interactive=False)


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0–100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


NOISE_NOTE = ("Measured on a shared, noisy machine; ratios come from one run (both sides under the same load), "
              "absolute numbers are pessimistic.")
