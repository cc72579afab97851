"""Is a request from a phone? For studies that exclude phones (``exclude_phones`` setting).

Judged from the User-Agent, which a rater can change: this keeps honest phone users from starting
a study they cannot do well, it is not a control. Crowd platforms filter devices themselves
(Prolific's device filter, MTurk qualifications); researchers should set those too. Tablets
(iPad, Android without "Mobile") are not phones.
"""

from __future__ import annotations

import re

from django.http import HttpRequest

PHONE = re.compile(r"iPhone|iPod|Android.+Mobile|Windows Phone|BlackBerry|Opera Mini|Mobile.+Firefox|webOS", re.I)
MAX_AGENT = 512  # a longer User-Agent is read only this far


def is_phone(request: HttpRequest) -> bool:
    return bool(PHONE.search(request.headers.get("User-Agent", "")[:MAX_AGENT]))


def phones_excluded(study) -> bool:
    return bool((study.settings or {}).get("exclude_phones"))


def refused_phone(request: HttpRequest, study) -> bool:
    """True when this study excludes phones and the request comes from one."""
    return phones_excluded(study) and is_phone(request)
