import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.science.correlation import (
    fisher_z_mean,
    model_level_agreement,
    per_group_correlations,
    sample_correlations,
    summarise_across_groups,
    viescore_aspect,
    viescore_table,
)


def test_perfectly_monotone_judge_scores_one_everywhere():
    x = np.linspace(0, 1, 30)
    result = sample_correlations(x, 1 / (1 + np.exp(-10 * (x - 0.5))))
    assert result.srcc == pytest.approx(1.0) and result.krcc == pytest.approx(1.0)
    assert result.plcc < 1.0
    assert result.plcc_logistic == pytest.approx(1.0, abs=1e-6)


def test_lower_is_better_flips_the_sign():
    rng = np.random.default_rng(0)
    human = rng.random(50)
    distance = 1 - human + rng.normal(0, 0.1, 50)
    assert sample_correlations(distance, human).srcc < 0
    assert sample_correlations(distance, human, lower_is_better=True).srcc > 0


def test_constant_judge_gives_none_with_reason():
    result = sample_correlations(np.ones(10), np.arange(10))
    assert result.srcc is None and result.plcc is None and result.krcc is None
    assert "judge scores are constant" in result.reason


def test_too_few_pairs_gives_none_with_reason():
    result = sample_correlations([1, np.nan, 2], [1, 2, np.nan])
    assert result.srcc is None and "only 1 paired" in result.reason


def test_failed_logistic_fit_is_reported_not_raised():
    # Two distinct judge values: the 4-parameter curve is under-determined but must not crash.
    result = sample_correlations([0, 0, 0, 1, 1, 1], [0.1, 0.2, 0.1, 0.9, 0.8, 0.7])
    assert result.srcc is not None
    assert result.plcc_logistic is not None or result.logistic_reason


def test_float_noise_ties_are_snapped_before_ranking():
    noisy = np.array([0.2, np.mean([0.1, 0.2, 0.3]), 0.0, 1.0])
    assert noisy[0] != noisy[1]  # 0.2 vs 0.20000000000000004
    result = sample_correlations(noisy, [0.5, 0.5, 0.0, 1.0])
    assert result.srcc == pytest.approx(1.0)


def test_fisher_z_mean_averages_in_z_space_and_skips_undefined():
    assert fisher_z_mean([0.5, None, 0.5]) == pytest.approx(0.5)
    assert fisher_z_mean([0.9, 0.1]) == pytest.approx(np.tanh((np.arctanh(0.9) + np.arctanh(0.1)) / 2))
    assert fisher_z_mean([1.0, 1.0]) < 1.0 + 1e-12  # clipped, finite
    assert fisher_z_mean([None]) is None


def test_per_model_table_and_summary():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"model": np.repeat(["a", "b"], 40), "human": rng.random(80)})
    frame["judge"] = frame["human"] + rng.normal(0, 0.2, 80)
    table = per_group_correlations(frame, judge="judge", human="human")
    assert list(table["model"]) == ["a", "b"]
    summary = summarise_across_groups(table)
    assert 0 < summary["srcc"] < 1


def test_model_ranking_footrule_and_rmse():
    human = pd.Series({"a": 60.0, "b": 55.0, "c": 50.0})
    judge = pd.Series({"a": 58.0, "b": 52.0, "c": 56.0})
    result = model_level_agreement(judge, human)
    assert result.footrule == 2.0  # b and c swap
    assert result.spearman_rho == pytest.approx(0.5)
    assert result.rmse == pytest.approx(np.sqrt((4 + 9 + 36) / 3))


def test_viescore_takes_min_sub_score_over_ten_and_geometric_mean():
    judge = pd.DataFrame(
        {
            "task": ["t"] * 2,
            "model": ["m"] * 2,
            "uid": ["x"] * 2,
            "aspect": ["SC", "PQ"],
            "scores": [[8, 4], [10, 9, 12]],
        }
    )
    assert viescore_aspect(judge["scores"]).tolist() == pytest.approx([0.4, 0.9])
    row = viescore_table(judge).iloc[0]
    assert (row["SC"], row["PQ"]) == pytest.approx((0.4, 0.9))
    assert row["O"] == pytest.approx(np.sqrt(0.36))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-1e3, 1e3), st.floats(-1e3, 1e3)), min_size=3, max_size=40))
