from collections import Counter
from functools import partial
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from raters.models import Rater
from tasks.assignment import (
    AssignmentUnavailable,
    assignment_batch_claim,
    assignment_next,
    assignments_expire,
    screen_at,
    screen_insert,
)
from tasks.models import Assignment, Comparison, GoldAnswer, Instance, Item, Participation, Study
from tasks.services import rating_submit
from tests.factories import make_instance, make_item, make_rater, make_study
from tests.conftest import all_at_once

pytestmark = pytest.mark.django_db


def _grid(study, instances=4, models=("M1", "M2", "M3", "M4", "M5")):
    """instances × models items, like a small ImagenHub or EvalMi study."""
    items = []
    for _ in range(instances):
        instance = make_instance(study)
        items += [make_item(study, instance=instance, model=m) for m in models]
    return items


def _rate_screen(rater, screen):
    for assignment in screen.assignments:
        if assignment.item_id:
            values = {"SC": 1, "PQ": 1} if screen.study.protocol == "imagenhub" else {"perception": 3, "correspondence": 4}
            answers = {} if screen.study.protocol == "imagenhub" else {"q1": "yes"}
            rating_submit(rater=rater, item=assignment.item, values=values, answers=answers)
        else:
            rating_submit(rater=rater, comparison=assignment.comparison, values={"preference": "A"})


def _rate_all(rater, study):
    seen = []
    while (screen := assignment_next(rater=rater, study=study)) is not None:
        seen += [a.item_id or a.comparison_id for a in screen.assignments]
        _rate_screen(rater, screen)
    return seen


def test_a_rater_in_balanced_mode_gets_a_session_of_the_configured_size_in_a_recorded_order():
    study = make_study(units_per_session=6)
    _grid(study)
    rater = make_rater()
    screen = assignment_next(rater=rater, study=study)
    assert (screen.number, screen.total) == (1, 6)
    positions = list(Assignment.objects.filter(rater=rater).values_list("position", flat=True))
    assert positions == list(range(6))
    assert Participation.objects.get(rater=rater, study=study).seed > 0


def test_the_quota_of_raters_per_item_is_never_exceeded_and_later_raters_get_nothing():
    study = make_study(units_per_session=20, raters_per_item=2)
    _grid(study, instances=2)  # 10 items × 2 raters = 20 claims
    raters = [make_rater() for _ in range(3)]
    for rater in raters:
        _rate_all(rater, study)
    per_item = Counter(Assignment.objects.values_list("item_id", flat=True))
    assert set(per_item.values()) == {2}
    assert all(item.claims == 2 for item in Item.objects.all())
    assert not Assignment.objects.filter(rater=raters[2]).exists()


def test_no_rater_sees_an_item_twice_even_over_several_sessions():
    study = make_study(units_per_session=4, raters_per_item=3)
    _grid(study, instances=2)
    rater = make_rater()
    seen = _rate_all(rater, study)
    while assignment_batch_claim(rater=rater, study=study):
        seen += _rate_all(rater, study)
    assert len(seen) == len(set(seen)) == 10


def test_balanced_overlap_spreads_raters_over_the_least_rated_items_first():
    study = make_study(units_per_session=5, raters_per_item=3)
    _grid(study, instances=2)
    first, second = make_rater(), make_rater()
    a = set(_rate_all(first, study))
    b = set(_rate_all(second, study))
    assert not a & b  # the second rater is sent to the five untouched items


def test_a_lease_that_runs_out_gives_the_item_back_to_the_pool():
    study = make_study(units_per_session=1, raters_per_item=1)
    item = make_item(study)
    late, other = make_rater(), make_rater()
    assert assignment_next(rater=late, study=study).items == [item]
    later = timezone.now() + timedelta(hours=2)
    assert assignments_expire(study=study, now=later) == 1
    item.refresh_from_db()
    assert item.claims == 0
    assert assignment_next(rater=other, study=study, now=later).items == [item]
    # the late rater comes back: the item is full now, so their session is over
    assert assignment_next(rater=late, study=study, now=later) is None


