"""Adaptive assignment (tasks.assignment.adaptive): claims follow the study's recorded priority
list, keep every guarantee of the balanced claim (quota, one unit per rater, gold and attention
slots, leases) and stay safe under concurrent claims (PostgreSQL)."""

from collections import Counter
from functools import partial

import pytest
from django.db import connection

from raters.models import AttentionCheck
from tasks.assignment import adaptive, assignment_batch_claim, assignment_next
from tasks.models import AllocationRound, Assignment, Comparison, Item, Study
from tasks.services import rating_submit
from tests.factories import make_attention_check, make_gold, make_instance, make_item, make_rater, make_study, make_user
from tests.conftest import all_at_once

pytestmark = pytest.mark.django_db

ADAPTIVE = Study.AssignmentMode.ADAPTIVE


def _grid(study, instances=6, models=("M1", "M2", "M3")):
    items = []
    for _ in range(instances):
        instance = make_instance(study)
        items += [make_item(study, instance=instance, model=m, with_image=False) for m in models]
    return items


def _rate(rater, item, sc):
    rating_submit(rater=rater, item=item, values={"SC": sc, "PQ": 1}, require_assignment=False)


def _claimed(rater, study):
    return list(Assignment.objects.filter(rater=rater, study=study).order_by("position", "slot")
                .values_list("item_id", flat=True))


def test_the_first_claim_records_a_round_and_hands_out_burn_in_units():
    study = make_study(assignment_mode=ADAPTIVE, units_per_session=4, raters_per_item=3)
    _grid(study)
    rater = make_rater()
    assert assignment_batch_claim(rater=rater, study=study) == 4
    (round_,) = AllocationRound.objects.filter(study=study)
    assert round_.trigger == "first" and round_.ratings_seen == 0
    assert round_.reasons == {"burn-in: below the minimum ratings": 18}
    assert len(round_.units) == 18 and {u[2] for u in round_.units} == {1}  # one claim each this round
    assert round_.parameters["cap"] == 3 and round_.parameters["alpha"] == 0.05
    assert round_.parameters["focus"] == adaptive.FOCUS == "uncertain"  # recorded: a replay knows the rule
    assert _claimed(rater, study) == [u[0] for u in round_.units[:4]]  # the list's order


def test_units_with_fewer_ratings_go_first_and_units_at_their_cap_stop():
    study = make_study(assignment_mode=ADAPTIVE, units_per_session=3, raters_per_item=3)
    items = _grid(study, instances=4)
    raters = [make_rater() for _ in range(3)]
    for k, item in enumerate(items):  # every unit rated; the first 6 by all three raters (their cap)
        for rater in raters[: 3 if k < 6 else 1]:
            _rate(rater, item, [0, 0.5, 1][(k + rater.pk) % 3])
    fresh = make_rater()
    assert assignment_batch_claim(rater=fresh, study=study) == 3
    (round_,) = AllocationRound.objects.filter(study=study)
    listed = {u[0] for u in round_.units}
    assert not listed & {item.pk for item in items[:6]}  # at their cap: never listed
    assert round_.reasons["stopped: at its cap"] == 6
    assert set(_claimed(fresh, study)) <= {item.pk for item in items[6:]}


def test_units_of_settled_models_stop_taking_ratings():
    study = make_study(assignment_mode=ADAPTIVE, units_per_session=5, raters_per_item=10)
    items = _grid(study, instances=8, models=("Good", "Bad"))
    raters = [make_rater() for _ in range(4)]
    for item in items:
        good = item.gen_model.name == "Good"
        for k, rater in enumerate(raters):
            _rate(rater, item, (1 if k else 0.5) if good else (0 if k else 0.5))
    assert assignment_batch_claim(rater=make_rater(), study=study) == 0  # nothing left to learn
    (round_,) = AllocationRound.objects.filter(study=study)
    assert round_.units == []
    assert round_.reasons == {"stopped: model settled (its adjacent pairs are separated or tied)": 16}
    assert [v["verdict"] for v in round_.verdicts] == ["separated"]
    assert round_.verdicts[0]["a"] == "Good"


