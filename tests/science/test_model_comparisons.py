"""All model pairs with Holm and bootstrap rank intervals (analysis.science.model_comparisons), without Django.

Oracles: a brute-force loop that writes every resample of instances out (same counts), and
simulations with known truth (models far apart are separated and ranked tightly; equal models are not).
"""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.science.correlation_tests import bootstrap_counts, summarise_columns, summarise_replicates
from analysis.science.model_comparisons import compare_models


def _items(true_means, n=60, sd=0.3, seed=0, missing=0.0):
    rng = np.random.default_rng(seed)
    prompt_effect = rng.normal(0, 0.3, n)  # all models answer the same prompts: paired
    rows = []
    for model, mean in true_means.items():
        for i in range(n):
            if rng.uniform() >= missing:
                rows.append((model, f"p{i}", mean + prompt_effect[i] + rng.normal(0, sd)))
    return pd.DataFrame(rows, columns=["model", "instance", "score"])


@pytest.mark.parametrize("missing", [0.1, 0.0], ids=["some-missing", "complete"])  # complete: the fast path
def test_pairs_and_ranks_equal_a_brute_force_loop_over_the_same_resamples(missing):
    items = _items({"A": 0.6, "B": 0.5, "C": 0.45, "D": 0.2}, n=25, missing=missing)
    result = compare_models(items, n_boot=200, seed=4)
    wide = items.pivot_table(index="instance", columns="model", values="score")
    order = list(result["ranks"])
    assert order == list(wide.mean().sort_values(ascending=False).index)
    wide = wide[order]
    counts = bootstrap_counts(len(wide), 200, np.random.default_rng(4))
    rep_means, diffs = [], {}
    for row in counts:
        resample = wide.iloc[np.repeat(np.arange(len(wide)), row.astype(int))]
        rep_means.append(resample.mean().to_numpy())
        for a in range(4):
            for b in range(a + 1, 4):
                both = resample[[order[a], order[b]]].dropna()
                diffs.setdefault((order[a], order[b]), []).append((both[order[a]] - both[order[b]]).mean())
    rep_means = np.array(rep_means)
    ranks = stats.rankdata(-rep_means, method="min", axis=1)
    for k, model in enumerate(order):
        expected = [int(np.percentile(ranks[:, k], 2.5, method="lower")),
                    int(np.percentile(ranks[:, k], 97.5, method="higher"))]
        assert result["ranks"][model]["rank_ci95"] == expected
        assert result["ranks"][model]["bootstrap_undefined_share"] == 0.0
    for pair in result["pairs"]:
        brute = np.array(diffs[pair["first"], pair["second"]])
        assert pair["ci95"] == pytest.approx(list(np.percentile(brute, [2.5, 97.5])), abs=1e-12)


def test_models_far_apart_are_all_separated_and_equal_models_are_not():
    result = compare_models(_items({"A": 0.9, "B": 0.6, "C": 0.3, "D": 0.3}, n=80), n_boot=500)
    separated = {(p["first"], p["second"]): p["separated"] for p in result["pairs"]}
    assert separated[("A", "B")] and separated[("B", "C")] and separated[("A", "D")]
    assert not separated.get(("C", "D"), separated.get(("D", "C")))
    assert result["ranks"]["A"]["rank_ci95"] == [1, 1]
    tied = [result["ranks"][m]["rank_ci95"] for m in ("C", "D")]
    assert all(interval == [3, 4] for interval in tied)
    assert all(p["p_holm"] >= p["p"] for p in result["pairs"])


def test_holm_keeps_the_family_wise_error_when_no_model_differs():
    """Six equal models (15 pairs): with Holm, a false 'separated' anywhere in the table happens in
    about 5 % of studies or fewer; unadjusted, in far more."""
    any_holm = any_raw = 0
    runs = 60
    for seed in range(runs):
        result = compare_models(_items({m: 0.5 for m in "ABCDEF"}, n=40, seed=seed), n_boot=200, seed=seed)
        any_holm += any(p["separated"] for p in result["pairs"])
        any_raw += any(p["p"] < 0.05 for p in result["pairs"])
    assert any_holm / runs <= 0.12
    assert any_raw > any_holm


