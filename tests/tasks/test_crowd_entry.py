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
    return client.post(url, {"u0-SC": "1", "u0-PQ": "1"}, follow=True)


def test_a_prolific_worker_arrives_by_link_and_the_same_id_comes_back_to_the_same_rater(client):
    study = _study()
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID=5f1e&STUDY_ID=S1&SESSION_ID=X1")
    assert Rater.objects.count() == 0  # nothing stored before consent
    client.post(f"/s/{study.slug}/consent", {"agree": "yes"})
    rater = Rater.objects.get(platform="prolific", external_id="5f1e")
    assert Participation.objects.get(rater=rater).crowd == {"STUDY_ID": "S1", "SESSION_ID": "X1", "platform": "prolific"}
    fresh = client.__class__()  # a new browser, same worker, same Prolific session
    assert fresh.get(f"/s/{study.slug}/start?PROLIFIC_PID=5f1e&STUDY_ID=S1&SESSION_ID=X1").url.endswith("/instructions")
    assert fresh.get(f"/s/{study.slug}/instructions").status_code == 200
    assert Rater.objects.filter(external_id="5f1e").count() == 1


@pytest.mark.parametrize("link", [
    "PROLIFIC_PID=5f1e",  # the worker id alone
    "PROLIFIC_PID=5f1e&STUDY_ID=S1",
    "PROLIFIC_PID=5f1e&STUDY_ID=S1&SESSION_ID=guess",
    "PROLIFIC_PID=5f1e&STUDY_ID=other&SESSION_ID=X1",
])
def test_another_browser_cannot_take_over_a_worker_s_participation_with_their_id(client, link):
    study = _study()
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID=5f1e&STUDY_ID=S1&SESSION_ID=X1")
    client.post(f"/s/{study.slug}/consent", {"agree": "yes"})
    attacker = client.__class__()
    response = attacker.get(f"/s/{study.slug}/start?{link}")
    assert response.status_code == 403 and b"started in another browser" in response.content
    assert attacker.get(f"/s/{study.slug}/instructions").status_code == 403
    assert attacker.post(f"/s/{study.slug}/consent", {"agree": "yes"}).status_code == 403
    assert Participation.objects.get().crowd["SESSION_ID"] == "X1"  # the worker's ids are untouched


def test_an_mturk_worker_resumes_elsewhere_only_with_the_same_assignment_and_hit(client):
    study = _study()
    client.get(f"/s/{study.slug}/start?{MTURK}")
    client.post(f"/s/{study.slug}/consent", {"agree": "yes"})
    other = client.__class__()
    forged = MTURK.replace("assignmentId=A1", "assignmentId=A2")
    assert other.get(f"/s/{study.slug}/start?{forged}").status_code == 403
    assert other.get(f"/s/{study.slug}/start?{MTURK}").url.endswith("/instructions")


def test_a_thousand_links_with_random_ids_store_nothing(client):
    from django.contrib.sessions.models import Session

    study = _study()
    for i in range(1000):
        response = client.get(f"/s/{study.slug}/start?PROLIFIC_PID=r{i:04d}x&STUDY_ID=S&SESSION_ID=s{i}")
        assert response.status_code == 302 and response.url.endswith("/consent")
    assert (Rater.objects.count(), Participation.objects.count(), Session.objects.count()) == (0, 0, 0)


def test_one_address_can_start_only_so_many_new_participations_an_hour(client, settings):
    from django.core.cache import cache

    cache.clear()
    settings.CROWD_NEW_PARTICIPATIONS_PER_ADDRESS_HOUR = 3
    study = _study()
    statuses = []
    for i in range(5):
        browser = client.__class__(REMOTE_ADDR="203.0.113.9")
        browser.get(f"/s/{study.slug}/start?PROLIFIC_PID=w{i}&STUDY_ID=S&SESSION_ID=s{i}")
        statuses.append(browser.post(f"/s/{study.slug}/consent", {"agree": "yes"}).status_code)
    assert statuses == [302, 302, 302, 429, 429]
    assert Rater.objects.count() == 3
    elsewhere = client.__class__(REMOTE_ADDR="198.51.100.4")
    elsewhere.get(f"/s/{study.slug}/start?PROLIFIC_PID=w9&STUDY_ID=S&SESSION_ID=s9")
    assert elsewhere.post(f"/s/{study.slug}/consent", {"agree": "yes"}).status_code == 302
    cache.clear()


def test_a_worker_who_asks_for_more_again_and_again_holds_one_session(client):
    study = make_study(units_per_session=2, raters_per_item=1)
    for _ in range(20):
        make_item(study, instance=make_instance(study))
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID=hoarder&STUDY_ID=S&SESSION_ID=s")
    client.post(f"/s/{study.slug}/consent", {"agree": "yes"})
    client.post(f"/s/{study.slug}/instructions")
    client.get(f"/s/{study.slug}/rate")
    for _ in range(30):
        assert client.post(f"/s/{study.slug}/more").url.endswith("/rate")
    assert study.assignments.filter(state="leased").count() == 2


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
    assert client.post(f"/s/{study.slug}/consent", {"agree": "yes"}).status_code == 302
    client.get(f"/s/{other.slug}/start?PROLIFIC_PID=first")  # the same browser: no ids needed
    assert client.post(f"/s/{other.slug}/consent", {"agree": "yes"}).status_code == 302
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
