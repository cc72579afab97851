"""Planning from a finished study's variance components or from published MOS."""

import numpy as np
import pandas as pd
import pytest

from analysis.science import planning, planning_sources
from analysis.science.live_estimates import subject_dof
from analysis.science.simulation import run_fixed, simulate_raters, truth_from_arrays


def _mos(rng, models=6, prompts=400, noise_sd=8.0, raters=16):
    """A published-style sheet: true item scores (sd 10 within a model) plus the mean of ``raters``
    raters' noise."""
    true = 50 + rng.normal(0, 10, (models, prompts)) + np.linspace(0, 10, models)[:, None]
    observed = true + rng.normal(0, noise_sd / np.sqrt(raters), true.shape)
    rows = [{"model": f"m{k}", "prompt_number": p + 1, "perception": observed[k, p]}
            for k in range(models) for p in range(prompts)]
    return pd.DataFrame(rows)


def test_published_mos_with_a_given_rater_noise_recovers_the_item_spread():
    rng = np.random.default_rng(0)
    components = planning_sources.components_from_mos(_mos(rng), "perception", noise_sd=8.0, raters_per_item=16,
                                                       source="EvalMi-50K (published MOS)")
    assert components.item_sd == pytest.approx(10.0, rel=0.05)
    assert components.diff_sd_true == pytest.approx(np.sqrt(2) * 10, rel=0.1)
    assert components.items == 400


def test_the_plan_answers_raters_items_for_a_gap_and_items_for_an_alpha_width():
    components = planning_sources.VarianceComponents(source="s", item_sd=10.0, noise_sd=8.0, diff_sd_true=14.0,
                                                     items=400)
    plan = planning_sources.plan_from_components(components, halfwidth=4.0, gap=2.0, alpha_width=0.05)
    assert plan.raters_per_item == planning.raters_per_item(8.0, 4.0)
    assert plan.items_for_gap == planning.items_for_gap(np.sqrt(14.0**2 + 2 * 64 / plan.raters_per_item), 2.0)
    assert plan.items_for_alpha > 400  # a narrower α CI than 400 items give at that many raters


def test_the_alpha_ci_width_narrows_with_items_and_raters():
    alpha = planning_sources.expected_alpha(planning_sources.VarianceComponents("s", 10.0, 10.0))
    assert alpha == pytest.approx(0.5)
    assert planning_sources.alpha_ci_width(alpha, 3, 400) < planning_sources.alpha_ci_width(alpha, 3, 100)
    assert planning_sources.alpha_ci_width(alpha, 8, 100) < planning_sources.alpha_ci_width(alpha, 3, 100)
    assert planning_sources.alpha_ci_width(alpha, 1, 100) == float("inf")


def test_the_alpha_ci_width_is_close_to_the_spread_of_simulated_alphas():
    rng = np.random.default_rng(4)
    estimates = []
    for _ in range(300):
        item = rng.normal(0, 1, (200, 1))
        ratings = item + rng.normal(0, 1, (200, 3))
        between = ratings.mean(axis=1).var(ddof=1) * 3
        within = ratings.var(axis=1, ddof=1).mean()
        estimates.append((between - within) / (between + 2 * within))  # one-way ICC(1)
    simulated = 2 * 1.96 * np.std(estimates)
    assert planning_sources.alpha_ci_width(0.5, 3, 200) == pytest.approx(simulated, rel=0.15)


def test_a_finished_studys_fit_gives_the_components_the_simulation_used():
    rng = np.random.default_rng(5)
    truth = truth_from_arrays(3 + rng.normal(0, 0.5, (4, 300)))
    raters = simulate_raters(16, noise=0.6, noise_spread=0.0, bias_sd=0.2, scale_sd=0.0, seed=5)
    run = run_fixed(truth, raters, 4, scale=None)
    quality, std, bias, inconsistency = subject_dof(run.values, run.unit, run.rater, truth.n_units, 16)
    items = pd.DataFrame({"model": truth.unit_model, "instance": truth.unit_prompt, "quality": quality, "std": std})
    raters_frame = pd.DataFrame({"bias": bias, "inconsistency": inconsistency})
    components = planning_sources.components_from_fit(items, raters_frame)
    assert components.noise_sd == pytest.approx(0.6, rel=0.1)
    assert components.item_sd == pytest.approx(0.5, rel=0.1)
