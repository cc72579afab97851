import io
import zipfile

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from analysis.models import Judge, JudgeRun
from tasks.models import Rating, Study
from tasks.services import rating_submit
from tests.factories import make_item, make_rater, make_study, make_user
from tests.research.bundles import text_to_image_bundle

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("builds_run_at_once")]


@pytest.fixture
def world():
    """Two researchers each owning a study with one rating, a rater, an admin."""
    researcher, other = make_user("researcher"), make_user("other_researcher")
    admin = make_user("admin", is_staff=True)
    rater = make_rater()
    mine = make_study(slug="mine")
    mine.owners.add(researcher)
    theirs = make_study(slug="theirs")
    theirs.owners.add(other)
    for study in (mine, theirs):
        item = make_item(study)
        rating_submit(rater=rater, item=item, values={"SC": 1, "PQ": 0.5}, require_assignment=False)
    JudgeRun.objects.create(judge=Judge.objects.create(name="viescore-test", kind="viescore"), study=mine, total=4, done=1)
    return {"researcher": researcher, "other": other, "admin": admin, "rater": rater.user, "mine": mine}


def _client(user=None, *, token=False) -> APIClient:
    client = APIClient()
    if user is not None:
        if token:
            client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
        else:
            client.force_authenticate(user)
    return client


ENDPOINTS = [
    "/api/studies/",
    "/api/studies/mine/",
    "/api/studies/mine/items/",
    "/api/studies/mine/ratings/",
    "/api/studies/mine/export/",
    "/api/studies/mine/results/",
    "/api/judge-runs/",
]


@pytest.mark.parametrize("url", ENDPOINTS)
def test_an_anonymous_visitor_is_asked_to_authenticate(world, url):
    assert _client().get(url).status_code == 401


@pytest.mark.parametrize("url", ENDPOINTS)
def test_a_rater_is_forbidden_everywhere(world, url):
    assert _client(world["rater"]).get(url).status_code == 403


@pytest.mark.parametrize("url", ENDPOINTS)
def test_the_owner_reads_every_endpoint_with_a_token(world, url):
    assert _client(world["researcher"], token=True).get(url).status_code == 200


@pytest.mark.parametrize("url", ENDPOINTS[1:6])
def test_another_researcher_cannot_see_a_study_they_do_not_own(world, url):
    assert _client(world["other"]).get(url).status_code == 404


def test_the_study_list_is_paginated_and_shows_only_owned_studies_to_researchers_and_all_to_admins(world):
    body = _client(world["researcher"]).get("/api/studies/").json()
    assert [s["slug"] for s in body["results"]] == ["mine"] and body["count"] == 1
    assert body["results"][0]["items"] == 1 and body["results"][0]["ratings"] == 1
    assert {s["slug"] for s in _client(world["admin"]).get("/api/studies/").json()["results"]} == {"mine", "theirs"}
    assert _client(world["other"]).get("/api/judge-runs/").json()["count"] == 0
    runs = _client(world["researcher"]).get("/api/judge-runs/?study=mine").json()["results"]
    assert [(r["judge"], r["done"], r["total"]) for r in runs] == [("viescore-test", 1, 4)]


def test_ratings_are_listed_with_pseudonymous_raters(world):
    body = _client(world["admin"]).get("/api/studies/mine/ratings/").json()
    rating = Rating.objects.get(study=world["mine"])
    assert body["results"][0]["rater"] == f"rater{rating.rater_id}"
    assert body["results"][0]["values"] == {"SC": 1.0, "PQ": 0.5}


