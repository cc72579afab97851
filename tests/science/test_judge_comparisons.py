"""Which judge differences are real (analysis.science.judge_comparisons), without the database.

Synthetic judges with known truth and brute-force oracles (scipy on every resample written out, the
ceiling module on the same items); the issue's two worked examples on the VIEScore release.

The release is not in ../shared/datasets (only GPT-4o 0-shot is); point ``VIESCORE_RELEASE`` at its
``paper_implementation/_answers`` folder (github.com/TIGER-AI-Lab/VIEScore) to run those two tests.
"""

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.science.ceiling import human_ceiling, judge_vs_rest
from analysis.science.correlation import fisher_z_mean, viescore_table
from analysis.science.correlation_tests import bootstrap_counts
from analysis.science.judge_comparisons import JudgeBlock, _agreement_and_kappa, _seed, compare_judges, yes_no_intervals
from analysis.science.qa import yes_no_agreement

RELEASE = Path(os.environ.get("VIESCORE_RELEASE", "/nonexistent"))


def _study(seed=0, n=40, models=("A", "B", "C"), noise=(0.15, 0.45)):
    """Three raters per item (0/0.5/1), a good judge (small noise) and a poor one (large noise)."""
    rng = np.random.default_rng(seed)
    rows, judges = [], {name: [] for name in ("good", "poor")}
    for model in models:
        truth = rng.uniform(0, 1, n)
        for i in range(n):
            item = f"{model}/{i}"
            for rater in ("r1", "r2", "r3"):
                rows.append((rater, item, model, float(np.clip(np.round((truth[i] + rng.normal(0, 0.25)) * 2) / 2, 0, 1))))
            for name, sd in zip(("good", "poor"), noise):
                judges[name].append((item, model, float(np.clip(np.round(truth[i] + rng.normal(0, sd), 1), 0, 1))))
    raters = pd.DataFrame(rows, columns=["rater", "item", "model", "SC"])
    human = raters.groupby(["item", "model"], as_index=False)["SC"].mean().rename(columns={"SC": "human"})
    blocks = [JudgeBlock(name, "SC", "SC", pd.DataFrame(values, columns=["item", "model", "value"]).merge(
        human, on=["item", "model"])) for name, values in judges.items()]
    return blocks, raters


def test_a_judge_with_less_noise_is_found_better_and_the_comparison_is_oriented_better_first():
    blocks, raters = _study()
    result = compare_judges(blocks[::-1], n_boot=400, seed=1)  # poor listed first
    (pair,) = [c for c in result["comparisons"] if c["kind"] == "judge_vs_judge"]
    assert pair["first"]["judge"] == "good" and pair["difference"] > 0
    assert pair["ci95"][0] > 0 and pair["p"] < 0.01 and pair["p_holm"] < 0.05 and pair["real"]
    assert pair["spearman"]["first"] == pytest.approx(fisher_z_mean(
        [stats.spearmanr(b.frame[b.frame.model == m]["value"], b.frame[b.frame.model == m]["human"])[0]
         for m in "ABC" for b in blocks if b.judge == "good"]))


def test_per_model_paired_differences_equal_scipy_on_the_shared_resamples():
    blocks, _ = _study(n=25)
    result = compare_judges(blocks, n_boot=200, seed=3)
    (pair,) = result["comparisons"]
    good, poor = (b.frame.sort_values("item") for b in blocks)
    for model in "ABC":
        g, p = good[good.model == model], poor[poor.model == model]
        counts = bootstrap_counts(len(g), 200, _seed(3, "SC", model))
        diffs = []
        for row in counts:
            index = np.repeat(np.arange(len(g)), row.astype(int))
            h = g["human"].to_numpy()[index]
            diffs.append(stats.spearmanr(g["value"].to_numpy()[index], h)[0]
                         - stats.spearmanr(p["value"].to_numpy()[index], h)[0])
        block = pair["per_model"][model]["spearman"]
        assert block["estimate"] == pytest.approx(stats.spearmanr(g["value"], g["human"])[0]
                                                  - stats.spearmanr(p["value"], p["human"])[0])
        assert block["ci95"] == pytest.approx(list(np.percentile(diffs, [2.5, 97.5])), abs=1e-12)
        pearson = pair["per_model"][model]["pearson"]
        assert {"williams_t", "steiger_z", "zou_ci95"} <= set(pearson)
        assert pearson["zou_ci95"][0] < pearson["estimate"] < pearson["zou_ci95"][1]


