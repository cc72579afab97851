"""REST API for judge runs: start, cancel, resume; who may do what (personas), and the schema."""

from __future__ import annotations

import pytest
from django.urls import reverse

from analysis.models import Judge, JudgeRun, JudgeScore
from tests.factories import make_item, make_rater, make_study, make_user
from tests.judge_server import FakeJudgeServer

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def server():
    with FakeJudgeServer() as running:
        yield running


@pytest.fixture(autouse=True)
def operator_endpoint(settings, server):
    """The fake server is the operator's endpoint named ``default``; judges pick it by name."""
    settings.JUDGE_ENDPOINTS = server.endpoints()


@pytest.fixture
def world():
    owner = make_user("api-owner")
    study = make_study(slug="api-judged")
    study.owners.add(owner)
    for i in range(3):
        make_item(study, model=f"Model{i % 2}")
    other = make_user("api-other-researcher")
    make_study(slug="api-elsewhere").owners.add(other)
    rater = make_rater(user=make_user("api-rater")).user
    admin = make_user("api-admin", is_staff=True)
    return {"study": study, "owner": owner, "other": other, "rater": rater, "admin": admin}


def start_body(server, **extra):
    return {"study": "api-judged", "judge": "VIEScore api", "kind": "viescore",
            "params": {"model": "fake-good"}, **extra}


def post(client, user, url, body=None, capture=None):
    if user is not None:
        client.force_login(user)
    if capture is None:
        return client.post(url, body or {}, content_type="application/json")
    with capture(execute=True):
        return client.post(url, body or {}, content_type="application/json")


def test_the_owner_starts_a_run_that_lands_scores(client, server, world, django_capture_on_commit_callbacks):
    response = post(client, world["owner"], reverse("api-judge-runs"), start_body(server),
                    django_capture_on_commit_callbacks)
    assert response.status_code == 201, response.content
    run = JudgeRun.objects.get(pk=response.json()["id"])
    assert (response.json()["study"], response.json()["judge_kind"]) == ("api-judged", "viescore")
    assert (run.state, run.done, run.total) == ("done", 3, 3)
    assert JudgeScore.objects.filter(run=run).count() == 9
    # the same judge by name only, again: reuses it and answers from the cache
    again = post(client, world["owner"], reverse("api-judge-runs"), {"study": "api-judged", "judge": "VIEScore api"},
                 django_capture_on_commit_callbacks)
    assert again.status_code == 201 and JudgeRun.objects.get(pk=again.json()["id"]).cached == 3
    assert Judge.objects.filter(name="VIEScore api").count() == 1


def test_an_admin_may_start_a_run_on_any_study(client, server, world, django_capture_on_commit_callbacks):
    response = post(client, world["admin"], reverse("api-judge-runs"), start_body(server),
                    django_capture_on_commit_callbacks)
    assert response.status_code == 201


@pytest.mark.parametrize("persona, expected", [("other", 404), ("rater", 403), (None, (401, 403))])
def test_others_cannot_start_a_run_and_nothing_is_stored(client, server, world, persona, expected):
    response = post(client, world[persona] if persona else None, reverse("api-judge-runs"), start_body(server))
    assert response.status_code in (expected if isinstance(expected, tuple) else (expected,))
    assert not JudgeRun.objects.exists() and not Judge.objects.exists()


