import pytest

from raters.models import Rater
from tasks.crowd import CrowdParamsInvalid, crowd_entry_from
from tasks.models import Participation, Rating, Study
from tests.factories import make_instance, make_item, make_study

pytestmark = pytest.mark.django_db

MTURK = "workerId=W1&assignmentId=A1&hitId=H1&turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com"


def _study(**fields):
    study = make_study(units_per_session=1, completion_code="CODE-7", **fields)
    make_item(study, instance=make_instance(study))
    return study


def _finish(client, study):
    client.post(f"/s/{study.slug}/consent", {"agree": "yes"})
    client.post(f"/s/{study.slug}/instructions")
    url = client.get(f"/s/{study.slug}/rate").url
    assignment = study.assignments.get()
    return client.post(url, {"u0-SC": "1", "u0-PQ": "1"}, follow=True)


def test_a_prolific_worker_arrives_by_link_and_the_same_id_comes_back_to_the_same_rater(client):
    study = _study()
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID=5f1e&STUDY_ID=S1&SESSION_ID=X1")
    rater = Rater.objects.get(platform="prolific", external_id="5f1e")
    assert Participation.objects.get(rater=rater).crowd == {"STUDY_ID": "S1", "SESSION_ID": "X1", "platform": "prolific"}
    client.post(f"/s/{study.slug}/consent", {"agree": "yes"})
    fresh = client.__class__()  # a new browser, same worker
    assert fresh.get(f"/s/{study.slug}/start?PROLIFIC_PID=5f1e&STUDY_ID=S1&SESSION_ID=X2").url.endswith("/instructions")
    assert Rater.objects.filter(external_id="5f1e").count() == 1


def test_a_prolific_worker_finishes_with_the_code_and_a_link_back_to_prolific(client):
    study = _study()
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID=5f1e")
    done = _finish(client, study)
    html = done.content.decode()
    assert "CODE-7" in html and "https://app.prolific.com/submissions/complete?cc=CODE-7" in html
    assert Rating.objects.count() == 1


def test_a_prolific_study_with_its_own_completion_url_sends_workers_there(client):
    study = _study(completion_url="https://app.prolific.com/submissions/complete?cc=OWN")
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID=5f1e")
    assert "cc=OWN" in _finish(client, study).content.decode()


def test_an_mturk_worker_finishes_with_the_submit_form_posting_to_mturk(client):
    study = _study()
    client.get(f"/s/{study.slug}/start?{MTURK}")
    html = _finish(client, study).content.decode()
    assert 'action="https://workersandbox.mturk.com/mturk/externalSubmit"' in html
    assert 'name="assignmentId" value="A1"' in html and 'name="completion_code" value="CODE-7"' in html


def test_an_mturk_preview_shows_the_task_without_creating_a_rater(client):
    study = _study()
    response = client.get(f"/s/{study.slug}/start?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1")
    assert response.status_code == 200 and b"This is a preview" in response.content
    assert Rater.objects.count() == 0


def test_an_mturk_link_that_submits_elsewhere_is_refused(client):
    study = _study()
    response = client.get(f"/s/{study.slug}/start?workerId=W1&assignmentId=A1&hitId=H1&turkSubmitTo=https://evil.example")
    assert response.status_code == 400 and b"not an MTurk address" in response.content
    assert Rater.objects.count() == 0


def test_a_malformed_worker_id_is_refused_with_a_clear_message(client):
    study = _study()
    response = client.get(f"/s/{study.slug}/start?PROLIFIC_PID=<script>")
    assert response.status_code == 400 and b"PROLIFIC_PID is missing or not a valid id" in response.content


def test_a_closed_study_turns_crowd_workers_away(client):
    study = _study(state=Study.State.CLOSED)
    response = client.get(f"/s/{study.slug}/start?PROLIFIC_PID=5f1e")
    assert response.status_code == 410 and b"This study is closed" in response.content and Rater.objects.count() == 0