def test_judges_are_compared_only_on_the_items_both_scored():
    blocks, _ = _study(n=30)
    partial = JudgeBlock("poor", "SC", "SC", blocks[1].frame.iloc[::2])  # scored every other item
    result = compare_judges([blocks[0], partial], n_boot=100)
    (pair,) = result["comparisons"]
    assert pair["items"] == len(partial.frame)
    assert all(entry["n"] == 15 for entry in pair["per_model"].values())


def test_the_ceiling_comparison_is_like_for_like_on_the_judges_items():
    blocks, raters = _study(n=30)
    result = compare_judges(blocks, raters=raters, n_boot=200, seed=2)
    found = {c["first"]["judge"]: c for c in result["comparisons"] if c["kind"] == "judge_vs_ceiling"}
    assert set(found) == {"good", "poor"}
    good = blocks[0].frame
    per_model = judge_vs_rest(raters, good.set_index("item")["value"], score="SC", groupings=[("model",)])[0]
    ceiling = human_ceiling(raters, scores=["SC"])
    for model in "ABC":
        block = found["good"]["per_model"][model]["spearman"]
        assert block["first"] == pytest.approx(per_model.set_index("model").loc[model, "srcc"])
        assert block["second"] == pytest.approx(ceiling.set_index("model").loc[model, "srcc"])
    assert found["poor"]["difference"] < found["good"]["difference"]
    assert all(c["p_holm"] >= c["p"] for c in result["comparisons"])


def test_undefined_resamples_are_counted_where_a_model_is_nearly_constant():
    blocks, _ = _study(n=8)
    frame = blocks[0].frame.copy()
    frame.loc[frame.model == "A", "value"] = [0.5] * 7 + [0.9]  # one item differs: many resamples are constant
    result = compare_judges([JudgeBlock("good", "SC", "SC", frame)], n_boot=300)
    share = result["intervals"]["good"]["SC"]["models"]["A"]["bootstrap_undefined_share"]["srcc"]
    assert 0.2 < share < 0.6  # (7/8)^8 = 34 % of resamples never draw the odd item
    assert result["intervals"]["good"]["SC"]["bootstrap_undefined_share"]["spearman_mean"] >= share


def test_no_bootstrap_gives_no_comparisons_and_says_so():
    blocks, _ = _study(n=10)
    result = compare_judges(blocks, n_boot=0)
    assert result["comparisons"] == [] and "n_boot = 0" in result["reasons"][0]
    with pytest.raises(ValueError, match="average must be one of"):
        compare_judges(blocks, average="median")


def test_yes_no_resamples_of_cell_counts_give_the_reports_agreement_and_kappa():
    rng = np.random.default_rng(5)
    counts = rng.multinomial(60, [0.4, 0.1, 0.15, 0.35], size=50).astype(float)
    agreement, kappa = _agreement_and_kappa(counts)
    for row, a, k in zip(counts, agreement, kappa):
        judge = np.repeat([1, 1, 0, 0], row.astype(int))
        human = np.repeat([1, 0, 1, 0], row.astype(int))
        expected = yes_no_agreement(pd.DataFrame({"judge": judge, "human": human}), by=()).iloc[-1]
        assert a == pytest.approx(expected["agreement"])
        assert (np.isnan(k) and np.isnan(expected["cohen_kappa"])) or k == pytest.approx(expected["cohen_kappa"])