def test_a_rater_back_after_the_lease_ran_out_resumes_with_the_same_items_when_they_are_still_free():
    study = make_study(units_per_session=3, raters_per_item=1)
    _grid(study, instances=1, models=("M1", "M2", "M3"))
    rater = make_rater()
    first = assignment_next(rater=rater, study=study)
    later = timezone.now() + timedelta(hours=2)
    again = assignment_next(rater=rater, study=study, now=later)
    assert again.items == first.items and again.position == first.position
    assert Assignment.objects.filter(state=Assignment.State.LEASED).count() == 3


def test_a_reload_or_a_new_login_resumes_at_the_first_unrated_screen():
    study = make_study(units_per_session=4)
    _grid(study, instances=1)
    rater = make_rater()
    first = assignment_next(rater=rater, study=study)
    _rate_screen(rater, first)
    resumed = assignment_next(rater=rater, study=study)
    assert resumed.number == 2 and resumed.position != first.position
    assert assignment_next(rater=rater, study=study).position == resumed.position
    assert Assignment.objects.filter(rater=rater).count() == 4  # no second session was claimed


def test_whole_set_mode_gives_one_rater_every_item_of_one_model():
    study = make_study(assignment_mode=Study.AssignmentMode.WHOLE_SET, raters_per_item=1)
    _grid(study, instances=4, models=("M1", "M2"))
    first, second = make_rater(), make_rater()
    screen = assignment_next(rater=first, study=study)
    assert screen.total == 4
    models = set(Assignment.objects.filter(rater=first).values_list("item__gen_model__name", flat=True))
    assert len(models) == 1
    assignment_next(rater=second, study=study)
    assert set(Assignment.objects.filter(rater=second).values_list("item__gen_model__name", flat=True)) == {"M1", "M2"} - models


def test_the_order_is_randomised_per_rater_from_the_recorded_seed():
    study = make_study(units_per_session=20, raters_per_item=5)
    _grid(study, instances=4)
    orders = []
    for _ in range(2):
        rater = make_rater()
        assignment_next(rater=rater, study=study)
        orders.append(list(Assignment.objects.filter(rater=rater).order_by("position").values_list("item_id", flat=True)))
    assert sorted(orders[0]) == sorted(orders[1]) and orders[0] != orders[1]
    # replaying the recorded seed gives the same order
    rater = make_rater()
    Participation.objects.create(rater=rater, study=study, seed=Participation.objects.first().seed)
    study2_rater_order = None
    Item.objects.update(claims=0)
    assignment_next(rater=rater, study=study)
    study2_rater_order = list(Assignment.objects.filter(rater=rater).order_by("position").values_list("item_id", flat=True))
    first_rater = Participation.objects.order_by("pk").first().rater
    assert study2_rater_order == list(
        Assignment.objects.filter(rater=first_rater).order_by("position").values_list("item_id", flat=True)
    )


def test_an_evalmi_trial_shows_three_items_of_one_instance_from_different_models():
    study = make_study(protocol="evalmi", task_type="counting", units_per_session=2)
    _grid(study, instances=3)
    rater = make_rater()
    screen = assignment_next(rater=rater, study=study)
    assert len(screen.items) == 3
    assert len({item.instance_id for item in screen.items}) == 1
    assert len({item.gen_model_id for item in screen.items}) == 3
    assert [a.slot for a in screen.assignments] == [0, 1, 2]
    assert screen.total == 2


def test_a_pairwise_rater_gets_comparisons_with_the_sides_drawn_and_recorded():
    study = make_study(protocol="pairwise", units_per_session=30)
    items = _grid(study, instances=3, models=("M1", "M2", "M3"))
    for i in range(0, 9, 3):
        for a, b in ((0, 1), (0, 2), (1, 2)):
            Comparison.objects.create(study=study, item_a=items[i + a], item_b=items[i + b])
    rater = make_rater()
    screen = assignment_next(rater=rater, study=study)
    assert screen.comparison is not None and screen.total == 9
    sides = set(Assignment.objects.filter(rater=rater).values_list("presentation__left", flat=True))
    assert sides <= {"A", "B"} and len(sides) == 2


