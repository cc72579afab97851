"""Live unit estimates: the dof-corrected subject model is calibrated where the plain MLE is not."""

import numpy as np
import pytest

from analysis.science import live_estimates
from analysis.science.simulation import linear_rmse, rate, run_fixed, simulate_raters, truth_from_arrays


def _truth(models=6, prompts=200, seed=0):
    rng = np.random.default_rng(seed)
    return truth_from_arrays(2.8 + rng.normal(0, 0.5, (models, prompts)) + np.linspace(0, 0.5, models)[:, None])


def _calibration(estimate, std, truth):
    error = estimate - truth
    return float(np.std(error - error.mean()) / np.sqrt(np.mean(std**2)))


def test_the_dof_corrected_subject_model_is_calibrated_and_beats_z_mos_with_spammers():
    truth = _truth()
    raters = simulate_raters(32, spammer_share=0.1, seed=2)
    run = run_fixed(truth, raters, 8, seed=2)
    out = {m: live_estimates.unit_estimates(run.values, run.unit, run.rater, truth.n_units, 32, m)
           for m in live_estimates.METHODS}
    rmse = {m: linear_rmse(e, truth.unit_quality) for m, (e, _, _) in out.items()}
    calibration = {m: _calibration(e, s, truth.unit_quality) for m, (e, s, _) in out.items()}
    print(f"\nitem RMSE {rmse}; error sd / claimed std {calibration}")
    assert rmse["subject_dof"] < rmse["zmos"]
    assert 0.85 < calibration["subject_dof"] < 1.2
    assert calibration["subject"] > 1.3  # the plain MLE's std is too small in a small crossed panel


def test_noise_is_unknown_until_some_unit_has_a_second_rating():
    truth = _truth(models=2, prompts=50)
    raters = simulate_raters(10, seed=1)
    rng = np.random.default_rng(1)
    unit = np.arange(truth.n_units)
    rater = rng.integers(0, 10, truth.n_units)
    values = rate(truth.unit_quality[unit], rater, raters, rng)
    for method in ("subject_dof", "zmos"):
        estimate, std, n = live_estimates.unit_estimates(values, unit, rater, truth.n_units, 10, method)
        assert np.isfinite(estimate).all() and np.isnan(std).all() and (n == 1).all()


def test_repeats_that_only_chain_raters_leave_the_noise_unknown():
    # every unit rated once, nine rated twice by raters who share no other unit: each rater's bias
    # absorbs their one repeat (no cycle in the rater-unit graph), so nothing is left for the noise
    truth = _truth(models=12, prompts=30, seed=4)
    raters = simulate_raters(64, seed=4)
    rng = np.random.default_rng(4)
    unit = np.concatenate([np.arange(truth.n_units), np.arange(9)])
    rater = np.concatenate([np.arange(truth.n_units) % 64, 20 + np.arange(9)])
    values = rate(truth.unit_quality[unit], rater, raters, rng)
    assert live_estimates.residual_dof(unit, rater, truth.n_units, 64) == 0
    estimate, std, _ = live_estimates.unit_estimates(values, unit, rater, truth.n_units, 64)
    assert np.isfinite(estimate).all() and np.isnan(std).all()


def test_residual_dof_counts_ratings_less_qualities_less_biases():
    # a fully crossed panel of 5 raters x 8 units: 40 - 8 - 5 + 1
    unit = np.tile(np.arange(8), 5)
    rater = np.repeat(np.arange(5), 8)
    assert live_estimates.residual_dof(unit, rater, 8, 5) == 28
    # two separate panels: each keeps its own
    assert live_estimates.residual_dof(np.concatenate([unit, unit + 8]), np.concatenate([rater, rater + 5]),
                                       16, 10) == 56


def test_single_rated_units_do_not_shrink_the_raters_noise():
    truth = _truth(models=4, prompts=300, seed=3)
    raters = simulate_raters(20, noise=0.8, noise_spread=0.0, bias_sd=0.0, scale_sd=0.0, seed=3)
    rng = np.random.default_rng(3)
    unit = np.concatenate([np.arange(truth.n_units), np.arange(0, truth.n_units, 4)])  # a quarter rated twice
    rater = np.concatenate([rng.integers(0, 20, truth.n_units), rng.integers(0, 20, truth.n_units // 4)])
    same = rater[truth.n_units:] == rater[: truth.n_units][::4]
    rater[truth.n_units:][same] = (rater[truth.n_units:][same] + 1) % 20
    values = rate(truth.unit_quality[unit], rater, raters, rng, scale=None)
    _, _, _, inconsistency = live_estimates.subject_dof(values, unit, rater, truth.n_units, 20)
    assert np.median(inconsistency) == pytest.approx(0.8, rel=0.15)


def test_an_unknown_method_is_refused():
    with pytest.raises(ValueError, match="unknown method"):
        live_estimates.unit_estimates([1.0], [0], [0], 1, 1, "median")
