"""The behaviour rules run by themselves: a Celery job (eager here) after a rater finishes a session
of screens, and every N ratings of a study, queued after the rating commits."""

from datetime import timedelta
from unittest import mock

import pytest
from django.urls import reverse
from django.utils import timezone

from raters.jobs import apply_quality_rules_job
from raters.models import QualityPolicy, QualityRulesSchedule, RaterAction, RaterStanding
from raters.services import quality_rules_tick
from tasks.assignment import assignment_next
from tasks.models import Assignment, Participation
from tasks.services import screen_submit
from tests.factories import make_item, make_rater, make_study

pytestmark = pytest.mark.django_db


def _study(**policy):
    study = make_study(units_per_session=4, raters_per_item=3)
    for _ in range(8):
        make_item(study)
    defaults = {"behaviour_action": "reject", "behaviour_min_flags": 1, "straightline_min_items": 4,
                "min_median_time_ms": 0, "consensus_min_items": 100, "use_bt500": False}
    QualityPolicy.objects.create(study=study, **{**defaults, **policy})
    return study


def _rate_screen(rater, study, values):
    screen = assignment_next(rater=rater, study=study)
    return screen_submit(rater=rater, screen=screen, entries=[{"values": values}])


def _enter(client, study, external_id):
    client.get(reverse("rating:start", args=[study.slug]), {"PROLIFIC_PID": external_id, "STUDY_ID": "s", "SESSION_ID": "x"})
    client.post(reverse("rating:consent", args=[study.slug]), {"agree": "yes"})  # the rater is created here
    Participation.objects.filter(study=study, rater__external_id=external_id).update(
        consented_at=timezone.now(), instructions_seen_at=timezone.now()
    )
    return Participation.objects.get(study=study, rater__external_id=external_id).rater


def test_a_straight_liner_is_rejected_when_their_session_ends_without_anyone_pressing_a_button(
    client, django_capture_on_commit_callbacks
):
    study = _study()
    rater = _enter(client, study, "flatline1")
    client.get(reverse("rating:next", args=[study.slug]))
    for n in range(4):
        assignment = Assignment.objects.filter(rater=rater, state="leased").order_by("position").first()
        with django_capture_on_commit_callbacks(execute=True):
            client.post(reverse("rating:unit", args=[study.slug, assignment.position]),
                        {"u0-SC": "1", "u0-PQ": "1"})
        schedule = QualityRulesSchedule.objects.get(study=study)
        if n < 3:  # the session is not over: nothing ran yet
            assert (schedule.runs, schedule.ratings_since_run) == (0, n + 1)
            assert not RaterStanding.objects.filter(rater=rater).exists()
    schedule.refresh_from_db()
    assert (schedule.runs, schedule.queued, schedule.last_run_actions, schedule.ratings_since_run) == (1, False, 1, 0)
    standing = RaterStanding.objects.get(rater=rater, study=study)
    assert standing.state == "rejected" and standing.automatic and "Straight-lining" in standing.reason


def test_a_careful_rater_finishing_a_session_is_left_alone():
    study = _study()
    rater = make_rater()
    answers = [{"SC": 1, "PQ": 0.5}, {"SC": 0, "PQ": 1}, {"SC": 0.5, "PQ": 0}, {"SC": 1, "PQ": 1}]
    for values in answers:
        _rate_screen(rater, study, values)
    summary = apply_quality_rules_job.delay(study.pk).get()
    assert summary == {"study": study.pk, "acted_on": []}
    assert not RaterStanding.objects.filter(rater=rater).exists()


def test_rules_run_every_n_ratings_when_the_policy_says_so(django_capture_on_commit_callbacks):
    study = _study(rules_after_session=False, rules_every_ratings=3)
    raters = [make_rater() for _ in range(2)]
    for k in range(7):
        with django_capture_on_commit_callbacks(execute=True):
            _rate_screen(raters[k % 2], study, {"SC": 1, "PQ": 1})
    schedule = QualityRulesSchedule.objects.get(study=study)
    assert (schedule.runs, schedule.ratings_since_run) == (2, 1)


