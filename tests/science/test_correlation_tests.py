"""Dependent-correlation tests and the count-weighted bootstrap (analysis.science.correlation_tests).

Oracles: Zou's (2007) published worked example; Williams' t and Steiger's Z recomputed independently
(the 3x3 determinant by numpy.linalg, the covariance of two Fisher z's by the Pearson-Filon formula
and by simulation); the bootstrap against a brute force that writes every resample out and calls
scipy; Holm against a hand computation.
"""

import math

import numpy as np
import pytest
from scipy import stats

from analysis.science.correlation_tests import (
    bootstrap_counts,
    fisher_interval,
    holm,
    steiger_z,
    summarise_replicates,
    weighted_correlations,
    williams_t,
    zou_interval,
)


def test_zou_interval_reproduces_his_worked_example_for_overlapping_correlations():
    # Zou (2007), Psychological Methods 12:399, example 2: r12 = .396, r13 = .179, r23 = .088, n = 66
    low, high = zou_interval(0.396, 0.179, 0.088, 66)
    assert (round(low, 3), round(high, 3)) == (-0.093, 0.517)


def test_williams_t_equals_an_independent_computation_with_the_correlation_matrix_determinant():
    r_jk, r_jh, r_kh, n = 0.4, 0.5, 0.1, 103
    matrix = np.array([[1, r_jk, r_jh], [r_jk, 1, r_kh], [r_jh, r_kh, 1]])
    det = np.linalg.det(matrix)
    rbar = (r_jk + r_jh) / 2
    expected = (r_jk - r_jh) * np.sqrt((n - 1) * (1 + r_kh) / (2 * (n - 1) / (n - 3) * det + rbar**2 * (1 - r_kh) ** 3))
    result = williams_t(r_jk, r_jh, r_kh, n)
    assert result.statistic == pytest.approx(expected, rel=1e-12)
    assert result.df == n - 3
    assert result.p_value == pytest.approx(2 * stats.t.sf(abs(expected), n - 3), rel=1e-12)


def _pearson_filon_covariance(r_jk, r_jh, r_kh):
    """n * cov(r_jk, r_jh) from the general Pearson-Filon formula for two correlations sharing j
    (Steiger 1980, eq. 2 with k = j), divided out of the two variances to a correlation of the z's."""
    psi = r_kh * (1 - r_jk**2 - r_jh**2) - 0.5 * r_jk * r_jh * (1 - r_jk**2 - r_jh**2 - r_kh**2)
    return psi / ((1 - r_jk**2) * (1 - r_jh**2))


def test_steiger_z_uses_the_pearson_filon_covariance_at_the_pooled_correlation():
    r_jk, r_jh, r_kh, n = 0.62, 0.48, 0.55, 80
    rbar = (r_jk + r_jh) / 2
    c = _pearson_filon_covariance(rbar, rbar, r_kh)
    expected = (math.atanh(r_jk) - math.atanh(r_jh)) * math.sqrt(n - 3) / math.sqrt(2 - 2 * c)
    result = steiger_z(r_jk, r_jh, r_kh, n)
    assert result.statistic == pytest.approx(expected, rel=1e-12)
    assert result.p_value == pytest.approx(2 * stats.norm.sf(abs(expected)), rel=1e-12)


def test_williams_and_steiger_hold_their_size_when_two_judges_are_equally_good():
    """Simulation with known truth: j (human), k and h (two judges) normal with r_jk = r_jh = 0.5 and
    r_kh = 0.6; at 5 % both tests reject about 5 % of 2,000 samples of 60 items."""
    rng = np.random.default_rng(7)
    cov = np.array([[1, 0.5, 0.5], [0.5, 1, 0.6], [0.5, 0.6, 1]])
    n, runs = 60, 2000
    rejections = {"williams": 0, "steiger": 0}
    for _ in range(runs):
        sample = rng.multivariate_normal(np.zeros(3), cov, size=n)
        r = np.corrcoef(sample, rowvar=False)
        rejections["williams"] += williams_t(r[0, 1], r[0, 2], r[1, 2], n).p_value < 0.05
        rejections["steiger"] += steiger_z(r[0, 1], r[0, 2], r[1, 2], n).p_value < 0.05
    for name, count in rejections.items():
        assert 0.035 < count / runs < 0.065, (name, count / runs)


def test_closed_form_tests_refuse_undefined_inputs_with_a_reason():
    assert williams_t(float("nan"), 0.3, 0.2, 50).reason == "a correlation is undefined"
    assert steiger_z(0.3, 0.2, 0.1, 3).reason == "only 3 items: need at least 4"
    assert zou_interval(1.0, 0.2, 0.1, 50) is None


