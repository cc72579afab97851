import krippendorff
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from analysis.science.agreement import (
    LEVELS,
    _alpha_from_weights,
    _unit_counts,
    agreement_table,
    fleiss_kappa,
    krippendorff_alpha,
)

# Fleiss (1971) / Wikipedia example: 10 subjects, 14 raters, 5 categories -> kappa 0.210.
FLEISS_COUNTS = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]


def matrix_from_counts(counts):
    """raters x units matrix whose unit j holds counts[j][c] ratings of category c."""
    columns = [np.repeat(np.arange(len(row)), row) for row in counts]
    return np.array(columns, dtype=float).T


def test_fleiss_kappa_matches_the_textbook_example():
    assert fleiss_kappa(matrix_from_counts(FLEISS_COUNTS)).value == pytest.approx(0.2099, abs=1e-4)


def test_fleiss_kappa_ignores_units_with_a_single_rating():
    paired = np.array([[1, 0, 1, 0, 1], [1, 0, 0, 0, 1], [1, 1, 1, 0, np.nan]])
    with_lonely_unit = np.hstack([paired, np.array([[1.0], [np.nan], [np.nan]])])
    estimate = fleiss_kappa(with_lonely_unit)
    assert estimate.n_units == 5
    assert estimate.value == pytest.approx(fleiss_kappa(paired).value)


def test_krippendorff_alpha_matches_the_package_on_its_own_example():
    # Krippendorff (2011) "Computing Krippendorff's alpha-reliability", example C.
    data = np.array(
        [
            [1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
            [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan],
        ]
    )
    assert krippendorff_alpha(data, level="nominal").value == pytest.approx(0.743, abs=1e-3)
    assert krippendorff_alpha(data, level="interval").value == pytest.approx(0.849, abs=1e-3)


@pytest.mark.parametrize("level", LEVELS)
def test_bootstrap_engine_reproduces_the_package_point_estimate(level):
    rng = np.random.default_rng(7)
    for _ in range(10):
        data = rng.integers(1, 6, size=(4, 25)).astype(float)
        data[rng.random(data.shape) < 0.25] = np.nan
        counts, values = _unit_counts(data)
        ours = _alpha_from_weights(counts, values, np.ones((1, counts.shape[0])), level)[0]
        reference = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        assert ours == pytest.approx(reference, abs=1e-9)


def test_alpha_is_null_with_reason_when_only_one_value_is_present():
    estimate = krippendorff_alpha(np.zeros((3, 10)), level="ordinal", n_boot=100)
    assert estimate.value is None and estimate.ci95 is None
    assert "only one value present (0)" in estimate.reason


def test_alpha_is_null_with_reason_with_a_single_rater():
    estimate = krippendorff_alpha(np.array([[0.0, 0.5, 1.0]]))
    assert estimate.value is None
    assert "fewer than 2 ratings" in estimate.reason


def test_bootstrap_ci_is_seeded_and_brackets_the_estimate():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 80)
    data = np.vstack([np.where(rng.random(80) < 0.8, truth, rng.integers(0, 3, 80)) for _ in range(3)]).astype(float)
    first = krippendorff_alpha(data, level="ordinal", n_boot=400, seed=3)
    again = krippendorff_alpha(data, level="ordinal", n_boot=400, seed=3)
    assert first == again
    assert first.ci95[0] < first.value < first.ci95[1]
    kappa = fleiss_kappa(data, n_boot=400, seed=3)
    assert kappa.ci95[0] < kappa.value < kappa.ci95[1]


def test_whole_study_agreement_treats_model_item_pairs_as_units():
    ratings = pd.DataFrame(
        {
            "rater": ["a", "b"] * 4,
            "model": ["m1"] * 4 + ["m2"] * 4,
            "item": ["p1", "p1", "p2", "p2"] * 2,
            "score": [1, 1, 0, 0, 0, 0, 1, 1],
        }
    )
    table = agreement_table(ratings, scores=["score"], by=(), levels=["nominal"], kappa=False, n_boot=0)
    assert table.loc[0, "n_units"] == 4
    assert table.loc[0, "value"] == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(2, 5), st.integers(2, 12)), elements=st.sampled_from([0.0, 0.5, 1.0, np.nan])),
    st.sampled_from(LEVELS),
)
def test_alpha_never_exceeds_one_and_is_none_or_finite(data, level):
    estimate = krippendorff_alpha(data, level=level)
    if estimate.value is None:
        assert estimate.reason
    else:
        assert np.isfinite(estimate.value) and estimate.value <= 1.0 + 1e-12