def test_no_run_is_queued_when_the_policy_turns_both_triggers_off(django_capture_on_commit_callbacks):
    study = _study(rules_after_session=False, rules_every_ratings=0)
    rater = make_rater()
    for _ in range(4):
        with django_capture_on_commit_callbacks(execute=True):
            _rate_screen(rater, study, {"SC": 1, "PQ": 1})
    assert not QualityRulesSchedule.objects.filter(study=study).exists()
    assert not RaterStanding.objects.filter(rater=rater).exists()


def test_a_burst_of_triggers_queues_one_job_until_it_starts_and_a_lost_job_is_queued_again():
    study = _study()
    with mock.patch.object(apply_quality_rules_job, "delay") as delay:
        assert quality_rules_tick(study_id=study.pk, session_finished=True, every=0) is True
        assert quality_rules_tick(study_id=study.pk, session_finished=True, every=0) is False
        assert delay.call_count == 1
        later = timezone.now() + timedelta(hours=1)  # the queued job never started (broker lost it)
        assert quality_rules_tick(study_id=study.pk, session_finished=True, every=0, now=later) is True
        assert delay.call_args_list == [mock.call(study.pk), mock.call(study.pk)]


def test_ratings_are_still_stored_when_the_broker_is_down(django_capture_on_commit_callbacks):
    study = _study()
    rater = make_rater()
    with mock.patch.object(apply_quality_rules_job, "delay", side_effect=ConnectionError("broker down")):
        for _ in range(4):
            with django_capture_on_commit_callbacks(execute=True):
                _rate_screen(rater, study, {"SC": 1, "PQ": 1})
    assert rater.ratings.count() == 4
    assert QualityRulesSchedule.objects.get(study=study).queued is False  # the next trigger will try again


def test_the_job_is_idempotent_and_ignores_a_deleted_study():
    study = _study()
    rater = make_rater()
    for _ in range(4):
        _rate_screen(rater, study, {"SC": 0, "PQ": 0})
    assert apply_quality_rules_job.delay(study.pk).get() == {"study": study.pk, "acted_on": [rater.pk]}
    assert apply_quality_rules_job.delay(study.pk).get() == {"study": study.pk, "acted_on": []}
    assert RaterAction.objects.filter(rater=rater).count() == 1
    assert apply_quality_rules_job.delay(study.pk + 999).get() is None


def test_the_rater_list_tells_the_researcher_when_rules_run_by_themselves(client):
    from tests.factories import make_user

    study = _study(rules_every_ratings=25)
    owner = make_user()
    study.owners.add(owner)
    client.force_login(owner)
    html = client.get(reverse("raters:list", args=[study.slug])).content.decode()
    assert "when a rater finishes a session and every 25 ratings." in html and "Last run" not in html
    apply_quality_rules_job.delay(study.pk)
    html = client.get(reverse("raters:list", args=[study.slug])).content.decode()
    assert "Last run 0\xa0minutes ago, acted on 0 raters." in html


def test_runs_are_spaced_a_due_run_waits_out_the_rest_of_the_interval(settings):
    settings.QUALITY_RULES_MIN_INTERVAL_SECONDS = 60
    study = _study()
    now = timezone.now()
    QualityRulesSchedule.objects.create(study=study, last_run_at=now - timedelta(seconds=20))
    with mock.patch.object(apply_quality_rules_job, "apply_async") as later, \
            mock.patch.object(apply_quality_rules_job, "delay") as at_once:
        assert quality_rules_tick(study_id=study.pk, session_finished=True, every=0, now=now) is True
        assert at_once.call_count == 0 and later.call_args == mock.call(args=[study.pk], countdown=40.0)
        assert quality_rules_tick(study_id=study.pk, session_finished=True, every=0, now=now) is False  # one waits
        QualityRulesSchedule.objects.filter(study=study).update(queued=False, last_run_at=now - timedelta(minutes=5))
        assert quality_rules_tick(study_id=study.pk, session_finished=True, every=0, now=now) is True
        assert at_once.call_args == mock.call(study.pk)  # the interval is over: at once
