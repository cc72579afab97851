"""The item-only agreement intervals at scale: the delete-one jackknife over units
(analysis.science.agreement, ``method``).

Oracles: every coefficient recomputed without each unit in turn (agreement_estimates on the matrix
less that column; alpha also by the ``krippendorff`` package), and the bootstrap's spread on data
large enough for both to be right.
"""

import krippendorff
import numpy as np
import pandas as pd
import pytest

from analysis.science import agreement
from analysis.science.agreement import BOOTSTRAP, JACKKNIFE, agreement_estimates, agreement_table

MEASURES = ["alpha_nominal", "alpha_ordinal", "alpha_interval", "fleiss_kappa",
            "percent_agreement", "gwet_ac1", "gwet_ac2_quadratic"]


def _matrix(seed: int, raters: int = 5, units: int = 40) -> np.ndarray:
    """Raters x units, 4 categories each used by several units, missing ratings, one unit with a
    single rating and one that nobody rated."""
    rng = np.random.default_rng(seed)
    quality = rng.integers(1, 5, units)
    matrix = np.clip(quality[None, :] + rng.integers(-1, 2, (raters, units)), 1, 4).astype(float)
    matrix[rng.random(matrix.shape) < 0.2] = np.nan
    matrix[1:, 3] = np.nan  # a single rating
    matrix[:, 7] = np.nan  # nobody rated it
    for value in (1.0, 2.0, 3.0, 4.0):  # no category lives in one unit only: leaving a unit out keeps them all
        assert (np.nansum(matrix == value, axis=0) > 0).sum() >= 2
    return matrix


def _long(matrix: np.ndarray) -> pd.DataFrame:
    raters, units = np.indices(matrix.shape)
    return pd.DataFrame({"rater": raters.ravel(), "item": units.ravel(), "model": "m",
                         "score": matrix.ravel()})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_jackknife_interval_is_the_delete_one_recomputation(seed):
    matrix = _matrix(seed)
    frame = _long(matrix)
    table = agreement_table(frame, scores=["score"], by=("model",), levels=["nominal", "ordinal", "interval"],
                            kappa=True, gwet=True, method=JACKKNIFE).set_index("measure")
    full = agreement_estimates(matrix, levels=["nominal", "ordinal", "interval"], kappa=True, gwet=True)
    without = [agreement_estimates(np.delete(matrix, u, axis=1), levels=["nominal", "ordinal", "interval"],
                                   kappa=True, gwet=True) for u in range(matrix.shape[1])]
    for u in (0, 5, 11):  # the delete-one alpha agrees with the reference implementation too
        kept = np.delete(matrix, u, axis=1)
        assert without[u]["alpha_interval"].value == pytest.approx(
            krippendorff.alpha(kept, level_of_measurement="interval"), abs=1e-12)
    for measure in MEASURES:
        row = table.loc[measure]
        t = np.array([w[measure].value for w in without], float)
        n = len(t)  # the unrated unit counts (leaving it out changes nothing), as the bootstrap resamples it
        half = 1.959963984540054 * np.sqrt((n - 1) / n * ((t - t.mean()) ** 2).sum())
        assert row["value"] == pytest.approx(full[measure].value, abs=1e-12)
        assert row["method"] == JACKKNIFE and row["boot_undefined"] == 0
        assert row["ci_low"] == pytest.approx(full[measure].value - half, abs=1e-10)
        assert row["ci_high"] == pytest.approx(min(full[measure].value + half, 1.0), abs=1e-10)


def test_the_jackknife_is_about_as_wide_as_the_bootstrap_on_a_large_sample():
    # 600 units: both methods estimate the same standard error; a method that was off by a factor
    # (a forgotten (n - 1)/n, a wrong n) would fall outside this band
    matrix = _matrix(3, raters=6, units=600)
    frame = _long(matrix)
    kw = dict(scores=["score"], by=("model",), levels=["ordinal", "interval"], kappa=True, gwet=True)
    jack = agreement_table(frame, method=JACKKNIFE, **kw).set_index("measure")
    boot = agreement_table(frame, method=BOOTSTRAP, n_boot=2000, seed=1, **kw).set_index("measure")
    for measure in ["alpha_ordinal", "alpha_interval", "fleiss_kappa", "percent_agreement", "gwet_ac1",
                    "gwet_ac2_quadratic"]:
        width = jack.loc[measure, "ci_high"] - jack.loc[measure, "ci_low"]
        boot_width = boot.loc[measure, "ci_high"] - boot.loc[measure, "ci_low"]
        assert 0.85 < width / boot_width < 1.2, (measure, width, boot_width)
        assert boot.loc[measure, "method"] == BOOTSTRAP