def test_a_researcher_uploads_a_bundle_and_gets_a_draft_study_they_own(world):
    response = _client(world["researcher"]).post(
        "/api/studies/",
        {"bundle": text_to_image_bundle(), "slug": "via-api", "title": "Via API", "protocol": "imagenhub",
         "task_type": "text_to_image", "settings": '{"checklist_mode": true}'},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    assert response.json()["state"] == "draft" and response.json()["items"] == 4
    assert list(Study.objects.get(slug="via-api").owners.all()) == [world["researcher"]]


def test_a_broken_bundle_is_answered_with_every_problem_and_nothing_is_created(world):
    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w") as archive:
        archive.writestr("manifest.csv", "instance,model,output\ns1,A,gone.png\ns1,A,gone.png\n")
    bundle.seek(0)
    bundle.name = "broken.zip"
    response = _client(world["researcher"]).post(
        "/api/studies/",
        {"bundle": bundle, "slug": "broken", "title": "Broken", "protocol": "imagenhub", "task_type": "text_to_image"},
        format="multipart",
    )
    assert response.status_code == 400
    assert [(p["line"], p["message"]) for p in response.json()["problems"]] == [
        (2, "file 'gone.png' is not in the zip"),
        (3, "duplicate row: instance 's1', model 'A' already on line 2"),
    ]  # sorted by line (issue 14)
    assert not Study.objects.filter(slug="broken").exists()


def test_a_rater_cannot_create_studies(world):
    response = _client(world["rater"]).post("/api/studies/", {"slug": "x"}, format="multipart")
    assert response.status_code == 403


def test_publish_close_and_clone_follow_the_study_states(world):
    client = _client(world["researcher"])
    assert client.post("/api/studies/mine/publish/").status_code == 409  # already open
    assert client.post("/api/studies/mine/close/").json()["state"] == "closed"
    assert client.post("/api/studies/mine/close/").status_code == 409
    clone = client.post("/api/studies/mine/clone/", {"slug": "mine-again"}, format="json")
    assert clone.status_code == 201 and clone.json()["state"] == "draft"
    assert clone.json()["items"] == 1 and clone.json()["ratings"] == 0
    assert client.post("/api/studies/mine-again/publish/").json()["state"] == "open"
    assert _client(world["other"]).post("/api/studies/mine/close/").status_code == 404


def test_the_export_endpoint_streams_a_zip(world):
    response = _client(world["researcher"]).get("/api/studies/mine/export/")
    assert response.streaming and response["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))).namelist()
    assert "items.csv" in names and "README.md" in names


def test_the_openapi_schema_and_the_docs_page_are_served_without_a_cdn(world, client):
    client.force_login(world["researcher"])
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/studies/{slug}/export/" in schema.content
    docs = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in docs and "cdn" not in docs.lower() and "/static/drf_spectacular_sidecar/" in docs


def test_results_are_the_study_report_json(world):
    body = _client(world["researcher"]).get("/api/studies/mine/results/").json()
    assert body["study"] == "mine" and body["protocol"] == "imagenhub"
    assert body["models"]["ModelA"]["dimensions"]["SC"]["mean"] == 1.0


def test_item_image_urls_go_through_the_access_checked_image_route(world, client):
    item = world["mine"].items.get()
    body = _client(world["researcher"], token=True).get("/api/studies/mine/items/").json()
    assert body["results"][0]["image_url"] == f"/img/{item.image.sha256}/full"
    client.force_login(world["researcher"])
    assert client.get(body["results"][0]["image_url"]).status_code == 200
    client.force_login(world["other"])
    assert client.get(body["results"][0]["image_url"]).status_code == 404


def _study_with_ratings(slug: str, owner, *, items: int, raters: list) -> Study:
    study = make_study(slug=slug)
    study.owners.add(owner)
    for _ in range(items):
        item = make_item(study, with_image=False)
        for rater in raters:
            rating_submit(rater=rater, item=item, values={"SC": 1, "PQ": 0.5}, require_assignment=False)
    return study


def test_study_counts_are_exact_and_an_empty_study_counts_zero(world):
    researcher = world["researcher"]
    _study_with_ratings("counted", researcher, items=3, raters=[make_rater(), make_rater()])
    make_study(slug="empty").owners.add(researcher)
    client = _client(researcher)
    listed = {s["slug"]: (s["items"], s["ratings"]) for s in client.get("/api/studies/").json()["results"]}
    assert listed == {"mine": (1, 1), "counted": (3, 6), "empty": (0, 0)}
    detail = client.get("/api/studies/counted/").json()
    assert (detail["items"], detail["ratings"]) == (3, 6)


def test_study_counts_never_join_items_and_ratings_in_one_statement(world):
    """The join walks items x ratings rows: 17.5 s for two 5,000-item studies (bench.study_counts)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    _study_with_ratings("counted", world["researcher"], items=2, raters=[make_rater()])
    client = _client(world["researcher"])
    with CaptureQueriesContext(connection) as listing:
        assert client.get("/api/studies/").status_code == 200
    with CaptureQueriesContext(connection) as detail:
        assert client.get("/api/studies/counted/").status_code == 200
    for query in [*listing.captured_queries, *detail.captured_queries]:
        sql = query["sql"]
        assert not ('JOIN "tasks_item"' in sql and 'JOIN "tasks_rating"' in sql), sql


def test_a_researcher_can_declare_the_raters_a_fixed_panel_and_the_api_shows_it(world):
    client = _client(world["researcher"])
    response = client.post(
        "/api/studies/",
        {"bundle": text_to_image_bundle(), "slug": "experts", "title": "Experts", "protocol": "imagenhub",
         "task_type": "text_to_image", "rater_sampling": "fixed"},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    assert response.json()["rater_sampling"] == "fixed"
    assert client.get("/api/studies/mine/").json()["rater_sampling"] == "sampled"
    refused = client.post("/api/studies/", {"bundle": text_to_image_bundle(), "slug": "odd", "title": "Odd",
                                            "protocol": "imagenhub", "task_type": "text_to_image",
                                            "rater_sampling": "random"}, format="multipart")
    assert refused.status_code == 400 and "rater_sampling" in refused.json()