def test_no_rater_gets_a_unit_twice_and_the_quota_holds_over_many_rounds():
    study = make_study(assignment_mode=ADAPTIVE, units_per_session=4, raters_per_item=2)
    items = _grid(study, instances=4)
    seen = Counter()
    for _ in range(14):
        rater = make_rater()
        for _ in range(20):  # bounded: a bug must fail, not hang
            if (screen := assignment_next(rater=rater, study=study)) is None:
                break
            for assignment in screen.assignments:
                seen[assignment.item_id] += 1
                rating_submit(rater=rater, item=assignment.item, values={"SC": 0.5, "PQ": 1})
            pairs = _claimed(rater, study)
            assert len(pairs) == len(set(pairs))
    assert max(seen.values()) <= 2
    assert sum(seen.values()) == 2 * len(items)  # every unit rated up to its cap
    for item in Item.objects.filter(study=study):
        assert item.claims == seen[item.pk]
    assert AllocationRound.objects.filter(study=study).count() >= 2  # the list was recomputed as it ran dry


def test_hidden_gold_and_attention_checks_still_go_into_an_adaptive_session():
    study = make_study(assignment_mode=ADAPTIVE, settings={"gold_share": 0.2}, units_per_session=8,
                       raters_per_item=2)
    _grid(study, instances=8)
    gold = [make_item(study, with_image=False) for _ in range(6)]
    for item in gold:
        make_gold(item)
    make_attention_check(make_item(study, with_image=False), after_items=0)
    rater = make_rater()
    assert assignment_batch_claim(rater=rater, study=study) == 8
    mine = Assignment.objects.filter(rater=rater, study=study)
    assert mine.filter(item__gold__isnull=False).count() == 2
    assert mine.filter(item__attention_check__isnull=False).count() == 1
    assert sorted(mine.values_list("position", flat=True)) == list(range(11))
    round_ = AllocationRound.objects.get(study=study)
    gold_and_checks = {g.pk for g in gold} | set(AttentionCheck.objects.values_list("item_id", flat=True))
    assert not {u[0] for u in round_.units} & gold_and_checks  # never in the list (outside the quota)


def test_an_evalmi_trial_groups_listed_units_of_one_instance():
    study = make_study(protocol="evalmi", task_type="counting", assignment_mode=ADAPTIVE, units_per_session=2,
                       raters_per_item=2)
    _grid(study, instances=4, models=("M1", "M2", "M3"))
    rater = make_rater()
    assert assignment_batch_claim(rater=rater, study=study) == 2
    mine = list(Assignment.objects.filter(rater=rater).select_related("item"))
    by_position = {}
    for assignment in mine:
        by_position.setdefault(assignment.position, set()).add(assignment.item.instance_id)
    assert sorted(by_position) == [0, 1] and all(len(v) == 1 for v in by_position.values())


def test_pairwise_adaptive_claims_never_show_a_rater_the_same_comparison_twice():
    study = make_study(protocol="pairwise", task_type="text_to_image", assignment_mode=ADAPTIVE,
                       units_per_session=3, raters_per_item=3)
    for _ in range(4):
        instance = make_instance(study)
        outputs = [make_item(study, instance=instance, model=m, with_image=False) for m in ("A", "B", "C")]
        for a in range(3):
            for b in range(a + 1, 3):
                Comparison.objects.create(study=study, item_a=outputs[a], item_b=outputs[b])
    shown = Counter()
    for _ in range(5):
        rater = make_rater()
        mine = []
        for _ in range(20):  # bounded: a bug must fail, not hang
            if (screen := assignment_next(rater=rater, study=study)) is None:
                break
            for assignment in screen.assignments:
                mine.append(assignment.comparison_id)
                rating_submit(rater=rater, comparison=assignment.comparison, values={"preference": "A"})
        assert len(mine) == len(set(mine))
        shown.update(mine)
    assert max(shown.values()) <= 3
    round_ = AllocationRound.objects.filter(study=study).first()
    assert round_.reasons and all(len(u) == 3 for u in round_.units)