def test_auto_takes_the_jackknife_past_the_threshold_for_every_group(monkeypatch):
    frame = pd.concat([_long(_matrix(4)).assign(model="a"), _long(_matrix(5, units=20)).assign(model="b")])
    frame["item"] = frame["model"] + frame["item"].astype(str)
    kw = dict(scores=["score"], groupings=[("model",), ()], levels=["interval"], kappa=True, n_boot=100)
    per_model, study = agreement.agreement_tables(frame, method="auto", **kw)
    assert set(per_model["method"]) == set(study["method"]) == {BOOTSTRAP}
    # the largest model has 166 ratings: 166 x 100 replicates passes a threshold of 16,000
    monkeypatch.setattr(agreement, "JACKKNIFE_ABOVE", 16_000)
    per_model, study = agreement.agreement_tables(frame, method="auto", **kw)
    assert set(per_model["method"]) == set(study["method"]) == {JACKKNIFE}
    assert per_model["ci_low"].notna().all() and study["ci_low"].notna().all()
    with pytest.raises(ValueError, match="method must be one of"):
        agreement.agreement_tables(frame, method="delta", **kw)


def test_without_replicates_or_with_one_value_there_is_no_interval():
    matrix = _matrix(6)
    frame = _long(matrix)
    none = agreement_table(frame, scores=["score"], levels=["interval"], n_boot=0, method=JACKKNIFE)
    assert none["ci_low"].isna().all()
    constant = _long(np.where(np.isfinite(matrix), 2.0, np.nan))
    table = agreement_table(constant, scores=["score"], levels=["interval"], gwet=True,
                            method=JACKKNIFE).set_index("measure")
    assert table.loc["alpha_interval", "value"] is None and table.loc["alpha_interval", "ci_low"] is None
    assert table.loc["percent_agreement", "value"] == 1.0


def test_the_datasheet_says_when_the_item_intervals_are_the_jackknife():
    from analysis.science.exports import _agreement_interval_how

    fixed = _agreement_interval_how({"rater_sampling": "fixed", "item_interval_methods": ["percentile bootstrap"]})
    assert "jackknife" not in fixed and "bootstrap over items" in fixed
    assert "the mean's is the Student-t interval over items" in fixed  # not a bootstrap
    fixed = _agreement_interval_how({"rater_sampling": "fixed", "item_interval_methods": ["jackknife"]})
    assert "delete-one jackknife over items (T ± 1.96·se)" in fixed
    crowd = _agreement_interval_how({"rater_sampling": "sampled", "two_way_interval_methods": ["jackknife"],
                                     "item_interval_methods": ["jackknife"]})
    assert "over items plus over raters" in crowd and "at this size: the delete-one jackknife over items" in crowd


def test_the_item_jackknife_equals_the_rater_bootstrap_modules_item_part():
    # two implementations of the delete-one-item jackknife (agreement's, by count patterns, for the
    # item-only tables; rater_bootstrap's, by unit terms, whose coverage bench.coverage measures)
    from analysis.science import rater_bootstrap as rb

    rng = np.random.default_rng(1)
    quality = rng.integers(1, 6, 300)
    rows = [(f"r{r}", f"i{i}", "m", float(np.clip(quality[i] + rng.integers(-1, 2), 1, 5)))
            for i in range(300) for r in rng.choice(12, 4, replace=False)]
    frame = pd.DataFrame(rows, columns=["rater", "item", "model", "score"])
    _, theirs = rb.agreement_intervals(frame, value="score", raters=False, n_boot=1000, method=JACKKNIFE)
    ours = agreement_table(frame, scores=["score"], levels=["nominal", "ordinal", "interval"],
                           method=JACKKNIFE).set_index("measure")
    for measure in ("alpha_nominal", "alpha_ordinal", "alpha_interval", "fleiss_kappa"):
        assert ours.loc[measure, "ci_low"] == pytest.approx(theirs[measure].low, abs=1e-12)
        assert ours.loc[measure, "ci_high"] == pytest.approx(theirs[measure].high, abs=1e-12)
