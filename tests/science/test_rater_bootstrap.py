"""The two-way bootstrap of items and raters (analysis.science.rater_bootstrap), against oracles.

Pure: runs with ``-p no:django``.
"""

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.science.agreement import _alpha_from_weights, _unit_counts, agreement_estimates
from analysis.science.rater_bootstrap import (
    ITEMS,
    ITEMS_RATERS,
    _weighted_pearson,
    _weighted_ranks,
    agreement_intervals,
    agreement_statistics,
    correlation_intervals,
    crossed_mean_variance,
    mean_intervals,
    mean_replicates,
    multiplicities,
    pairwise_intervals,
)


def _crowd(seed=0, items=40, pool=8, per_item=3, models=2, levels=5):
    rng = np.random.default_rng(seed)
    rows = []
    bias = rng.normal(0, 0.6, pool)
    for i in range(items):
        quality = rng.normal(3, 1)
        for r in rng.choice(pool, per_item, replace=False):
            value = int(np.clip(round(quality + bias[r] + rng.normal(0, 0.5)), 1, levels))
            rows.append({"item": f"i{i}", "rater": f"r{r}", "model": f"m{i % models}", "score": value})
    return pd.DataFrame(rows)


def _matrix(frame):
    return frame.pivot(index="rater", columns="item", values="score").to_numpy(float)


# ------------------------------------------------------------------ agreement


def test_with_every_weight_one_agreement_equals_the_reference_implementation():
    frame = _crowd(seed=3)
    values, _ = agreement_intervals(frame, value="score", n_boot=0)
    reference = agreement_estimates(_matrix(frame))
    for name in ("alpha_nominal", "alpha_ordinal", "alpha_interval", "fleiss_kappa"):
        assert values[name] == pytest.approx(reference[name].value, abs=1e-12)


def test_item_weights_alone_give_the_item_bootstrap_replicates_of_analysis_agreement():
    frame = _crowd(seed=4)
    matrix = _matrix(frame)
    counts, categories = _unit_counts(matrix)
    unit, _ = pd.factorize(frame["item"], sort=True)
    cats, category = np.unique(frame["score"].to_numpy(float), return_inverse=True)
    assert np.array_equal(cats, categories)
    w = multiplicities(matrix.shape[1], 25, np.random.default_rng(1))
    ours = agreement_statistics(unit, np.ones((25, len(frame))), category, cats, w, matrix.shape[1])
    for level in ("nominal", "ordinal", "interval"):
        np.testing.assert_allclose(ours[f"alpha_{level}"], _alpha_from_weights(counts, categories, w, level),
                                   atol=1e-12)


def _brute_force_alpha_nominal(frame, v, w):
    """Nominal alpha of the data where item i appears w[i] times and rater r v[r] times, pairing only
    values of different raters (each unit's m_u values spread over its pairs of different raters)."""
    raters = sorted(frame["rater"].unique())
    items = sorted(frame["item"].unique())
    coincidence = {}
    for i, item in enumerate(items):
        values = []
        for row in frame[frame["item"] == item].itertuples():
            values += [(row.rater, row.score)] * int(v[raters.index(row.rater)])
        pairs = [(a, b) for (x, a), (y, b) in itertools.permutations(values, 2) if x != y]
        for a, b in pairs:
            coincidence[(a, b)] = coincidence.get((a, b), 0.0) + w[i] * len(values) / len(pairs)
    n_c = {}
    for (a, _), count in coincidence.items():
        n_c[a] = n_c.get(a, 0.0) + count
    n = sum(n_c.values())
    observed = sum(c for (a, b), c in coincidence.items() if a != b)
    expected = sum(n_c[a] * n_c[b] for a in n_c for b in n_c if a != b)
    return 1 - (n - 1) * observed / expected if expected else float("nan")