def test_the_allocation_api_shows_the_rounds_to_the_study_team_only(client):
    owner, stranger = make_user(), make_user()
    study = make_study(assignment_mode=ADAPTIVE, units_per_session=2)
    study.owners.add(owner)
    make_study().owners.add(stranger)  # a researcher of another study
    _grid(study, instances=2)
    assignment_batch_claim(rater=make_rater(), study=study)
    url = f"/api/studies/{study.slug}/allocation/"
    client.force_login(stranger)
    assert client.get(url).status_code == 404
    client.force_login(owner)
    body = client.get(url).json()
    assert body["mode"] == "adaptive" and len(body["rounds"]) == 1
    first = body["rounds"][0]
    assert first["trigger"] == "first" and first["units"][0]["reason"] == "burn-in: below the minimum ratings"
    assert client.get(url + "?limit=x").status_code == 400
    for hostile in ("?before=99999999999999999999999", "?before=%D9%A1", "?limit=%205", "?before=-1", "?before=1%00"):
        assert client.get(url + hostile).status_code == 400, hostile
    rid = first["id"]
    assert client.get(url + f"?before={rid}").json()["rounds"] == []  # pages back from a round id
    assert len(client.get(url + f"?before={rid + 1}&limit=1").json()["rounds"]) == 1
    assert client.post(url).status_code == 405


def test_adaptive_settings_are_configured_on_a_draft_and_locked_once_open(client):
    owner = make_user()
    study = make_study(state=Study.State.DRAFT)
    study.owners.add(owner)
    client.force_login(owner)
    url = f"/api/studies/{study.slug}/"
    change = {"assignment_mode": "adaptive", "adaptive_target_halfwidth": 0.2, "adaptive_margin": 0.05,
              "adaptive_alpha": 0.01, "adaptive_min_ratings": 2}
    response = client.patch(url, change, content_type="application/json")
    assert response.status_code == 200, response.json()
    assert {k: response.json()["configuration"][k] for k in change} == change
    assert client.patch(url, {"adaptive_alpha": 0.9}, content_type="application/json").status_code == 400
    Study.objects.filter(pk=study.pk).update(state=Study.State.OPEN)
    assert client.patch(url, {"adaptive_margin": 0.1}, content_type="application/json").status_code == 409


@pytest.mark.django_db(transaction=True)
def test_many_raters_claiming_at_once_in_adaptive_mode_never_over_assign_and_recompute_once():
    """PostgreSQL only (threads prove nothing on SQLite, which serialises writers)."""
    if connection.vendor != "postgresql":
        pytest.skip("concurrency test needs PostgreSQL (DATABASE_URL=postgres://...)")
    study = make_study(assignment_mode=ADAPTIVE, units_per_session=8, raters_per_item=2)
    _grid(study, instances=4, models=("M1", "M2", "M3", "M4", "M5"))  # 20 units x cap 2 = 40 claims
    raters = [make_rater() for _ in range(12)]
    errors = all_at_once([partial(assignment_next, rater=rater, study=study) for rater in raters])
    assert errors == []
    per_item = Counter(Assignment.objects.values_list("item_id", flat=True))
    assert max(per_item.values()) <= 2
    for item in Item.objects.all():
        assert item.claims == per_item[item.pk]
    pairs = list(Assignment.objects.values_list("rater_id", "item_id"))
    assert len(pairs) == len(set(pairs))
    rounds = list(AllocationRound.objects.filter(study=study).order_by("id").values_list("trigger", flat=True))
    assert rounds[0] == "first" and rounds.count("first") == 1  # computed once, not per claim
    # round limits: the first round hands each unit to one rater, later ones (lists run dry) one more;
    # a claimer retries once after a new round, so under a burst some claims may stay unused (not the quota)
    assert set(per_item) == set(Item.objects.values_list("pk", flat=True))
    assert adaptive.refresh_step(study) >= adaptive.REFRESH_RATINGS_MIN


