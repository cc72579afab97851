"""Error pages that must work while the database is away (wiring only: no models, no templates)."""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.views import defaults

RETRY_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Please try again</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 36rem; margin: 4rem auto; padding: 0 1rem">
<h1>Please try again</h1>
<p>The site lost its connection to the database for a moment. Your last answer was <strong>not</strong> saved.
Go back and submit it again, or reload this page in a few seconds.</p></body></html>"""


def server_error(request: HttpRequest) -> HttpResponse:
    """500 handler: a lost database connection becomes a 503 asking the rater to retry.

    Django calls this inside its ``except`` block, so ``sys.exc_info()`` holds the error. The page
    uses no template and no session (both would need the database). Views write in
    transactions, so a request cut off by the outage stored nothing and a resubmit is safe.
    """
    error = sys.exc_info()[1]
    if isinstance(error, (OperationalError, InterfaceError)):
        return HttpResponse(RETRY_PAGE, status=503, headers={"Retry-After": "5"})
    return defaults.server_error(request)
