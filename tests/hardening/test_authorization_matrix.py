"""Authorisation matrix generated from the URL configuration.

Every URL pattern of the site (admin excepted: Django's own, checked once) is requested as each
persona — anonymous, a rater, another rater, a rater without work, a rater with work only in another
study, a researcher of another study, the study's owner and an admin — with path parameters filled
from one fixture study. A new view whose route matches no rule in ACCESS fails
``test_every_url_pattern_has_an_access_rule``, so it cannot slip in unclassified. Raters must never
see the gold note or another rater's identity on any page.

Right route, wrong object: the owner of a study, on their own study's routes, names objects of
other studies (another researcher's, and another study of their own) wherever a route takes an
object id: in the path (every parameter of the URLconf is classified in PATH_PARAMETERS, so a new
one fails ``test_every_path_parameter_is_classified``) and in the query or form (BODY_OBJECTS).
Each must be refused, GET and POST, and change nothing. Drafts are hidden on every route.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RoutePattern
from django.utils import timezone

from analysis.export_services import study_export_run, study_export_start
from analysis.models import Judge, JudgeRun, JudgeScore
from raters.models import Rater, RaterAction, RaterStanding
from tasks.assignment import assignment_next, participation_get_or_create
from tasks.models import ComparisonGold, GoldAnswer, Item, Participation, Rating, Study, StudyBuild, WorkedExample
from tasks.services import rating_submit
from tests.factories import make_comparison, make_gold, make_item, make_rater, make_study, make_user

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
#   owner       the owner of this study, its collaborators and admins; 403/404 for everyone else
#   uploader    who uploaded the study build (the owner here) and admins; collaborators of the study too are refused
#   requester   a file prepared for one researcher (a background export): only them, not even admins
ACCESS: list[tuple[str, str]] = [
    (r"^(studies/<slug:slug>/exports|api/exports)/<int:export_id>/download/$", "requester"),
    (r"^api/exports/<int:export_id>/$", "requester"),
    (r"^api/studies/<slug:slug>/stopping/$", "owner"),  # the stopping and cost panel's numbers
    (r"^$", "any_user"),
    (r"^accounts/(login|logout)/$", "public"),
    (r"^img/", "image"),
    (r"^s/<slug:slug>/rubric$", "public"),
    (r"^s/<slug:slug>/", "rater_flow"),
    (r"^studies/<slug:slug>/qualification/$", "rater_flow"),
    (r"^studies/<slug:slug>/(raters|judges|exports)/", "owner"),
    (r"^api/(schema|docs|redoc)/$", "public"),  # describes the API, holds no data
    (r"^api/(studies|judge-runs|judge-endpoints)/$", "researcher"),
    (r"^api/studies/<slug:slug>/allocation/$", "owner"),  # adaptive rounds: the study's team only
    (r"^api/studies/<slug:slug>/", "owner"),
    (r"^api/judge-runs/<int:pk>/", "owner"),  # the run, its cancel/ and resume/
    (r"^research/new/$", "researcher"),
    (r"^research/new/sample/", "researcher"),  # a generated sample bundle: no study, no data
    (r"^(research/new|api/study-builds)/<int:build_id>/$", "uploader"),  # a study build: who uploaded it
    (r"^research/help/stopping/$", "researcher"),  # the README's method section, no study data
    (r"^research/<slug:slug>/planning-sources/$", "owner"),  # plans from studies the user can see
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
    # A researcher the owner made a collaborator: reaches the study through Study.objects.visible_to
    # like its owner; other_researcher (no collaboration) stays a 404 everywhere.
    collaborator = make_user("collaborator-a")
    study.collaborators.add(collaborator)
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
    export = study_export_run(export_id=study_export_start(study=study, user=owner).pk)
    foreign = {name: _foreign_objects(name, owner=owner if name == "own-other" else outsider)
               for name in ("others-study", "own-other")}
    build = StudyBuild.objects.create(owner=owner, slug="matrix-c", state=StudyBuild.State.FAILED,
                                      problems=[{"file": "manifest.csv", "line": 2, "message": "broken"}])
    release = _done_release(study)
    params = {
        "release_id": release.pk,
        "build_id": build.pk, "slug": study.slug, "rater_id": other_rater.pk, "pk": run.pk, "run_id": run.pk, "position": 0,
        "export_id": export.pk,
        "name": "mos", "action": "close", "sha256": items[1].image.sha256, "size": "160",
        "protocol": "imagenhub", "task_type": "mask_guided_editing",
    }
    personas = {"anonymous": None, "rater": rater_user, "another_rater": other_user, "idle_rater": idle_user,
                "rater_elsewhere": elsewhere_user, "other_researcher": outsider, "collaborator": collaborator,
                "owner": owner, "admin": admin}
    draft = make_study(slug="matrix-draft", title="Draft title 5kq1", state=Study.State.DRAFT,
                       instructions="Draft rubric 5kq1")
    draft.owners.add(owner)
    make_item(draft)
    return {"study": study, "params": params, "personas": personas, "other_rater": other_rater,
            "foreign": foreign, "draft": draft}


def _foreign_objects(name: str, *, owner) -> dict:
    """A study of ``owner`` with one of every object a route can name: a rater with work, an item
    and its image, a judge run with scores under its own judge name, and a pairwise study beside
    it with a comparison (for the pairwise gold candidates)."""
    study = make_study(slug=f"matrix-{name}")
    study.owners.add(owner)
    item = make_item(study, model="Foreign")
    rater = make_rater()
    rating_submit(rater=rater, item=item, values={"SC": 1.0, "PQ": 1.0}, require_assignment=False)
    judge = Judge.objects.create(name=f"Foreign judge {name}", kind="viescore", owner=owner,
                                 params={"endpoint": "default", "model": "foreign-model"})
    build = StudyBuild.objects.create(owner=owner, slug=f"matrix-{name}-built", state=StudyBuild.State.FAILED,
                                      problems=[{"file": "manifest.csv", "line": 2, "message": "broken"}])
    run = JudgeRun.objects.create(judge=judge, study=study, total=1, config_hash=name, state=JudgeRun.State.FAILED)
    JudgeScore.objects.create(run=run, item=item, dimension="SC", value=0.5)
    export = study_export_run(export_id=study_export_start(study=study, user=owner).pk)
    pairs = make_study(slug=f"matrix-{name}-pairs", protocol="pairwise")
    pairs.owners.add(owner)
    comparison = make_comparison(pairs)
    example = WorkedExample.objects.create(study=study, image=item.image, caption="foreign example")
    return {"study": study, "rater": rater, "item": item, "judge": judge, "run": run, "comparison": comparison,
            "example": example,
            "path": {"rater_id": rater.pk, "pk": run.pk, "run_id": run.pk, "sha256": item.image.sha256,
                     "build_id": build.pk, "export_id": export.pk, "release_id": _done_release(study).pk}}


def _done_release(study):
    """A built dataset release of ``study`` with a file to download."""
    from django.core.files.base import ContentFile

    from analysis.models import DatasetRelease, export_storage

    name = export_storage().save(f"releases/{study.slug}/1-test.zip", ContentFile(b"PK\x05\x06" + b"\0" * 18))
    return DatasetRelease.objects.create(study=study, state=DatasetRelease.State.DONE, file=name, size=22)


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
                    JudgeRun.objects.get(study=study).state, GoldAnswer.objects.count(), Item.objects.count())
    problems = []
    # Image routes first: the rating flow below hands the idle persona work, which would let it see images.
    for route, name in sorted(url_patterns(), key=lambda pair: access_of(pair[0]) != "image"):
        rule = access_of(route)
        url = fill(route, world["params"]) + QUERY.get(name, "")
        for persona, user in world["personas"].items():
            browser = client_for(Client, user)
            allowed_people = {
                "public": set(world["personas"]),
                "image": {"rater", "another_rater", "collaborator", "owner", "admin"},
                "any_user": set(world["personas"]) - {"anonymous"},
                "rater_flow": set(world["personas"]) - {"anonymous"},
                "researcher": {"other_researcher", "collaborator", "owner", "admin"},
                "owner": {"collaborator", "owner", "admin"},
                "uploader": {"owner", "admin"},
                "requester": {"owner"},
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
                elif rule in ("owner", "uploader", "requester") and response.status_code in (403, 404):
                    problems.append(f"{where}: the owner/admin was refused")
    assert not problems, "\n".join(problems)
    state_after = (Study.objects.get(pk=study.pk).state, Rating.objects.count(), Study.objects.count(),
                   JudgeRun.objects.get(study=study).state, GoldAnswer.objects.count(), Item.objects.count())
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


# Every path parameter of the URLconf, by what it names. "object" parameters name something that
# belongs to a study (or to a rater in one): each gets values from other studies in the wrong-object test.
PATH_PARAMETERS = {
    "slug": "study",  # the study itself: the persona test covers other studies' owners
    "rater_id": "object",
    "pk": "object",  # a judge run (API)
    "build_id": "object",  # a study build (its uploader's)
    "release_id": "object",  # a dataset release of the study in the route
    "run_id": "object",  # a judge run (judges page)
    "export_id": "object",  # a background export (the researcher's who asked for it)
    "sha256": "object",  # an image
    "position": "own queue",  # a place in the requester's own queue (screen_at(rater=…)): no one else's
    "name": "choice",  # a plot name
    "action": "choice",  # publish / close / clone
    "size": "choice",  # an image size
    "protocol": "choice",  # a sample bundle's protocol
    "task_type": "choice",  # a sample bundle's task type
}
# Object ids a route reads from the query or the form, by URL name: (method, slug, data) with the
# objects of the foreign study ``f`` (slug None: the route has none; "pairs": f's pairwise study's slug
# owned by the same owner as the route's study).
BODY_OBJECTS = {
    "gold_candidates": [
        ("post", "own", lambda f: {"item": f["item"].pk, "tolerance": "0"}),
        ("post", "own-pairs", lambda f: {"comparison": f["comparison"].pk}),
    ],
    "api-judge-runs": [
        ("get", None, lambda f: {"study": f["study"].slug}),
        ("post", None, lambda f: {"study": f["study"].slug, "judge": f["judge"].name}),
    ],
    "judge_side_by_side": [("get", "own", lambda f: {"judge": f["judge"].name, "dim": "SC"})],
    "research-study-examples": [("post", "own", lambda f: {"remove": f["example"].pk})],
    "judge_scatter": [("get", "own", lambda f: {"judge": f["judge"].name, "dim": "SC", "human": "SC"})],
    "research-study-planning-sources": [("get", "own", lambda f: {"source": f"study:{f['study'].slug}",
                                                                  "halfwidth": "0.3"})],
}


def route_parameters(route: str) -> list[str]:
    return [name for _, name in re.findall(r"<(?:(\w+):)?(\w+)>", route)]


def test_every_path_parameter_is_classified():
    unknown = sorted({(name, route) for route, _ in url_patterns() for name in route_parameters(route)
                      if name not in PATH_PARAMETERS})
    assert not unknown, f"classify these path parameters in PATH_PARAMETERS of {__file__}: {unknown}"


def _foreign_state(world) -> tuple:
    foreign = world["foreign"].values()
    return (sorted(Rater.objects.filter(pk__in=[f["rater"].pk for f in foreign]).values_list("state", flat=True)),
            RaterStanding.objects.count(), RaterAction.objects.count(), GoldAnswer.objects.count(),
            ComparisonGold.objects.count(), JudgeRun.objects.count(), WorkedExample.objects.count(),
            sorted(JudgeRun.objects.values_list("state", "cancel_requested")))


def test_the_owner_cannot_reach_another_studys_objects_through_their_own_studys_routes(world):
    from django.test import Client

    owner = Client()
    owner.force_login(world["personas"]["owner"])
    before, problems, checked = _foreign_state(world), [], 0
    for route, name in url_patterns():
        objects = [p for p in route_parameters(route) if PATH_PARAMETERS[p] == "object"]
        if not objects:
            continue
        for which, foreign in world["foreign"].items():
            if which == "own-other" and "slug" not in route_parameters(route):
                continue  # without a study in the route, an object of a study they own is theirs
            url = fill(route, {**world["params"], **{k: foreign["path"][k] for k in objects}})
            for method in ("get", "post"):
                response = getattr(owner, method)(url)
                checked += 1
                if response.status_code not in (403, 404, 405):
                    problems.append(f"owner {method.upper()} {url} ({name}, object of {which}) → {response.status_code}")
    assert not problems, "\n".join(problems)
    assert checked >= 20, checked
    assert _foreign_state(world) == before, "a request naming another study's object changed it"


def test_object_ids_in_the_query_or_form_never_reach_another_studys_objects(world):
    from django.test import Client

    owner = Client()
    owner.force_login(world["personas"]["owner"])
    names = {name for _, name in url_patterns()}
    assert set(BODY_OBJECTS) <= names, set(BODY_OBJECTS) - names
    before, problems = _foreign_state(world), []
    routes = {name: route for route, name in url_patterns()}
    for name, cases in BODY_OBJECTS.items():
        for method, slug, data in cases:
            foreign = world["foreign"]["others-study"]
            params = dict(world["params"])
            if slug == "own-pairs":
                params["slug"] = world["foreign"]["own-other"]["comparison"].study.slug
            url = fill(routes[name], params)
            response = getattr(owner, method)(url, data(foreign))
            text = body_of(response)
            where = f"owner {method.upper()} {url} {data(foreign)} ({name}) → {response.status_code}"
            if response.status_code >= 500:
                problems.append(f"{where}: server error")
            if method == "post" and response.status_code not in (302, 400, 403, 404):
                problems.append(f"{where}: expected a refusal")
            if foreign["judge"].name in text or foreign["study"].title in text or f'"id":{foreign["run"].pk},' in text:
                problems.append(f"{where}: shows the other study's data")
    assert not problems, "\n".join(problems)
    assert _foreign_state(world) == before, "a request naming another study's object changed it"


def test_the_owner_cannot_run_another_researchers_judge_by_name_on_their_own_study(world, client):
    client.force_login(world["personas"]["owner"])
    foreign = world["foreign"]["others-study"]
    response = client.post("/api/judge-runs/", {"study": world["study"].slug, "judge": foreign["judge"].name},
                           content_type="application/json")
    assert response.status_code in (400, 404)
    assert not JudgeRun.objects.filter(study=world["study"], judge=foreign["judge"]).exists()


def test_a_draft_study_is_hidden_on_every_route_from_everyone_but_its_owners_and_staff(world):
    from django.test import Client

    draft, problems = world["draft"], []
    for route, name in url_patterns():
        if "slug" not in route_parameters(route):
            continue
        url = fill(route, {**world["params"], "slug": draft.slug})
        for persona, user in world["personas"].items():
            if persona in ("owner", "admin"):
                continue
            browser = client_for(Client, user)
            for method in ("get", "post"):
                response = getattr(browser, method)(url)
                text = body_of(response)
                where = f"{persona} {method.upper()} {url} ({name}) → {response.status_code}"
                if "Draft title 5kq1" in text or "Draft rubric 5kq1" in text:
                    problems.append(f"{where}: shows the draft")
                if response.status_code not in REFUSED:
                    problems.append(f"{where}: expected a refusal")
    assert not problems, "\n".join(problems)