def test_bad_start_requests_say_why_and_store_nothing(client, server, world):
    url = reverse("api-judge-runs")
    cases = [
        ({"study": "api-judged", "judge": "nobody"}, "no judge named 'nobody'"),
        ({"study": "api-judged", "judge": "x", "kind": "viescore", "params": {"endpoint": "elsewhere"}},
         "no judge endpoint named 'elsewhere'"),
        ({"study": "api-judged", "judge": "x", "kind": "viescore", "params": {"model": "m"}}, "does not serve params.model 'm'"),
        ({"study": "api-judged", "judge": "x", "kind": "viescore", "params": {"api_key": "sk-1"}}, "params.api_key"),
        ({"study": "api-judged", "judge": "x", "kind": "metric", "params": {"metrics": ["nope"]}}, "unknown metric"),
        ({"study": "api-judged", "judge": "x", "kind": "viescore",
          "params": {"model": "fake-good", "timeout_seconds": [1]}}, "params.timeout_seconds"),
    ]
    for body, message in cases:
        response = post(client, world["owner"], url, body)
        assert response.status_code == 400 and message in response.json()["detail"], (body, response.content)
    unknown_kind = post(client, world["owner"], url, {"study": "api-judged", "judge": "x", "kind": "imported"})
    assert unknown_kind.status_code == 400 and "kind" in unknown_kind.json()
    assert not JudgeRun.objects.exists() and not Judge.objects.exists()


def queued_run(world, server, django_capture_on_commit_callbacks, client):
    """A run left queued (its job not executed), as if the worker had not picked it up yet."""
    response = post(client, world["owner"], reverse("api-judge-runs"), start_body(server))
    client.logout()
    return JudgeRun.objects.get(pk=response.json()["id"])


@pytest.mark.parametrize("persona, allowed", [("owner", True), ("admin", True), ("other", False), ("rater", False),
                                              (None, False)])
def test_cancel_and_resume_per_persona(client, server, world, django_capture_on_commit_callbacks, persona, allowed):
    run = queued_run(world, server, django_capture_on_commit_callbacks, client)
    user = world[persona] if persona else None
    cancel = post(client, user, reverse("api-judge-run-cancel", args=[run.pk]))
    run.refresh_from_db()
    if not allowed:
        assert cancel.status_code in (401, 403, 404) and run.state == "queued"
        resume = post(client, user, reverse("api-judge-run-resume", args=[run.pk]))
        assert resume.status_code in (401, 403, 404)
        return
    assert cancel.status_code == 200 and cancel.json()["state"] == "cancelled" and run.state == "cancelled"
    with django_capture_on_commit_callbacks(execute=True):
        resume = client.post(reverse("api-judge-run-resume", args=[run.pk]))
    assert resume.status_code == 200, resume.content
    run.refresh_from_db()
    assert (run.state, run.done) == ("done", 3)


def test_resuming_a_finished_run_is_a_conflict(client, server, world, django_capture_on_commit_callbacks):
    response = post(client, world["owner"], reverse("api-judge-runs"), start_body(server),
                    django_capture_on_commit_callbacks)
    resume = client.post(reverse("api-judge-run-resume", args=[response.json()["id"]]))
    assert resume.status_code == 409 and "only cancelled, failed or stalled" in resume.json()["detail"]


def test_the_schema_documents_start_cancel_and_resume(client, world):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    paths = schema["paths"]
    assert "post" in paths["/api/judge-runs/"]
    assert "post" in paths["/api/judge-runs/{id}/cancel/"] and "post" in paths["/api/judge-runs/{id}/resume/"]
    body = paths["/api/judge-runs/"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    fields = schema["components"]["schemas"][body.rsplit("/", 1)[-1]]["properties"]
    assert {"study", "judge", "kind", "params", "version"} <= set(fields)


def test_the_run_list_filters_are_checked_and_a_bad_one_is_a_400_naming_it(client, world):
    judge = Judge.objects.create(name="Listed judge", kind="viescore", params={})
    run = JudgeRun.objects.create(judge=judge, study=world["study"], total=3, config_hash="x")
    client.force_login(world["owner"])
    url = reverse("api-judge-runs")
    found = client.get(url, {"study": "api-judged", "state": "queued"})
    assert found.status_code == 200 and [r["id"] for r in found.json()["results"]] == [run.pk]
    assert client.get(url, {"state": "done"}).json()["results"] == []
    for query, name in [("study=%00", "study"), ("study=a%00b", "study"), ("study=" + "s" * 101, "study"),
                        ("state=%00", "state"), ("state=sideways", "state")]:
        response = client.get(f"{url}?{query}")
        assert response.status_code == 400, (query, response.status_code)
        assert name in response.json(), (query, response.json())
