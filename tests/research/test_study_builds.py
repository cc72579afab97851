"""Study builds in the background: the upload is stored, a job builds it with progress the page
and the API show, a second delivery does nothing, and a failed or killed build leaves no file."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from tasks import build_services, builder
from tasks.builder import StudySpec
from tasks.images import store_image
from tasks.jobs import study_build_job
from tasks.models import Item, StoredImage, Study, StudyBuild
from tests.factories import make_user, png_bytes
from tests.research.bundles import text_to_image_bundle

pytestmark = pytest.mark.django_db


@pytest.fixture
def researcher():
    user = make_user("builder")
    user.user_permissions.add(Permission.objects.get(codename="add_study"))
    return user


def media_files(under: str = "") -> list[str]:
    root = Path(settings.MEDIA_ROOT)
    return sorted(p.relative_to(root).as_posix() for p in (root / under).rglob("*") if p.is_file()) \
        if (root / under).exists() else []


def _form(**overrides) -> dict:
    bundle = text_to_image_bundle()
    bundle.name = "bundle.zip"
    fields = {"bundle": bundle, "slug": "queued-study", "title": "Queued", "protocol": "imagenhub",
              "task_type": "text_to_image", "raters_per_item": 3, "assignment_mode": "balanced", "settings": "{}"}
    fields.update(overrides)
    return fields


def _queued_build(owner=None, **overrides) -> StudyBuild:
    """A stored upload whose job has not run yet (as with a worker that has not picked it up)."""
    spec = StudySpec(slug="queued-study", title="Queued", protocol="imagenhub", task_type="text_to_image")
    for name, value in overrides.items():
        setattr(spec, name, value)
    queued = []
    original = build_services._queue
    build_services._queue = queued.append
    try:
        build = build_services.study_build_start(upload=text_to_image_bundle(), spec=spec, owner=owner)
    finally:
        build_services._queue = original
    assert queued == [build]
    return build


def test_with_a_worker_the_page_shows_progress_that_polls_itself_and_then_leads_to_the_study(
    client, researcher, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    with django_capture_on_commit_callbacks() as queued:  # not run: the worker has not picked it up
        response = client.post(reverse("research-study-new"), _form())
    build = StudyBuild.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("research-study-build", args=[build.pk])
    assert len(queued) == 1 and build.state == "queued" and build.upload and not Study.objects.exists()

    page = client.get(response["Location"]).content.decode()
    url = reverse("research-study-build", args=[build.pk])
    assert "Waiting for a worker" in page
    assert f'hx-get="{url}" hx-trigger="every 2s"' in page and f'<a href="{url}">Refresh</a>' in page

    queued[0]()  # the worker runs the job
    build.refresh_from_db()
    assert build.state == "done" and build.study.slug == "queued-study" and not build.upload
    fragment = client.get(url, headers={"HX-Request": "true"})
    assert fragment["HX-Redirect"] == reverse("research-study", args=["queued-study"])
    assert client.get(url)["Location"] == reverse("research-study", args=["queued-study"])
    assert media_files("builds") == []  # the upload went once built


def test_with_a_worker_the_api_answers_202_and_the_build_to_poll(client, researcher, django_capture_on_commit_callbacks):
    client.force_login(researcher)
    fields = _form(slug="via-api")
    with django_capture_on_commit_callbacks() as queued:
        response = client.post("/api/studies/", fields)
    assert response.status_code == 202
    body = response.json()
    assert response["Location"] == body["url"] == f"/api/study-builds/{body['id']}/"
    assert (body["state"], body["stage"], body["study"]) == ("queued", "waiting", None)
    queued[0]()
    done = client.get(body["url"]).json()
    assert (done["state"], done["study"], done["done"], done["total"]) == ("done", "via-api", 4, 4)
    assert Item.objects.filter(study__slug="via-api").count() == 4


def test_another_researcher_cannot_see_a_build(client, researcher):
    build = _queued_build(owner=researcher)
    other = make_user("other-researcher", is_staff=False)
    other.user_permissions.add(Permission.objects.get(codename="add_study"))
    client.force_login(other)
    assert client.get(f"/api/study-builds/{build.pk}/").status_code == 404
    assert client.get(reverse("research-study-build", args=[build.pk])).status_code == 404


def test_a_slug_already_being_built_is_refused_before_anything_is_stored(researcher):
    _queued_build(owner=researcher)
    with pytest.raises(builder.BundleInvalid) as caught:
        _queued_build(owner=researcher)
    assert [p.message for p in caught.value.problems] == ["a study with slug 'queued-study' is already being built"]
    assert StudyBuild.objects.count() == 1


def test_the_job_writes_its_progress_where_the_page_reads_it(researcher, monkeypatch):
    build = _queued_build(owner=researcher)
    monkeypatch.setattr(build_services, "PROGRESS_SECONDS", 0)
    monkeypatch.setattr(builder, "STORE_CHUNK", 1)
    seen = []
    real_store = builder.images_store_many

    def store_and_look(*args, **kwargs):
        row = StudyBuild.objects.get(pk=build.pk)  # what a page polling now would read
        seen.append((row.state, row.stage, row.done, row.total))
        return real_store(*args, **kwargs)

    monkeypatch.setattr(builder, "images_store_many", store_and_look)
    study_build_job.delay(build.pk)
    assert seen == [("running", "storing", n, 4) for n in range(4)]


def test_a_second_delivery_of_the_job_does_nothing(researcher):
    build = _queued_build(owner=researcher)
    assert study_build_job.delay(build.pk).get()["state"] == "done"
    assert study_build_job.delay(build.pk).get() is None
    assert Study.objects.count() == 1 and Item.objects.count() == 4


def test_a_build_that_fails_after_storing_images_leaves_no_row_and_no_file(researcher, monkeypatch):
    """As a 7,000-image build cut short did (1,763 files with no row): the failure path removes
    the build's images and its upload."""
    kept = store_image(png_bytes(color=(1, 2, 3)))  # an image of the site, not of this build
    build = _queued_build(owner=researcher)
    real_store, stored = builder.images_store_many, []

    def store_then_fail(*args, **kwargs):
        if len(stored) == 3:
            raise OSError("disk full")
        stored.append(real_store(*args, **kwargs))
        return stored[-1]

    monkeypatch.setattr(builder, "STORE_CHUNK", 1)
    monkeypatch.setattr(builder, "images_store_many", store_then_fail)
    with pytest.raises(OSError):
        study_build_job.delay(build.pk)
    build.refresh_from_db()
    assert (build.state, build.error) == ("failed", "OSError: disk full")
    assert list(StoredImage.objects.all()) == [kept]
    assert media_files() == [kept.file.name]
    assert not Study.objects.exists()


