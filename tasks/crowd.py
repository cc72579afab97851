"""Crowd platforms: reading the entry link's parameters and building the way back.

Prolific sends ``PROLIFIC_PID``, ``STUDY_ID`` and ``SESSION_ID``; MTurk sends ``workerId``,
``assignmentId``, ``hitId`` and ``turkSubmitTo`` (and ``assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE``
while the worker only previews the HIT). Ids are checked before they touch the database, and
``turkSubmitTo`` must be an MTurk host so the completion form cannot post anywhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit
from xml.sax.saxutils import escape

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.utils import timezone

from raters.models import Rater
from tasks.assignment import participation_get_or_create

MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
MTURK_HOSTS = {"www.mturk.com", "workersandbox.mturk.com"}
PROLIFIC_COMPLETE = "https://app.prolific.com/submissions/complete"
_ID = re.compile(r"^[A-Za-z0-9_\-]{1,200}$")


class CrowdParamsInvalid(ValueError):
    """The entry link is malformed; the message tells the worker what is wrong."""


@dataclass(frozen=True)
class CrowdEntry:
    platform: str  # Rater.Platform value
    external_id: str
    params: dict = field(default_factory=dict)
    preview: bool = False


def _id(params, name: str) -> str:
    value = (params.get(name) or "").strip()
    if not _ID.match(value):
        raise CrowdParamsInvalid(f"The link's {name} is missing or not a valid id; please open the study from the platform again.")
    return value


def crowd_entry_from(params) -> CrowdEntry | None:
    """Read a Prolific or MTurk entry from query parameters; None when neither is present."""
    if "PROLIFIC_PID" in params:
        return CrowdEntry(
            platform=Rater.Platform.PROLIFIC,
            external_id=_id(params, "PROLIFIC_PID"),
            params={key: _id(params, key) for key in ("STUDY_ID", "SESSION_ID") if params.get(key)},
        )
    if "assignmentId" in params or "workerId" in params:
        if params.get("assignmentId") == MTURK_PREVIEW:
            return CrowdEntry(platform=Rater.Platform.MTURK, external_id="", preview=True)
        submit_to = (params.get("turkSubmitTo") or "").strip()
        parts = urlsplit(submit_to)
        if parts.scheme != "https" or parts.hostname not in MTURK_HOSTS:
            raise CrowdParamsInvalid("The link's turkSubmitTo is not an MTurk address; please open the HIT from MTurk again.")
        return CrowdEntry(
            platform=Rater.Platform.MTURK,
            external_id=_id(params, "workerId"),
            params={
                "assignmentId": _id(params, "assignmentId"),
                "hitId": _id(params, "hitId"),
                "turkSubmitTo": f"https://{parts.hostname}",
            },
        )
    return None


def prolific_return_url(completion_url: str, code: str) -> str:
    """Where a Prolific worker goes when done: the study's URL, else Prolific's completion link."""
    return completion_url or f"{PROLIFIC_COMPLETE}?{urlencode({'cc': code})}"


def mturk_submit_url(crowd: dict) -> str:
    return f"{crowd['turkSubmitTo']}/mturk/externalSubmit"


# ------------------------------------------------------------------ joining and resuming

# The ids the platform gives one worker's one attempt, next to the worker id (which alone is not
# secret: it shows in links, screenshots and other studies' data).
IDENTIFYING = {Rater.Platform.PROLIFIC: ("STUDY_ID", "SESSION_ID"), Rater.Platform.MTURK: ("assignmentId", "hitId")}


class CrowdEntryRefused(Exception):
    """This browser may not take over the participation; the message tells the worker why."""


def crowd_resume_allowed(stored: dict, entry: CrowdEntry) -> bool:
    """Whether a link may resume a participation in a browser that does not know it yet: only
    with the same platform ids the participation began with (all of them, none empty)."""
    keys = IDENTIFYING.get(entry.platform, ())
    return bool(keys) and all(entry.params.get(key) and entry.params.get(key) == stored.get(key) for key in keys)


STARTED_ELSEWHERE = ("This study was started in another browser. Please go on in that browser, or open the study "
                     "again from the platform in the same session.")


def crowd_participation_join(*, study, entry: CrowdEntry):
    """The crowd worker of ``entry`` consents to ``study``: their rater (created the first time)
    and their participation, created consented. Raises CrowdEntryRefused when somebody else's
    browser began this worker's participation meanwhile with other platform ids."""
    with transaction.atomic():
        rater, _ = Rater.objects.get_or_create(platform=entry.platform, external_id=entry.external_id)
        if not rater.can_rate:
            raise CrowdEntryRefused("Your rater account is not active for rating.")
        existing = rater.participations.filter(study=study).first()
        if existing is not None and not crowd_resume_allowed(existing.crowd, entry):
            raise CrowdEntryRefused(STARTED_ELSEWHERE)
        participation = participation_get_or_create(rater=rater, study=study,
                                                    crowd={**entry.params, "platform": entry.platform})
        if participation.consented_at is None:
            participation.consented_at = timezone.now()
            participation.save(update_fields=["consented_at"])
    return participation