def test_yes_no_intervals_cover_the_estimate_and_count_undefined_kappa():
    judge = np.array([1] * 30 + [0] * 2)
    human = np.array([1] * 31 + [0])
    out = yes_no_intervals(judge, human, n_boot=500, seed=0)
    assert out["agreement_ci95"][0] <= 31 / 32 <= out["agreement_ci95"][1]
    assert out["bootstrap_undefined_share"]["cohen_kappa"] > 0  # resamples with every answer yes on both sides
    assert yes_no_intervals([], [], n_boot=100)["agreement_ci95"] is None


# ------------------------------------------------------------------ the examples (VIEScore release)


def _release_blocks(viescore_root, task: str, aspect: str, settings: list[str]) -> list[JudgeBlock]:
    from analysis.science.formats import read_imagenhub_task, read_viescore_judge
    from analysis.science.imagenhub import add_overall, item_scores

    human = item_scores(add_overall(read_imagenhub_task(viescore_root / "human_ratings" / task)
                                    .rename(columns={"uid": "item"})))
    blocks = []
    for setting in settings:
        judge = viescore_table(read_viescore_judge(RELEASE / f"results_{setting}")).rename(columns={"uid": "item"})
        paired = judge[judge["task"] == task][["model", "item", aspect]].dropna().rename(columns={aspect: "value"}).merge(
            human[["model", "item", aspect]].rename(columns={aspect: "human"}), on=["model", "item"])
        blocks.append(JudgeBlock(setting, aspect, aspect, paired.assign(item=paired["model"] + "/" + paired["item"])))
    return blocks


needs_release = pytest.mark.skipif(not (RELEASE / "results_gemini_0shot").is_dir(),
                                   reason="VIESCORE_RELEASE does not point at VIEScore's _answers folder")


# Tolerance: the difference of the Fisher means is deterministic (to 1e-3, the rounding); the
# interval ends are percentiles of 1,000 resamples, whose Monte Carlo error (a different seed or
# resampling scheme than the issue's) is about 0.005: ends are checked to 0.01.
@needs_release
@pytest.mark.slow
def test_text_guided_editing_sc_gpt4o_is_really_better_than_gemini(viescore_root):
    blocks = _release_blocks(viescore_root, "ImagenHub_Text-Guided_IE", "SC", ["gpt4o_0shot", "gemini_0shot"])
    (pair,) = compare_judges(blocks, n_boot=1000, seed=0)["comparisons"]
    assert pair["first"]["judge"] == "gpt4o_0shot"
    assert pair["difference"] == pytest.approx(0.155, abs=1e-3)
    assert pair["ci95"] == pytest.approx([0.094, 0.218], abs=0.01)
    assert pair["real"]


@needs_release
@pytest.mark.slow
def test_subject_driven_editing_pq_gemini_and_gpt4v_are_not_told_apart(viescore_root):
    blocks = _release_blocks(viescore_root, "ImagenHub_Subject-Driven_IE", "PQ", ["gemini_0shot", "gpt4v_0shot"])
    (pair,) = compare_judges(blocks, n_boot=1000, seed=0)["comparisons"]
    assert pair["first"]["judge"] == "gemini_0shot"
    assert pair["difference"] == pytest.approx(0.007, abs=1e-3)
    assert pair["ci95"] == pytest.approx([-0.095, 0.113], abs=0.01)
    assert not pair["real"]


def test_a_study_too_large_for_the_bootstrap_budget_is_skipped_with_the_n_boot_that_fits(monkeypatch):
    import analysis.science.judge_comparisons as module

    blocks, _ = _study(n=20)  # 60 items
    monkeypatch.setattr(module, "WORK_LIMIT", 60 * 100)
    assert compare_judges(blocks, n_boot=100)["comparisons"]
    result = compare_judges(blocks, n_boot=101)
    assert result["comparisons"] == [] and "use n_boot <= 100" in result["reasons"][0]
