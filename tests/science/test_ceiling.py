import numpy as np
import pandas as pd
import pytest

from analysis.science.ceiling import human_ceiling, pairwise_rater_correlations, rater_vs_rest


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


def _ceiling_by_scipy_loop(ratings, score, by):
    """The straightforward definition: pivot per group, one scipy call per rater and method."""
    from scipy import stats

    from analysis.science.correlation import fisher_z_mean

    rows = []
    groups = ratings.groupby(list(by), sort=True) if by else [((), ratings)]
    for _, group in groups:
        table = group.pivot_table(index="rater", columns="item", values=score, aggfunc="mean").to_numpy()
        values = {"srcc": [], "plcc": [], "krcc": []}
        for r in range(table.shape[0]):
            others = np.nanmean(np.delete(table, r, axis=0), axis=0) if table.shape[0] > 1 else np.full(table.shape[1], np.nan)
            x, y = np.round(table[r], 9), np.round(others, 9)
            keep = np.isfinite(x) & np.isfinite(y)
            x, y = x[keep], y[keep]
            if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
                continue
            values["srcc"].append(stats.spearmanr(x, y)[0])
            values["plcc"].append(stats.pearsonr(x, y)[0])
            values["krcc"].append(stats.kendalltau(x, y)[0])
        rows.append({m: fisher_z_mean(v) for m, v in values.items()})
    return rows


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_vectorised_ceiling_equals_one_scipy_call_per_rater_on_random_panels():
    rng = np.random.default_rng(9)
    for trial in range(12):
        n = 400
        ratings = pd.DataFrame({
            "rater": rng.choice([f"r{i}" for i in range(6)], n),
            "item": rng.integers(0, 40, n),
            "model": rng.choice(["m1", "m2", "m3"], n),
            "score": rng.choice([0.0, 0.5, 1.0], n) if trial % 2 else rng.normal(50, 10, n),
        })
        ratings = ratings.drop_duplicates(["rater", "item", "model"]) if trial % 3 else ratings  # some doubles
        ratings.loc[ratings.sample(frac=0.05, random_state=trial).index, "score"] = np.nan
        for by in (("model",), ()):
            table = human_ceiling(ratings, scores=["score"], by=by)
            expected = _ceiling_by_scipy_loop(ratings, "score", by)
            for (_, row), reference in zip(table.iterrows(), expected):
                for method, value in reference.items():
                    if value is None:
                        assert row[method] is None
                    else:
                        assert row[method] == pytest.approx(value, abs=1e-9)


def test_ceiling_rows_come_group_by_group_then_dimension():
    ratings = pd.DataFrame({"rater": list("ab") * 6, "item": np.repeat(range(6), 2), "model": ["m1"] * 6 + ["m2"] * 6,
                            "SC": range(12), "PQ": range(12)})
    table = human_ceiling(ratings, scores=["SC", "PQ"])
    assert list(zip(table["model"], table["dimension"])) == [("m1", "SC"), ("m1", "PQ"), ("m2", "SC"), ("m2", "PQ")]


def test_ceilings_for_several_groupings_equal_one_call_per_grouping():
    from analysis.science.ceiling import human_ceilings

    rng = np.random.default_rng(2)
    for unique_items in (True, False):
        n = 600
        model = rng.choice(["m1", "m2", "m3"], n)
        item = rng.integers(0, 40, n)
        ratings = pd.DataFrame({
            "rater": rng.choice([f"r{i}" for i in range(7)], n),
            # unique: an item id belongs to one model (the report's Item ids); else ids repeat across models
            "item": [f"{m}-{i}" for m, i in zip(model, item)] if unique_items else item,
            "model": model, "SC": rng.choice([0.0, 0.5, 1.0], n), "PQ": rng.normal(0, 1, n),
        })
        together = human_ceilings(ratings, scores=["SC", "PQ"], groupings=[("model",), ()])
        for by, table in zip([("model",), ()], together):
            alone = human_ceiling(ratings, scores=["SC", "PQ"], by=by)
            pd.testing.assert_frame_equal(table, alone)


def test_judge_vs_rest_is_the_judge_against_the_mean_of_the_other_raters_averaged_over_left_out_raters():
    from scipy import stats

    from analysis.science.ceiling import judge_vs_rest

    rng = np.random.default_rng(5)
    truth = rng.random(12)
    rows = [{"rater": f"r{r}", "item": f"i{i}", "model": "m", "s": truth[i] + rng.normal(0, 0.3)}
            for r in range(3) for i in range(12)]
    ratings = pd.DataFrame(rows)
    judge = pd.Series(truth + rng.normal(0, 0.2, 12), index=[f"i{i}" for i in range(12)])
    per_model, study = judge_vs_rest(ratings, judge, score="s")
    wide = ratings.pivot(index="item", columns="rater", values="s").loc[judge.index]
    expected = [stats.spearmanr(judge, wide.drop(columns=r).mean(axis=1))[0] for r in wide.columns]
    assert per_model.loc[0, "srcc"] == pytest.approx(np.tanh(np.mean(np.arctanh(expected))))
    assert per_model.loc[0, "n_raters"] == 3 and study.loc[0, "srcc"] == pytest.approx(per_model.loc[0, "srcc"])
    against_all = stats.spearmanr(judge, wide.mean(axis=1))[0]
    assert per_model.loc[0, "srcc"] != pytest.approx(against_all)  # not the usual judge-vs-mean-of-all number
