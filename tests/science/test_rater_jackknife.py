"""The delete-one jackknife over items and raters (analysis.science.rater_bootstrap), the report's
two-way intervals at scale: its delete-one values against brute-force recomputation (and
krippendorff), its width against the bootstrap it stands in for, and when "auto" takes it.

Pure: runs with ``-p no:django``.
"""

import krippendorff
import numpy as np
import pandas as pd
import pytest

from analysis.science import agreement, rater_bootstrap as rb
from analysis.science.agreement import _alpha_from_full_matrix, _alpha_from_sums, agreement_estimates


def _crowd(seed=0, items=120, pool=12, per_item=3, models=2, bias_sd=0.5):
    rng = np.random.default_rng(seed)
    bias = rng.normal(0, bias_sd, pool)
    quality = rng.normal(3, 0.9, items)
    item = np.repeat(np.arange(items), per_item)
    rater = np.argsort(rng.random((items, pool)), axis=1)[:, :per_item].ravel()
    score = np.clip(np.round(quality[item] + bias[rater] + rng.normal(0, 0.6, len(item))), 1, 5)
    return pd.DataFrame({"item": [f"i{i}" for i in item], "rater": [f"r{r}" for r in rater],
                         "model": [f"m{i % models}" for i in item], "score": score})


def _codes(frame):
    unit, n_units = rb._codes(frame["item"])
    rater, n_raters = rb._codes(frame["rater"])
    categories, category = np.unique(frame["score"].to_numpy(), return_inverse=True)
    return unit, rater, category, categories, n_units, n_raters


def _alpha_kappa(frame):
    matrix = frame.pivot(index="rater", columns="item", values="score").to_numpy(float)
    return agreement_estimates(matrix)