def test_duplicated_raters_do_not_agree_with_themselves_as_a_brute_force_count_says():
    frame = _crowd(seed=5, items=12, pool=5)
    unit, _ = pd.factorize(frame["item"], sort=True)
    rater, _ = pd.factorize(frame["rater"], sort=True)
    cats, category = np.unique(frame["score"].to_numpy(float), return_inverse=True)
    rng = np.random.default_rng(2)
    defined = 0
    for _ in range(8):
        v = multiplicities(5, 1, rng)[0]
        w = multiplicities(12, 1, rng)[0]
        ours = agreement_statistics(unit, v[rater][None], category, cats, w[None], 12)["alpha_nominal"][0]
        with np.errstate(all="ignore"):
            brute = _brute_force_alpha_nominal(frame, v, w)
        np.testing.assert_allclose(ours, brute, atol=1e-12, equal_nan=True)
        defined += bool(np.isfinite(ours))
    assert defined >= 5


def test_agreement_of_identical_ratings_is_undefined_and_its_resamples_are_counted():
    frame = _crowd(seed=6).assign(score=3)
    values, intervals = agreement_intervals(frame, value="score", n_boot=50)
    assert values["alpha_nominal"] is None
    interval = intervals["alpha_nominal"]
    assert interval.ci95 is None and interval.undefined == 50 and "0 of 50" in interval.reason


def test_rater_inclusive_agreement_intervals_are_wider_and_alpha_stays_at_most_one():
    frame = _crowd(seed=7, items=60, pool=6)
    _, items = agreement_intervals(frame, value="score", raters=False, n_boot=300, seed=1)
    _, both = agreement_intervals(frame, value="score", raters=True, n_boot=300, seed=1)
    for name in ("alpha_interval", "fleiss_kappa"):
        assert items[name].kind == ITEMS and both[name].kind == ITEMS_RATERS
        assert both[name].high - both[name].low > items[name].high - items[name].low
        assert both[name].high <= 1.0


# ------------------------------------------------------------------ means


def _complete(seed, items=30, raters=6):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (items, 1)) + rng.normal(0, 0.8, (1, raters)) + rng.normal(0, 0.5, (items, raters))
    frame = pd.DataFrame([{"item": i, "rater": r, "model": "m", "score": x[i, r]}
                          for i in range(items) for r in range(raters)])
    return x, frame


def test_the_bootstrap_variance_of_a_mean_matches_owens_closed_form():
    x, frame = _complete(seed=8)
    replicates = mean_replicates(frame, value="score", n_boot=20_000, seed=3)["m"]
    assert np.var(replicates) == pytest.approx(crossed_mean_variance(x), rel=0.05)
    # items alone: the variance of the mean of row means over n items drawn with replacement
    items_only = mean_replicates(frame, value="score", raters=False, n_boot=20_000, seed=3)["m"]
    row_means = x.mean(axis=1)
    assert np.var(items_only) == pytest.approx(np.var(row_means) / len(row_means), rel=0.05)


def test_the_bootstrap_variance_of_a_mean_is_at_least_the_crossed_random_effects_variance():
    """Method-of-moments (two-way ANOVA) estimate of Var(mean) = s_item^2/I + s_rater^2/R + s_e^2/(IR)
    for the crossed random-effects model; Owen's bootstrap errs on the wide side by about one
    residual share, never below."""
    for seed in range(3):
        x, frame = _complete(seed=10 + seed)
        n_items, n_raters = x.shape
        grand = x.mean()
        ms_items = n_raters * ((x.mean(axis=1) - grand) ** 2).sum() / (n_items - 1)
        ms_raters = n_items * ((x.mean(axis=0) - grand) ** 2).sum() / (n_raters - 1)
        resid = x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + grand
        ms_error = (resid**2).sum() / ((n_items - 1) * (n_raters - 1))
        var_items = max((ms_items - ms_error) / n_raters, 0)
        var_raters = max((ms_raters - ms_error) / n_items, 0)
        mixed = var_items / n_items + var_raters / n_raters + ms_error / (n_items * n_raters)
        boot = np.var(mean_replicates(frame, value="score", n_boot=8_000, seed=seed)["m"])
        assert 0.75 * mixed <= boot <= 1.3 * mixed