def test_a_page_of_the_flow_without_an_entry_is_forbidden(client):
    study = _study()
    assert client.get(f"/s/{study.slug}/rate").status_code == 403


def test_the_crowd_parser_needs_a_prolific_id_and_ignores_links_without_platform_parameters():
    assert crowd_entry_from({}) is None
    with pytest.raises(CrowdParamsInvalid):
        crowd_entry_from({"PROLIFIC_PID": ""})
    entry = crowd_entry_from({"PROLIFIC_PID": "abc", "STUDY_ID": "s"})
    assert (entry.platform, entry.external_id, entry.params) == ("prolific", "abc", {"STUDY_ID": "s"})


def test_a_crowd_browser_is_known_by_a_signed_cookie_that_cannot_be_edited(client):
    """The study → rater map lives in a signed cookie (no session row per screen); a changed
    cookie is ignored, so nobody can rate as somebody else by editing it."""
    from django.contrib.sessions.models import Session
    from django.core import signing

    study, other = _study(), _study()
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID=first")
    client.get(f"/s/{other.slug}/start?PROLIFIC_PID=first")
    assert client.post(f"/s/{study.slug}/consent", {"agree": "yes"}).status_code == 302
    assert Session.objects.count() == 0  # crowd raters need no server-side session
    first = Rater.objects.get(external_id="first")
    assert signing.loads(client.cookies["crowd_raters"].value, salt="tasks.crowd.raters") == {
        study.slug: first.pk, other.slug: first.pk}  # both studies remembered

    victim = Rater.objects.create(platform="prolific", external_id="victim")
    Participation.objects.create(rater=victim, study=study, seed=1)
    payload, signature = client.cookies["crowd_raters"].value.split(":", 1)
    forged = signing.dumps({study.slug: victim.pk}, salt="tasks.crowd.raters").split(":", 1)[0]
    client.cookies["crowd_raters"] = f"{forged}:{signature}"  # the victim's payload, the old signature
    assert client.post(f"/s/{study.slug}/consent", {"agree": "yes"}).status_code == 403
    client.cookies["crowd_raters"] = signing.dumps({study.slug: victim.pk}, salt="another-salt")
    assert client.get(f"/s/{study.slug}/rate").status_code == 403
    client.cookies["crowd_raters"] = f"{payload}:{signature}"  # the genuine cookie still works
    assert client.get(f"/s/{study.slug}/rate").status_code == 302


def test_the_done_page_shows_the_whole_code_with_a_copy_button(client):
    study = _study()
    study.completion_code = "C" * 40  # long codes are not cut
    study.save()
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID=5f1e&STUDY_ID=S1&SESSION_ID=X1")
    html = _finish(client, study).content.decode()
    assert f'data-testid="completion-code">{"C" * 40}<' in html and 'data-copy="completion-code"' in html


def test_an_invited_rater_who_finishes_is_shown_no_completion_code(client):
    from tests.factories import make_rater, make_user

    study = _study()
    user = make_user()
    make_rater(user=user)
    client.force_login(user)
    client.get(f"/s/{study.slug}/start")
    html = _finish(client, study).content.decode()
    assert "Thank you" in html and "CODE-7" not in html and "completion code" not in html



def test_after_taking_the_completion_code_a_worker_cannot_reopen_or_change_their_answers(client):
    study = _study()
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID=5f1e&STUDY_ID=S1&SESSION_ID=X1")
    assert "CODE-7" in _finish(client, study).content.decode()  # the done page: code taken
    rating = Rating.objects.get()
    reopened = client.get(f"/s/{study.slug}/rate/0")
    assert reopened.status_code == 302 and reopened.url.endswith("/done")
    changed = client.post(f"/s/{study.slug}/rate/0", {"u0-SC": "0", "u0-PQ": "0"})
    assert changed.status_code == 403 and "final" in changed.content.decode()
    rating.refresh_from_db()
    assert rating.values == {"SC": 1.0, "PQ": 1.0} and not rating.revisions.exists()
