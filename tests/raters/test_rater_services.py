"""raters.services: decisions with reasons, automatic rules, exclusion from analysis."""

import pytest
from django.test import TestCase

from raters.models import QualityPolicy, Rater, RaterAction, RaterStanding
from raters.exclusion import analysis_ratings, excluded_raters
from raters.services import DecisionRefused, rater_decide, rater_rules_apply
from tasks.models import Assignment, Rating
from tasks.services import rating_submit
from tests.factories import make_attention_check, make_gold, make_item, make_rater, make_study, make_user

pytestmark = pytest.mark.django_db


def _rate(rater, item, values, time_ms=5000):
    """One rating as a session of its own: the rules run when it commits (after the session)."""
    Assignment.objects.get_or_create(study=item.study, rater=rater, item=item)
    with TestCase.captureOnCommitCallbacks(execute=True):
        return rating_submit(rater=rater, item=item, values=values, time_on_item_ms=time_ms)


def test_a_decision_needs_a_reason_and_nothing_is_stored_without_one():
    study, rater = make_study(), make_rater()
    with pytest.raises(DecisionRefused, match="Give a reason"):
        rater_decide(study=study, rater=rater, decision="reject", reason="  ")
    assert not RaterStanding.objects.exists() and not RaterAction.objects.exists()


def test_rejecting_a_rater_excludes_their_ratings_but_keeps_them():
    study, researcher = make_study(), make_user()
    careful, sloppy = make_rater(), make_rater()
    item = make_item(study)
    _rate(careful, item, {"SC": 1, "PQ": 1})
    _rate(sloppy, item, {"SC": 0, "PQ": 0})
    rater_decide(study=study, rater=sloppy, decision="reject", reason="Clicked through", actor=researcher)
    assert list(excluded_raters(study)) == [sloppy.pk]
    assert Rating.objects.filter(study=study).count() == 2
    assert list(analysis_ratings(study).values_list("rater_id", flat=True)) == [careful.pk]
    assert analysis_ratings(study, include_excluded=True).count() == 2
    assert excluded_raters(study) == {sloppy.pk: "rejected: Clicked through"}
    action = RaterAction.objects.get()
    assert (action.decision, action.actor, action.automatic) == ("reject", researcher, False)


def test_a_rejection_in_one_study_does_not_exclude_the_rater_elsewhere():
    first, second, rater = make_study(), make_study(), make_rater()
    rater_decide(study=first, rater=rater, decision="reject", reason="Failed checks")
    assert rater.pk in excluded_raters(first)
    assert rater.pk not in excluded_raters(second)


def test_blocking_is_site_wide_and_only_an_admin_lifts_it():
    study, other, rater = make_study(), make_study(), make_rater()
    Rating.objects.create(study=other, rater=rater, item=make_item(other), values={"SC": 1.0, "PQ": 1.0})
    owner, admin = make_user(), make_user(is_staff=True)
    with pytest.raises(DecisionRefused, match="Only an admin can block"):
        rater_decide(study=study, rater=rater, decision="block", reason="Bot answers", actor=owner)
    rater.refresh_from_db()
    assert rater.state == Rater.State.ACTIVE
    rater_decide(study=study, rater=rater, decision="block", reason="Bot answers", actor=admin)
    rater.refresh_from_db()
    assert rater.state == Rater.State.BLOCKED and not rater.can_rate
    assert excluded_raters(other) == {rater.pk: "blocked: Blocked in %s: Bot answers" % study.slug}
    assert not analysis_ratings(other).exists()
    with pytest.raises(DecisionRefused, match="only an admin"):
        rater_decide(study=study, rater=rater, decision="reactivate", reason="Appeal", actor=owner)
    rater_decide(study=study, rater=rater, decision="reactivate", reason="Appeal accepted", actor=admin)
    rater.refresh_from_db()
    assert rater.state == Rater.State.ACTIVE and excluded_raters(other) == {}


def test_gold_accuracy_below_70_percent_after_10_gold_items_pauses_the_rater():
    study = make_study()
    rater = make_rater()
    golds = [make_item(study) for _ in range(10)]
    for item in golds:
        make_gold(item, values={"SC": 1.0, "PQ": 1.0})
    for item in golds[:6]:
        _rate(rater, item, {"SC": 1, "PQ": 1})
    for item in golds[6:9]:
        _rate(rater, item, {"SC": 0, "PQ": 1})
    assert RaterStanding.objects.filter(rater=rater).count() == 0  # 9 gold items: too early to judge
    _rate(rater, golds[9], {"SC": 0, "PQ": 1})
    standing = RaterStanding.objects.get(rater=rater, study=study)
    assert standing.state == RaterStanding.State.PAUSED and standing.automatic
    assert standing.reason == "Rule: gold accuracy 60% (6 of 10), minimum 70% after 10 gold items"


def test_gold_within_tolerance_counts_as_correct():
    study = make_study(protocol="evalmi", task_type="counting", settings={"qa": False})
    rater = make_rater()
    item = make_item(study)
    make_gold(item, values={"perception": 4.0, "correspondence": 2.0}, tolerance=1.0)
    _rate(rater, item, {"perception": 5, "correspondence": 3})
    from raters.gold import gold_accuracy

    assert gold_accuracy(rater=rater, study=study) == (1, 1)


def test_a_rule_never_overrules_a_researchers_approval():
    study, researcher, rater = make_study(), make_user(), make_rater()
    QualityPolicy.objects.create(study=study, gold_min_items=1)
    item = make_item(study)
    make_gold(item)
    rater_decide(study=study, rater=rater, decision="approve", reason="Known expert", actor=researcher)
    _rate(rater, item, {"SC": 0, "PQ": 0})
    assert RaterStanding.objects.get(rater=rater).state == RaterStanding.State.APPROVED
    assert RaterAction.objects.count() == 1


