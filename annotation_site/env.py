"""Small helpers that read settings from the environment and fail loudly on bad values.

A typo such as ``DEBUG=ture`` must stop the process at start-up, not silently fall back to a
default that behaves differently in production.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

from analysis.science.judges.endpoints import EndpointError, endpoints_from_environ, parse_networks

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}


class EnvError(ValueError):
    """An environment variable holds a value the site cannot use."""


def envstr(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value


def envbool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise EnvError(f"{name}={value!r} is not a boolean; use one of {sorted(TRUE_WORDS | FALSE_WORDS)}")


def envint(name: str, default: int, *, minimum: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise EnvError(f"{name}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise EnvError(f"{name}={number} is below the minimum {minimum}")
    return number


def envlist(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return list(default)
    return [part.strip() for part in value.split(",") if part.strip()]


def database_config(url: str | None, *, default_sqlite_path: str, prepare_threshold: str | None = None) -> dict:
    """Turn DATABASE_URL into a Django DATABASES entry.

    Only SQLite and PostgreSQL are supported; anything else is rejected rather than guessed.

    PostgreSQL connections bind parameters on the server and prepare a statement once it has
    run ``prepare_threshold`` times on a connection (default 5; ``off`` disables it, e.g. behind
    a transaction-mode PgBouncer without prepared-statement support). The rating pages run the
    same few statements over and over; planning a seven-table join costs about 1.3 ms, running
    it 0.15 ms, so a prepared plan takes most of a statement's server time away.
    """
    if not url:
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": default_sqlite_path}
    scheme = url.split(":", 1)[0].lower()
    if scheme not in {"sqlite", "postgres", "postgresql", "pgsql"}:
        raise EnvError(f"DATABASE_URL scheme {scheme!r} is not supported; use sqlite:/// or postgres://")
    try:
        config = dj_database_url.parse(url, conn_max_age=60)
    except Exception as exc:  # dj_database_url raises several types for malformed URLs
        raise EnvError(f"DATABASE_URL={url!r} cannot be parsed: {exc}") from None
    if config["ENGINE"].endswith("postgresql") and not config.get("NAME"):
        raise EnvError("DATABASE_URL for PostgreSQL must name a database, e.g. postgres://postgres@127.0.0.1:5432/annotation")
    if config["ENGINE"].endswith("postgresql"):
        threshold = (prepare_threshold or "5").strip().lower()
        if threshold not in {"off", "none"}:
            if not (threshold.isascii() and threshold.isdigit()):
                raise EnvError(f"DATABASE_PREPARE_THRESHOLD={prepare_threshold!r}: give a whole number of runs (0 = at once) or 'off'")
            options = config.setdefault("OPTIONS", {})
            options["server_side_binding"] = True
            options["prepare_threshold"] = int(threshold)
    return config


def judge_endpoints() -> dict[str, dict]:
    """Operator judge endpoints from ``JUDGE_ENDPOINTS`` (JSON) and/or the single-endpoint
    ``JUDGE_API_BASE`` / ``JUDGE_MODEL`` / ``JUDGE_API_KEY`` (the endpoint named ``default``).
    A bad entry stops start-up with the reason (analysis.science.judges.endpoints checks the schema)."""
    try:
        return endpoints_from_environ(os.environ)
    except EndpointError as exc:
        raise EnvError(str(exc)) from None


def envnetworks(name: str) -> list[str]:
    """Comma-separated IP addresses or CIDR networks, each checked."""
    values = envlist(name, [])
    try:
        parse_networks(values)
    except EndpointError as exc:
        raise EnvError(f"{name}: {exc}") from None
    return values


def celery_filesystem_options(folder: str) -> dict:
    """Transport options for kombu's filesystem broker (``CELERY_BROKER_URL=filesystem://``), the
    embedded broker of ``make run``: messages are files in ``<folder>/queue`` that the web server
    writes and the worker beside it takes (locked per file), so no broker server is needed.
    Fanout (remote control) goes through ``<folder>/control``. Creates the folders."""
    root = Path(folder).expanduser().resolve()
    queue, control, processed = root / "queue", root / "control", root / "processed"
    for path in (queue, control, processed):
        path.mkdir(parents=True, exist_ok=True)
    return {"data_folder_in": str(queue), "data_folder_out": str(queue), "control_folder": str(control),
            "processed_folder": str(processed), "store_processed": False}
