"""How a rater leaves: the code and the way back for each outcome, also when the study closes mid-session."""

from __future__ import annotations

import re

import pytest

from raters.models import QualificationAttempt, QualityPolicy, RaterStanding
from raters.services import rater_decide
from tasks.models import Participation, Rating, Study
from tasks.outcomes import Outcome, closed_exit, exit_for
from tests.factories import crowd_enter, make_instance, make_item, make_study, make_user

pytestmark = pytest.mark.django_db

CODES = {"completion_code": "DONE-1", "screened_out_code": "SCREEN-2", "qualification_failed_code": "QUAL-3",
         "closed_code": "CLOSED-4"}


def _study(n_items=3, **fields):
    study = make_study(units_per_session=n_items, **{**CODES, **fields})
    instance = make_instance(study)
    for m in range(n_items):
        make_item(study, instance=instance, model=f"M{m}")
    return study


def _fields(response):
    return sorted(set(re.findall(r'name="(u\d+-[\w-]+)"', response.content.decode())))


def _close(study):
    Study.objects.filter(pk=study.pk).update(state=Study.State.CLOSED)


def test_a_rater_who_rated_and_sees_the_study_close_gets_the_completion_code_and_prolific_link(client):
    study = _study()
    url = crowd_enter(client, study, pid="PA")
    pq, sc = _fields(client.get(url))
    client.post(url, {sc: "1", pq: "1"})
    _close(study)
    response = client.get(f"/s/{study.slug}/rate")
    html = response.content.decode()
    assert response.status_code == 410 and "DONE-1" in html and 'data-outcome="completed"' in html
    assert "https://app.prolific.com/submissions/complete?cc=DONE-1" in html
    assert study.slug not in html and study.title not in html
    assert Participation.objects.get().completed_at is not None  # their answers are final now


def test_a_rater_with_nothing_rated_when_the_study_closes_gets_the_closed_code(client):
    study = _study(closed_url="https://app.prolific.com/submissions/complete?cc=CLOSED-4")
    url = crowd_enter(client, study, pid="PB")
    _close(study)
    html = client.get(url).content.decode()
    assert "CLOSED-4" in html and 'data-outcome="closed"' in html and "DONE-1" not in html
    assert 'href="https://app.prolific.com/submissions/complete?cc=CLOSED-4"' in html


def test_an_htmx_submit_to_a_closed_study_sends_the_whole_page_to_the_exit(client):
    study = _study()
    url = crowd_enter(client, study, pid="PC")
    pq, sc = _fields(client.get(url))
    _close(study)
    response = client.post(url, {sc: "1", pq: "1"}, headers={"HX-Request": "true"})
    assert response.status_code == 204 and response["HX-Redirect"] == f"/s/{study.slug}/rate"
    assert Rating.objects.count() == 0
    assert b"CLOSED-4" in client.get(response["HX-Redirect"]).content


def test_a_completed_rater_without_a_completion_code_falls_back_to_the_closed_code(client):
    study = _study(completion_code="")
    url = crowd_enter(client, study, pid="PD")
    pq, sc = _fields(client.get(url))
    client.post(url, {sc: "1", pq: "1"})
    _close(study)
    assert b"CLOSED-4" in client.get(f"/s/{study.slug}/rate").content


def test_a_rater_screened_out_gets_the_screened_out_code_not_the_completion_code(client):
    study = _study(n_items=1)
    url = crowd_enter(client, study, pid="PE")
    pq, sc = _fields(client.get(url))
    participation = Participation.objects.get()
    rater_decide(study=study, rater=participation.rater, decision="reject", reason="too fast", actor=None)
    done = client.post(url, {sc: "1", pq: "1"}, follow=True)
    html = done.content.decode()
    assert RaterStanding.objects.get().state == "rejected"
    assert "SCREEN-2" in html and "DONE-1" not in html and 'data-outcome="screened_out"' in html


def test_a_rater_who_failed_the_qualification_gets_that_code_on_the_test_page(client):
    study = _study(n_items=2)
    QualityPolicy.objects.create(study=study, qualification_required=True, qualification_max_attempts=1)
    crowd_enter_no_work(client, study, pid="PF")
    participation = Participation.objects.get()
    QualificationAttempt.objects.create(study=study, rater=participation.rater, number=1, items=[1], passed=False,
                                        finished_at=participation.created_at)
    html = client.get(f"/studies/{study.slug}/qualification/").content.decode()
    assert "QUAL-3" in html and "cc=QUAL-3" in html and "DONE-1" not in html


def crowd_enter_no_work(client, study, *, pid):
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID={pid}")
    client.post(f"/s/{study.slug}/consent", {"agree": "yes"})
    client.post(f"/s/{study.slug}/instructions")


def test_invited_raters_get_no_code_for_any_outcome():
    study = _study()
    user = make_user("invited-x")
    from tasks.assignment import participation_get_or_create
    from tests.factories import make_rater

    participation = participation_get_or_create(rater=make_rater(user=user), study=study)
    for outcome in Outcome:
        assert exit_for(study=study, participation=participation, outcome=outcome).code == ""


def test_an_mturk_worker_gets_the_submit_form_with_the_outcome_code():
    study = _study()
    from tests.factories import make_rater

    rater = make_rater(platform="mturk", external_id="W1")
    participation = Participation.objects.create(study=study, rater=rater, seed=1, crowd={
        "platform": "mturk", "assignmentId": "A1", "hitId": "H1", "turkSubmitTo": "https://www.mturk.com"})
    exit_ = closed_exit(study=study, participation=participation)
    assert (exit_.code, exit_.mturk_action, exit_.mturk_assignment) == (
        "CLOSED-4", "https://www.mturk.com/mturk/externalSubmit", "A1")


def test_a_rater_in_the_qualification_test_when_the_study_closes_is_sent_to_their_exit(client):
    study = _study(n_items=2)
    QualityPolicy.objects.create(study=study, qualification_required=True)
    crowd_enter_no_work(client, study, pid="PG")
    _close(study)
    response = client.get(f"/studies/{study.slug}/qualification/", follow=True)
    assert response.status_code == 410 and b"CLOSED-4" in response.content
    htmx = client.post(f"/studies/{study.slug}/qualification/", {"action": "start"}, headers={"HX-Request": "true"})
    assert htmx.status_code == 204 and htmx["HX-Redirect"] == f"/s/{study.slug}/rate"
