"""raters.gold: qualification tests, hidden gold slots, attention slots, gold from consensus."""

import pytest

from raters.gold import (
    QualificationRefused,
    completion_allowed,
    gold_candidates,
    gold_confirm,
    may_work,
    qualification_answer,
    qualification_next_item,
    qualification_start,
    qualification_status,
)
from raters.models import QualificationAnswer, QualityPolicy
from raters.services import rater_decide
from tasks.assignment import assignment_batch_claim, quality_slots_insert
from tasks.assignment.gold import gold_slot_item
from tasks.models import Assignment, GoldAnswer, Rating
from tests.factories import make_attention_check, make_gold, make_item, make_rater, make_study, make_user

pytestmark = pytest.mark.django_db


def _study_with_test(n_gold=4, *, pass_share=0.75, attempts=2, **study_fields):
    study = make_study(**study_fields)
    QualityPolicy.objects.create(
        study=study, qualification_required=True, qualification_size=n_gold,
        qualification_pass_share=pass_share, qualification_max_attempts=attempts,
    )
    for _ in range(n_gold):
        make_gold(make_item(study), values={"SC": 1.0, "PQ": 0.5})
    return study


def _take_test(rater, study, right: int):
    attempt = qualification_start(rater=rater, study=study)
    for k in range(attempt.total):
        item = qualification_next_item(attempt)
        values = {"SC": 1, "PQ": 0.5} if k < right else {"SC": 0, "PQ": 0.5}
        attempt = qualification_answer(attempt=attempt, item=item, values=values, time_on_item_ms=3000)
    return attempt


def test_a_rater_who_answers_enough_gold_right_passes_and_may_work():
    study, rater = _study_with_test(), make_rater()
    assert may_work(rater=rater, study=study) == (False, "This study starts with a short qualification test.")
    attempt = _take_test(rater, study, right=3)
    assert (attempt.passed, attempt.correct, attempt.total) == (True, 3, 4)
    assert may_work(rater=rater, study=study) == (True, "")
    assert completion_allowed(rater=rater, study=study) == (True, "")


def test_a_rater_who_fails_may_retry_then_is_told_politely_and_gets_no_completion_code():
    study, crowd = _study_with_test(attempts=2), make_rater(platform="prolific", external_id="5f00c0ffee")
    assert _take_test(crowd, study, right=2).passed is False
    status = qualification_status(rater=crowd, study=study)
    assert status.may_try and "you may try again (1 attempt left)" in status.message
    assert _take_test(crowd, study, right=1).passed is False
    allowed, message = completion_allowed(rater=crowd, study=study)
    assert not allowed and message.startswith("Thank you for your time.")
    with pytest.raises(QualificationRefused, match="cannot offer you this study"):
        qualification_start(rater=crowd, study=study)


def test_qualification_answers_are_not_ratings_and_must_follow_the_order_shown():
    study, rater = _study_with_test(), make_rater()
    attempt = qualification_start(rater=rater, study=study)
    shown = qualification_next_item(attempt)
    other = next(pk for pk in attempt.items if pk != shown.pk)
    with pytest.raises(QualificationRefused, match="answer the item shown"):
        qualification_answer(attempt=attempt, item=shown.__class__.objects.get(pk=other), values={"SC": 1, "PQ": 1})
    with pytest.raises(QualificationRefused, match="must be one of"):
        qualification_answer(attempt=attempt, item=shown, values={"SC": 3, "PQ": 1})
    qualification_answer(attempt=attempt, item=shown, values={"SC": 1, "PQ": 0.5})
    assert QualificationAnswer.objects.count() == 1 and Rating.objects.count() == 0


def test_starting_twice_returns_the_open_attempt():
    study, rater = _study_with_test(), make_rater()
    assert qualification_start(rater=rater, study=study).pk == qualification_start(rater=rater, study=study).pk


def test_a_paused_rater_may_not_work_and_is_told_why():
    study, rater = make_study(), make_rater()
    rater_decide(study=study, rater=rater, decision="pause", reason="Review")
    ok, message = may_work(rater=rater, study=study)
    assert not ok and "paused while a researcher reviews it" in message


