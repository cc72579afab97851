"""analysis.science.rater_flags: behaviour flags on simulated personas and edge cases (pure, no database)."""

import numpy as np
import pandas as pd
import pytest

from analysis.science.agreement import krippendorff_alpha, reliability_matrix
from analysis.science.rater_flags import (
    Thresholds,
    attention_flag,
    consensus_agreement,
    gold_flag,
    rater_quality,
    straight_lining_flag,
    too_fast_flag,
)
from tests.raters.personas import BAD, CAREFUL, long_frame, persona_answers, true_scores


@pytest.fixture(scope="module")
def personas():
    frame = long_frame(persona_answers(true_scores(40)))
    return frame, rater_quality(frame)


def test_the_careful_raters_carry_no_flag(personas):
    _, quality = personas
    for rater in CAREFUL:
        assert quality[rater].flags == [], quality[rater].flags
        assert quality[rater].consensus_r > 0.7


def test_every_bad_persona_is_flagged_for_what_they_did(personas):
    _, quality = personas
    assert [f.code for f in quality["speeder"].flags] == ["too_fast"]
    assert {f.code for f in quality["straight_liner"].flags} == {"straight_lining", "low_consensus"}
    # the subject model also finds the random clicker's noise far above the careful raters' (no gold needed)
    assert [f.code for f in quality["random_clicker"].flags] == ["low_consensus", "inconsistent"]
    assert {f.code for f in quality["adversary"].flags} == {"straight_lining", "low_consensus"}
    assert quality["speeder"].median_time_ms == pytest.approx(733.0)
    assert quality["random_clicker"].consensus_r == pytest.approx(-0.123, abs=0.001)


def test_the_subject_model_gives_bias_and_inconsistency_per_dimension_and_acts_on_nothing(personas):
    from raters.quality import BEHAVIOUR_CODES

    _, quality = personas
    careful = quality["careful_1"].subject
    assert set(careful) == {"SC", "PQ"} and not careful["SC"]["inconsistent"]
    low, high = careful["SC"]["inconsistency_ci95"]
    assert low < careful["SC"]["inconsistency"] < high
    clicker = quality["random_clicker"].subject["SC"]
    assert clicker["inconsistent"] and clicker["inconsistency"] > 2 * clicker["median_inconsistency"]
    flag = next(f for f in quality["random_clicker"].flags if f.code == "inconsistent")
    assert flag.reason.startswith("SC: inconsistency 0.52 (95 % CI 0.43–0.67) against a median rater's 0.24")
    # a screening signal only: the automatic rules count behaviour flags, and this is not one
    assert "inconsistent" not in BEHAVIOUR_CODES
    plain = rater_quality(personas[0], Thresholds(use_subject_model=False))
    assert not plain["random_clicker"].subject and "inconsistent" not in [f.code for f in plain["random_clicker"].flags]


def test_dropping_the_flagged_raters_raises_alpha_from_0_12_to_0_79(personas):
    frame, quality = personas
    sc = frame[frame["dimension"] == "SC"]
    kept = sc[~sc["rater"].isin([r for r, q in quality.items() if q.flags])]
    before = krippendorff_alpha(reliability_matrix(sc, score="score"), level="interval").value
    after = krippendorff_alpha(reliability_matrix(kept, score="score"), level="interval").value
    assert before == pytest.approx(0.115, abs=0.001)
    assert after == pytest.approx(0.790, abs=0.001)
    assert set(kept["rater"]) == set(CAREFUL) and set(BAD).isdisjoint(kept["rater"])


def test_each_flag_has_a_reason_with_the_numbers(personas):
    _, quality = personas
    assert quality["speeder"].flags[0].reason == "median 733 ms per item over 40 items, study minimum 2000 ms"
    assert "r = -0.12 with the leave-one-out consensus over 80 scores" in quality["random_clicker"].flags[0].reason