def test_collapsing_units_with_equal_counts_into_patterns_keeps_alpha_and_kappa():
    from analysis.science.agreement import _alpha_from_sums, _kappa_from_sums, _weighted_sums, agreement_estimates

    rng = np.random.default_rng(11)
    data = rng.integers(1, 4, size=(5, 400)).astype(float)
    data[rng.random(data.shape) < 0.2] = np.nan
    counts, values = _unit_counts(data)
    patterns, frequency = np.unique(counts, axis=0, return_counts=True)
    assert len(patterns) < len(counts)
    sums = _weighted_sums(patterns, [frequency[None, :].astype(float)])
    point = agreement_estimates(data, levels=LEVELS, kappa=True)
    for level in LEVELS:
        assert _alpha_from_sums(sums, values, level)[0] == pytest.approx(point[f"alpha_{level}"].value, abs=1e-9)
    assert _kappa_from_sums(sums, len(values))[0] == pytest.approx(point["fleiss_kappa"].value, abs=1e-12)
    with_ci = agreement_estimates(data, levels=LEVELS, kappa=True, n_boot=300, seed=1)
    for estimate in with_ci.values():
        assert estimate.ci95[0] < estimate.value < estimate.ci95[1]


def test_agreement_table_from_long_ratings_equals_the_matrix_path_with_the_package_alpha():
    from analysis.science.agreement import agreement_estimates, reliability_matrix

    rng = np.random.default_rng(21)
    for trial in range(20):
        n = 300
        ratings = pd.DataFrame({
            "rater": rng.choice([f"r{i}" for i in range(5)], n), "item": rng.integers(0, 30, n),
            "model": rng.choice(["m1", "m2", "m3"], n), "score": rng.choice([1.0, 2.0, 3.0, 4.0, np.nan], n),
        })  # duplicates (a rater rating an item twice) and gaps on purpose
        table = agreement_table(ratings, scores=["score"], by=("model",), levels=LEVELS, kappa=True,
                                n_boot=120 if trial % 2 else 0, seed=trial)
        for model, group in ratings.groupby("model"):
            rows = table[table["model"] == model]
            matrix = reliability_matrix(group, score="score")
            expected = agreement_estimates(matrix, levels=LEVELS, kappa=True, n_boot=120 if trial % 2 else 0,
                                           seed=trial)
            for row in rows.itertuples():
                assert row.model == model
                est = expected[row.measure]
                assert row.n_units == est.n_units
                if row.measure.startswith("alpha_"):
                    package = krippendorff.alpha(reliability_data=np.round(matrix, 9),
                                                 level_of_measurement=row.measure.removeprefix("alpha_"))
                    assert row.value == pytest.approx(package, abs=1e-9)
                assert row.value == pytest.approx(est.value, abs=1e-12)
                if est.ci95:  # same seed, same resampled units: the same interval
                    assert (row.ci_low, row.ci_high) == pytest.approx(est.ci95, abs=1e-12)


def test_groups_of_equal_size_share_draws_but_get_the_same_weights_as_fresh_draws():
    from analysis.science.agreement import _bootstrap_weights, _SharedDraws

    rng = np.random.default_rng(5)
    shared = _SharedDraws()
    for _ in range(3):
        frequency = rng.multinomial(200, np.ones(60) / 60)
        frequency = frequency[frequency > 0]  # many patterns for 200 units: the position-draw path
        fresh = np.vstack(list(_bootstrap_weights(frequency, 500, 7)))
        reused = np.vstack(list(_bootstrap_weights(frequency, 500, 7, shared)))
        assert np.array_equal(fresh, reused)
        assert (fresh.sum(axis=1) == 200).all()


def test_agreement_for_several_groupings_equals_one_call_per_grouping():
    from analysis.science.agreement import agreement_tables

    rng = np.random.default_rng(8)
    n = 500
    ratings = pd.DataFrame({
        "rater": rng.choice([f"r{i}" for i in range(6)], n), "item": rng.integers(0, 40, n),
        "model": rng.choice(["m1", "m2", "m3"], n), "judge": rng.choice(["j1", "j2"], n),
        "SC": rng.choice([0.0, 0.5, 1.0, np.nan], n), "PQ": rng.choice([1.0, 2.0, 3.0], n),
    })
    groupings = [("model",), (), ("judge",)]  # per judge the units differ: counted on their own
    together = agreement_tables(ratings, scores=["SC", "PQ"], groupings=groupings, levels=LEVELS, n_boot=100, seed=4)
    for by, table in zip(groupings, together):
        alone = agreement_table(ratings, scores=["SC", "PQ"], by=by, levels=LEVELS, n_boot=100, seed=4)
        pd.testing.assert_frame_equal(table, alone)


def test_count_patterns_equal_numpy_row_unique():
    from analysis.science.agreement import _patterns

    rng = np.random.default_rng(3)
    for n_values in (1, 3, 7):
        counts = rng.integers(0, 4, size=(500, n_values)).astype(float)
        patterns, frequency = _patterns(counts)
        expected, expected_frequency = np.unique(counts, axis=0, return_counts=True)
        assert np.array_equal(patterns, expected) and np.array_equal(frequency, expected_frequency)


