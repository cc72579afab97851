"""A rater reports a broken image or leaves a comment on a screen; researchers see it."""

import pytest
from django.test import Client

from tasks.models import Rating, ScreenReport
from tests.factories import crowd_enter, make_instance, make_item, make_study, make_user

pytestmark = pytest.mark.django_db


def _study(**fields):
    study = make_study(units_per_session=2, **fields)
    instance = make_instance(study)
    for m in range(2):
        make_item(study, instance=instance, model=f"M{m}")
    return study


def test_a_rater_reports_a_broken_image_and_a_second_report_replaces_the_first(client):
    study = _study()
    screen_url = crowd_enter(client, study)
    page = client.get(screen_url).content.decode()
    assert "Report a problem with this screen" in page
    position = int(screen_url.rsplit("/", 1)[1])
    url = f"/s/{study.slug}/rate/{position}/report"
    response = client.post(url, {"broken": "yes", "comment": "the picture\nis grey"}, headers={"HX-Request": "true"})
    assert response.status_code == 200 and 'data-testid="report-sent"' in response.content.decode()
    report = ScreenReport.objects.get()
    screen_items = list(study.assignments.filter(position=position).values_list("item_id", flat=True))
    assert report.broken_image and report.comment == "the picture\nis grey" and report.items == screen_items
    client.post(url, {"comment": "on second look it loads"})
    report = ScreenReport.objects.get()
    assert not report.broken_image and report.comment == "on second look it loads"
    assert not Rating.objects.exists()  # a report is not an answer


@pytest.mark.parametrize("form, message", [
    ({}, "write a comment"),
    ({"comment": "x" * 1001}, "under 1000"),
    ({"comment": "nul\x00byte"}, "cannot be stored"),
    ({"comment": "escape \x1b[31m sequence"}, "cannot be stored"),
])
def test_an_empty_or_hostile_report_is_refused_and_nothing_is_stored(client, form, message):
    study = _study()
    position = int(crowd_enter(client, study).rsplit("/", 1)[1])
    response = client.post(f"/s/{study.slug}/rate/{position}/report", form)
    assert response.status_code == 400 and message in response.content.decode()
    assert not ScreenReport.objects.exists()


def test_a_rater_cannot_report_on_a_screen_that_is_not_theirs(client):
    study = _study()
    crowd_enter(client, study, pid="FIRST")
    mine = Client()
    crowd_enter(mine, study, pid="SECOND")
    # Positions are per rater: one past the second rater's queue names nobody's screen of theirs,
    # even where the first rater has one.
    taken = set(study.assignments.filter(rater__external_id="SECOND").values_list("position", flat=True))
    assert mine.post(f"/s/{study.slug}/rate/{max(taken) + 100}/report", {"broken": "yes"}).status_code == 403
    assert Client().post(f"/s/{study.slug}/rate/0/report", {"broken": "yes"}).status_code in (403, 404)
    assert mine.get(f"/s/{study.slug}/rate/0/report").status_code == 405
    assert not ScreenReport.objects.exists()


def test_the_owner_sees_the_reports_on_the_dashboard(client):
    study = _study()
    owner = make_user()
    study.owners.add(owner)
    rater = Client()
    position = int(crowd_enter(rater, study, pid="REPORTER").rsplit("/", 1)[1])
    rater.post(f"/s/{study.slug}/rate/{position}/report", {"broken": "yes", "comment": "<b>grey</b> square"})
    client.force_login(owner)
    html = client.get(f"/research/{study.slug}/").content.decode()
    assert 'data-testid="screen-reports"' in html and "prolific:REPORTER" in html
    assert "&lt;b&gt;grey&lt;/b&gt; square" in html  # rater text is escaped
