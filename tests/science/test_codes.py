"""Codes computed once per report (analysis.science.codes) give every analysis the same result as coding
the labels itself."""

import numpy as np
import pandas as pd
import pytest

from analysis.science.agreement import agreement_tables
from analysis.science.ceiling import human_ceilings
from analysis.science.codes import RatingCodes, appearance_order, dense_rank, distinct_values, sort_order
from analysis.science.screening import mos_with_and_without_screening, screen_observers
from analysis.science.zmos import group_means, zscore_by_rater


def messy_ratings(seed: int, n: int = 900) -> pd.DataFrame:
    """Long ratings with gaps: missing scores, a rater rating an item twice, a one-rating rater, a
    constant rater, a rater who only rated one dimension, a rating without a model."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "rater": rng.choice([f"r{i:02d}" for i in range(12)], n),
        "item": rng.integers(0, 60, n),
        "perception": rng.choice([1.0, 2.0, 3.0, 4.0, 5.0, np.nan], n, p=[0.18, 0.2, 0.2, 0.2, 0.18, 0.04]),
        "correspondence": rng.choice([1.0, 2.0, 3.0, 4.0, 5.0], n),
    })
    frame["model"] = np.where(frame["item"] % 3 == 0, "beta", np.where(frame["item"] % 3 == 1, "alpha", "gamma"))
    frame.loc[frame["rater"] == "r03", "perception"] = 4.0  # constant: no z-score
    frame.loc[frame["rater"] == "r05", "perception"] = np.nan  # rated only correspondence
    lone = frame.iloc[[0]].assign(rater="lonely", perception=2.0)  # a single rating
    frame = pd.concat([frame, lone], ignore_index=True)
    frame.loc[7, "model"] = None  # a rating of no model
    return frame.astype({"rater": "category", "model": "category"})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dense_ranks_and_appearance_order_equal_pandas_factorize(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(-1, 7, 500), rng.integers(-1, 40, 500)
    combined = np.where((a < 0) | (b < 0), -1, a * 40 + b)
    ranked, values = dense_rank([a, b], [7, 40])
    expected, uniques = pd.factorize(np.where(combined < 0, np.nan, combined), sort=True)
    assert np.array_equal(ranked, expected) and np.array_equal(values, uniques.astype(np.int64))
    huge, huge_values = dense_rank([a, b], [7, 10**9])  # too many combinations to count: sorted
    assert np.array_equal(huge, pd.factorize(np.where(combined < 0, np.nan, a * 10**9 + b), sort=True)[0])
    assert np.array_equal(appearance_order(ranked), pd.factorize(np.where(ranked < 0, np.nan, ranked))[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_z_scores_group_means_and_screening_with_codes_equal_those_without(seed):
    ratings = messy_ratings(seed)
    codes = RatingCodes(ratings)
    for dim in ("perception", "correspondence"):
        plain, plain_excluded = zscore_by_rater(ratings, score=dim)
        coded, coded_excluded = zscore_by_rater(ratings, score=dim, codes=codes)
        pd.testing.assert_frame_equal(coded, plain)
        assert coded_excluded == plain_excluded
        for keys in (["model", "item"], ["model", "rater"], ["item"]):
            plain_codes = codes.of_subframe(plain, ratings.index)
            pd.testing.assert_series_equal(group_means(plain, keys, "z_scaled"),
                                           group_means(plain, keys, "z_scaled", codes=plain_codes))
        present = ratings[dim].notna()
        frame = ratings[present]
        screened = screen_observers(frame, score=dim)
        with_codes = screen_observers(frame, score=dim, codes=codes.take(present.to_numpy()))
        pd.testing.assert_frame_equal(with_codes.raters, screened.raters)
        pd.testing.assert_frame_equal(with_codes.items, screened.items)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mos_with_and_without_screening_from_the_z_scores_equals_z_scoring_each_subset_afresh(seed):
    ratings = messy_ratings(seed)
    ratings = ratings[ratings["model"].notna()].reset_index(drop=True)  # afresh leaves out ratings of no model
    codes = RatingCodes(ratings)
    for dim in ("perception", "correspondence"):
        present = ratings[dim].notna()
        frame = ratings[present]
        frame_codes = codes.take(present.to_numpy())
        result = screen_observers(frame, score=dim)
        zscored, _ = zscore_by_rater(ratings, score=dim, codes=codes)
        afresh = mos_with_and_without_screening(frame, score=dim, screening=result)
        reused = mos_with_and_without_screening(frame, score=dim, screening=result, codes=frame_codes,
                                                zscored=zscored)
        pd.testing.assert_frame_equal(reused, afresh, check_exact=True)
    # a rejected rater changes the screened MOS: the subset is applied, not ignored
    result.raters.loc["r00", "rejected"] = True
    reused = mos_with_and_without_screening(frame, score=dim, screening=result, codes=frame_codes, zscored=zscored)
    afresh = mos_with_and_without_screening(frame, score=dim, screening=result)
    pd.testing.assert_frame_equal(reused, afresh, check_exact=True)
    assert (reused["shift"] != 0).any()


@pytest.mark.parametrize("seed", [0, 1])
def test_agreement_and_ceiling_with_codes_equal_those_without(seed):
    ratings = messy_ratings(seed)
    codes = RatingCodes(ratings)
    dims = ["perception", "correspondence"]
    plain = agreement_tables(ratings, scores=dims, groupings=[("model",), ()], n_boot=200, seed=seed)
    coded = agreement_tables(ratings, scores=dims, groupings=[("model",), ()], n_boot=200, seed=seed, codes=codes)
    for a, b in zip(plain, coded):
        pd.testing.assert_frame_equal(a, b)
    subset = ratings[ratings["perception"].notna()]  # the ceiling's frame is a subset of the rows
    plain = human_ceilings(subset, scores=dims)
    coded = human_ceilings(subset, scores=dims, codes=codes.of_subframe(subset, ratings.index))
    for a, b in zip(plain, coded):
        pd.testing.assert_frame_equal(a, b)


def test_codes_of_another_frame_are_refused():
    ratings = messy_ratings(0)
    codes = RatingCodes(ratings)
    shorter = ratings.iloc[:-1]
    with pytest.raises(ValueError, match="do not fit"):
        zscore_by_rater(shorter, score="perception", codes=codes)
    with pytest.raises(ValueError, match="do not fit"):
        screen_observers(ratings, score="perception", rater="model", codes=codes)
    with pytest.raises(ValueError, match="do not fit"):
        group_means(shorter, ["model", "item"], "perception", codes=codes)


@pytest.mark.parametrize("bits", [3, 16, 17, 33, 47, 50])
def test_sort_order_is_numpys_stable_argsort(bits):
    # the radix passes (and the fallbacks past 2^48 and below _RADIX_FROM keys) order exactly as a
    # stable sort: equal keys keep their input order
    rng = np.random.default_rng(bits)
    for n in (0, 1, 100, 40_000):
        keys = rng.integers(0, 2**bits, n)
        keys[: n // 3] = keys[n // 3: 2 * (n // 3)]  # many ties
        assert np.array_equal(sort_order(keys), np.argsort(keys, kind="stable"))
    assert np.array_equal(sort_order(keys.astype(np.int32) if bits < 31 else keys),
                          np.argsort(keys, kind="stable"))


def test_sort_order_negative_or_float_keys_fall_back():
    rng = np.random.default_rng(0)
    keys = rng.integers(-1000, 1000, 50_000)
    assert np.array_equal(sort_order(keys), np.argsort(keys, kind="stable"))
    floats = rng.normal(size=50_000)
    assert np.array_equal(sort_order(floats), np.argsort(floats, kind="stable"))


@pytest.mark.parametrize("distinct", [1, 5, 320, 5_000, 60_000])
def test_distinct_values_is_numpys_unique(distinct):
    # hashed when few distinct values (Likert points, a rater's z-scores), sorted when many: the
    # same (sorted distinct values, inverse) either way, -0.0 counted as 0.0
    rng = np.random.default_rng(distinct)
    pool = np.round(rng.normal(size=distinct), 3)
    pool[0] = 0.0
    values = pool[rng.integers(0, distinct, 60_000)]
    values[5] = -0.0
    got, inverse = distinct_values(values)
    want, want_inverse = np.unique(values, return_inverse=True)
    assert np.array_equal(got, want) and np.array_equal(inverse, want_inverse)
    ints = rng.integers(0, distinct, 60_000)
    got, inverse = distinct_values(ints)
    want, want_inverse = np.unique(ints, return_inverse=True)
    assert np.array_equal(got, want) and np.array_equal(inverse, want_inverse)


def test_distinct_values_with_nan_sorts_as_numpy_does():
    values = np.tile([1.0, 2.0, np.nan, 3.0], 10_000)
    got, inverse = distinct_values(values)
    want, want_inverse = np.unique(values, return_inverse=True)
    assert np.array_equal(got, want, equal_nan=True) and np.array_equal(inverse, want_inverse)