@pytest.mark.parametrize("shared_cells", [8_000_000, 2_000])  # one product, or batches of a few groups
def test_a_batch_of_groups_gets_the_replicates_each_group_would_get_alone(monkeypatch, shared_cells):
    from analysis.science import agreement

    monkeypatch.setattr(agreement, "_SHARED_CELLS", shared_cells)
    rng = np.random.default_rng(12)
    batch = agreement._ReplicateBatch(300, 3)
    expected, slots = [], []
    for units, values in [(200, 4), (200, 3), (150, 4), (200, 5), (2000, 2)]:  # the last: few patterns
        counts = np.zeros((units, values))
        for u in range(units):
            counts[u] = np.bincount(rng.integers(0, values, rng.integers(1, 7)), minlength=values)
        patterns, frequency = agreement._patterns(counts)
        expected.append(agreement._weighted_sums(patterns, agreement._bootstrap_weights(frequency, 300, 3)))
        slots.append(batch.add(patterns, frequency))
    batch.run()
    for want, slot in zip(expected, slots):
        assert slot[0].shape == want.shape
        np.testing.assert_allclose(slot[0], want, rtol=1e-12, atol=1e-9)


def test_kappa_from_the_coincidence_row_sums_equals_fleiss_from_the_counts():
    from analysis.science.agreement import fleiss_kappa

    rng = np.random.default_rng(13)
    for _ in range(20):
        data = rng.integers(1, 5, size=(rng.integers(3, 8), 60)).astype(float)
        data[rng.random(data.shape) < 0.25] = np.nan
        counts, _ = _unit_counts(data)
        counts = counts[counts.sum(axis=1) >= 2]
        m = counts.sum(axis=1)
        p_bar = (((counts**2).sum(axis=1) - m) / (m * (m - 1))).mean()
        p_e = ((counts.sum(axis=0) / m.sum()) ** 2).sum()
        assert fleiss_kappa(data).value == pytest.approx((p_bar - p_e) / (1 - p_e), abs=1e-12)


@pytest.mark.parametrize("rate", [None, 0.0, 1.6])  # default; all units topped up; most replicates over n
def test_pattern_counts_of_a_replicate_follow_the_exact_multinomial(rate):
    from scipy import stats

    from analysis.science.agreement import _multinomial_counts

    frequency = np.array([5, 3, 2])  # 10 units in 3 patterns: every outcome's probability is known
    counts = _multinomial_counts(np.random.default_rng(1), frequency, 40_000, rate=rate)
    assert (counts.sum(axis=1) == 10).all() and (counts >= 0).all()
    outcomes, seen = np.unique(counts, axis=0, return_counts=True)
    expected = stats.multinomial(10, frequency / 10).pmf(outcomes) * len(counts)
    assert expected.sum() > 0.999 * len(counts)  # (almost) every possible outcome was drawn
    chi2 = ((seen - expected) ** 2 / expected).sum()
    assert chi2 < stats.chi2.ppf(0.999, len(outcomes) - 1)


def _likert_panel(rng, n_units, n_raters=4, n_models=3):
    """Long ratings: per-model offset, per-unit true score, per-rating noise; 1-5 points."""
    model = np.repeat(np.arange(n_models), n_units // n_models)
    truth = rng.normal(0, 1, len(model)) + 0.4 * model
    scores = np.clip(np.rint(3 + truth[:, None] + rng.normal(0, 0.9, (len(model), n_raters))), 1, 5)
    return scores.T  # raters x units


def test_study_bootstrap_keeps_the_point_estimates_and_the_interval_width_and_coverage_of_the_old_draws(monkeypatch):
    """The pattern counts used to come from rng.multinomial; they are now drawn as Poisson counts
    topped up to n. Same distribution: over 30 data sets the intervals are as wide (within 15 %)
    and cover the population value as often; point estimates do not depend on the draws."""
    from analysis.science import agreement

    def old_draws(rng, frequency, size, rate=None):
        return rng.multinomial(int(frequency.sum()), frequency / frequency.sum(), size=size)

    population = agreement_estimates_of(_likert_panel(np.random.default_rng(99), 300_000), n_boot=0)
    widths = {"old": [], "new": []}
    covered = {"old": 0, "new": 0}
    for seed in range(30):
        data = _likert_panel(np.random.default_rng(seed), 900)
        counts, _ = _unit_counts(data)
        assert len(np.unique(counts, axis=0)) * 8 <= counts.shape[0]  # the multinomial path
        new = agreement_estimates_of(data, n_boot=400, seed=seed)
        with monkeypatch.context() as patched:
            patched.setattr(agreement, "_multinomial_counts", old_draws)
            old = agreement_estimates_of(data, n_boot=400, seed=seed)
        for name in new:
            assert new[name].value == old[name].value
            for label, estimate in (("old", old[name]), ("new", new[name])):
                low, high = estimate.ci95
                widths[label].append(high - low)
                covered[label] += low <= population[name].value <= high
    ratio = np.mean(widths["new"]) / np.mean(widths["old"])
    assert 0.85 < ratio < 1.15
    measures = 30 * len(population)
    assert covered["new"] >= 0.85 * measures
    assert abs(covered["new"] - covered["old"]) <= 0.05 * measures


def agreement_estimates_of(data, *, n_boot, seed=0):
    from analysis.science.agreement import agreement_estimates

    return agreement_estimates(data, levels=LEVELS, kappa=True, n_boot=n_boot, seed=seed)