def test_gold_items_stay_out_of_the_pool_and_can_be_slotted_into_a_queue():
    study = make_study(units_per_session=10)
    items = _grid(study, instances=1, models=("M1", "M2", "M3"))
    GoldAnswer.objects.create(item=items[0], values={"SC": 1, "PQ": 1})
    rater = make_rater()
    assignment_next(rater=rater, study=study)
    assert items[0].pk not in set(Assignment.objects.filter(rater=rater).values_list("item_id", flat=True))
    screen_insert(rater=rater, study=study, items=[items[0]], position=1)
    order = list(Assignment.objects.filter(rater=rater).order_by("position").values_list("item_id", "position"))
    assert order[1] == (items[0].pk, 1) and [p for _, p in order] == [0, 1, 2]
    items[0].refresh_from_db()
    assert items[0].claims == 0  # gold sits outside the quota
    with pytest.raises(AssignmentUnavailable, match="already has"):
        screen_insert(rater=rater, study=study, items=[items[0]])


def test_a_closed_study_or_a_blocked_rater_gets_no_work():
    study = make_study(state=Study.State.CLOSED)
    make_item(study)
    with pytest.raises(AssignmentUnavailable, match="closed"):
        assignment_next(rater=make_rater(), study=study)
    open_study = make_study()
    make_item(open_study)
    with pytest.raises(AssignmentUnavailable, match="not active"):
        assignment_next(rater=make_rater(state=Rater.State.BLOCKED), study=open_study)


def test_going_back_finds_the_previous_screen_and_a_revision_is_kept():
    study = make_study(units_per_session=3)
    _grid(study, instances=1, models=("M1", "M2", "M3"))
    rater = make_rater()
    first = assignment_next(rater=rater, study=study)
    _rate_screen(rater, first)
    second = assignment_next(rater=rater, study=study)
    back = second.back  # the screen's place in the queue names the previous screen
    assert back == first.position
    again = screen_at(rater=rater, study=study, position=back)
    assert again.is_done and again.number == 1
    rating = rating_submit(rater=rater, item=again.items[0], values={"SC": 0.5, "PQ": 1})
    assert rating.revisions.count() == 1


@pytest.mark.django_db(transaction=True)
def test_many_raters_claiming_at_once_never_over_assign_an_item():
    """Runs on PostgreSQL (CI sets DATABASE_URL); SQLite serialises writers, so threads prove nothing there."""
    if connection.vendor != "postgresql":
        pytest.skip("concurrency test needs PostgreSQL (CI runs it with DATABASE_URL=postgres://...)")
    study = make_study(units_per_session=8, raters_per_item=2)
    _grid(study, instances=4)  # 20 items × 2 = 40 claims for 12 raters × 8 wanted
    raters = [make_rater() for _ in range(12)]
    errors = all_at_once([partial(assignment_next, rater=rater, study=study) for rater in raters])
    assert errors == []
    per_item = Counter(Assignment.objects.values_list("item_id", flat=True))
    assert max(per_item.values()) <= 2
    assert sum(per_item.values()) == 40  # every claim is used: demand exceeds supply
    for item in Item.objects.all():
        assert item.claims == per_item[item.pk]
    pairs = list(Assignment.objects.values_list("rater_id", "item_id"))
    assert len(pairs) == len(set(pairs))


def test_claims_skip_items_the_rater_already_rated_without_an_assignment():
    """A rating given through the API (no assignment) keeps the unit out of the rater's sessions:
    a leased unit never has a rating yet, which the submit relies on to skip a lookup."""
    study = make_study(raters_per_item=3, units_per_session=10)
    items = _grid(study, instances=1, models=("M1", "M2", "M3"))
    rater = make_rater()
    rating_submit(rater=rater, item=items[0], values={"SC": 1, "PQ": 0.5}, source="api", require_assignment=False)
    assignment_batch_claim(rater=rater, study=study)
    claimed = set(Assignment.objects.filter(rater=rater).values_list("item_id", flat=True))
    assert claimed == {items[1].pk, items[2].pk}