def test_two_failed_attention_checks_reject_the_rater_and_one_does_not():
    study, rater = make_study(), make_rater()
    first, second = make_item(study), make_item(study)
    make_attention_check(first, expected={"SC": 0.5})
    make_attention_check(second, expected={"SC": 0.5})
    _rate(rater, first, {"SC": 1, "PQ": 1})
    assert rater_rules_apply(rater=rater, study=study) == []
    assert not RaterStanding.objects.filter(rater=rater).exists()
    _rate(rater, second, {"SC": 0, "PQ": 1})
    standing = RaterStanding.objects.get(rater=rater)
    assert standing.state == RaterStanding.State.REJECTED
    assert "failed 2 of 2 attention checks" in standing.reason


def test_an_attention_check_is_scored_on_the_first_answer_only():
    study, rater = make_study(), make_rater()
    item = make_item(study)
    check = make_attention_check(item, expected={"SC": 0.5})
    _rate(rater, item, {"SC": 1, "PQ": 1})
    _rate(rater, item, {"SC": 0.5, "PQ": 1})  # corrected after the fact
    assert check.results.get(rater=rater).passed is False


def test_attention_check_ratings_are_left_out_of_analysis():
    study, rater = make_study(), make_rater()
    normal, check_item = make_item(study), make_item(study)
    make_attention_check(check_item)
    _rate(rater, normal, {"SC": 1, "PQ": 1})
    _rate(rater, check_item, {"SC": 0.5, "PQ": 1})
    assert list(analysis_ratings(study).values_list("item_id", flat=True)) == [normal.pk]


def test_an_unknown_decision_is_refused():
    with pytest.raises(DecisionRefused, match="Unknown decision"):
        rater_decide(study=make_study(), rater=make_rater(), decision="promote", reason="x")


def test_the_command_applies_the_rules_and_names_an_unknown_study():
    from io import StringIO

    from django.core.management import CommandError, call_command

    study, rater = make_study(), make_rater(platform="prolific", external_id="cmd1")
    QualityPolicy.objects.create(study=study, gold_min_items=1, gold_action="reject")
    item = make_item(study)
    make_gold(item)
    Rating.objects.create(study=study, rater=rater, item=item, values={"SC": 0.0, "PQ": 0.0})
    out = StringIO()
    call_command("apply_quality_rules", study.slug, stdout=out)
    assert "rules acted on 1 rater(s)" in out.getvalue() and "gold accuracy 0% (0 of 1)" in out.getvalue()
    assert RaterStanding.objects.get(rater=rater).state == "rejected"
    with pytest.raises(CommandError, match="No study with slug 'nope'"):
        call_command("apply_quality_rules", "nope")


def test_the_analysis_layer_leaves_out_rejected_raters_and_attention_checks_and_says_why():
    from analysis.data import ratings_frame

    study = make_study()
    normal, check_item = make_item(study), make_item(study)
    make_attention_check(check_item)
    good = make_rater(platform="prolific", external_id="good1")
    bad = make_rater(platform="prolific", external_id="bad1")
    for rater in (good, bad):
        Rating.objects.create(study=study, rater=rater, item=normal, values={"SC": 1.0, "PQ": 1.0})
        Rating.objects.create(study=study, rater=rater, item=check_item, values={"SC": 0.5, "PQ": 1.0})
    rater_decide(study=study, rater=bad, decision="reject", reason="Failed two attention checks")
    assert excluded_raters(study) == {bad.pk: "rejected: Failed two attention checks"}
    frame = ratings_frame(study)
    assert list(frame["rater"].astype(str)) == [str(good.pk)]
    assert len(ratings_frame(study, include_excluded=True)) == 2


def test_an_attention_check_edited_before_it_was_scored_is_still_scored_on_the_first_answer():
    from raters.gold import attention_failures

    study, rater = make_study(), make_rater()
    item = make_item(study)
    check = make_attention_check(item, expected={"SC": 0.5})
    Assignment.objects.create(study=study, rater=rater, item=item)
    rating_submit(rater=rater, item=item, values={"SC": 1, "PQ": 1})  # the submit scores nothing
    rating_submit(rater=rater, item=item, values={"SC": 0.5, "PQ": 1})  # corrected before any rule ran
    assert not check.results.exists()
    assert attention_failures(rater=rater, study=study) == (1, 1)
    result = check.results.get(rater=rater)
    assert result.passed is False and result.values == {"SC": 1.0, "PQ": 1.0}
    assert attention_failures(rater=rater, study=study) == (1, 1)  # scored once


def test_a_study_without_rules_after_sessions_still_runs_a_rater_s_gold_rules_when_their_session_ends(
        django_capture_on_commit_callbacks):
    study, rater = make_study(), make_rater()
    QualityPolicy.objects.create(study=study, gold_min_items=2, gold_action="pause", rules_after_session=False,
                                 rules_every_ratings=0)
    golds = [make_item(study) for _ in range(2)]
    for item in golds:
        make_gold(item, values={"SC": 1.0, "PQ": 1.0})
        Assignment.objects.create(study=study, rater=rater, item=item, position=golds.index(item))
    with django_capture_on_commit_callbacks(execute=True) as first:
        rating_submit(rater=rater, item=golds[0], values={"SC": 0, "PQ": 0})
    assert not first and not RaterStanding.objects.exists()  # mid-session: nothing queued
    with django_capture_on_commit_callbacks(execute=True) as last:
        rating_submit(rater=rater, item=golds[1], values={"SC": 0, "PQ": 0})
    assert len(last) == 2  # the rater's rules, and the study's notices (analysis.notices)
    assert RaterStanding.objects.get(rater=rater).state == RaterStanding.State.PAUSED