def test_delete_one_agreement_values_are_the_statistic_recomputed_without_that_unit_or_rater():
    frame = _crowd(seed=1)
    unit, rater, category, categories, n_units, n_raters = _codes(frame)
    values, without = rb.agreement_jackknife(unit, rater, category, categories, n_units, n_raters)
    items = sorted(frame["item"].unique())
    raters = sorted(frame["rater"].unique())
    for k in (0, 7, 55):
        reference = _alpha_kappa(frame[frame["item"] != items[k]])
        for name in ("alpha_nominal", "alpha_ordinal", "alpha_interval", "fleiss_kappa"):
            assert without[name][0][k] == pytest.approx(reference[name].value, abs=1e-10)
    for k in range(n_raters):
        rest = frame[frame["rater"] != raters[k]]
        reference = _alpha_kappa(rest)
        matrix = rest.pivot(index="rater", columns="item", values="score").to_numpy(float)
        assert without["alpha_interval"][1][k] == pytest.approx(
            krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval"), abs=1e-10)
        assert without["fleiss_kappa"][1][k] == pytest.approx(reference["fleiss_kappa"].value, abs=1e-10)
    full = _alpha_kappa(frame)
    for name in values:
        assert values[name] == pytest.approx(full[name].value, abs=1e-12)


@pytest.mark.parametrize("estimator", ["item_means", "rater_means"])
def test_delete_one_mean_values_are_the_estimator_recomputed(estimator):
    frame = _crowd(seed=2, items=30, pool=6, per_item=2)
    item, n_items = rb._codes(frame["item"])
    rater, n_raters = rb._codes(frame["rater"])
    x = frame["score"].to_numpy(float)

    def estimate(f):
        first, second = ("item", "rater") if estimator == "item_means" else ("rater", "item")
        return f.groupby(first)["score"].mean().mean()

    if estimator == "item_means":
        point, without_items, without_raters = rb.mean_of_means_jackknife(item, rater, x)
    else:
        point, without_raters, without_items = rb.mean_of_means_jackknife(rater, item, x)
    assert point == pytest.approx(estimate(frame), abs=1e-12)
    items, raters = sorted(frame["item"].unique()), sorted(frame["rater"].unique())
    for k in range(n_items):
        assert without_items[k] == pytest.approx(estimate(frame[frame["item"] != items[k]]), abs=1e-12)
    for k in range(n_raters):
        assert without_raters[k] == pytest.approx(estimate(frame[frame["rater"] != raters[k]]), abs=1e-12)


def test_jackknife_width_is_the_bootstraps_at_the_size_where_auto_takes_it():
    frame = _crowd(seed=3, items=1200, pool=40, per_item=5)
    for raters in (False, True):
        _, boot = rb.agreement_intervals(frame, value="score", raters=raters, n_boot=1500, seed=1,
                                         method=rb.BOOTSTRAP)
        _, jack = rb.agreement_intervals(frame, value="score", raters=raters, method=rb.JACKKNIFE)
        for name in ("alpha_interval", "alpha_ordinal", "fleiss_kappa"):
            ratio = (jack[name].high - jack[name].low) / (boot[name].high - boot[name].low)
            assert (0.9 if not raters else 0.75) < ratio < (1.1 if not raters else 1.35), (raters, name, ratio)
            assert jack[name].method == rb.JACKKNIFE and boot[name].method == rb.BOOTSTRAP
        boot_means = rb.mean_intervals(frame, value="score", raters=raters, n_boot=1500, method=rb.BOOTSTRAP)
        jack_means = rb.mean_intervals(frame, value="score", raters=raters, method=rb.JACKKNIFE)
        for model in boot_means:
            ratio = (jack_means[model].high - jack_means[model].low) / (boot_means[model].high - boot_means[model].low)
            assert 0.85 < ratio < 1.3, (raters, model, ratio)


def test_auto_takes_the_jackknife_only_past_the_threshold(monkeypatch):
    frame = _crowd(seed=4, items=60)
    _, small = rb.agreement_intervals(frame, value="score", n_boot=200)
    assert {i.method for i in small.values()} == {rb.BOOTSTRAP}
    monkeypatch.setattr(agreement, "JACKKNIFE_ABOVE", 2_000)
    _, large = rb.agreement_intervals(frame, value="score", n_boot=200)
    assert {i.method for i in large.values()} == {rb.JACKKNIFE}
    assert {i.method for i in rb.mean_intervals(frame, value="score", n_boot=200).values()} == {rb.JACKKNIFE}
    with pytest.raises(ValueError, match="method must be one of"):
        rb.agreement_intervals(frame, value="score", method="bayes")


def test_jackknife_intervals_stay_in_range_and_say_why_when_undefined():
    frame = _crowd(seed=5, items=40)
    _, jack = rb.agreement_intervals(frame, value="score", method=rb.JACKKNIFE)
    assert all(i.high <= 1.0 for i in jack.values())
    means = rb.mean_intervals(frame, value="score", method=rb.JACKKNIFE)
    assert all(1.0 <= i.low <= i.high <= 5.0 for i in means.values())
    same = frame.assign(score=3.0)
    values, flat = rb.agreement_intervals(same, value="score", method=rb.JACKKNIFE)
    assert values["alpha_interval"] is None and flat["alpha_interval"].ci95 is None
    assert "undefined" in flat["alpha_interval"].reason
    one_rater = frame[frame["rater"] == frame["rater"].iloc[0]]
    _, alone = rb.agreement_intervals(one_rater, value="score", method=rb.JACKKNIFE)
    assert alone["fleiss_kappa"].ci95 is None
    assert np.isnan(rb.jackknife_variance(np.array([np.nan, 1.0])))  # one finite value: no variance
    assert rb.jackknife_variance(np.array([1.0, 3.0, np.nan])) == pytest.approx(0.5 * 2.0)  # (n-1)/n * sum


def test_codes_of_a_categorical_column_are_those_of_its_labels():
    labels = pd.Series(["b", "a", "c", "a", "b"])
    unused_first = pd.Series(pd.Categorical(labels, categories=["z", "c", "b", "a"]))
    for values in (labels, unused_first, labels.astype("category")):
        codes, n = rb._codes(values)
        assert n == 3 and list(codes) == [1, 0, 2, 0, 1]


def test_the_one_pass_by_model_equals_one_call_per_model_and_one_for_the_study():
    frame = _crowd(seed=6, items=150, pool=10, models=3)
    frame.loc[frame["model"] == "m1", "score"] = frame.loc[frame["model"] == "m1", "score"].clip(2, 5)  # m1 never says 1
    frame["model"] = frame["model"].astype("category")
    by = rb.agreement_jackknife_by(frame, value="score", group="model")
    assert set(by) == {None, "m0", "m1", "m2"}
    for key, subset in [(None, frame)] + [(m, frame[frame["model"] == m]) for m in ("m0", "m1", "m2")]:
        values, intervals = rb.agreement_intervals(subset, value="score", method=rb.JACKKNIFE)
        for name in values:
            assert by[key][0][name] == pytest.approx(values[name], abs=1e-12)
            assert by[key][1][name].ci95 == pytest.approx(intervals[name].ci95, abs=1e-12)
            assert by[key][1][name].method == rb.JACKKNIFE


def test_ratings_without_a_model_count_for_the_study_only():
    frame = _crowd(seed=7, items=90, pool=8, models=3)
    frame.loc[frame["model"] == "m2", "model"] = None
    by = rb.agreement_jackknife_by(frame, value="score", group="model")
    assert set(by) == {None, "m0", "m1"}
    whole, _ = rb.agreement_intervals(frame, value="score", method=rb.JACKKNIFE)
    assert by[None][0]["alpha_interval"] == pytest.approx(whole["alpha_interval"], abs=1e-12)
    alone, _ = rb.agreement_intervals(frame[frame["model"] == "m0"], value="score", method=rb.JACKKNIFE)
    assert by["m0"][0]["alpha_interval"] == pytest.approx(alone["alpha_interval"], abs=1e-12)


@pytest.mark.parametrize("n_values", [2, 5, 11])
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_alpha_from_the_upper_triangle_equals_the_full_coincidence_matrix(n_values, level):
    rng = np.random.default_rng(n_values)
    values = np.sort(rng.choice(np.arange(1, 40), n_values, replace=False)).astype(float)
    sums = rng.gamma(2.0, 3.0, (400, n_values * (n_values + 1) // 2 + 3))
    sums[:5] = 0.0  # no pairs: undefined
    sums[5:10, 1:] = 0.0  # one category only: undefined
    fast, full = _alpha_from_sums(sums, values, level), _alpha_from_full_matrix(sums, values, level)
    assert np.array_equal(np.isfinite(fast), np.isfinite(full)) and not np.isfinite(fast[:10]).any()
    assert np.allclose(fast, full, rtol=1e-13, atol=1e-13, equal_nan=True)


@pytest.mark.parametrize("categorical", [False, True])
def test_clusters_per_group_are_pandas_grouped_distinct_counts(categorical):
    # min(distinct items, distinct raters) per model and the largest model, from codes, equal
    # pandas' grouped nunique / size (rows without a model left out, as grouping leaves them)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"rater": rng.choice([f"r{i}" for i in range(30)], 5000), "item": rng.integers(0, 400, 5000),
                          "model": rng.choice(["b", "a", "c", None], 5000)})
    if categorical:
        frame = frame.astype({"rater": "category", "model": "category"})
    got, largest = rb._clusters_and_largest(frame, "model")
    grouped = frame.groupby("model", observed=True)
    want = np.minimum(grouped["item"].nunique(), grouped["rater"].nunique())
    assert list(got.index) == list(want.index) and np.array_equal(got.to_numpy(), want.to_numpy())
    assert largest == grouped.size().max()


def test_the_rater_inclusive_jackknife_interval_is_t_with_g_minus_1_df_without_the_bootstrap_inflation():
    # A mean over G = 10 raters: the delete-one jackknife variance is exactly s^2 / G (unbiased), so
    # T +- t(G - 1, 0.975) se is the exact 95 % interval. The bootstrap's cut (tail_share) multiplies
    # by a further sqrt(G / (G - 1)) to undo the bootstrap's (G - 1)/G: on the jackknife that made the
    # interval 5.4 % too wide (coverage 0.959 instead of 0.95).
    from scipy import stats

    rng = np.random.default_rng(0)
    v = rng.normal(size=10)
    without_raters = (v.sum() - v) / 9
    assert rb.jackknife_variance(without_raters) == pytest.approx(v.var(ddof=1) / 10)
    interval = rb.jackknife_interval(float(v.mean()), np.full(50, v.mean()), without_raters, kind=rb.ITEMS_RATERS,
                                     clusters=10)
    half = stats.t.ppf(0.975, 9) * v.std(ddof=1) / np.sqrt(10)
    assert interval.high - v.mean() == pytest.approx(half, rel=1e-9)
    assert v.mean() - interval.low == pytest.approx(half, rel=1e-9)
    items_only = rb.jackknife_interval(float(v.mean()), without_raters, None, kind=rb.ITEMS, clusters=10)
    assert items_only.high - v.mean() == pytest.approx(stats.norm.ppf(0.975) * v.std(ddof=1) / np.sqrt(10))
