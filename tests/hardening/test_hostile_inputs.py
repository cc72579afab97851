"""Hostile values against every route of the site: never a server error, never a half-stored write.

Every URL pattern (from the URLconf, as in the authorisation matrix) is requested with hostile
path parameters (NUL, lone-surrogate bytes, 10 000-character slugs, integers past 64 bits), with
hostile values in every query parameter and form field the views read, and (API routes) with
hostile JSON bodies, as anonymous, a rater in the flow and the study's owner (an admin runs the
same code as the owner). Nothing is
marked to skip on PostgreSQL: NUL bytes and out-of-range integers break there, not on SQLite.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from django.test import Client
from django.utils import timezone

from analysis.export_services import study_export_run, study_export_start
from analysis.models import Judge, JudgeRun
from raters.models import RaterAction, RaterStanding
from tasks.assignment import assignment_next, participation_get_or_create
from tasks.models import GoldAnswer, Participation, Rating, Study, StudyBuild
from tests.factories import make_comparison, make_item, make_rater, make_study, make_user
from tests.hardening.test_authorization_matrix import body_of, url_patterns

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

# Text values: each is sent percent-encoded in paths and queries and as-is in forms.
HOSTILE_TEXT = {
    "nul": "a\x00b",
    "only nul": "\x00",
    "long": "x" * 10_000,
    "huge int": "9" * 30,
    "float junk": "1e999",
    "nan": "nan",
    "markup": "<script>alert(1)</script>",
    "path and unicode": "../../etc/passwd zażółć 🦊",
    "empty": "",
}
# Raw percent-encodings that do not decode to valid UTF-8 (lone surrogate, truncated sequence).
HOSTILE_RAW = {"lone surrogate": "%ED%A0%80", "broken utf-8": "%C3%28", "percent nul": "%00"}
QUERY_NAMES = ["study", "state", "judge", "dim", "human", "threshold", "sort", "dir", "flag", "page", "fragment",
               "include_excluded", "PROLIFIC_PID", "STUDY_ID", "SESSION_ID", "workerId", "assignmentId", "hitId",
               "turkSubmitTo", "next"]
FORM_NAMES = ["decision", "reason", "item", "comparison", "tolerance", "agreement_threshold", "agree", "action",
              "slug", "title", "protocol", "task_type", "instructions", "raters_per_item", "assignment_mode",
              "settings", "shown", "username", "password", "kind", "metrics", "endpoint", "model", "name",
              # the configure page and its examples (tasks.configure_views)
              "completion_code", "completion_url", "closed_code", "closed_url", "units_per_session", "consent_text",
              "estimated_minutes", "pay_per_hour", "pay_currency", "seconds_per_unit_estimate", "gold_share",
              "qualification_required", "qualification_pass_share", "min_consensus_r", "collaborators", "caption",
              "remove", "count", "spacing"]
JSON_BODIES = {
    "deep": '{"study": ' + "[" * 10_000 + "]" * 10_000 + "}",
    "nul": '{"study": "\\u0000", "judge": "\\u0000", "kind": "viescore", "slug": "a\\u0000", "title": "\\u0000", '
           '"params": {"\\u0000": "\\u0000"}}',
    "surrogate": '{"study": "\\ud800", "judge": "\\udfff", "title": "\\ud800", "params": {"x": "\\ud800"}}',
    "huge numbers": '{"study": 1e999, "judge": ' + "9" * 400 + ', "params": {"concurrency": 1e999}}',
    "wrong types": '{"study": ["x"], "judge": {"a": 1}, "kind": 7, "params": "lots", "version": null, "slug": [], '
                   '"title": {}}',
    "concurrency lots": '{"study": "hostile-a", "judge": "Hostile judge", "kind": "viescore", '
                        '"params": {"concurrency": "lots", "base_url": "http://127.0.0.1:9/"}}',
    "not json": "{'study': nope",
    "top-level array": "[1, 2, 3]",
}


@pytest.fixture
def hostile_world(db):
    owner = make_user("hostile-owner")
    study = make_study(slug="hostile-a", title="Hostile study")
    study.owners.add(owner)
    items = [make_item(study, model=f"Model{i % 2}") for i in range(4)]
    pairs = make_study(slug="hostile-pairs", protocol="pairwise", task_type="pairwise")
    pairs.owners.add(owner)
    make_comparison(pairs)
    rater_user = make_user("hostile-rater")
    rater = make_rater(user=rater_user)
    participation_get_or_create(rater=rater, study=study)
    Participation.objects.filter(rater=rater, study=study).update(consented_at=timezone.now(),
                                                                  instructions_seen_at=timezone.now())
    assignment_next(rater=rater, study=study)
    judge = Judge.objects.create(name="Hostile judge", kind="viescore", params={}, owner=owner)
    run = JudgeRun.objects.create(judge=judge, study=study, total=4, config_hash="x")
    build = StudyBuild.objects.create(owner=owner, slug="hostile-built", state=StudyBuild.State.FAILED,
                                      problems=[{"file": "manifest.csv", "line": 2, "message": "broken"}])
    export = study_export_run(export_id=study_export_start(study=study, user=owner).pk)
    from tests.hardening.test_authorization_matrix import _done_release

    real = {"slug": study.slug, "rater_id": rater.pk, "pk": run.pk, "run_id": run.pk, "position": 0,
            "build_id": build.pk, "export_id": export.pk, "release_id": _done_release(study).pk,
            "name": "mos", "action": "close", "sha256": items[0].image.sha256, "size": "160",
            "protocol": "evalmi", "task_type": "mixed"}
    return {"study": study, "real": real,
            "personas": {"anonymous": None, "rater": rater_user, "owner": owner}}


def _path_values(converter: str) -> list[str]:
    """Already percent-encoded path segments the converter lets through to the view."""
    if converter == "int":
        return ["9" * 30, "0", "2147483648", "9223372036854775808"]
    if converter == "slug":
        return ["s" * 10_000, "-", "_"]
    return [quote(v, safe="") for v in HOSTILE_TEXT.values() if v and "/" not in v] + list(HOSTILE_RAW.values())


def hostile_urls(route: str, real: dict) -> list[str]:
    """The route with one path parameter at a time made hostile, the others real."""
    params = re.findall(r"<(?:(\w+):)?(\w+)>", route)
    urls = []
    for converter, name in params:
        for value in _path_values(converter or "str"):
            url = re.sub(r"<(?:(\w+):)?(\w+)>",
                         lambda m: value if m.group(2) == name else quote(str(real[m.group(2)]), safe=""), route)
            urls.append("/" + url)
    return urls


def real_url(route: str, real: dict) -> str:
    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", lambda m: quote(str(real[m.group(2)]), safe=""), route)


def _snapshot(study: Study) -> tuple:
    # Not the studies: a POST to a real publish/close/clone route is a legitimate action (with a
    # hostile slug or title, a clone must be a 400 and store nothing, which the 500 check catches).
    return (Rating.objects.count(), GoldAnswer.objects.count(), RaterStanding.objects.count(), RaterAction.objects.count(),
            Judge.objects.count(), JudgeRun.objects.count())  # not run states: a real cancel/resume is legitimate


def _clients(world) -> dict[str, Client]:
    clients = {}
    for persona, user in world["personas"].items():
        client = Client(raise_request_exception=False)  # collect every 500, not only the first
        if user is not None:
            client.force_login(user)
        clients[persona] = client
    return clients


def _routes():
    # The admin is Django's own; the logout view ends the session the other requests need.
    return [(route, name) for route, name in url_patterns() if not route.startswith("accounts/logout")]


def test_hostile_path_parameters_never_cause_a_server_error(hostile_world):
    clients, problems = _clients(hostile_world), []
    before = _snapshot(hostile_world["study"])
    for route, name in _routes():
        for url in hostile_urls(route, hostile_world["real"]):
            for persona, client in clients.items():
                for method in ("get", "post"):
                    response = getattr(client, method)(url)
                    if response.status_code >= 500:
                        problems.append(f"{persona} {method.upper()} {url[:120]} ({name}) → {response.status_code}")
    assert not problems, "\n".join(problems)
    assert _snapshot(hostile_world["study"]) == before


@pytest.mark.parametrize("value", list(HOSTILE_TEXT) + list(HOSTILE_RAW))
def test_hostile_query_and_form_values_never_cause_a_server_error_or_a_partial_write(hostile_world, value):
    clients, problems = _clients(hostile_world), []
    raw = HOSTILE_RAW.get(value)
    text = HOSTILE_TEXT.get(value, "")
    encoded = raw if raw is not None else quote(text, safe="")
    query = "?" + "&".join(f"{name}={encoded}" for name in QUERY_NAMES)
    before = _snapshot(hostile_world["study"])
    for route, name in _routes():
        url = real_url(route, hostile_world["real"])
        for persona, client in clients.items():
            form = {field: text for field in FORM_NAMES}
            if persona == "rater" and route.startswith("s/"):
                page = body_of(client.get(real_url("s/<slug:slug>/rate/<int:position>", hostile_world["real"])))
                form.update({field: text for field in re.findall(r'name="(a\d+-[\w-]+)"', page)})
            for method, target, data in [("get", url + query, None), ("post", url + query, form)]:
                response = getattr(client, method)(target, data) if data else getattr(client, method)(target)
                if response.status_code >= 500:
                    problems.append(f"{persona} {method.upper()} {target[:100]} ({name}) → {response.status_code}: "
                                    f"{body_of(response)[:200]}")
    assert not problems, "\n".join(problems)
    assert _snapshot(hostile_world["study"]) == before, "a hostile request stored something"


def test_hostile_json_bodies_to_every_api_route_are_refused_without_a_server_error(hostile_world):
    clients, problems = _clients(hostile_world), []
    before = _snapshot(hostile_world["study"])
    for route, name in _routes():
        if not route.startswith("api/"):
            continue
        url = real_url(route, hostile_world["real"])
        for persona, client in clients.items():
            for body_name, body in JSON_BODIES.items():
                response = client.post(url, body, content_type="application/json")
                if response.status_code >= 500:
                    problems.append(f"{persona} POST {url} {body_name} ({name}) → {response.status_code}: "
                                    f"{body_of(response)[:200]}")
                if name == "api-judge-runs" and persona == "owner":
                    assert response.status_code == 400, (body_name, response.status_code, body_of(response)[:300])
    assert not problems, "\n".join(problems)
    assert _snapshot(hostile_world["study"]) == before, "a hostile body stored something"