def test_hidden_gold_fills_its_share_of_a_batch_and_is_an_ordinary_assignment():
    study = make_study(settings={"gold_share": 0.2}, units_per_session=8, raters_per_item=2)
    for _ in range(20):
        make_item(study)
    gold = [make_item(study) for _ in range(6)]
    for item in gold:
        make_gold(item)
    rater = make_rater()
    claimed = assignment_batch_claim(rater=rater, study=study)  # the engine slots gold in itself
    mine = Assignment.objects.filter(rater=rater, study=study)
    n_gold = mine.filter(item__gold__isnull=False).count()
    assert (claimed, n_gold, mine.count()) == (8, 2, 10)
    assert sorted(mine.values_list("position", flat=True)) == list(range(10))
    assert set(mine.values_list("state", flat=True)) == {Assignment.State.LEASED}
    assert quality_slots_insert(rater=rater, study=study, first_position=0, screens=claimed) == 0  # share is met


def test_no_gold_is_slotted_when_the_share_is_zero_or_the_pool_is_used_up():
    study = make_study()
    make_gold(make_item(study))
    assert gold_slot_item(rater=make_rater(), study=study) is None
    shared = make_study(settings={"gold_share": 0.5})
    only = make_item(shared)
    make_gold(only)
    rater = make_rater()
    Assignment.objects.create(study=shared, rater=rater, item=only)
    assert gold_slot_item(rater=rater, study=shared) is None


def test_an_attention_check_is_slotted_once_its_position_is_reached():
    study = make_study(units_per_session=5)
    for _ in range(6):
        make_item(study)
    check_item = make_item(study)
    make_attention_check(check_item, after_items=3)
    rater = make_rater()
    claimed = assignment_batch_claim(rater=rater, study=study)
    quality_slots_insert(rater=rater, study=study, first_position=0, screens=claimed)
    assert Assignment.objects.filter(rater=rater, item=check_item).count() == 1
    quality_slots_insert(rater=rater, study=study, first_position=0, screens=claimed)
    assert Assignment.objects.filter(rater=rater, item=check_item).count() == 1


def test_items_all_pilot_raters_agreed_on_become_gold_candidates_a_researcher_confirms():
    study = make_study()
    agreed, split = make_item(study), make_item(study)
    raters = [make_rater() for _ in range(3)]
    for k, rater in enumerate(raters):
        Rating.objects.create(study=study, rater=rater, item=agreed, values={"SC": 1.0, "PQ": 0.5})
        Rating.objects.create(study=study, rater=rater, item=split, values={"SC": 1.0 if k else 0.0, "PQ": 0.5})
    candidates = gold_candidates(study)
    assert [(c.item, c.values, c.raters) for c in candidates] == [(agreed, {"SC": 1.0, "PQ": 0.5}, 3)]
    gold = gold_confirm(study=study, item=agreed, actor=make_user(username="dana"), tolerance=0.0)
    assert gold.values == {"SC": 1.0, "PQ": 0.5} and "confirmed by dana" in gold.note
    assert gold_candidates(study) == []
    with pytest.raises(QualificationRefused, match="no longer agree"):
        gold_confirm(study=study, item=split, actor=None)
    assert GoldAnswer.objects.count() == 1


def test_excluded_raters_do_not_spoil_or_make_a_consensus():
    study = make_study()
    item = make_item(study)
    good = [make_rater() for _ in range(3)]
    bad = make_rater()
    for rater in good:
        Rating.objects.create(study=study, rater=rater, item=item, values={"SC": 1.0, "PQ": 1.0})
    Rating.objects.create(study=study, rater=bad, item=item, values={"SC": 0.0, "PQ": 0.0})
    assert gold_candidates(study) == []
    rater_decide(study=study, rater=bad, decision="reject", reason="Adversarial")
    assert [c.item for c in gold_candidates(study)] == [item]


def test_an_attention_check_goes_to_a_random_place_in_the_batch_not_always_the_last():
    """Always last, it told a careless rater the one screen of each batch worth reading."""
    places = []
    for _ in range(12):
        study = make_study(units_per_session=5)
        for _ in range(5):
            make_item(study)
        make_attention_check(make_item(study), after_items=0)
        rater = make_rater()
        claimed = assignment_batch_claim(rater=rater, study=study)  # slots the check in
        assert claimed == 5
        positions = sorted(Assignment.objects.filter(rater=rater).values_list("position", flat=True))
        assert positions == list(range(6))  # still one screen each, no gaps
        places.append(Assignment.objects.get(rater=rater, item__attention_check__isnull=False).position)
    assert len(set(places)) > 1 and min(places) < 5, places
