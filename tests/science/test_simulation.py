"""Simulated studies with known truth: the rater simulator, the metrics, fixed against adaptive."""

import numpy as np
import pandas as pd
import pytest

from analysis.science import simulation


def _truth(seed=0, prompts=150):
    """Eight models: four far apart, then two close pairs (gaps 0.05 rating points)."""
    rng = np.random.default_rng(seed)
    levels = np.array([1.6, 2.1, 2.6, 3.1, 3.35, 3.40, 3.6, 3.65])
    return simulation.truth_from_arrays(levels[:, None] + rng.normal(0, 0.5, (8, prompts)))


def test_raters_have_the_asked_spammer_share_and_ratings_stay_on_the_scale():
    raters = simulation.simulate_raters(40, spammer_share=0.25, seed=1)
    assert raters.spammer.sum() == 10 and len(raters) == 40
    rng = np.random.default_rng(1)
    values = simulation.rate(np.full(4000, 3.0), rng.integers(0, 40, 4000), raters, rng)
    assert set(np.unique(values)) <= {1, 2, 3, 4, 5}


def test_a_careful_raters_ratings_centre_on_the_truth_plus_their_bias():
    raters = simulation.simulate_raters(1, bias_sd=0.0, noise=0.5, noise_spread=0.0, scale_sd=0.0, seed=2)
    rng = np.random.default_rng(2)
    values = simulation.rate(np.full(20000, 2.7), np.zeros(20000, int), raters, rng, scale=None)
    assert values.mean() == pytest.approx(2.7, abs=0.02) and values.std() == pytest.approx(0.5, abs=0.02)


def test_the_fixed_design_gives_every_unit_the_same_raters_of_its_block():
    truth = _truth(prompts=40)
    run = simulation.run_fixed(truth, simulation.simulate_raters(16), 3, blocks=4)
    assert run.used == 3 * truth.n_units
    by_unit = pd.DataFrame({"unit": run.unit, "rater": run.rater}).groupby("unit")["rater"].apply(tuple)
    assert by_unit.iloc[0] == (0, 1, 2) and by_unit.iloc[39] == (12, 13, 14)


def test_metrics_score_a_perfect_ranking_and_count_wrong_separations():
    true = np.array([3.0, 2.0, 1.0])
    good = simulation.ranking_metrics(true, np.full(3, 0.01), np.full(3, 100), true)
    assert good["tau"] == 1 and good["separated"] == 1 and good["wrong"] == 0
    flipped = simulation.ranking_metrics(np.array([2.0, 3.0, 1.0]), np.full(3, 0.01), np.full(3, 100), true)
    assert flipped["wrong"] == pytest.approx(1 / 2) and flipped["declared"] == 2
    assert simulation.linear_rmse(2 * true + 1, true) == pytest.approx(0)


def test_adaptive_allocation_matches_the_fixed_rankings_with_forty_percent_of_the_ratings():
    rows = []
    for seed in (0, 1, 2):
        truth, raters = _truth(seed), simulation.simulate_raters(32, spammer_share=0.05, seed=seed)
        rows.append(simulation.compare(truth, raters, fixed_per_unit=(8,), adaptive_shares=(0.4,), reference=8,
                                       seeds=(seed,), batches=10))
    table = pd.concat(rows)
    summary = simulation.summary(table)
    print("\n" + summary.to_string(index=False))
    fixed = table[table["design"] == "fixed 8/unit"]
    adaptive = table[table["design"].str.startswith("adaptive")]
    assert (adaptive["ratings"] <= 0.4 * fixed["ratings"].to_numpy() + 1).all()
    assert adaptive["tau_subject"].mean() >= fixed["tau_zmos"].mean() - 1e-9
    assert adaptive["wrong_subject"].mean() <= 0.05
    assert simulation.share_to_match(table, reference="fixed 8/unit") == 0.4


def test_adaptive_runs_record_their_looks_and_decisions_and_stop_when_every_pair_is_settled():
    truth = simulation.truth_from_arrays(np.array([1.0, 2.0, 3.0, 4.0])[:, None]
                                         + np.random.default_rng(0).normal(0, 0.3, (4, 100)))
    run = simulation.run_adaptive(truth, simulation.simulate_raters(20, seed=0), budget=4000, batches=10, seed=0)
    assert run.used < 4000  # far-apart models settle early
    assert run.looks[-1]["open"] == 0 and run.looks[-1]["separated"] == 3
    assert any(reason.startswith("stopped: model settled") for reason in run.decisions)
    assert run.looks[0]["ratings"] == truth.n_units  # the first look follows the burn-in


