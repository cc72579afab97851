"""VIEScore's own analysis conventions (analysis.science.viescore_conventions), without the database.

The O cells the report cannot match to the last decimal are explained here exactly: the VIEScore
notebook ranks unsnapped floats, and its human O mean sums the three raters' O in the order its
rater files were listed (last file first on the authors' machine).
"""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.science.correlation import tanh_of_mean
from analysis.science.formats import read_imagenhub_task, read_viescore_judge
from analysis.science.viescore_conventions import apply_truncation, truncated_score


def test_list_scores_are_truncated_toward_zero_before_the_minimum():
    assert truncated_score([8.5, 9.0]) == 0.8
    assert truncated_score([10, 12]) == 1.0  # clipped to [0, 1] as VIEScore does
    assert truncated_score(["7", 9]) == 0.7
    assert truncated_score([]) is None and truncated_score(["x"]) is None


def test_truncation_replaces_sc_and_pq_and_recomputes_o_of_viescore_judges_only():
    scores = pd.DataFrame({
        "judge": ["v", "v", "v", "clip"], "item": [1, 1, 1, 1], "model": ["M"] * 4,
        "dimension": ["SC", "PQ", "O", "CLIP_Score"], "value": [0.85, 0.9, math.sqrt(0.85 * 0.9), 0.31]})
    subs = pd.DataFrame({"judge": ["v", "v"], "item": [1, 1], "dimension": ["SC", "PQ"],
                         "sub_scores": [[8.5, 9], [9, 10]]})
    out, changed = apply_truncation(scores, subs)
    assert changed == 1
    assert out["value"].tolist() == pytest.approx([0.8, 0.9, math.sqrt(0.8 * 0.9), 0.31])
    assert apply_truncation(scores, subs.iloc[:0])[0] is scores


@pytest.mark.parametrize("slug, published", [("ImagenHub_Text-Guided_IG", 0.3928),
                                             ("ImagenHub_Control-Guided_IG", 0.5439)])
def test_published_o_cells_come_from_unsnapped_ranks_and_the_raters_summed_last_file_first(viescore_root, slug,
                                                                                           published):
    judge = read_viescore_judge(viescore_root / "gpt4o_0shot")
    judge = judge[judge["task"] == slug].assign(
        value=lambda f: [truncated_score(s) for s in f["scores"]])
    wide = judge.pivot_table(index=["model", "uid"], columns="aspect", values="value").dropna().reset_index()
    ratings = read_imagenhub_task(viescore_root / "human_ratings" / slug)
    ratings["O"] = [math.sqrt(a * b) for a, b in zip(ratings["SC"], ratings["PQ"])]
    by_rater = ratings.set_index(["rater", "model", "uid"])["O"]
    raters = sorted(ratings["rater"].unique())

    def task_number(order):
        per_model = []
        for model, part in wide.groupby("model"):
            judge_o = [math.sqrt(sc * pq) for sc, pq in zip(part["SC"], part["PQ"])]
            human_o = [np.mean([by_rater[r, model, uid] for r in order]) for uid in part["uid"]]
            per_model.append(stats.spearmanr(judge_o, human_o)[0])
        return tanh_of_mean(per_model)

    assert task_number(raters[::-1]) == pytest.approx(published, abs=5e-5)
    assert abs(task_number(raters) - published) > 5e-5  # the other order misses: float noise decides