def test_the_list_is_recomputed_after_enough_new_ratings_or_time_and_not_per_claim(monkeypatch):
    monkeypatch.setattr(adaptive, "LIST_MIN", 4)
    monkeypatch.setattr(adaptive, "REFRESH_RATINGS_MIN", 3)
    study = make_study(assignment_mode=ADAPTIVE, units_per_session=1, raters_per_item=3)
    items = _grid(study, instances=4)
    assignment_batch_claim(rater=make_rater(), study=study)
    assignment_batch_claim(rater=make_rater(), study=study)  # no new rating: the same round
    assert list(AllocationRound.objects.values_list("trigger", flat=True)) == ["first"]
    raters = [make_rater() for _ in range(3)]
    for rater, item in zip(raters, items[5:8]):
        _rate(rater, item, 1)
    assignment_batch_claim(rater=make_rater(), study=study)
    latest = AllocationRound.objects.filter(study=study).first()
    assert latest.trigger == "ratings" and latest.ratings_seen == 3
    _rate(raters[0], items[9], 0)
    monkeypatch.setattr(adaptive, "REFRESH_SECONDS", -1)
    assignment_batch_claim(rater=make_rater(), study=study)
    assert AllocationRound.objects.filter(study=study).first().trigger == "time"


def stale_list_study(monkeypatch) -> tuple[Study, AllocationRound]:
    """An adaptive study whose first list (computed in a claim) 3 new ratings made stale: (study, that round)."""
    monkeypatch.setattr(adaptive, "LIST_MIN", 4)
    monkeypatch.setattr(adaptive, "REFRESH_RATINGS_MIN", 3)
    study = make_study(assignment_mode=ADAPTIVE, units_per_session=1, raters_per_item=3)
    items = _grid(study, instances=4)
    assignment_batch_claim(rater=make_rater(), study=study)  # no list yet: computed in the claim
    first = AllocationRound.objects.get(study=study)
    for rater, item in zip([make_rater() for _ in range(3)], items[5:8]):
        _rate(rater, item, 1)
    return study, first


def test_a_stale_list_is_recomputed_by_a_job_off_the_claiming_request_queued_once(monkeypatch):
    """With a broker the claim does not pay the O(ratings) estimate: it queues the job once per
    round and claims from the current list; the job makes the round, a second delivery nothing."""
    from tasks import jobs

    queued = []
    monkeypatch.setattr(jobs.adaptive_recompute_job, "delay", lambda *args: queued.append(args))
    study, first = stale_list_study(monkeypatch)
    assert assignment_batch_claim(rater=make_rater(), study=study) == 1  # claimed from the stale list
    assignment_batch_claim(rater=make_rater(), study=study)
    assert list(AllocationRound.objects.filter(study=study).values_list("id", flat=True)) == [first.pk]
    assert queued == [(study.pk, first.pk, "ratings")]  # once for the round, not per claim
    made = jobs.adaptive_recompute_job(*queued[0])
    latest = AllocationRound.objects.filter(study=study).first()
    assert made == latest.pk != first.pk and latest.trigger == "ratings" and latest.ratings_seen == 3
    assert jobs.adaptive_recompute_job(*queued[0]) is None  # delivered twice: the round is no longer the latest
    assert jobs.adaptive_recompute_job(10**9, latest.pk, "ratings") is None  # a study that is gone


def test_a_study_without_units_gets_an_empty_round_and_no_work():
    study = make_study(assignment_mode=ADAPTIVE)
    assert assignment_batch_claim(rater=make_rater(), study=study) == 0
    assert AllocationRound.objects.get(study=study).units == []


def test_a_claim_between_rounds_costs_the_same_statements_whatever_the_study_size():
    """O(batch): once the round exists, a claim reads the round row, a bounded count of new
    ratings and pages of the list, never the pool (the statements do not grow with the study)."""
    from django.test.utils import CaptureQueriesContext

    counts = []
    for instances in (4, 40):
        study = make_study(assignment_mode=ADAPTIVE, units_per_session=3, raters_per_item=3)
        _grid(study, instances=instances)
        assignment_batch_claim(rater=make_rater(), study=study)  # the first round
        rater = make_rater()
        with CaptureQueriesContext(connection) as claim:
            assert assignment_batch_claim(rater=rater, study=study) == 3
        assert not any("tasks_allocationround" in q["sql"] and "INSERT" in q["sql"] for q in claim.captured_queries)
        counts.append(len(claim.captured_queries))
    assert counts[0] == counts[1]