def test_truly_equal_models_are_almost_never_separated_by_the_adaptive_loop():
    declared, wrong = 0, 0
    for seed in range(4):
        rng = np.random.default_rng(seed)
        base = 3.0 + rng.normal(0, 0.5, 100)
        truth = simulation.truth_from_arrays(np.tile(base, (6, 1)))  # six identical models
        raters = simulation.simulate_raters(24, seed=seed)
        run = simulation.run_adaptive(truth, raters, budget=4800, batches=20, seed=seed)
        row = simulation.study_metrics(run, truth, raters)
        declared += row["declared_subject"]
        wrong += row["wrong_count_subject"]
    print(f"\nequal models, 4 studies x 5 adjacent pairs, 20 looks each: {wrong} wrong separations")
    assert wrong <= 1


def test_the_evalmi_loader_reads_a_parsed_sheet(tmp_path):
    frame = pd.DataFrame({"model": ["a", "a", "b", "b", "c"], "prompt_number": [1, 2, 1, 2, 1],
                          "perception": [50.0, 60.0, 25.0, 75.0, 99.0]})
    path = tmp_path / "mos.csv"
    frame.to_csv(path, index=False)
    truth = simulation.load_evalmi_truth(path, "perception")
    assert truth.models == ("a", "b", "c") and truth.n_prompts == 1  # prompt 2 lacks model c
    assert truth.quality[:, 0] == pytest.approx([3.0, 2.0, 4.96])


@pytest.mark.slow  # reading the 50,400-row sheet takes ~10 s
def test_the_evalmi_truth_has_24_models_and_2100_prompts(shared_datasets):
    path = shared_datasets / "evalmi" / "AIGI2025_MOS_yn.xlsx"
    if not path.exists():
        pytest.skip(f"EvalMi-50K MOS sheet not found at {path}")
    truth = simulation.load_evalmi_truth(path, "perception", prompts=100)
    assert truth.n_models == 24 and truth.n_prompts == 100
    assert 1 <= truth.quality.min() and truth.quality.max() <= 5


def test_effort_goes_to_the_models_whose_position_is_still_open():
    truth = _truth(0)
    run = simulation.run_adaptive(truth, simulation.simulate_raters(32, seed=0), budget=3840, batches=10, seed=0)
    per_unit = np.bincount(truth.unit_model[run.unit], minlength=8) / truth.n_prompts
    assert per_unit[[4, 5, 6]].mean() > 2 * per_unit[[0, 1, 2]].mean()  # the close pairs vs the far-apart models


def test_the_best_split_knowing_the_truth_spends_on_close_models_and_is_capped():
    means = np.array([3.0, 2.98, 2.0, 1.0])  # one close pair, two models far from everything
    tau_even = simulation.expected_tau(means, np.full(4, 100), 0.8)
    tau, ratings = simulation.best_split_tau(means, 25, 400, 0.8, cap=8)
    assert tau >= tau_even - 1e-12
    assert ratings.sum() <= 400 and ratings.min() >= 25 and ratings.max() <= 8 * 25
    assert ratings[0] > ratings[2] and ratings[1] > ratings[3]
    # more budget never lowers the yardstick; fixed 8/unit is the cap everywhere
    assert simulation.best_split_tau(means, 25, 800, 0.8, cap=8)[0] == pytest.approx(
        simulation.expected_tau(means, np.full(4, 200), 0.8))


def test_the_share_the_best_split_needs_to_match_a_fixed_design():
    # one close pair and two models far from everything: the split spends on the pair, so it
    # matches fixed 8/unit with part of its ratings; with evenly spaced models and no room above 8
    # per unit only the fixed design itself matches it
    means = np.array([3.0, 2.95, 2.0, 1.0])
    share = simulation.share_to_match_fixed(means, 25, 0.8, per_unit=8, cap=32)
    assert share is not None and share < 0.75
    goal = simulation.expected_tau(means, np.full(4, 200.0), 0.8)
    budget = int(round(share * 8 * 25 * 4))
    assert simulation.best_split_tau(means, 25, budget, 0.8, cap=32)[0] >= goal - 1e-12
    assert simulation.best_split_tau(means, 25, budget - 25, 0.8, cap=32)[0] < goal
    even = np.array([3.3, 3.2, 3.1, 3.0])
    assert simulation.share_to_match_fixed(even, 25, 0.8, per_unit=8) == pytest.approx(1.0)
