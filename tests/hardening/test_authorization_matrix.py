"""Authorisation matrix generated from the URL configuration.

Every URL pattern of the site (admin excepted: Django's own, checked once) is requested as each
persona — anonymous, a rater, another rater, a rater without work, a rater with work only in another
study, a researcher of another study, the study's owner and an admin — with path parameters filled from one fixture study. A new view whose route matches no
rule in ACCESS fails ``test_every_url_pattern_has_an_access_rule``, so it cannot slip in
unclassified. Raters must never see the gold note or another rater's identity on any page.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RoutePattern
from django.utils import timezone

from analysis.models import Judge, JudgeRun
from tasks.assignment import assignment_next, participation_get_or_create
from tasks.models import GoldAnswer, Item, Participation, Rating, Study, StudyBuild
from tasks.services import rating_submit
from tests.factories import make_gold, make_item, make_rater, make_study, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

GOLD_NOTE = "gold-note-7f3a-never-shown"
OTHER_RATER = "other-rater-93kd"

# Route (as written in the URLconf, prefixes joined) → who may use it. First match wins.
#   public      anyone (login page, the rubric, the API description)
#   image       an image of the study: raters with work in it, its owners, admins; 403/404 for everyone
#               else (anonymous, a rater without work, a rater with work only in another study, a
#               researcher of another study); those allowed get the image (200)
#   any_user    any logged-in user (home)
#   rater_flow  the rating flow: any logged-in user may join an open study as a rater (start creates
#               their own participation); a request only ever reaches the requester's own queue
#   researcher  researchers (staff, owners of any study); nobody else
#   owner       the owner of this study and admins; 403/404 for everyone else
ACCESS: list[tuple[str, str]] = [
    (r"^$", "any_user"),
    (r"^accounts/(login|logout)/$", "public"),
    (r"^img/", "image"),
    (r"^s/<slug:slug>/rubric$", "public"),
    (r"^s/<slug:slug>/", "rater_flow"),
    (r"^studies/<slug:slug>/qualification/$", "rater_flow"),
    (r"^studies/<slug:slug>/(raters|judges)/", "owner"),
    (r"^api/(schema|docs|redoc)/$", "public"),  # describes the API, holds no data
    (r"^api/(studies|judge-runs)/$", "researcher"),
    (r"^api/studies/<slug:slug>/", "owner"),
    (r"^api/judge-runs/<int:pk>/", "owner"),  # the run, its cancel/ and resume/
    (r"^research/new/$", "researcher"),
    (r"^(research/new|api/study-builds)/<int:build_id>/$", "owner"),  # a study build: who uploaded it
    (r"^research/<slug:slug>/", "owner"),
]
REFUSED = {302, 401, 403, 404, 405}  # 302 only to the login page or the study's start link (checked below)
# Query strings some views need to do their work (url name → query).
QUERY = {"judge_scatter": "?" + urlencode({"judge": "Matrix judge", "dim": "SC", "human": "SC"})}


def url_patterns(resolver=None, prefix: str = ""):
    """(route, name) for every URLPattern, routes of nested includes joined."""
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        if not isinstance(entry.pattern, RoutePattern):
            continue  # regex routes: only the DEBUG media helper, not part of the product
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            if route.startswith("admin/"):
                continue
            yield from url_patterns(entry, route)
        elif isinstance(entry, URLPattern):
            yield route, entry.name


def access_of(route: str) -> str | None:
    return next((rule for pattern, rule in ACCESS if re.search(pattern, route)), None)


def test_every_url_pattern_has_an_access_rule():
    unclassified = [route for route, _ in url_patterns() if access_of(route) is None]
    assert not unclassified, f"add these routes to ACCESS in {__file__}: {unclassified}"


@pytest.fixture
def world(db):
    owner = make_user("owner-a")
    study = make_study(slug="matrix-a", title="Matrix study")
    study.owners.add(owner)
    other_study = make_study(slug="matrix-b")
    outsider = make_user("researcher-b")
    other_study.owners.add(outsider)
    admin = make_user("admin", is_staff=True, is_superuser=True)
    items = [make_item(study, model=f"Model{i % 2}") for i in range(4)]
    gold = make_gold(items[0])
    gold.note = GOLD_NOTE
    gold.save()

    def enrolled(username: str) -> tuple:
        user = make_user(username)
        rater = make_rater(user=user)
        participation_get_or_create(rater=rater, study=study)
        Participation.objects.filter(rater=rater, study=study).update(
            consented_at=timezone.now(), instructions_seen_at=timezone.now()
        )
        return user, rater

    rater_user, rater = enrolled("rater-one")
    other_user, other_rater = enrolled(OTHER_RATER)
    idle_user, _ = enrolled("rater-idle")  # consented, but no assignment yet
    elsewhere_user = make_user("rater-elsewhere")
    make_item(other_study)
    assignment_next(rater=make_rater(user=elsewhere_user), study=other_study)
    screen = assignment_next(rater=other_rater, study=study)
    rating_submit(rater=other_rater, item=screen.items[0], values={"SC": 0.5, "PQ": 1.0})
    assignment_next(rater=rater, study=study)
    judge = Judge.objects.create(name="Matrix judge", kind="viescore", params={})
    run = JudgeRun.objects.create(judge=judge, study=study, total=4, config_hash="x")
    build = StudyBuild.objects.create(owner=owner, slug="matrix-c", state=StudyBuild.State.FAILED,
                                      problems=[{"file": "manifest.csv", "line": 2, "message": "broken"}])
    params = {
        "build_id": build.pk, "slug": study.slug, "rater_id": other_rater.pk, "pk": run.pk, "run_id": run.pk, "position": 0,
        "name": "mos", "action": "close", "sha256": items[1].image.sha256, "size": "160",
    }
    personas = {"anonymous": None, "rater": rater_user, "another_rater": other_user, "idle_rater": idle_user,
                "rater_elsewhere": elsewhere_user, "other_researcher": outsider, "owner": owner, "admin": admin}
    return {"study": study, "params": params, "personas": personas, "other_rater": other_rater}


def fill(route: str, params: dict) -> str:
    def value(match):
        name = match.group(2)
        assert name in params, f"no fixture value for path parameter {name!r} in {route}"
        return str(params[name])

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", value, route)


def body_of(response) -> str:
    if getattr(response, "streaming", False):
        data = b"".join(response.streaming_content)  # the test client closes it when exhausted
    else:
        data = response.content
    return data.decode("utf-8", "replace")


def client_for(client_class, user):
    client = client_class()
    if user is not None:
        client.force_login(user)
    return client


def test_each_persona_gets_only_what_its_role_allows_on_every_url(world, client):
    from django.test import Client

    study = world["study"]
    state_before = (Study.objects.get(pk=study.pk).state, Rating.objects.count(), Study.objects.count(),
                    JudgeRun.objects.get().state, GoldAnswer.objects.count(), Item.objects.count())
    problems = []
    # Image routes first: the rating flow below hands the idle persona work, which would let it see images.
    for route, name in sorted(url_patterns(), key=lambda pair: access_of(pair[0]) != "image"):
        rule = access_of(route)
        url = fill(route, world["params"]) + QUERY.get(name, "")
        for persona, user in world["personas"].items():
            browser = client_for(Client, user)
            allowed_people = {
                "public": set(world["personas"]),
                "image": {"rater", "another_rater", "owner", "admin"},
                "any_user": set(world["personas"]) - {"anonymous"},
                "rater_flow": set(world["personas"]) - {"anonymous"},
                "researcher": {"other_researcher", "owner", "admin"},
                "owner": {"owner", "admin"},
            }[rule]
            methods = ["get"] if persona in allowed_people else ["get", "post"]
            for method in methods:
                response = getattr(browser, method)(url)
                text = body_of(response)
                where = f"{persona} {method.upper()} {url} ({name}, {rule}) → {response.status_code}"
                if response.status_code >= 500:
                    problems.append(f"{where}: server error")
                if persona in ("rater", "another_rater", "idle_rater", "rater_elsewhere", "anonymous"):
                    if GOLD_NOTE in text:
                        problems.append(f"{where}: gold note leaked")
                    if persona != "another_rater" and OTHER_RATER in text:
                        problems.append(f"{where}: another rater's identity leaked")
                if persona not in allowed_people:
                    # 405 to a POST tells nothing about the image (any hash gets it)
                    if rule == "image" and response.status_code not in (403, 404) and (method, response.status_code) != ("post", 405):
                        problems.append(f"{where}: expected 403/404 for an image of a study without access")
                    elif response.status_code not in REFUSED:
                        problems.append(f"{where}: expected a refusal")
                    elif response.status_code == 302 and not re.search(r"login|/start$", response.get("Location", "")):
                        problems.append(f"{where}: redirected to {response['Location']}, not to the login page")
                elif rule == "image" and method == "get" and response.status_code != 200:
                    problems.append(f"{where}: expected the image")
                elif rule == "owner" and response.status_code in (403, 404):
                    problems.append(f"{where}: the owner/admin was refused")
    assert not problems, "\n".join(problems)
    state_after = (Study.objects.get(pk=study.pk).state, Rating.objects.count(), Study.objects.count(),
                   JudgeRun.objects.get().state, GoldAnswer.objects.count(), Item.objects.count())
    assert state_after == state_before, "a refused request changed data"


def test_a_rater_cannot_open_the_admin(world, client):
    client.force_login(world["personas"]["rater"])
    response = client.get("/admin/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_a_rater_without_a_participation_gets_no_screen_of_another_rater(world, client):
    """Positions are per rater: a stranger asking for position 0 of the study gets no work of others."""
    stranger = make_user("stranger")
    client.force_login(stranger)
    response = client.get(f"/s/{world['study'].slug}/rate/0")
    assert response.status_code == 403
    assert OTHER_RATER not in body_of(response)
