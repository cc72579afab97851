"""Study exports prepared by a background job: service, page, API, owner-only downloads.

A large study (more votes than EXPORT_INLINE_MAX_VOTES) is never exported inside a request: the
old direct links send the researcher to the export page (page) or answer 409 (API).
"""

from __future__ import annotations

import io
import zipfile

import pytest
from django.urls import reverse

from analysis.export_services import study_export_run, study_export_start
from analysis.science.exports import iter_export_zip
from analysis.export_input import study_export_input
from analysis.models import StudyExport
from tests.factories import make_study, make_user
from tests.research.test_exports import _imagenhub_study_with_votes

pytestmark = pytest.mark.django_db


@pytest.fixture
def researcher():
    return make_user("exporter")


@pytest.fixture
def study(researcher):
    study = _imagenhub_study_with_votes(slug="exported", title="Exported study")
    study.owners.add(researcher)
    return study


def _zip(data: bytes) -> zipfile.ZipFile:
    return zipfile.ZipFile(io.BytesIO(data))


def test_the_job_writes_the_same_dataset_as_the_stream_with_progress(study, researcher, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        export = study_export_start(study=study, user=researcher)
    export.refresh_from_db()
    votes = study.ratings.count()
    assert (export.state, export.done, export.total, export.stage) == ("done", votes, votes, "ready")
    with export.file.open("rb") as handle:
        built = _zip(handle.read())
    streamed = _zip(b"".join(iter_export_zip(study_export_input(study))))
    assert built.namelist() == streamed.namelist()
    for name in ("votes.csv", "items.csv", "raters.csv"):
        assert built.read(name) == streamed.read(name)
    assert export.size == export.file.size


def test_an_export_under_way_is_not_started_twice_and_a_new_one_replaces_the_old_file(study, researcher,
                                                                                     django_capture_on_commit_callbacks):
    first = study_export_start(study=study, user=researcher)  # queued: its commit never comes here
    assert study_export_start(study=study, user=researcher).pk == first.pk
    study_export_run(export_id=first.pk)
    first.refresh_from_db()
    old_path = first.file.path
    with django_capture_on_commit_callbacks(execute=True):
        second = study_export_start(study=study, user=researcher)
    assert second.pk != first.pk
    assert not StudyExport.objects.filter(pk=first.pk).exists()
    import os

    assert not os.path.exists(old_path)


def test_a_second_delivery_of_the_job_finds_nothing_to_claim(study, researcher):
    export = study_export_start(study=study, user=researcher)
    assert study_export_run(export_id=export.pk, task_id="t1").state == "done"
    assert study_export_run(export_id=export.pk, task_id="t1") is None


def test_exports_are_kept_outside_media_root(study, researcher, settings):
    export = study_export_start(study=study, user=researcher)
    export = study_export_run(export_id=export.pk)
    assert str(settings.EXPORTS_ROOT) in export.file.path
    assert str(settings.MEDIA_ROOT) not in export.file.path
    with pytest.raises(ValueError):
        export.file.url  # no public URL


# -------------------------------------------------------------------------------- page


def test_the_page_prepares_an_export_and_the_owner_downloads_it(client, study, researcher,
                                                                 django_capture_on_commit_callbacks):
    client.force_login(researcher)
    page = client.get(reverse("study-exports", args=[study.slug]))
    assert page.status_code == 200 and "Prepare the export" in page.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(reverse("study-export-start", args=[study.slug]), {"kind": "dataset"})
    assert started.status_code == 302
    export = StudyExport.objects.get(study=study)
    html = client.get(reverse("study-exports", args=[study.slug])).content.decode()
    download = reverse("study-export-download", args=[study.slug, export.pk])
    assert download in html and "Ready" in html
    response = client.get(download)
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="exported-ratings.zip"'
    assert "votes.parquet" in _zip(b"".join(response.streaming_content)).namelist()


def test_the_list_partial_polls_while_an_export_is_being_prepared(client, study, researcher):
    export = study_export_start(study=study, user=researcher)
    client.force_login(researcher)
    url = reverse("study-exports", args=[study.slug]) + "?fragment=list"
    html = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 2s"' in html and "waiting for the worker" in html and "<h1>" not in html
    study_export_run(export_id=export.pk)
    html = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "hx-trigger" not in html and "Download" in html


def test_only_the_researcher_who_asked_downloads_the_file(client, study, researcher):
    export = study_export_run(export_id=study_export_start(study=study, user=researcher).pk)
    download = reverse("study-export-download", args=[study.slug, export.pk])
    colleague = make_user("co-owner")
    study.owners.add(colleague)
    outsider = make_user("outsider-export")  # a researcher with a study of their own
    make_study(slug="theirs").owners.add(outsider)
    for user in (colleague, outsider):
        client.force_login(user)
        assert client.get(download).status_code == 404
    client.force_login(make_user("rater-export"))
    assert client.get(download).status_code == 403  # not a researcher at all
    client.force_login(colleague)
    assert str(export.pk) not in client.get(reverse("study-exports", args=[study.slug])).content.decode().split("Your exports")[1]
    client.logout()
    assert client.get(download).status_code == 302  # to the login page


def test_a_large_study_is_sent_to_the_background_export_instead_of_streamed(client, study, researcher, settings):
    settings.EXPORT_INLINE_MAX_VOTES = study.ratings.count() - 1
    client.force_login(researcher)
    response = client.get(reverse("research-export", args=[study.slug]))
    assert response.status_code == 302 and response.url == reverse("study-exports", args=[study.slug])
    page = client.get(response.url).content.decode()
    assert "prepared in the background" in page and "Download now" not in page
    api = client.get(reverse("api-study-export", args=[study.slug]))
    assert api.status_code == 409 and "POST /api/studies/exported/exports/" in api.json()["detail"]


# --------------------------------------------------------------------------------- API


def test_the_api_starts_polls_and_downloads_an_export(client, study, researcher, django_capture_on_commit_callbacks):
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(reverse("api-study-exports", args=[study.slug]), {}, content_type="application/json")
    assert started.status_code == 202
    body = client.get(reverse("api-study-export-detail", args=[started.json()["id"]])).json()
    assert body["state"] == "done" and body["download"].endswith(f"/api/exports/{body['id']}/download/")
    response = client.get(body["download"])
    assert response.status_code == 200 and b"".join(response.streaming_content)[:2] == b"PK"
    listed = client.get(reverse("api-study-exports", args=[study.slug])).json()
    assert [e["id"] for e in listed] == [body["id"]]


def test_the_api_refuses_unknown_kinds_and_unfinished_or_foreign_exports(client, study, researcher):
    client.force_login(researcher)
    bad = client.post(reverse("api-study-exports", args=[study.slug]), {"kind": "everything"},
                      content_type="application/json")
    assert bad.status_code == 400
    export = study_export_start(study=study, user=researcher)  # queued
    assert client.get(reverse("api-study-export-download", args=[export.pk])).status_code == 409
    client.force_login(make_user("api-outsider"))
    assert client.get(reverse("api-study-export-detail", args=[export.pk])).status_code in (403, 404)
    assert client.get(reverse("api-study-export-download", args=[export.pk])).status_code in (403, 404)
