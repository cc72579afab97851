"""Gwet's AC1 / AC2 and raw percent agreement beside alpha and kappa, and the bootstrap's count of
resamples where a coefficient is undefined.

Oracles: the worked example of Gwet's Handbook of Inter-Rater Reliability (4 raters, 12 units, 5
categories, missing ratings; AC1 = 0.7754 with pa = 0.8182 and pe = 0.1903) and, where installed,
the ``irrCAC`` package (0.4.4; it pins scipy==1.12 / pandas<3, so it is not in requirements-test.txt:
``pip install --no-deps irrCAC==0.4.4``; its categories are passed explicitly because under pandas
3 it would count NaN as a category).
"""

import numpy as np
import pandas as pd
import pytest

from analysis.science.agreement import agreement_estimates, agreement_table

# Gwet (2014), Handbook of Inter-Rater Reliability, 4th ed., the "cac.raw4raters" example: units x raters.
HANDBOOK = np.array([
    [1, 1, np.nan, 1], [2, 2, 3, 2], [3, 3, 3, 3], [3, 3, 3, 3], [2, 2, 2, 2], [1, 2, 3, 4],
    [4, 4, 4, 4], [1, 1, 2, 1], [2, 2, 2, 2], [np.nan, 5, 5, 5], [np.nan, np.nan, 1, 1],
    [np.nan, np.nan, 3, np.nan],
]).T


def test_gwets_ac1_and_percent_agreement_reproduce_the_handbooks_worked_example():
    estimates = agreement_estimates(HANDBOOK, levels=[], kappa=False, gwet=True)
    assert round(estimates["gwet_ac1"].value, 4) == 0.7754
    assert round(estimates["percent_agreement"].value, 4) == 0.8182
    assert round(estimates["gwet_ac2_quadratic"].value, 4) == 0.9140  # irrCAC 0.4.4, quadratic weights


def test_gwet_coefficients_equal_irrcac_on_random_data_with_missing_ratings():
    raw = pytest.importorskip("irrCAC.raw")
    rng = np.random.default_rng(7)
    for trial in range(6):
        values = [1.0, 2.0, 3.0, 5.0] if trial % 2 else [0.0, 0.5, 1.0]
        matrix = rng.choice(values + [values[-1]] * 3, size=(4, 40))
        matrix[rng.random(matrix.shape) < 0.25] = np.nan
        ours = agreement_estimates(matrix, levels=[], kappa=False, gwet=True)
        frame = pd.DataFrame(matrix.T)
        categories = sorted(set(matrix[np.isfinite(matrix)]))
        ac1 = raw.CAC(frame, categories=categories, digits=15).gwet()["est"]
        ac2 = raw.CAC(frame, weights="quadratic", categories=categories, digits=15).gwet()["est"]
        assert ours["gwet_ac1"].value == pytest.approx(ac1["coefficient_value"], abs=1e-12)
        assert ours["percent_agreement"].value == pytest.approx(ac1["pa"], abs=1e-12)
        assert ours["gwet_ac2_quadratic"].value == pytest.approx(ac2["coefficient_value"], abs=1e-12)


def test_on_skewed_ratings_raters_agree_and_ac1_says_so_while_kappa_is_low():
    # 40 units, 3 raters, nearly always 1: agreement 0.95, kappa low (the paradox), AC1 high
    matrix = np.ones((3, 40))
    matrix[0, :3] = 0.5
    matrix[1, 3] = 0.0
    estimates = agreement_estimates(matrix, levels=["nominal"], kappa=True, gwet=True)
    assert estimates["percent_agreement"].value == pytest.approx(1 - 4 * (2 / 3) / 40)
    assert estimates["fleiss_kappa"].value < 0.1 < 0.9 < estimates["gwet_ac1"].value


def test_one_value_everywhere_has_full_percent_agreement_and_undefined_chance_corrected_coefficients():
    estimates = agreement_estimates(np.zeros((3, 10)), levels=["nominal"], kappa=True, gwet=True)
    assert estimates["percent_agreement"].value == 1.0
    assert estimates["gwet_ac1"].value is None and "only one value present" in estimates["gwet_ac1"].reason


def test_bootstrap_counts_the_resamples_where_the_coefficient_is_undefined():
    # 30 units, one of them with a disagreement: a resample misses it with probability (29/30)^30 = 36 %,
    # and then every rating is the same value: alpha and kappa undefined there
    matrix = np.ones((3, 30))
    matrix[0, 0] = 0.0
    estimates = agreement_estimates(matrix, levels=["nominal"], kappa=True, n_boot=2000, seed=1, gwet=True)
    kappa = estimates["fleiss_kappa"]
    assert kappa.boot_total == 2000
    assert kappa.boot_undefined / 2000 == pytest.approx((29 / 30) ** 30, abs=0.03)
    assert estimates["percent_agreement"].boot_undefined == 0  # defined on every resample


def test_agreement_table_reports_gwet_rows_and_undefined_resamples_per_group():
    rows = [{"rater": r, "item": f"i{i}", "model": "m", "score": 1.0 if (i or r) else 0.0}
            for r in range(3) for i in range(30)]
    table = agreement_table(pd.DataFrame(rows), scores=["score"], by=("model",), levels=["nominal"], n_boot=500,
                            gwet=True).set_index("measure")
    assert {"percent_agreement", "gwet_ac1", "gwet_ac2_quadratic", "fleiss_kappa"} <= set(table.index)
    assert 100 < table.loc["fleiss_kappa", "boot_undefined"] < 260
    assert table.loc["percent_agreement", "boot_undefined"] == 0
