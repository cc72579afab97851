import pytest
from django.urls import reverse

from analysis.models import Judge, JudgeRun
from raters.models import Rater, RaterAction
from tasks.models import Study
from tasks.services import rating_submit
from tests.factories import make_item, make_rater, make_study, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(make_user("admin", is_staff=True, is_superuser=True))
    return client


def _act(client, model_url: str, action: str, ids):
    return client.post(reverse(model_url), {"action": action, "_selected_action": [str(i) for i in ids]}, follow=True)


def test_an_admin_closes_and_reopens_studies_through_the_services(admin_client):
    study = make_study()
    make_item(study)
    _act(admin_client, "admin:tasks_study_changelist", "close_studies", [study.pk])
    assert Study.objects.get(pk=study.pk).state == "closed"
    _act(admin_client, "admin:tasks_study_changelist", "open_studies", [study.pk])
    assert Study.objects.get(pk=study.pk).state == "open"
    page = _act(admin_client, "admin:tasks_study_changelist", "open_studies", [study.pk]).content.decode()
    assert "is already open" in page


def test_an_empty_draft_cannot_be_opened_from_the_admin(admin_client):
    study = make_study(state="draft")
    page = _act(admin_client, "admin:tasks_study_changelist", "open_studies", [study.pk]).content.decode()
    assert "has no items" in page and Study.objects.get(pk=study.pk).state == "draft"


def test_blocking_a_rater_from_the_admin_asks_for_a_reason_then_logs_it_in_their_latest_study(admin_client):
    rater = make_rater()
    rating_submit(rater=rater, item=make_item(), values={"SC": 1, "PQ": 1}, require_assignment=False)
    form = _act(admin_client, "admin:raters_rater_changelist", "block_raters", [rater.pk]).content.decode()
    assert 'name="reason"' in form and "Block 1 rater site-wide" in form
    rater.refresh_from_db()
    assert rater.state == Rater.State.ACTIVE  # nothing happens before the reason is given
    page = admin_client.post(reverse("admin:raters_rater_changelist"), {
        "action": "block_raters", "_selected_action": [str(rater.pk)], "reason": "copied answers", "apply": "1",
    }, follow=True).content.decode()
    rater.refresh_from_db()
    assert rater.state == Rater.State.BLOCKED and "site-wide" in page
    assert RaterAction.objects.get(rater=rater).reason == "copied answers (from the admin, admin)"


def test_a_rater_with_no_ratings_anywhere_is_blocked_site_wide_with_the_reason_kept_on_the_rater(admin_client):
    from django.contrib.admin.models import LogEntry

    from tasks.services import RatingRejected

    rater = make_rater()
    admin_client.post(reverse("admin:raters_rater_changelist"), {
        "action": "block_raters", "_selected_action": [str(rater.pk)], "reason": "known spammer", "apply": "1",
    })
    rater.refresh_from_db()
    assert rater.state == Rater.State.BLOCKED
    assert rater.state_reason == "Blocked site-wide by admin: known spammer (from the admin, admin)"
    assert LogEntry.objects.get(object_id=str(rater.pk)).get_change_message() == "Blocked site-wide: known spammer"
    with pytest.raises(RatingRejected, match="not active"):
        rating_submit(rater=rater, item=make_item(), values={"SC": 1, "PQ": 1}, require_assignment=False)


def test_an_empty_reason_blocks_nobody(admin_client):
    rater = make_rater()
    page = admin_client.post(reverse("admin:raters_rater_changelist"), {
        "action": "block_raters", "_selected_action": [str(rater.pk)], "reason": "  ", "apply": "1",
    }).content.decode()
    rater.refresh_from_db()
    assert rater.state == Rater.State.ACTIVE and "Give a reason" in page


def test_a_runnable_judge_appears_as_a_study_action_and_starts_a_run(admin_client, settings):
    judge = Judge.objects.create(name="sharpness-metric", kind="metric", params={"metrics": ["sharpness"]})
    study = make_study()
    make_item(study)
    changelist = admin_client.get(reverse("admin:tasks_study_changelist")).content.decode()
    assert "Start judge run: sharpness-metric" in changelist
    page = _act(admin_client, "admin:tasks_study_changelist", f"start_judge_{judge.pk}", [study.pk]).content.decode()
    run = JudgeRun.objects.get(judge=judge, study=study)
    assert f"Judge run {run.pk} queued on {study.slug} (1 units)" in page
