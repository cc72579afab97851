"""Red-team round on the study-lifecycle endpoints (stopping panel, planning sources, releases,
exports, adaptive assignment): each test is an attack that worked before its fix.

Crowd raters control the ratings a study holds; a researcher pages over another researcher's
studies only through Study.objects.visible_to. The authorisation matrix and the hostile-input
sweeps (tests/hardening/) already cover routes and hostile values on an empty study; these are
the cases that need a study in a particular state.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tasks.models import Study
from tasks.services import rating_submit
from tests.factories import make_item, make_rater, make_study, make_user

pytestmark = pytest.mark.django_db


def _finished_source(owner, *, agreeing: bool) -> Study:
    """A closed ImagenHub study whose raters never disagree (``agreeing``), or whose items have one
    rating each: either way its subject model finds no rater noise at all."""
    source = make_study(title="Unanimous source")
    source.owners.add(owner)
    items = [make_item(source, model=m, with_image=False) for m in ("A", "B") for _ in range(4)]
    raters = [make_rater() for _ in range(3)]
    for k, item in enumerate(items):
        for j, rater in enumerate(raters):
            if not agreeing and j != k % 3:
                continue
            value = 1.0 if item.gen_model.name == "A" else 0.5
            rating_submit(rater=rater, item=item, values={"SC": value, "PQ": value}, require_assignment=False)
    Study.objects.filter(pk=source.pk).update(state=Study.State.CLOSED)
    return source


@pytest.mark.parametrize("agreeing", [True, False], ids=["raters-agree", "one-rating-per-item"])
def test_a_source_study_without_rater_noise_is_refused_with_a_message_not_a_server_error(agreeing):
    """Raters who all give the same answers (or a study with one rating per item) made the
    planning-sources page of every later study of that researcher a 500 as soon as a CI half-width
    was asked for (raters_per_item refuses a zero noise)."""
    owner = make_user("planner")
    source = _finished_source(owner, agreeing=agreeing)
    target = make_study()
    target.owners.add(owner)
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    url = reverse("research-study-planning-sources", args=[target.slug])
    response = client.get(url, {"source": f"study:{source.slug}", "dimension": "SC", "halfwidth": "0.3"})
    assert response.status_code == 400, response.status_code
    assert "no rater noise" in response.content.decode()
    # other targets still plan from it
    response = client.get(url, {"source": f"study:{source.slug}", "dimension": "SC", "alpha_width": "0.2"})
    assert response.status_code == 200


def test_a_release_whose_worker_died_does_not_block_every_later_release_of_the_study(
        client, django_capture_on_commit_callbacks):
    """A release build killed mid-way (out of memory, a redeploy) stayed 'running' for ever: the
    redelivered job claims only queued releases, and every new request was refused with "a release
    of this study is being built", so the study could never be released again."""
    from datetime import timedelta

    from django.utils import timezone

    from analysis.jobs import build_release_job
    from analysis.models import DatasetRelease
    from analysis.release_services import STALE_AFTER

    owner = make_user("releaser")
    study = make_study()
    study.owners.add(owner)
    client.force_login(owner)
    dead = DatasetRelease.objects.create(study=study, requested_by=owner, state=DatasetRelease.State.RUNNING)
    url = f"/api/studies/{study.slug}/releases/"
    with django_capture_on_commit_callbacks(execute=False):
        assert client.post(url, {}, content_type="application/json").status_code == 409  # may still be building
        assert build_release_job(dead.pk) is None  # the redelivered job leaves it as it is
        DatasetRelease.objects.filter(pk=dead.pk).update(created_at=timezone.now() - STALE_AFTER - timedelta(minutes=1))
        response = client.post(url, {}, content_type="application/json")
    assert response.status_code == 202, response.content
    dead.refresh_from_db()
    assert dead.state == DatasetRelease.State.FAILED and "request a new release" in dead.error
    assert DatasetRelease.objects.get(pk=response.json()["id"]).state == DatasetRelease.State.QUEUED
