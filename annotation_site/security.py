"""HTTP hardening the settings switch on: the Content-Security-Policy header and login rate limits.

Rate limits count in Django's cache (``CACHES``; use a shared one such as Redis when several
worker processes serve the site, or each process counts on its own). A client is its IP address:
``REMOTE_ADDR``, or behind ``RATE_LIMIT_PROXY_COUNT`` reverse proxies the address the outermost
of them saw (counted from the right of ``X-Forwarded-For``, which a client cannot forge past
its own proxy).
"""

from __future__ import annotations

import hashlib
import time
import unicodedata
from functools import wraps

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse


class ContentSecurityPolicyMiddleware:
    """Adds ``settings.CONTENT_SECURITY_POLICY`` (empty: no header) to every response without one."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.policy = getattr(settings, "CONTENT_SECURITY_POLICY", "")
        self.header = ("Content-Security-Policy-Report-Only" if getattr(settings, "CONTENT_SECURITY_POLICY_REPORT_ONLY", False)
                       else "Content-Security-Policy")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.policy and self.header not in response:
            response[self.header] = self.policy
        return response


def client_ip(request: HttpRequest) -> str:
    proxies = getattr(settings, "RATE_LIMIT_PROXY_COUNT", 0)
    if proxies:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= proxies:
            return forwarded[-proxies][:64]
    return request.META.get("REMOTE_ADDR", "")[:64]


def _hit(scope: str, key: str, *, limit: int, window: int) -> bool:
    """Count one attempt for ``key`` in the current ``window``-second slot; True while within ``limit``."""
    slot = int(time.time() // window)
    # Hashed: usernames are attacker-chosen text and cache keys have a length and character limit.
    name = f"ratelimit:{scope}:{slot}:{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()}"
    cache.add(name, 0, timeout=window)
    try:
        count = cache.incr(name)
    except ValueError:  # expired between add and incr
        cache.set(name, 1, timeout=window)
        count = 1
    return count <= limit


def _too_many(window: int) -> HttpResponse:
    minutes = max(1, round(window / 60))
    return HttpResponse(
        f"Too many login attempts. Please wait {minutes} minute{'s' if minutes != 1 else ''} and try again.\n",
        status=429, content_type="text/plain; charset=utf-8", headers={"Retry-After": str(window)},
    )


def login_rate_limited(view):
    """Refuse login POSTs beyond ``LOGIN_RATE_LIMIT_PER_IP`` per client IP and
    ``LOGIN_RATE_LIMIT_PER_USERNAME`` per username, each per ``LOGIN_RATE_LIMIT_WINDOW`` seconds
    (429 with Retry-After; 0 turns a limit off). Every POST counts, so guessing is slowed whether
    the guesses fail or not; showing the form (GET) is never limited."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        if request.method == "POST":
            window = settings.LOGIN_RATE_LIMIT_WINDOW
            per_ip, per_user = settings.LOGIN_RATE_LIMIT_PER_IP, settings.LOGIN_RATE_LIMIT_PER_USERNAME
            # The login form folds names with NFKC (ｖｉｃｔｉｍ and 𝐯𝐢𝐜𝐭𝐢𝐦 log in as victim): count them as one.
            username = unicodedata.normalize("NFKC", str(request.POST.get("username", ""))).strip().casefold()[:150]
            within = True
            if per_ip:
                within &= _hit("login-ip", client_ip(request), limit=per_ip, window=window)
            if per_user and username:
                within &= _hit("login-user", username, limit=per_user, window=window)
            if not within:
                return _too_many(window)
        return view(request, *args, **kwargs)

    return wrapper