def test_mean_intervals_stay_inside_the_scale_where_a_t_interval_would_not():
    rng = np.random.default_rng(9)
    frame = pd.DataFrame([{"item": i, "rater": r, "model": "m", "score": float(rng.random() < 0.97)}
                          for i in range(20) for r in range(3)])
    interval = mean_intervals(frame, value="score", estimator="rater_means", n_boot=500)["m"]
    assert 0.0 <= interval.low <= interval.high <= 1.0


def test_one_rater_or_one_item_has_no_rater_inclusive_interval_and_says_why():
    frame = _crowd(seed=11).assign(rater="only")
    interval = mean_intervals(frame, value="score", n_boot=100)["m0"]
    assert interval.ci95 is None and "1 rater(s)" in interval.reason
    assert mean_intervals(frame, value="score", raters=False, n_boot=100)["m0"].ci95 is not None
    single = _crowd(seed=11).query("item == 'i0'")
    assert "1 item(s)" in mean_intervals(single, value="score", n_boot=100)["m0"].reason


def test_the_rater_means_estimator_weights_raters_as_imagenhub_table_4():
    frame = _crowd(seed=12, items=20, pool=4, per_item=2)
    replicates = mean_replicates(frame, value="score", estimator="rater_means", n_boot=1, seed=0)
    # with weights of one the estimator is the mean of per-rater means
    weights_one = mean_replicates(frame, value="score", estimator="rater_means", raters=False, n_boot=1, seed=0)
    assert set(replicates) == set(weights_one) == {"m0", "m1"}
    from analysis.science.rater_bootstrap import _matrix as sparse_of, _weighted_mean

    part = frame[frame["model"] == "m0"]
    item, _ = pd.factorize(part["item"], sort=True)
    rater, raters = pd.factorize(part["rater"], sort=True)
    sums = sparse_of(rater, item, part["score"].to_numpy(float), (len(raters), item.max() + 1))
    counts = sparse_of(rater, item, np.ones(len(part)), (len(raters), item.max() + 1))
    value = _weighted_mean(sums, counts, np.ones((1, item.max() + 1)), np.ones((1, len(raters))), "rater_means")
    assert value[0] == pytest.approx(part.groupby("rater")["score"].mean().mean())


# ------------------------------------------------------------------ correlation


def test_weighted_ranks_and_correlations_equal_scipy_on_the_expanded_sample():
    rng = np.random.default_rng(13)
    x = rng.integers(0, 6, (30, 15)).astype(float)
    y = x + rng.integers(0, 4, (30, 15))
    w = rng.integers(0, 3, (30, 15)).astype(float)
    spearman = _weighted_pearson(_weighted_ranks(x, w), _weighted_ranks(y, w), w)
    pearson = _weighted_pearson(x, y, w)
    for b in range(30):
        xe, ye = np.repeat(x[b], w[b].astype(int)), np.repeat(y[b], w[b].astype(int))
        assert spearman[b] == pytest.approx(stats.spearmanr(xe, ye).statistic, abs=1e-12)
        assert pearson[b] == pytest.approx(stats.pearsonr(xe, ye).statistic, abs=1e-12)


def test_correlation_intervals_cover_the_point_estimate_and_widen_with_raters():
    frame = _crowd(seed=14, items=80, pool=6)
    rng = np.random.default_rng(0)
    human = frame.groupby("item")["score"].mean()
    judge = human + rng.normal(0, 0.5, len(human))
    items = correlation_intervals(frame, judge, value="score", raters=False, n_boot=400)
    both = correlation_intervals(frame, judge, value="score", raters=True, n_boot=400)
    rho = stats.spearmanr(judge, human).statistic
    assert items["spearman"].low < rho < items["spearman"].high
    assert both["spearman"].high - both["spearman"].low > items["spearman"].high - items["spearman"].low
    negated = correlation_intervals(frame, -judge, value="score", raters=False, lower_is_better=True, n_boot=400)
    assert negated["pearson"].ci95 == pytest.approx(items["pearson"].ci95)


# ------------------------------------------------------------------ pairwise