def test_a_failed_build_shows_its_problems_on_its_page(client, researcher):
    build = _queued_build(owner=researcher, task_type="control_guided_generation")
    study_build_job.delay(build.pk)
    client.force_login(researcher)
    page = client.get(reverse("research-study-build", args=[build.pk])).content.decode()
    assert "2 problems: nothing was created" in page and "needs a control image" in page
    assert "hx-get" not in page  # nothing left to poll
    assert media_files() == []


def test_a_build_whose_worker_was_killed_is_claimed_again_once_stale_and_its_leftovers_go(researcher):
    build = _queued_build(owner=researcher)
    StudyBuild.objects.filter(pk=build.pk).update(state="running", heartbeat_at=timezone.now())
    leftover = store_image(png_bytes(color=(9, 8, 7)), folder=build.image_folder)  # a row the killed attempt committed
    orphan = Path(settings.MEDIA_ROOT) / Path(leftover.file.name).parent / "half-written.png"
    orphan.write_bytes(b"\x89PNG half")  # and a file it wrote without a row
    assert study_build_job.delay(build.pk).get() is None  # still fresh: another worker may be on it

    StudyBuild.objects.filter(pk=build.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert study_build_job.delay(build.pk).get()["state"] == "done"
    assert not StoredImage.objects.filter(pk=leftover.pk).exists() and not orphan.exists()
    assert StoredImage.objects.count() == 4 and Item.objects.count() == 4


def _age(path: Path, hours: float = 48) -> None:
    then = time.time() - hours * 3600
    os.utime(path, (then, then))


def test_prune_images_finds_files_without_rows_once_they_are_older_than_the_grace_period(researcher):
    root = Path(settings.MEDIA_ROOT)
    kept = store_image(png_bytes(color=(5, 5, 5)))
    old_orphan = root / "images/2026/01/build-77/ab/abcdef.png"
    fresh_orphan = root / "images/2026/11/cd/cdef01.png"
    old_derived = root / "derived/ee/" / ("e" * 64 + "_160.webp")
    dead_upload = root / "builds/0123.zip"
    for path in (old_orphan, fresh_orphan, old_derived, dead_upload):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"left behind")
    live = _queued_build(owner=researcher)  # its upload is still needed
    for path in (old_orphan, old_derived, dead_upload, root / kept.file.name, root / live.upload.name):
        _age(path)

    out = StringIO()
    call_command("prune_images", stdout=out)
    assert "and 3 files without a row" in out.getvalue() and old_orphan.exists()
    call_command("prune_images", "--yes", stdout=StringIO())
    assert not old_orphan.exists() and not old_derived.exists() and not dead_upload.exists()
    assert fresh_orphan.exists() and (root / kept.file.name).exists() and (root / live.upload.name).exists()


def test_the_killed_workers_own_task_delivered_again_claims_its_build_at_once(researcher):
    build = _queued_build(owner=researcher)
    StudyBuild.objects.filter(pk=build.pk).update(state="running", heartbeat_at=timezone.now(), task_id="task-1")
    assert build_services.study_build_run(build_id=build.pk, task_id="task-2") is None  # another task: not ours
    assert build_services.study_build_run(build_id=build.pk, task_id="task-1").state == "done"


def test_a_build_whose_worker_died_long_ago_does_not_hold_its_slug(researcher):
    build = _queued_build(owner=researcher)
    StudyBuild.objects.filter(pk=build.pk).update(state="running", heartbeat_at=timezone.now() - timedelta(hours=2))
    assert _queued_build(owner=researcher).slug == "queued-study"


def test_the_page_of_a_build_whose_worker_stopped_says_so(client, researcher):
    build = _queued_build(owner=researcher)
    StudyBuild.objects.filter(pk=build.pk).update(state="running", heartbeat_at=timezone.now() - timedelta(hours=2))
    client.force_login(researcher)
    assert "its worker has stopped" in client.get(reverse("research-study-build", args=[build.pk])).content.decode()


def test_deleting_a_built_study_deletes_its_build_record_and_keeps_other_builds(researcher):
    from analysis.study_deletion import study_delete

    built = _queued_build(owner=researcher)
    study_build_job.delay(built.pk)
    other = _queued_build(owner=researcher, slug="another")
    study_delete(study=Study.objects.get(slug="queued-study"))
    assert list(StudyBuild.objects.values_list("pk", flat=True)) == [other.pk]
