"""Adaptive allocation: which units get the next raters, deterministically, with reasons."""

import numpy as np
import pytest
from scipy import stats

from analysis.science import allocation
from analysis.science.allocation import REASONS, UnitState


def _units(n, std, model, cap=10, estimate=None):
    estimate = np.zeros(len(model)) if estimate is None else estimate
    return UnitState.of(model, n, estimate, std, cap)


def test_units_below_the_minimum_come_first_then_the_least_certain_of_open_models():
    model = np.array([0, 0, 1, 1])
    units = _units([0, 3, 3, 3], [np.nan, 0.2, 0.5, 0.1], model, estimate=np.array([np.nan, 2.0, 2.0, 2.0]))
    decided = allocation.allocate(units, n_models=2, n_opt=100)
    assert list(decided.order) == [0, 2, 1, 3]
    assert REASONS[decided.reason[0]].startswith("burn-in")
    assert decided.records()[1]["reason"] == REASONS[allocation.OPEN_MODEL]


def test_capped_units_and_units_at_the_target_half_width_stop():
    model = np.array([0, 0, 1, 1])
    units = _units([10, 3, 3, 3], [0.5, 0.01, 0.5, 0.5], model, estimate=np.array([2.0, 2.0, 2.0, 2.0]))
    decided = allocation.allocate(units, n_models=2, target_halfwidth=0.1, n_opt=100)
    assert decided.reason[0] == allocation.AT_CAP and decided.reason[1] == allocation.AT_TARGET
    assert set(decided.order) == {2, 3}
    assert decided.priority[0] == -np.inf


def test_settled_models_stop_taking_ratings_and_open_ones_keep_them():
    # models 0 and 1 far apart and precise (settled against each other); 1, 2, 3 are close
    model = np.repeat(np.arange(4), 50)
    level = np.array([4.0, 2.0, 1.98, 1.97])[model]
    units = _units(np.full(200, 4), np.full(200, 0.05), model, estimate=level)
    decided = allocation.allocate(units, n_models=4, n_opt=400)
    assert list(decided.verdicts.verdict) == ["separated", "open", "open"]
    assert list(decided.settled) == [True, False, False, False]
    assert np.all(decided.reason[model == 0] == allocation.MODEL_SETTLED)
    assert set(model[decided.order]) == {1, 2, 3}
    assert "stopped: model settled" in " ".join(decided.reason_counts())


def test_a_unit_the_rater_already_rated_is_skipped_with_its_reason():
    model = np.array([0, 0, 1])
    units = _units([1, 1, 1], [0.5, 0.5, 0.5], model, estimate=np.array([1.0, 1.0, 1.0]))
    decided = allocation.allocate(units, n_models=2, n_opt=100, seen=np.array([True, False, False]))
    assert 0 not in decided.order and decided.reason[0] == allocation.SEEN


def test_the_ranking_is_deterministic_given_the_seed_and_ties_follow_the_seed():
    model = np.zeros(200, int)
    model[100:] = 1
    units = _units(np.full(200, 2), np.full(200, 0.3), model, estimate=np.full(200, 2.0))
    first = allocation.allocate(units, n_models=2, n_opt=100, seed=7).order
    again = allocation.allocate(units, n_models=2, n_opt=100, seed=7).order
    other = allocation.allocate(units, n_models=2, n_opt=100, seed=8).order
    assert np.array_equal(first, again) and not np.array_equal(first, other)


def test_a_limit_returns_the_top_of_the_full_ranking():
    rng = np.random.default_rng(0)
    model = rng.integers(0, 5, 5000)
    units = _units(rng.integers(1, 6, 5000), rng.uniform(0.1, 1, 5000), model, estimate=rng.normal(0, 0.01, 5000))
    full = allocation.allocate(units, n_models=5, n_opt=1000).order
    top = allocation.allocate(units, n_models=5, n_opt=1000, limit=50).order
    assert np.array_equal(full[:50], top)