def test_lower_is_better_ranks_the_smallest_first_and_no_bootstrap_gives_no_intervals():
    result = compare_models(_items({"A": 0.2, "B": 0.8}), n_boot=0, higher_is_better=False)
    assert list(result["ranks"]) == ["A", "B"] and result["ranks"]["A"]["rank_ci95"] is None
    assert result["pairs"][0]["difference"] < 0 and result["pairs"][0]["p_holm"] is None
    assert compare_models(pd.DataFrame(columns=["model", "instance", "score"]))["pairs"] == []


def test_a_model_missing_from_a_resample_is_counted_as_undefined():
    items = pd.concat([_items({"A": 0.5, "B": 0.4}, n=30),
                       pd.DataFrame({"model": ["C"], "instance": ["p0"], "score": [0.9]})])
    result = compare_models(items, n_boot=300)
    share = result["ranks"]["C"]["bootstrap_undefined_share"]
    assert 0.25 < share < 0.5  # (29/30)^30 = 36 % of resamples never draw p0, C's only instance


def test_reusing_the_resample_counts_gives_the_same_comparisons():
    items = _items({"A": 0.6, "B": 0.5, "C": 0.45}, n=30)
    reuse = {}
    first = compare_models(items, n_boot=150, seed=2, reuse=reuse)
    again = compare_models(items.assign(score=items["score"] * 2), n_boot=150, seed=2, reuse=reuse)
    assert len(reuse) == 1
    fresh = compare_models(items.assign(score=items["score"] * 2), n_boot=150, seed=2)
    assert again == fresh and first["ranks"] == compare_models(items, n_boot=150, seed=2)["ranks"]


def test_a_resample_that_is_zero_up_to_rounding_counts_as_zero():
    exact = summarise_replicates(0.2, np.array([0.3, 0.0, 0.1, 0.2]))
    noisy = summarise_replicates(0.2, np.array([0.3, 1e-17, 0.1, 0.2]))
    assert exact.p_counted == noisy.p_counted == pytest.approx(2 * 2 / 5)
    assert summarise_replicates(-0.2, np.array([-0.3, -1e-17, -0.1])).p_counted == pytest.approx(2 * 2 / 4)


def test_discrete_scores_count_the_same_far_resamples_as_a_brute_force_loop():
    """ImagenHub-like scores (thirds): many resampled differences are exactly zero, which the fast
    path (differences of the models' replicate sums) and the brute force reach by other roundings."""
    rng = np.random.default_rng(8)
    rows = [(m, f"p{i}", round(rng.integers(0, 4) / 3 + (0.1 if m == "A" else 0.0), 6))
            for m in ("A", "B", "C") for i in range(12)]
    items = pd.DataFrame(rows, columns=["model", "instance", "score"])
    result = compare_models(items, n_boot=300, seed=1)
    wide = items.pivot_table(index="instance", columns="model", values="score")[list(result["ranks"])]
    counts = bootstrap_counts(len(wide), 300, np.random.default_rng(1))
    for pair in result["pairs"]:
        gaps = (wide[pair["first"]] - wide[pair["second"]]).to_numpy()
        brute = np.array([np.repeat(gaps, row.astype(int)).mean() for row in counts])
        assert pair["p_counted"] == summarise_replicates(pair["difference"], brute).p_counted


def test_summarising_columns_at_once_equals_one_column_at_a_time():
    rng = np.random.default_rng(3)
    replicates = rng.normal(0.1, 0.2, (400, 6))
    replicates[:, 3] = np.round(replicates[:, 3], 1)  # ties and exact zeros
    replicates[7, 4] = np.nan  # an undefined resample: that column goes alone
    estimates = np.array([0.1, -0.05, 0.0, 0.1, 0.2, 1e-3])
    for summary, k in zip(summarise_columns(estimates, replicates), range(6)):
        alone = summarise_replicates(float(estimates[k]), replicates[:, k])
        assert summary.ci95 == alone.ci95 and summary.p_counted == alone.p_counted
        assert summary.undefined == alone.undefined and summary.n_boot == alone.n_boot
        assert summary.p_value == pytest.approx(alone.p_value, rel=1e-9)
