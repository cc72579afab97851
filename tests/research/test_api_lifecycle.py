"""The whole study lifecycle through the API alone (the browser walk is
tests/browser/test_study_lifecycle_browser.py): build from a bundle, configure, publish, three
Prolific raters (one rejected mid-way gets the screened-out code), results, an offline metric
judge, close, the Prolific decisions, the dataset export. The raters use the rating pages, as
raters do; everything the researcher does is an API call with a token-less authenticated client."""

from __future__ import annotations

import csv
import io
import re
import zipfile

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from tasks.models import Rating, Study
from tasks.sample_bundles import sample_bundle
from tests.factories import crowd_enter, make_user

pytestmark = pytest.mark.django_db(transaction=True)  # jobs run at their commit, as in production


def _rate_screen(client, url: str) -> str:
    """Answer every field of the screen at ``url`` with its middle choice; the next page's URL."""
    page = client.get(url).content.decode()
    fields = sorted(set(re.findall(r'name="(u\d+-[\w-]+)"', page)))
    shown = re.search(r'name="shown" value="([^"]+)"', page)
    response = client.post(url, {**{name: "0.5" for name in fields}, **({"shown": shown.group(1)} if shown else {})})
    return response.get("Location") or response.get("HX-Redirect") or url


def test_a_researcher_runs_a_crowd_study_from_bundle_to_payment_through_the_api_alone(client):
    researcher = make_user("api-researcher")
    researcher.user_permissions.add(Permission.objects.get(codename="add_study"))
    api = APIClient()
    api.force_authenticate(researcher)

    # Create from the builder's sample bundle
    created = api.post("/api/studies/", {
        "bundle": io.BytesIO(sample_bundle("imagenhub", "text_to_image")), "slug": "api-pilot", "title": "API pilot",
        "protocol": "imagenhub", "task_type": "text_to_image"}, format="multipart")
    assert created.status_code == 201, created.content
    assert created.json()["items"] == 4 and created.json()["state"] == "draft"

    # Configure, with a refused value first (nothing stored)
    assert api.patch("/api/studies/api-pilot/", {"units_per_session": 0}, format="json").status_code == 400
    configured = api.patch("/api/studies/api-pilot/", {
        "completion_code": "APIDONE1", "screened_out_code": "APIOUT2", "closed_code": "APISHUT3",
        "units_per_session": 4, "raters_per_item": 3, "pay_per_hour": "12.00", "seconds_per_unit_estimate": 15},
        format="json")
    assert configured.status_code == 200, configured.content
    body = api.get("/api/studies/api-pilot/").json()
    assert body["configuration"]["completion_code"] == "APIDONE1"
    assert body["cost"] and "PROLIFIC_PID={{%PROLIFIC_PID%}}" in body["links"]["prolific"]

    # Publish; three Prolific raters; the third is rejected after one screen
    assert api.post("/api/studies/api-pilot/publish/").json()["state"] == "open"
    study = Study.objects.get(slug="api-pilot")
    urls = {}
    for pid in ("APIONE", "APITWO", "APITHREE"):
        client.cookies.clear()
        urls[pid] = crowd_enter(client, study, pid=pid)
        urls[pid] = _rate_screen(client, urls[pid])
        urls[pid] = (urls[pid], dict(client.cookies.items()))
    third = study.ratings.filter(rater__external_id="APITHREE").values_list("rater_id", flat=True).first()
    other = make_user("api-other")
    other.user_permissions.add(Permission.objects.get(codename="add_study"))
    nosy = APIClient()
    nosy.force_authenticate(other)
    decision = {"decision": "reject", "reason": "Answered the middle of every scale"}
    assert nosy.post(f"/api/studies/api-pilot/raters/{third}/decision/", decision, format="json").status_code == 404
    assert api.post(f"/api/studies/api-pilot/raters/{third}/decision/", {"decision": "block", "reason": "x"},
                    format="json").status_code == 400  # site-wide blocks are staff's
    decided = api.post(f"/api/studies/api-pilot/raters/{third}/decision/", decision, format="json")
    assert decided.status_code == 200 and decided.json()["standing"] == "rejected"
    for pid, (url, cookies) in urls.items():
        client.cookies.clear()
        for name, value in cookies.items():
            client.cookies[name] = value.value if hasattr(value, "value") else value
        for _ in range(3 if pid != "APITHREE" else 1):
            url = _rate_screen(client, url)
        page = client.get(url, follow=True).content.decode()
        expected = "APIOUT2" if pid == "APITHREE" else "APIDONE1"
        assert expected in page, (pid, page[:500])
    assert Rating.objects.filter(study=study).count() == 9

    # Results, then an offline metric judge, through the API
    results = api.get("/api/studies/api-pilot/results/").json()
    assert set(results["models"]) == {"ModelA", "ModelB"}
    run = api.post("/api/judge-runs/", {"study": "api-pilot", "judge": "sharpness", "kind": "metric",
                                       "params": {"metrics": ["sharpness"]}}, format="json")
    assert run.status_code in (201, 202), run.content
    assert api.get(f"/api/judge-runs/{run.json()['id']}/").json()["state"] == "done"
    refused = api.post("/api/judge-runs/", {"study": "api-pilot", "judge": "ssim", "kind": "metric",
                                           "params": {"metrics": ["SSIM"]}}, format="json")
    assert refused.status_code == 400 and "source" in refused.json()["detail"]

    # Close, pay, export
    assert api.post("/api/studies/api-pilot/close/").json()["state"] == "closed"
    rows = {row["participant_id"]: row for row in api.get("/api/studies/api-pilot/prolific-decisions/").json()}
    assert set(rows) == {"APIONE", "APITWO", "APITHREE"}
    assert rows["APITHREE"]["decision"] == "REJECT" and "middle of every scale" in rows["APITHREE"]["reason"]
    export = api.get("/api/studies/api-pilot/export/")
    assert export.status_code == 200
    archive = zipfile.ZipFile(io.BytesIO(b"".join(export.streaming_content)))
    votes_name = next(n for n in archive.namelist() if n.endswith("votes.csv"))
    assert len(list(csv.DictReader(io.StringIO(archive.read(votes_name).decode("utf-8-sig"))))) == 9