def test_too_fast_ignores_unknown_times_and_a_zero_threshold():
    assert too_fast_flag([None, float("nan")], 2000) is None
    assert too_fast_flag([100, 200], 0) is None
    assert too_fast_flag([2500, 1500, 3000], 2000) is None
    assert too_fast_flag([500, 1500, 3000], 2000).value == 1500


def test_straight_lining_needs_enough_items_and_looks_per_session():
    flat = pd.DataFrame({"item": range(5), "dimension": "SC", "score": 1.0})
    assert straight_lining_flag({None: flat}, max_std=0.05, min_items=10) is None
    varied = pd.DataFrame({"item": range(12), "dimension": "SC", "score": [0.0, 1.0] * 6})
    long_flat = pd.DataFrame({"item": range(12, 24), "dimension": "SC", "score": 0.5})
    flag = straight_lining_flag({"monday": varied, "tuesday": long_flat}, max_std=0.05, min_items=10)
    assert flag.code == "straight_lining" and "in session tuesday" in flag.reason


def test_a_constant_rater_is_not_flagged_when_everyone_agrees_on_everything():
    frame = pd.DataFrame(
        [{"rater": r, "item": i, "dimension": "SC", "score": 1.0} for r in "abc" for i in range(12)]
    )
    quality = rater_quality(frame, Thresholds(straightline_min_items=100))
    assert all(q.flags == [] for q in quality.values())
    table = consensus_agreement(frame)
    assert table.loc["a", "consensus_constant"] and table.loc["a", "r"] is None


def test_items_rated_by_one_rater_have_no_consensus():
    frame = pd.DataFrame(
        [{"rater": "solo", "item": i, "dimension": "SC", "score": float(i % 2)} for i in range(12)]
    )
    assert consensus_agreement(frame).empty
    assert rater_quality(frame)["solo"].consensus_pairs == 0


def test_attention_follows_the_two_failure_rule():
    assert attention_flag(1, 3, max_failures=2) is None
    flag = attention_flag(2, 3, max_failures=2)
    assert flag.reason == "failed 2 of 3 attention checks (limit 2)"


def test_gold_accuracy_is_judged_only_after_enough_gold_items():
    assert gold_flag(0, 9, min_accuracy=0.7, min_items=10) is None
    assert gold_flag(7, 10, min_accuracy=0.7, min_items=10) is None
    assert gold_flag(6, 10, min_accuracy=0.7, min_items=10).reason.startswith("gold accuracy 60% (6 of 10)")


def test_raters_known_only_from_gold_or_attention_are_reported():
    empty = pd.DataFrame(columns=["rater", "item", "dimension", "score"])
    quality = rater_quality(empty, attention={"x": (2, 2)}, gold={"y": (1, 10)})
    assert quality["x"].has("attention") and quality["y"].has("gold")


def test_bt500_rejection_is_reported_as_a_flag():
    # BT.500 ignores a lone outlier (it inflates the kurtosis, widening the band to sqrt(20) sd),
    # so the panel has three erratic raters who land half a scale away on either side.
    rng = np.random.default_rng(3)
    truth = rng.normal(0.5, 0.2, 30)
    rows = [{"rater": f"r{k}", "item": i, "dimension": "MOS", "score": t + rng.normal(0, 0.1)} for k in range(10) for i, t in enumerate(truth)]
    for e in range(3):
        rows += [{"rater": f"erratic{e}", "item": i, "dimension": "MOS", "score": t + rng.choice([-0.5, 0.5])} for i, t in enumerate(truth)]
    quality = rater_quality(pd.DataFrame(rows), Thresholds(use_bt500=True))
    assert quality["erratic0"].has("bt500") and quality["erratic1"].has("bt500")
    assert "rejected (BT.500)" in next(f for f in quality["erratic0"].flags if f.code == "bt500").reason
    assert quality["erratic0"].has("inconsistent")  # the subject model sees them too, with no gold
    assert not any(quality[f"r{k}"].flags for k in range(10))
    assert not rater_quality(pd.DataFrame(rows), Thresholds(use_bt500=False))["erratic0"].has("bt500")