def test_fisher_intervals_use_the_published_standard_errors():
    z = math.atanh(0.5)
    half = stats.norm.ppf(0.975)
    assert fisher_interval(0.5, 50) == pytest.approx((math.tanh(z - half / math.sqrt(47)), math.tanh(z + half / math.sqrt(47))))
    bonett_wright = math.sqrt((1 + 0.125) / 47)
    assert fisher_interval(0.5, 50, method="srcc")[1] == pytest.approx(math.tanh(z + half * bonett_wright))
    fieller = math.sqrt(0.437 / 46)
    assert fisher_interval(0.5, 50, method="krcc")[0] == pytest.approx(math.tanh(z - half * fieller))
    assert fisher_interval(0.5, 4, method="krcc") is None


@pytest.mark.parametrize("n", [4, 25, 180])
def test_weighted_bootstrap_equals_scipy_on_every_resample_written_out(n):
    rng = np.random.default_rng(n)
    judge = rng.integers(0, 11, n) / 10  # a 0-10 judge, many ties
    human = np.round(rng.integers(0, 7, n) / 6, 9)  # the mean of three 0/0.5/1 raters, snapped as the report does
    counts = bootstrap_counts(n, 300, rng)
    spearman = weighted_correlations(judge, human, counts, method="srcc")
    pearson = weighted_correlations(judge, human, counts, method="plcc")
    for row, s, p in zip(counts, spearman, pearson):
        index = np.repeat(np.arange(n), row.astype(int))
        x, y = judge[index], human[index]
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            assert np.isnan(s) and np.isnan(p)
        else:
            assert s == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
            assert p == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)


def test_items_with_zero_weight_or_a_missing_side_are_not_in_the_resample():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=40), rng.normal(size=40)
    x[5] = np.nan  # a judge that did not score item 5
    counts = bootstrap_counts(40, 50, rng)
    counts[:, 7] = 0
    got = weighted_correlations(x, y, counts, method="srcc")
    for row, value in zip(counts, got):
        row = row.copy()
        row[5] = 0
        index = np.repeat(np.arange(40), row.astype(int))
        assert value == pytest.approx(stats.spearmanr(x[index], y[index])[0], abs=1e-12)


def test_paired_difference_bootstrap_equals_a_brute_force_loop():
    """Two judges against one human on the same resamples: the replicate differences equal a loop
    that draws the same resamples and calls scipy on each."""
    rng = np.random.default_rng(11)
    human = np.round(rng.integers(0, 7, 60) / 6, 9)
    first = np.clip(human + rng.normal(0, 0.2, 60), 0, 1).round(1)
    second = np.clip(human + rng.normal(0, 0.4, 60), 0, 1).round(1)
    counts = bootstrap_counts(60, 400, np.random.default_rng(0))
    diff = weighted_correlations(first, human, counts) - weighted_correlations(second, human, counts)
    brute = []
    for row in counts:
        index = np.repeat(np.arange(60), row.astype(int))
        brute.append(stats.spearmanr(first[index], human[index])[0] - stats.spearmanr(second[index], human[index])[0])
    np.testing.assert_allclose(diff, brute, atol=1e-12)
    estimate = stats.spearmanr(first, human)[0] - stats.spearmanr(second, human)[0]
    summary = summarise_replicates(estimate, diff)
    brute = np.array(brute)
    assert summary.ci95 == pytest.approx(tuple(np.percentile(brute, [2.5, 97.5])))
    far = (brute <= 0).sum() if estimate > 0 else (brute >= 0).sum()
    assert summary.p_counted == pytest.approx(min(1.0, 2 * (far + 1) / 401))
    assert summary.p_value == pytest.approx(2 * stats.norm.sf(abs(estimate) / brute.std(ddof=1)))


def test_undefined_replicates_are_counted_not_dropped_silently():
    summary = summarise_replicates(0.3, np.array([0.1, np.nan, 0.5, np.nan, 0.2]))
    assert summary.undefined == 2 and summary.n_boot == 5
    assert summary.as_dict()["bootstrap_undefined_share"] == pytest.approx(0.4)


def test_holm_matches_a_hand_computation_and_keeps_the_input_order():
    # sorted 0.01, 0.02, 0.04, 0.30 -> 4 x 0.01, max(.04, 3 x .02), max(.06, 2 x .04), max(.08, .30)
    assert holm([0.04, 0.01, 0.30, None, 0.02]) == pytest.approx([0.08, 0.04, 0.30, None, 0.06])
    assert holm([0.5, 0.9]) == [1.0, 1.0]