def test_correlations_are_symmetric(pairs):
    x, y = np.array(pairs).T
    forward = sample_correlations(x, y, logistic=False)
    backward = sample_correlations(y, x, logistic=False)
    for name in ("srcc", "plcc", "krcc"):
        a, b = getattr(forward, name), getattr(backward, name)
        assert (a is None and b is None) or a == pytest.approx(b, abs=1e-9)


def test_grouped_correlations_match_scipy_per_group_with_ties_and_float_noise():
    from scipy import stats

    from analysis.science.correlation import grouped_correlations

    rng = np.random.default_rng(3)
    for trial in range(60):
        sizes = rng.integers(0, 30, rng.integers(1, 6))
        groups = np.repeat(np.arange(len(sizes)), sizes)
        if trial % 3 == 0:  # Likert-like: many ties
            x = rng.integers(1, 6, len(groups)).astype(float)
            y = rng.integers(0, 4, len(groups)) / 3
        elif trial % 3 == 1:
            x = rng.random(len(groups))
            y = x + rng.normal(0, 0.3, len(groups))
        else:  # ties hidden under float noise smaller than 1e-9
            x = np.round(rng.random(len(groups)), 1) + rng.normal(0, 1e-12, len(groups))
            y = np.round(rng.random(len(groups)), 1) - rng.normal(0, 1e-12, len(groups))
        x[rng.random(len(groups)) < 0.1] = np.nan
        shuffle = rng.permutation(len(groups))
        result = grouped_correlations(groups[shuffle], x[shuffle], y[shuffle], n_groups=len(sizes))
        for g in range(len(sizes)):
            xs, ys = np.round(x[groups == g], 9), np.round(y[groups == g], 9)
            keep = np.isfinite(xs) & np.isfinite(ys)
            xs, ys = xs[keep], ys[keep]
            assert result.n[g] == len(xs)
            if len(xs) < 3 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
                assert np.isnan(result.srcc[g]) and result.reason[g]
                continue
            assert result.srcc[g] == pytest.approx(stats.spearmanr(xs, ys)[0], abs=1e-12)
            assert result.plcc[g] == pytest.approx(stats.pearsonr(xs, ys)[0], abs=1e-12)
            assert result.krcc[g] == pytest.approx(stats.kendalltau(xs, ys)[0], abs=1e-12)


def test_grouped_kendall_counts_discordant_pairs_with_many_distinct_values_on_both_sides():
    from scipy import stats

    from analysis.science.correlation import grouped_correlations

    rng = np.random.default_rng(4)
    groups = np.repeat([0, 1], [700, 300])
    x, y = rng.random(1000), rng.random(1000)  # > 512 distinct values on both sides: 10 bit levels
    result = grouped_correlations(groups, x, y)
    for g in (0, 1):
        assert result.krcc[g] == pytest.approx(stats.kendalltau(x[groups == g], y[groups == g])[0], abs=1e-12)


def test_grouped_correlations_explain_undefined_groups_like_sample_correlations():
    from analysis.science.correlation import grouped_correlations

    result = grouped_correlations([0, 0, 0, 1, 1, 2, 2, 2], [1, 1, 1, 1, 2, 1, 2, 3], [1, 2, 3, 1, 2, 5, 5, 5],
                                  n_groups=4)
    assert result.reason == [
        sample_correlations([1, 1, 1], [1, 2, 3]).reason,
        "only 2 paired samples: need at least 3",
        "human scores are constant: correlation undefined",
        "only 0 paired samples: need at least 3",
    ]
    assert np.isnan(result.krcc).all()