def test_the_next_pair_is_close_and_uncertain_and_never_one_the_rater_saw():
    score = np.array([0.0, 0.05, 2.0])
    std = np.array([0.3, 0.3, 0.3])
    a, b = np.array([0, 0, 1, 0]), np.array([1, 2, 2, 1])
    ranked = allocation.next_pairs(a, b, score, std, seed=1)
    assert set(ranked.order[:2]) == {0, 3}  # the close pair (two prompts of it) first
    seen = np.array([True, False, False, False])
    ranked = allocation.next_pairs(a, b, score, std, seen=seen, shown=np.array([0, 0, 0, 5]), seed=1)
    assert 0 not in ranked.order
    assert ranked.records()[0]["reason"].startswith("close")
    assert allocation.PAIR_REASONS[ranked.reason[0]].startswith("skipped")


def test_cheapest_focus_prefers_the_pair_nearest_a_verdict_and_uncertain_the_closest_pair():
    # models 0/1: gap 0.05, nearly separated; models 2/3: gap 0.001, would swallow the budget
    model = np.repeat(np.arange(4), 50)
    level = np.array([3.0, 2.95, 2.0, 1.999])[model]
    units = _units(np.full(200, 4), np.full(200, 0.1), model, estimate=level)
    cheapest = allocation.allocate(units, n_models=4, n_opt=400, limit=20, focus="cheapest")
    uncertain = allocation.allocate(units, n_models=4, n_opt=400, limit=20, focus="uncertain")
    assert set(model[cheapest.order]) == {0, 1}
    assert set(model[uncertain.order]) == {2, 3}


def test_an_unknown_focus_is_refused():
    units = _units([1, 1], [0.1, 0.1], np.array([0, 1]), estimate=np.array([1.0, 1.0]))
    try:
        allocation.allocate(units, n_models=2, n_opt=10, focus="loudest")
    except ValueError as error:
        assert "focus" in str(error)
    else:
        raise AssertionError("no error")


def test_the_misorder_slope_is_the_posterior_mean_of_phi_z_times_z():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(400_000)
    for z in (0.0, 0.7, 1.5, 3.0):
        monte_carlo = np.mean(stats.norm.pdf(x + z) * np.abs(x + z))
        assert allocation.misorder_slope(z) == pytest.approx(monte_carlo, abs=2e-3)
    assert allocation.misorder_slope(0.0) == pytest.approx(1 / (2 * np.pi))
    assert allocation.misorder_slope(5.0) < 0.01 * allocation.misorder_slope(0.0)


def test_ranking_focus_spends_on_models_whose_order_is_in_doubt_not_on_clear_ones():
    # pair std 0.07: models 0/1 clearly apart (gap 0.4), 2/3 close (gap 0.05), 4 clearly below
    model = np.repeat(np.arange(5), 30)
    level = np.array([2.85, 2.45, 2.05, 2.0, 1.6])[model]
    units = _units(np.full(150, 2), np.full(150, 0.27), model, estimate=level)
    decided = allocation.allocate(units, n_models=5, n_opt=1e7, limit=60)  # (tuned far away: none settled)
    assert decided.settled.sum() == 0
    assert set(model[decided.order]) == {2, 3}
    weight = allocation.ranking_weight(allocation.model_state(units, 5), units, 5)
    assert weight[2] > 20 * weight[0] and weight[3] > 20 * weight[4]


def test_ranking_focus_spreads_a_model_s_ratings_over_its_prompts():
    # one model's units with 1, 2, 3 ratings: the least rated first (the model mean's variance
    # falls most there)
    model = np.array([0, 0, 0, 1, 1, 1])
    n = np.array([1, 2, 3, 3, 3, 3])
    std = 0.8 / np.sqrt(n)
    units = _units(n, std, model, estimate=np.array([2.0, 2.0, 2.0, 2.02, 2.02, 2.02]))
    decided = allocation.allocate(units, n_models=2, n_opt=1000)
    assert list(decided.order[:2]) == [0, 1]


def test_ranking_focus_with_unknown_noise_treats_every_model_alike():
    model = np.array([0, 0, 1, 1])
    units = _units([1, 1, 1, 1], [np.nan] * 4, model, estimate=np.array([1.0, 2.0, 3.0, 4.0]))
    weight = allocation.ranking_weight(allocation.model_state(units, 2), units, 2)
    assert list(weight) == [1.0, 1.0]
