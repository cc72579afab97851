import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.science.zmos import item_mos, model_mos, zscore_by_rater


def make_ratings(n_raters=5, n_items=12, seed=0, models=("m1", "m2")):
    rng = np.random.default_rng(seed)
    quality = rng.normal(3, 1, n_items)
    rows = []
    for r in range(n_raters):
        offset, scale = rng.normal(0, 0.5), rng.uniform(0.5, 1.5)
        for i in range(n_items):
            rows.append((f"rater{r}", f"item{i}", models[i % len(models)], offset + scale * quality[i] + rng.normal(0, 0.3)))
    return pd.DataFrame(rows, columns=["rater", "item", "model", "score"])


def test_z_scores_are_rescaled_so_minus_three_to_three_maps_to_0_to_100():
    ratings = pd.DataFrame({"rater": ["a"] * 3, "item": ["x", "y", "z"], "score": [1.0, 2.0, 3.0]})
    scored, excluded = zscore_by_rater(ratings)
    assert not excluded
    assert scored["z"].tolist() == pytest.approx([-1.0, 0.0, 1.0])  # sigma ddof=1 = 1
    assert scored["z_scaled"].tolist() == pytest.approx([100 * 2 / 6, 50.0, 100 * 4 / 6])


def test_rater_with_identical_ratings_is_excluded_with_reason():
    ratings = make_ratings()
    ratings.loc[ratings["rater"] == "rater2", "score"] = 4.0
    result = item_mos(ratings)
    assert set(result.excluded) == {"rater2"}
    assert "sigma = 0" in result.excluded["rater2"]
    assert (result.table["n"] == 4).all()


def test_rater_with_a_single_rating_is_excluded_with_reason():
    ratings = pd.concat(
        [make_ratings(), pd.DataFrame([{"rater": "once", "item": "item0", "model": "m1", "score": 5.0}])]
    )
    result = item_mos(ratings)
    assert "only one rating" in result.excluded["once"]


def test_everyone_excluded_gives_an_empty_table_not_a_crash():
    ratings = pd.DataFrame({"rater": ["a", "a", "b"], "item": ["x", "y", "x"], "score": [2.0, 2.0, 1.0]})
    result = item_mos(ratings)
    assert result.table.empty
    assert set(result.excluded) == {"a", "b"}


def test_item_t_interval_brackets_the_mos():
    table = item_mos(make_ratings(n_raters=8)).table
    assert (table["ci_low"] < table["mos"]).all() and (table["mos"] < table["ci_high"]).all()


def test_bootstrap_intervals_are_seeded():
    ratings = make_ratings(n_raters=8)
    first = model_mos(ratings, ci="bootstrap", n_boot=300, seed=5).table
    again = model_mos(ratings, ci="bootstrap", n_boot=300, seed=5).table
    pd.testing.assert_frame_equal(first, again)
    assert (first["ci_low"] < first["mos"]).all() and (first["mos"] < first["ci_high"]).all()


def test_model_mos_is_the_mean_of_item_mos():
    ratings = make_ratings()
    items = item_mos(ratings).table
    models = model_mos(ratings).table.set_index("model")
    assert models.loc["m1", "mos"] == pytest.approx(items[items["model"] == "m1"]["mos"].mean())


@settings(max_examples=50, deadline=None)
@given(
    offset=st.floats(-50, 50, allow_nan=False),
    scale=st.floats(0.01, 100, allow_nan=False),
    rater=st.integers(0, 4),
    seed=st.integers(0, 10_000),
)
def test_affine_change_of_one_rater_leaves_z_mos_unchanged(offset, scale, rater, seed):
    ratings = make_ratings(seed=seed)
    shifted = ratings.copy()
    mask = shifted["rater"] == f"rater{rater}"
    shifted.loc[mask, "score"] = offset + scale * shifted.loc[mask, "score"]
    before = item_mos(ratings).table["mos"].to_numpy()
    after = item_mos(shifted).table["mos"].to_numpy()
    np.testing.assert_allclose(after, before, atol=1e-6)


def test_z_scores_and_item_mos_equal_the_plain_pandas_formulas_on_random_panels():
    rng = np.random.default_rng(12)
    for trial in range(10):
        ratings = make_ratings(n_raters=6, n_items=30, seed=trial)
        ratings.loc[ratings.sample(frac=0.1, random_state=trial).index, "score"] = np.nan
        ratings = ratings.sample(frac=1, random_state=trial)  # no particular order
        scored, _ = zscore_by_rater(ratings)
        grouped = ratings.dropna(subset=["score"]).groupby("rater")["score"]
        expected = (ratings["score"] - grouped.transform("mean")) / grouped.transform("std")
        assert np.allclose(scored["z"], expected.loc[scored.index], atol=1e-12)
        table = item_mos(ratings, ci="t").table
        plain = scored.groupby(["model", "item"])["z_scaled"].agg(["mean", "std", "size"]).reset_index()
        assert table[["model", "item"]].equals(plain[["model", "item"]])
        assert np.allclose(table["mos"], plain["mean"], atol=1e-12)
        assert np.allclose(table["std"], plain["std"], atol=1e-12, equal_nan=True)
        assert (table["n"].to_numpy() == plain["size"].to_numpy()).all()


def test_model_mos_of_subsets_equals_model_mos_of_each_subset():
    from analysis.science.zmos import model_mos_of_subsets

    ratings = make_ratings(n_raters=6, n_items=40, seed=3, models=("m1", "m2", "m3"))
    ratings.loc[ratings["rater"] == "rater5", "score"] = 2.0  # sigma 0: excluded in both
    without_rater0 = (ratings["rater"] != "rater0").to_numpy()
    everyone, subset = model_mos_of_subsets(ratings, [np.ones(len(ratings), bool), without_rater0])
    for got, frame in ((everyone, ratings), (subset, ratings[without_rater0])):
        expected = model_mos(frame, ci="none").table.set_index("model")["mos"]
        assert list(got.index) == list(expected.index)
        assert np.allclose(got.to_numpy(), expected.to_numpy(), atol=1e-12)


def test_group_means_equal_pandas_groupby_means():
    from analysis.science.zmos import group_means

    ratings = make_ratings(n_raters=4, n_items=20, seed=5).sample(frac=1, random_state=1)
    ratings.loc[ratings.index[:7], "score"] = np.nan
    ours = group_means(ratings, ["model", "item"], "score")
    plain = ratings.groupby(["model", "item"], sort=True)["score"].mean()
    assert list(ours.index) == list(plain.index) and ours.index.names == plain.index.names
    assert np.allclose(ours.to_numpy(), plain.to_numpy(), atol=1e-12, equal_nan=True)


def test_z_scoring_leaves_the_callers_frame_untouched():
    ratings = make_ratings()
    before = ratings.copy()
    scored, _ = zscore_by_rater(ratings)
    scored.loc[scored.index[0], "score"] = -99.0
    pd.testing.assert_frame_equal(ratings, before)