def test_a_session_claim_reads_an_index_range_and_never_sorts_the_free_pool():
    """150 raters arriving at once each claimed a session by sorting every free item (md5 of the
    pk): 4–8 ms of database CPU per claim at 2,000 items, growing with the study. The claim's
    reads of the pool now walk the (study, claims, rank) index from a random start: no Sort."""
    if connection.vendor != "postgresql":
        pytest.skip("reads PostgreSQL's plans (CI runs it with DATABASE_URL=postgres://...)")
    from django.test.utils import CaptureQueriesContext

    study = make_study(units_per_session=10, raters_per_item=3)
    models = [make_item(study, instance=make_instance(study), model=f"M{m}").gen_model for m in range(5)]
    instances = Instance.objects.bulk_create(Instance(study=study, key=f"k{i}", prompt="p", position=i + 1)
                                             for i in range(800))
    Item.objects.bulk_create(Item(study=study, instance=i, gen_model=m) for i in instances for m in models)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    with CaptureQueriesContext(connection) as claim:
        assert assignment_batch_claim(rater=make_rater(), study=study) == 10
    pool_reads = [q["sql"] for q in claim.captured_queries
                  if q["sql"].startswith("SELECT") and 'FROM "tasks_item"' in q["sql"] and "LIMIT" in q["sql"]]
    assert pool_reads
    with connection.cursor() as cursor:
        for sql in pool_reads:
            cursor.execute("EXPLAIN " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert "item_free_by_rank" in plan and "Sort" not in plan, plan


def test_a_rater_holds_one_open_session_and_cannot_claim_another_before_rating_it():
    study = make_study(units_per_session=5)
    _grid(study, instances=10)
    rater = make_rater()
    assert assignment_batch_claim(rater=rater, study=study) == 5
    for _ in range(30):
        with pytest.raises(AssignmentUnavailable, match="Rate the screens you have"):
            assignment_batch_claim(rater=rater, study=study)
    assert Assignment.objects.filter(rater=rater, state="leased").count() == 5
    _rate_all(rater, study)  # done with the session: the next one may come
    assert assignment_batch_claim(rater=rater, study=study) == 5


def test_fresh_ids_that_never_rate_lease_at_most_their_share_of_the_study_and_raters_who_rated_still_get_work(settings):
    settings.CROWD_NEWCOMER_SHARE_PERCENT = 50
    study = make_study(units_per_session=5, raters_per_item=1)
    _grid(study, instances=20)  # 100 units
    swarm = [make_rater(platform="prolific", external_id=f"fake{i}") for i in range(40)]
    refused = 0
    for rater in swarm:
        try:
            assignment_batch_claim(rater=rater, study=study)
        except AssignmentUnavailable as exc:
            assert "Many new raters" in str(exc)
            refused += 1
    held = Assignment.objects.filter(study=study, state="leased").count()
    assert held <= 55 and refused >= 25  # about half the study, not all of it
    worker = make_rater()
    Assignment.objects.create(study=study, rater=worker, item=make_item(study, instance=make_instance(study)),
                              state="done", position=0)  # has rated before
    assert assignment_batch_claim(rater=worker, study=study) == 5


def test_a_first_session_that_is_never_rated_lapses_after_the_short_first_lease(settings):
    settings.ASSIGNMENT_LEASE_SECONDS, settings.ASSIGNMENT_FIRST_LEASE_SECONDS = 1800, 300
    study = make_study(units_per_session=2, raters_per_item=1)
    _grid(study, instances=1, models=("M1", "M2"))
    idle, later = make_rater(), make_rater()
    assignment_batch_claim(rater=idle, study=study)
    assert assignment_next(rater=later, study=study, now=timezone.now() + timedelta(seconds=200)) is None
    assert assignment_next(rater=later, study=study, now=timezone.now() + timedelta(seconds=400)) is not None
    assert Assignment.objects.filter(rater=idle, state="expired").count() == 2