# A link's entry waits in a signed cookie until the worker consents: opening a link writes nothing
# to the database (no rater rows for every id anybody types in).
ENTRY_COOKIE = "crowd_entry"
_ENTRY_SALT = "tasks.crowd.entry"
ENTRY_MAX_AGE = 24 * 3600


def crowd_entry_remember(response, *, slug: str, entry: CrowdEntry) -> None:
    value = {"slug": slug, "platform": entry.platform, "external_id": entry.external_id, "params": entry.params}
    response.set_cookie(
        ENTRY_COOKIE, signing.dumps(value, salt=_ENTRY_SALT, compress=True), max_age=ENTRY_MAX_AGE,
        secure=settings.SESSION_COOKIE_SECURE, httponly=True, samesite=settings.SESSION_COOKIE_SAMESITE or "Lax",
    )


def crowd_entry_pending(request, *, slug: str) -> CrowdEntry | None:
    """The entry link this browser opened for ``slug`` and has not consented to yet, or None."""
    try:
        value = signing.loads(request.COOKIES.get(ENTRY_COOKIE, ""), salt=_ENTRY_SALT, max_age=ENTRY_MAX_AGE)
    except signing.BadSignature:
        return None
    if not isinstance(value, dict) or value.get("slug") != slug:
        return None
    return CrowdEntry(platform=value["platform"], external_id=value["external_id"], params=dict(value["params"]))


def crowd_entry_forget(response) -> None:
    response.delete_cookie(ENTRY_COOKIE)


# ------------------------------------------------------------------ which crowd rater this browser is

COOKIE = "crowd_raters"
_SALT = "tasks.crowd.raters"
SESSION_KEY = "crowd_raters"  # where earlier versions kept the same map, in the server-side session


def crowd_raters(request) -> dict[str, int]:
    """Study slug → crowd Rater id for this browser, from its signed cookie.

    A cookie signed with the site's secret, not a server-side session: the rating pages run on
    every screen and this way they need no session row (one statement fewer per request). It can
    no more be forged than a session id can be guessed, and it expires like the session cookie.
    A browser that entered under an earlier version has the map in its session instead.
    """
    value = request.COOKIES.get(COOKIE)
    if value:
        try:
            raters = signing.loads(value, salt=_SALT, max_age=settings.SESSION_COOKIE_AGE)
        except signing.BadSignature:  # tampered or expired: as if there were none
            raters = None
        if isinstance(raters, dict):
            return {str(slug): int(pk) for slug, pk in raters.items() if isinstance(pk, int)}
    if request.COOKIES.get(_session_cookie_name()):
        return dict(request.session.get(SESSION_KEY, {}))
    return {}


def crowd_rater_remember(request, response, *, slug: str, rater_id: int) -> None:
    """Remember on ``response`` that this browser rates ``slug`` as ``rater_id`` (other studies kept)."""
    raters = {**crowd_raters(request), slug: rater_id}
    response.set_cookie(
        COOKIE, signing.dumps(raters, salt=_SALT, compress=True), max_age=settings.SESSION_COOKIE_AGE,
        secure=settings.SESSION_COOKIE_SECURE, httponly=True, samesite=settings.SESSION_COOKIE_SAMESITE or "Lax",
    )


def _session_cookie_name() -> str:
    return settings.SESSION_COOKIE_NAME


# ------------------------------------------------------------------ the links to paste into each platform

PROLIFIC_PARAMETERS = "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
MTURK_SCHEMA = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd"


def launch_links(start_url: str) -> dict[str, str]:
    """The links to paste into each platform, for the study's absolute start URL.

    Prolific fills ``{{%PROLIFIC_PID%}}``, ``{{%STUDY_ID%}}`` and ``{{%SESSION_ID%}}`` (the names
    tasks.crowd reads). MTurk appends ``assignmentId``, ``hitId``, ``turkSubmitTo`` and
    ``workerId`` to the ExternalQuestion's URL itself; the URL is XML-escaped in the question.
    """
    separator = "&" if "?" in start_url else "?"
    return {
        "prolific": f"{start_url}{separator}{PROLIFIC_PARAMETERS}",
        "mturk": (f'<ExternalQuestion xmlns="{MTURK_SCHEMA}">\n'
                  f"  <ExternalURL>{escape(start_url)}</ExternalURL>\n"
                  "  <FrameHeight>0</FrameHeight>\n"
                  "</ExternalQuestion>"),
        "invited": start_url,
    }
