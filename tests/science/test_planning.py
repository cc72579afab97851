"""analysis.science.planning: sample sizes checked against formulas and against simulation (pure)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.science.planning import (PlanInputs, inputs_from_mos, inputs_from_ratings, items_for_alpha_width,
                               items_for_gap, paired_power, plan, raters_per_item)


def test_raters_per_item_is_the_smallest_k_whose_t_halfwidth_fits():
    k = raters_per_item(1.0, 0.5)
    assert k == 18
    assert stats.t.ppf(0.975, 17) / math.sqrt(18) <= 0.5 < stats.t.ppf(0.975, 16) / math.sqrt(17)
    assert raters_per_item(1.0, 0.01) is None  # beyond MAX_RATERS
    with pytest.raises(ValueError):
        raters_per_item(0.0, 0.5)


def test_raters_per_item_gives_that_halfwidth_in_simulation():
    rng = np.random.default_rng(0)
    k = raters_per_item(0.8, 0.3)
    ratings = rng.normal(3.0, 0.8, size=(20_000, k))
    half = stats.t.ppf(0.975, k - 1) * ratings.std(axis=1, ddof=1) / math.sqrt(k)
    # the expected half-width is a little below the plug-in one (E[s] < sigma)
    assert 0.27 < half.mean() <= 0.3
    covered = np.abs(ratings.mean(axis=1) - 3.0) <= half
    assert covered.mean() == pytest.approx(0.95, abs=0.01)


def test_items_for_gap_reaches_80_percent_power_in_simulation():
    n = items_for_gap(diff_sd=10.0, gap=4.0)
    assert paired_power(n, 0.4) >= 0.8 > paired_power(n - 1, 0.4)
    assert n == pytest.approx((stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) ** 2 / 0.16, abs=3)
    rng = np.random.default_rng(1)
    diffs = rng.normal(4.0, 10.0, size=(4000, n))
    t = diffs.mean(axis=1) / (diffs.std(axis=1, ddof=1) / math.sqrt(n))
    detected = np.abs(t) > stats.t.ppf(0.975, n - 1)
    assert detected.mean() == pytest.approx(0.8, abs=0.025)


def test_items_for_alpha_width_scales_with_the_square_of_the_width():
    assert items_for_alpha_width(0.2, 100, 0.1) == 400
    assert items_for_alpha_width(0.2, 100, 0.2) == 100


def test_a_pilot_gives_noise_gap_spread_and_alpha_width():
    rng = np.random.default_rng(2)
    rows = []
    quality = {(m, p): rng.normal(3 + 0.3 * m, 0.7) for m in range(3) for p in range(40)}
    for r in range(6):
        bias = rng.normal(0, 0.3)
        for (m, p), q in quality.items():
            rows.append((f"r{r}", f"m{m}-p{p}", f"m{m}", f"p{p}", q + bias + rng.normal(0, 0.6)))
    pilot = pd.DataFrame(rows, columns=["rater", "item", "model", "instance", "score"])
    inputs = inputs_from_ratings(pilot, "score")
    assert inputs.noise_sd == pytest.approx(0.6, abs=0.06)
    # true paired difference sd: sqrt(2) * 0.7 = 0.99
    assert inputs.diff_sd_true == pytest.approx(0.99, abs=0.2)
    assert inputs.alpha_ci_width > 0 and inputs.alpha_items == 120
    planned = plan(inputs, halfwidth=0.25, gap=0.3, alpha_width=inputs.alpha_ci_width / 2)
    assert planned.raters_per_item == raters_per_item(inputs.noise_sd, 0.25)
    assert planned.items_for_alpha == 480
    assert planned.items_for_gap == items_for_gap(planned.diff_sd_used, 0.3)
    # more raters per item leave less noise in the item scores: fewer prompts for the same gap
    more = plan(inputs, gap=0.3, raters=50)
    assert more.items_for_gap <= planned.items_for_gap


def test_too_small_a_pilot_plans_nothing():
    tiny = pd.DataFrame({"rater": ["a"], "item": [1], "model": ["m"], "instance": ["p"], "score": [3.0]})
    inputs = inputs_from_ratings(tiny, "score")
    assert inputs.noise_sd is None and "too few" in inputs.source
    assert plan(inputs, halfwidth=0.2, gap=1.0) == plan(PlanInputs(source=inputs.source), halfwidth=0.2, gap=1.0)


def test_evalmi_published_mos_plans_prompts_for_a_model_gap(evalmi_mos):
    inputs = inputs_from_mos(evalmi_mos, "correspondence", source="EvalMi-50K published MOS")
    # neighbouring models' per-prompt correspondence z-MOS differences spread by ~10-20 points
    assert 5 < inputs.diff_sd_observed < 30
    planned = plan(inputs, gap=1.0)
    print(f"\nEvalMi-50K correspondence: paired difference sd {inputs.diff_sd_observed:.2f} z-MOS points; "
          f"prompts to separate a 1-point gap at 80 % power: {planned.items_for_gap} "
          f"(2-point gap: {plan(inputs, gap=2.0).items_for_gap})")
    assert planned.items_for_gap == items_for_gap(inputs.diff_sd_observed, 1.0)
