import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.science.screening import mos_with_and_without_screening, screen_observers


def panel(n_raters=10, n_items=60, noise=0.4, seed=0):
    rng = np.random.default_rng(seed)
    quality = rng.uniform(1, 5, n_items)
    rows = [
        (f"r{r}", f"i{i}", "m1" if i % 2 else "m2", quality[i] + rng.normal(0, noise))
        for r in range(n_raters)
        for i in range(n_items)
    ]
    return pd.DataFrame(rows, columns=["rater", "item", "model", "score"]), quality


def test_erratic_rater_is_rejected_with_reason():
    ratings, _ = panel(n_raters=15)
    erratic = ratings["rater"] == "r0"
    # Off by one point, alternately up and down: often far from consensus, no net bias.
    ratings.loc[erratic, "score"] += np.where(np.arange(erratic.sum()) % 2 == 0, 1.0, -1.0)
    result = screen_observers(ratings)
    assert result.rejected == ["r0"]
    assert "rejected (BT.500)" in result.raters.loc["r0", "reason"]


def test_consistently_lenient_rater_is_kept_as_a_bias_not_noise():
    ratings, _ = panel(n_raters=15)
    ratings.loc[ratings["rater"] == "r0", "score"] += 1.0
    result = screen_observers(ratings)
    assert "r0" not in result.rejected
    assert "one-sided" in result.raters.loc["r0", "reason"]


def test_kurtosis_picks_the_two_sigma_or_sqrt20_sigma_threshold():
    ratings, _ = panel()
    items = screen_observers(ratings).items
    normal = items["beta2"].between(2, 4)
    ratio = items["threshold"] / items["std"]
    assert np.allclose(ratio[normal], 2.0)
    assert np.allclose(ratio[~normal], np.sqrt(20))


def test_unanimous_items_count_nobody_as_an_outlier():
    ratings = pd.DataFrame({"rater": list("abc") * 3, "item": np.repeat(["x", "y", "z"], 3), "score": 3.0})
    result = screen_observers(ratings)
    assert (result.raters["P"] == 0).all() and (result.raters["Q"] == 0).all()
    assert result.rejected == []


def test_mos_with_and_without_screening_reports_the_shift():
    ratings, _ = panel()
    erratic = ratings["rater"] == "r0"
    ratings.loc[erratic, "score"] += np.where(np.arange(erratic.sum()) % 2 == 0, 1.0, -1.0)
    table = mos_with_and_without_screening(ratings)
    assert set(table.columns) == {"model", "mos_all", "mos_screened", "shift"}
    assert np.allclose(table["shift"], table["mos_screened"] - table["mos_all"])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), noise=st.floats(0.05, 2.0), n_raters=st.integers(3, 12))
def test_screening_never_drops_a_rater_who_matches_consensus(seed, noise, n_raters):
    ratings, _ = panel(n_raters=n_raters, n_items=40, noise=noise, seed=seed)
    consensus = ratings.groupby("item", as_index=False).agg(score=("score", "mean"), model=("model", "first"))
    ratings = pd.concat([ratings, consensus.assign(rater="consensus")], ignore_index=True)
    result = screen_observers(ratings)
    assert "consensus" not in result.rejected


def test_a_screening_already_run_is_reused_not_repeated():
    ratings, _ = panel(n_raters=15)
    ratings.loc[ratings["rater"] == "r3", "score"] += np.where(np.arange(60) % 2 == 0, 1.5, -1.5)
    result = screen_observers(ratings)
    assert result.rejected == ["r3"]
    again = mos_with_and_without_screening(ratings, screening=result)
    assert again.equals(mos_with_and_without_screening(ratings))


def test_outlier_counts_equal_a_plain_per_rating_loop():
    ratings, _ = panel(n_raters=12, n_items=40, noise=0.8, seed=4)
    result = screen_observers(ratings)
    for rater, row in result.raters.iterrows():
        p = q = 0
        for _, rating in ratings[ratings["rater"] == rater].iterrows():
            scores = ratings[(ratings["item"] == rating["item"]) & (ratings["model"] == rating["model"])]["score"]
            deviation = scores - scores.mean()
            beta2 = (deviation**4).mean() / (deviation**2).mean() ** 2
            limit = (2.0 if 2 <= beta2 <= 4 else np.sqrt(20)) * scores.std()
            p += rating["score"] - scores.mean() > limit
            q += rating["score"] - scores.mean() < -limit
        assert (row["P"], row["Q"], row["n"]) == (p, q, 40)
