"""The key test: a generated study with personas, run through the real rating path and the rules.

Four careful raters, a speeder, a straight-liner, a random clicker and an adversary rate 40 items;
12 of them are hidden gold (ImagenHub tolerance ±0.5). The study's policy rejects on any behaviour
flag. The rules must flag and exclude exactly the bad personas, and Krippendorff's alpha of the
ratings analysis uses must rise.
"""

import pytest

from analysis.data import ratings_frame
from analysis.science.agreement import krippendorff_alpha, reliability_matrix
from raters.models import QualityPolicy, QualityRulesSchedule, Rater, RaterAction, RaterStanding
from raters.exclusion import analysis_ratings, excluded_raters
from raters.quality import rater_rows
from raters.services import study_rules_apply
from tasks.models import Assignment
from tasks.services import rating_submit
from tests.factories import make_gold, make_item, make_rater, make_study
from tests.raters.personas import BAD, CAREFUL, persona_answers, true_scores

pytestmark = pytest.mark.django_db

N_ITEMS, N_GOLD = 40, 12


def _alpha(study, dimension="SC", **kwargs) -> float:
    # Read as the report reads (analysis.data.ratings_frame), through the one exclusion rule.
    frame = ratings_frame(study, **kwargs)
    return krippendorff_alpha(reliability_matrix(frame, score=dimension), level="interval").value


@pytest.fixture(scope="module")
def screened_study(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        study = make_study(slug="persona-study")
        QualityPolicy.objects.create(study=study, behaviour_action="reject", behaviour_min_flags=1)
        truth = true_scores(N_ITEMS)
        items = [make_item(study, with_image=False) for _ in range(N_ITEMS)]
        for item, (sc, pq) in list(zip(items, truth))[:N_GOLD]:
            make_gold(item, values={"SC": sc, "PQ": pq}, tolerance=0.5)
        raters = {name: make_rater(platform="prolific", external_id=name) for name in (*CAREFUL, *BAD)}
        Assignment.objects.bulk_create(
            [Assignment(study=study, rater=r, item=item, position=k) for r in raters.values() for k, item in enumerate(items)]
        )
        for answer in persona_answers(truth):
            rating_submit(  # runs the per-rater gold and attention rules after each rating
                rater=raters[answer.rater], item=items[answer.item], values={"SC": answer.SC, "PQ": answer.PQ},
                time_on_item_ms=answer.time_ms,
            )
        alpha_before = _alpha(study, include_excluded=True)  # every rating: as before any screening
        taken = study_rules_apply(study=study)
        yield study, raters, alpha_before, taken
        study.delete()
        Rater.objects.filter(pk__in=[r.pk for r in raters.values()]).delete()


def test_the_rules_exclude_every_bad_persona_and_no_careful_rater(screened_study):
    study, raters, _, taken = screened_study
    assert set(excluded_raters(study)) == {raters[name].pk for name in BAD}
    assert not RaterStanding.objects.filter(rater__in=[raters[n] for n in CAREFUL]).exists()
    # Outside a test transaction the ratings commit one by one, so the automatic runs (every 50
    # ratings and when each rater finished their queue) acted already; running by hand adds nothing.
    assert taken == {}
    assert set(RaterAction.objects.filter(study=study, automatic=True).values_list("rater_id", flat=True)) == {
        raters[name].pk for name in BAD
    }
    assert QualityRulesSchedule.objects.get(study=study).runs >= len(raters)


def test_each_bad_persona_is_flagged_for_what_they_did(screened_study):
    study, raters, _, _ = screened_study
    flags = {row.rater.external_id: set(row.flag_codes) for row in rater_rows(study)}
    assert "too_fast" in flags["speeder"]
    assert {"straight_lining", "low_consensus"} <= flags["straight_liner"]
    assert "low_consensus" in flags["random_clicker"]
    assert {"straight_lining", "low_consensus", "gold"} <= flags["adversary"]
    assert all(flags[name] == set() for name in CAREFUL)


def test_careful_raters_pass_hidden_gold_within_the_tolerance(screened_study):
    study, raters, _, _ = screened_study
    rows = {row.rater.external_id: row for row in rater_rows(study)}
    assert all(rows[name].gold_accuracy == 1.0 for name in CAREFUL)
    assert rows["adversary"].gold_accuracy == pytest.approx(3 / 12)  # right only where SC and PQ are both <= 0.5


def test_krippendorffs_alpha_rises_from_0_12_to_0_79_after_screening(screened_study):
    study, _, alpha_before, _ = screened_study
    assert alpha_before == pytest.approx(0.115, abs=0.001)
    assert _alpha(study) == pytest.approx(0.790, abs=0.001)


def test_excluded_ratings_are_kept(screened_study):
    study, raters, _, _ = screened_study
    assert analysis_ratings(study, include_excluded=True).count() == N_ITEMS * len(raters)
    assert analysis_ratings(study).count() == N_ITEMS * len(CAREFUL)