@pytest.mark.parametrize("counting", [True, False])
def test_grouped_correlations_rank_the_side_with_few_values_by_counting_or_sorting_alike(monkeypatch, counting):
    from scipy import stats

    from analysis.science import correlation

    if not counting:  # no cells allowed: the few-valued side gets its own sort
        monkeypatch.setattr(correlation, "_CELLS_PER_PAIR", 0)
        monkeypatch.setattr(correlation, "_CELLS_ALLOWANCE", -1)
    rng = np.random.default_rng(9)
    groups = rng.integers(0, 40, 3000)
    likert = rng.integers(1, 6, 3000).astype(float)
    continuous = np.round(likert + rng.normal(0, 1.5, 3000), 6)  # within the 9-decimal snapping
    continuous[rng.random(3000) < 0.05] = np.nan
    for x, y in ((likert, continuous), (continuous, likert), (likert, np.round(continuous))):
        result = correlation.grouped_correlations(groups, x, y, n_groups=41)  # group 40: no pairs
        assert np.isnan(result.srcc[40]) and result.reason[40]
        for g in range(40):
            keep = (groups == g) & np.isfinite(x) & np.isfinite(y)
            assert result.srcc[g] == pytest.approx(stats.spearmanr(x[keep], y[keep])[0], abs=1e-12)
            assert result.krcc[g] == pytest.approx(stats.kendalltau(x[keep], y[keep])[0], abs=1e-12)
            assert result.plcc[g] == pytest.approx(stats.pearsonr(x[keep], y[keep])[0], abs=1e-12)


def test_model_level_agreement_on_another_scale_keeps_the_judges_sign_and_drops_rmse():
    human = pd.Series({"a": 0.8, "b": 0.5, "c": 0.2})
    dino = pd.Series({"a": 0.9, "b": 0.7, "c": 0.1})  # higher is better, but not on the human scale
    result = model_level_agreement(dino, human, same_scale=False)
    assert result.spearman_rho == pytest.approx(1.0) and result.footrule == 0.0
    assert result.rmse is None
    assert model_level_agreement(dino, human, lower_is_better=True).spearman_rho == pytest.approx(-1.0)


def _tau_a_by_pairs(x, y):
    n = len(x)
    sign = np.sign(np.subtract.outer(x, x)) * np.sign(np.subtract.outer(y, y))
    return np.triu(sign, 1).sum() / (n * (n - 1) / 2)


def test_kendall_tau_a_counts_tied_pairs_in_the_denominator_as_evalmi_does():
    rng = np.random.default_rng(3)
    judge, human = rng.integers(0, 5, 60).astype(float), rng.integers(0, 4, 60).astype(float)  # many ties
    a = sample_correlations(judge, human, kendall="a", logistic=False).krcc
    b = sample_correlations(judge, human, logistic=False).krcc
    assert a == pytest.approx(_tau_a_by_pairs(judge, human), abs=1e-12)
    assert abs(a) < abs(b)  # tau-b divides by fewer (untied) pairs
    table = per_group_correlations(pd.DataFrame({"judge": judge, "human": human, "model": "m"}), judge="judge",
                                   human="human", kendall="a", logistic=False)
    assert table.loc[0, "krcc"] == pytest.approx(a)
    with pytest.raises(ValueError, match="unknown Kendall variant 'c'"):
        sample_correlations(judge, human, kendall="c")


def test_fisher_mean_weighted_by_n_minus_3_gives_large_groups_their_share():
    values, n = [0.9, 0.1], [1003, 13]
    weighted = fisher_z_mean(values, weights=[k - 3 for k in n])
    expected = np.tanh((1000 * np.arctanh(0.9) + 10 * np.arctanh(0.1)) / 1010)
    assert weighted == pytest.approx(expected)
    assert fisher_z_mean(values) == pytest.approx(np.tanh(np.mean(np.arctanh(values))))
    assert fisher_z_mean([0.5, None], weights=[0, 5]) is None  # a weight of 0 leaves its value out
