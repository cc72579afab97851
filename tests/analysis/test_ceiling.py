import numpy as np
import pandas as pd
import pytest

from analysis.ceiling import human_ceiling, pairwise_rater_correlations, rater_vs_rest


def test_rater_is_compared_with_the_mean_of_the_others():
    matrix = np.array([[1, 2, 3, 4], [1, 2, 3, 4], [4, 3, 2, 1.0]])
    table = rater_vs_rest(matrix, ["a", "b", "c"]).set_index("rater")
    # a vs mean(b, c) = constant 2.5: undefined, reason given
    assert table.loc["a", "srcc"] is None or np.isnan(table.loc["a", "srcc"])
    assert "constant" in table.loc["a", "reason"]


def test_ceiling_is_a_fisher_mean_over_raters_and_explains_skips():
    rng = np.random.default_rng(0)
    truth = rng.random(50)
    rows = [(f"r{r}", f"i{i}", "m", truth[i] + rng.normal(0, 0.1)) for r in range(4) for i in range(50)]
    rows += [("lazy", f"i{i}", "m", 0.5) for i in range(50)]
    ratings = pd.DataFrame(rows, columns=["rater", "item", "model", "score"])
    ceiling = human_ceiling(ratings, scores=["score"]).iloc[0]
    assert ceiling["n_raters"] == 4
    assert 0.8 < ceiling["srcc"] < 1.0
    assert "lazy" in ceiling["reason"]


def test_single_rater_has_no_ceiling():
    ratings = pd.DataFrame({"rater": ["a"] * 3, "item": list("xyz"), "model": "m", "score": [1, 2, 3]})
    row = human_ceiling(ratings, scores=["score"]).iloc[0]
    assert row["srcc"] is None and "fewer than 2 raters" in row["reason"]


def test_imagenhub_magicbrush_leave_one_out_ceiling(imagenhub_ratings):
    magicbrush = imagenhub_ratings["Text-Guided_IE"].query("model == 'MagicBrush'")
    row = human_ceiling(magicbrush, scores=["O"]).iloc[0]
    assert row["n_raters"] == 3
    assert row["srcc"] == pytest.approx(0.7425, abs=1e-3)
    pairwise = pairwise_rater_correlations(magicbrush, score="O")
    assert len(pairwise) == 3 and pairwise["srcc"].mean() < row["srcc"]  # mean of others is less noisy


def test_imagic_sc_has_no_ceiling_and_says_why(imagenhub_ratings):
    imagic = imagenhub_ratings["Text-Guided_IE"].query("model == 'Imagic'")
    row = human_ceiling(imagic, scores=["SC"]).iloc[0]
    assert row["srcc"] is None and row["n_raters"] == 0
    assert "constant" in row["reason"]