def test_pairwise_intervals_contain_the_estimates_and_clustering_by_rater_widens_them():
    rng = np.random.default_rng(15)
    strengths = np.array([-0.5, 0.0, 0.5])
    taste = rng.normal(0, 0.8, (6, 3))
    rows = []
    for item in range(90):
        a, b = rng.choice(3, 2, replace=False)
        for rater in rng.choice(6, 3, replace=False):
            p = 1 / (1 + np.exp(-(strengths[a] + taste[rater, a] - strengths[b] - taste[rater, b])))
            rows.append({"item": item, "rater": rater, "model_a": a, "model_b": b,
                         "preference": "A" if rng.random() < p else "B"})
    frame = pd.DataFrame(rows)
    items = pairwise_intervals(frame, raters=False, n_boot=150)
    both = pairwise_intervals(frame, raters=True, n_boot=150)
    widths = [(both[m]["bt"].high - both[m]["bt"].low) / (items[m]["bt"].high - items[m]["bt"].low) for m in range(3)]
    assert np.mean(widths) > 1.0
    for m in range(3):
        assert 0.0 <= both[m]["win_rate"].low <= both[m]["win_rate"].high <= 1.0


def test_ranks_of_a_fixed_vector_equal_the_general_weighted_ranks():
    from analysis.science.rater_bootstrap import _fixed_order_ranks

    rng = np.random.default_rng(16)
    x = rng.integers(0, 5, 20).astype(float)
    w = rng.integers(0, 3, (40, 20)).astype(float)
    np.testing.assert_allclose(_fixed_order_ranks(x, np.argsort(x, kind="stable"), w),
                               _weighted_ranks(np.broadcast_to(x, w.shape), w))


def test_multiplicities_are_draws_with_replacement_that_sum_to_n():
    counts = multiplicities(7, 5000, np.random.default_rng(0))
    assert (counts.sum(axis=1) == 7).all() and counts.min() >= 0
    assert counts.mean(axis=0) == pytest.approx(np.ones(7), abs=0.05)
    assert counts.var(axis=0) == pytest.approx(np.full(7, 6 / 7), rel=0.1)  # multinomial: n p (1 - p)


def test_judges_on_the_same_items_reuse_the_human_resamples_and_get_the_same_intervals():
    from analysis.science.rater_bootstrap import HumanReplicates

    frame = _crowd(seed=17, items=50, pool=6)
    rng = np.random.default_rng(1)
    human = frame.groupby("item")["score"].mean()
    reuse = HumanReplicates()
    for _ in range(3):
        judge = human + rng.normal(0, 0.7, len(human))
        fresh = correlation_intervals(frame, judge, value="score", n_boot=200, seed=4)
        shared = correlation_intervals(frame, judge, value="score", n_boot=200, seed=4, reuse=reuse)
        assert shared == fresh
    assert len(reuse._store) == 1
    tiny = HumanReplicates(budget_bytes=1000)  # too small to keep anything: still the same answer
    assert correlation_intervals(frame, judge, value="score", n_boot=200, seed=4, reuse=tiny) == fresh
    assert not tiny._store


def test_few_raters_widen_the_percentiles_as_a_t_with_g_minus_1_degrees_of_freedom():
    from analysis.science.rater_bootstrap import percentile_interval, tail_share

    z = stats.t.ppf(0.975, 9) * np.sqrt(10 / 9)
    assert tail_share(10) == pytest.approx(stats.norm.cdf(-z)) and tail_share(None) == 0.025
    assert tail_share(10) < tail_share(30) < tail_share(1000) < 0.025
    replicates = np.random.default_rng(0).normal(size=4000)
    items = percentile_interval(replicates, kind=ITEMS, n_boot=4000, clusters=10)
    both = percentile_interval(replicates, kind=ITEMS_RATERS, n_boot=4000, clusters=10)
    assert (items.low, items.high) == tuple(np.percentile(replicates, [2.5, 97.5]))  # item intervals: as ever
    assert both.low < items.low and both.high > items.high
    assert both.low >= replicates.min() and both.high <= replicates.max()  # still percentiles: in range
