"""Win rates and Bradley–Terry scores (pure, no database)."""

import numpy as np
import pandas as pd
import pytest

from analysis.science.pairwise import bradley_terry, pairwise_summary


def judgements(*rows):
    """rows of (model_a, model_b, preference, count)."""
    expanded = [(a, b, p) for a, b, p, n in rows for _ in range(n)]
    return pd.DataFrame(expanded, columns=["model_a", "model_b", "preference"])


def test_bradley_terry_of_two_models_is_the_log_odds_of_their_record():
    wins = np.array([[0, 30], [10, 0]], dtype=float)
    scores = bradley_terry(wins, prior=0.0)
    assert scores[0] - scores[1] == pytest.approx(np.log(3.0), abs=1e-8)
    assert scores.sum() == pytest.approx(0.0, abs=1e-12)


def test_bradley_terry_satisfies_the_likelihood_equations_for_three_models():
    wins = np.array([[0, 7, 9], [3, 0, 6], [1, 4, 0]], dtype=float)
    p = np.exp(bradley_terry(wins, prior=0.0))
    games = wins + wins.T
    expected = (games * p[:, None] / (p[:, None] + p[None, :])).sum(axis=1)
    assert expected == pytest.approx(wins.sum(axis=1), rel=1e-7)


def test_ties_count_as_half_a_win_for_each_side():
    result = pairwise_summary(judgements(("X", "Y", "tie", 10)), n_boot=0).table.set_index("model")
    assert result.loc["X", "win_rate"] == 0.5 and result.loc["Y", "win_rate"] == 0.5
    assert result.loc["X", "bt_score"] == pytest.approx(result.loc["Y", "bt_score"])
    assert result.loc["X", "ties"] == 10


def test_both_bad_is_left_out_of_win_rates_by_default_and_reported_separately():
    data = judgements(("X", "Y", "A", 6), ("X", "Y", "B", 2), ("X", "Y", "both_bad", 8))
    excluded = pairwise_summary(data, n_boot=0).table.set_index("model")
    assert excluded.loc["X", "win_rate"] == pytest.approx(6 / 8)
    assert excluded.loc["X", "both_bad_rate"] == pytest.approx(0.5)
    as_tie = pairwise_summary(data, both_bad="tie", n_boot=0).table.set_index("model")
    assert as_tie.loc["X", "win_rate"] == pytest.approx((6 + 4) / 16)


def test_a_model_that_never_wins_still_gets_a_finite_score_below_the_others():
    data = judgements(("X", "Y", "A", 5), ("Y", "Z", "A", 5), ("X", "Z", "A", 5))
    table = pairwise_summary(data, n_boot=0).table
    assert table["model"].tolist() == ["X", "Y", "Z"]
    assert np.isfinite(table["bt_score"]).all()
    assert table.set_index("model").loc["Z", "win_rate"] == 0.0


def test_bootstrap_intervals_are_seeded_and_contain_the_estimate():
    rng = np.random.default_rng(1)
    models = ["A1", "B2", "C3", "D4"]
    strength = {"A1": 1.0, "B2": 0.3, "C3": -0.2, "D4": -1.1}
    rows = []
    for _ in range(600):
        a, b = rng.choice(models, 2, replace=False)
        p = 1 / (1 + np.exp(strength[b] - strength[a]))
        rows.append((a, b, "A" if rng.random() < p else "B"))
    data = pd.DataFrame(rows, columns=["model_a", "model_b", "preference"])
    first = pairwise_summary(data, n_boot=300, seed=7).table
    again = pairwise_summary(data, n_boot=300, seed=7).table
    pd.testing.assert_frame_equal(first, again)
    assert first["model"].tolist() == models
    assert ((first["bt_ci_low"] <= first["bt_score"]) & (first["bt_score"] <= first["bt_ci_high"])).all()
    assert ((first["win_rate_ci_low"] <= first["win_rate"]) & (first["win_rate"] <= first["win_rate_ci_high"])).all()


def test_disconnected_models_are_flagged_and_bad_input_is_refused():
    data = judgements(("X", "Y", "A", 3), ("P", "Q", "B", 3))
    assert any("disconnected" in note for note in pairwise_summary(data, n_boot=0).notes)
    with pytest.raises(ValueError, match="unknown preference"):
        pairwise_summary(judgements(("X", "Y", "left", 1)), n_boot=0)
    with pytest.raises(ValueError, match="itself"):
        pairwise_summary(judgements(("X", "X", "A", 1)), n_boot=0)


def test_win_rate_resamples_where_a_model_has_no_decisive_judgement_are_counted():
    """Z appears in one judgement of 41: resamples without it leave Z's win rate undefined; they are
    counted, not dropped silently (about (40/41)^41 = 36 % of them)."""
    data = judgements(("X", "Y", "A", 20), ("X", "Y", "B", 20), ("Z", "X", "A", 1))
    table = pairwise_summary(data, n_boot=400, seed=2).table.set_index("model")
    assert table.loc["X", "win_rate_boot_undefined"] == 0
    share = table.loc["Z", "win_rate_boot_undefined"] / 400
    assert 0.25 < share < 0.5


def test_bradley_terry_pairs_and_rank_intervals_come_from_the_bootstrap_replicates():
    from analysis.science.model_comparisons import compare_bradley_terry

    data = judgements(("X", "Y", "A", 40), ("X", "Y", "B", 10), ("Y", "Z", "A", 26), ("Y", "Z", "B", 24),
                      ("X", "Z", "A", 45), ("X", "Z", "B", 5))
    result = pairwise_summary(data, n_boot=300, seed=1)
    assert result.score_replicates.shape == (300, 3) and result.models == ["X", "Y", "Z"]
    scores = result.table.set_index("model").loc[result.models, "bt_score"]
    compared = compare_bradley_terry(result.models, scores, result.score_replicates)
    assert list(compared["ranks"]) == ["X", "Y", "Z"] and compared["ranks"]["X"]["rank_ci95"] == [1, 1]
    pairs = {(p["first"], p["second"]): p for p in compared["pairs"]}
    assert pairs["X", "Y"]["separated"] and not pairs["Y", "Z"]["separated"]
    replicate_gaps = result.score_replicates[:, 0] - result.score_replicates[:, 1]
    assert pairs["X", "Y"]["ci95"] == pytest.approx(list(np.percentile(replicate_gaps, [2.5, 97.5])))
