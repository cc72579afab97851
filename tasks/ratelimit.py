"""A small fixed-window rate limiter on Django's cache, for abuse guards that must not touch the
database (e.g. how many new crowd participations one address may start an hour).

With a per-process cache (the default LocMemCache) each web worker counts on its own, so the
effective limit is the limit times the workers; a shared cache (Redis) makes it exact.
"""

from __future__ import annotations

import time

from django.core.cache import cache


def rate_limit_take(*, key: str, limit: int, window_seconds: int, now: float | None = None) -> bool:
    """Count one event for ``key``; False (and counted anyway) once more than ``limit`` events
    fell in the current window of ``window_seconds``."""
    window = int((time.time() if now is None else now) // window_seconds)
    bucket = f"ratelimit:{key}:{window}"
    cache.add(bucket, 0, timeout=window_seconds + 60)  # atomic create; a no-op when it exists
    try:
        count = cache.incr(bucket)
    except ValueError:  # evicted between add and incr: this event starts the count
        cache.set(bucket, 1, timeout=window_seconds + 60)
        count = 1
    return count <= limit


def client_address(request) -> str:
    """The address the request came from as the server saw it (``REMOTE_ADDR``). Behind a proxy,
    configure it to set REMOTE_ADDR (e.g. gunicorn's forwarded-allow-ips): headers a client can
    write (X-Forwarded-For) are not trusted here."""
    return request.META.get("REMOTE_ADDR") or "unknown"
