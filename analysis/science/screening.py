"""Observer screening after ITU-R BT.500 (Annex 1, section 2.3.1).

For every item j: mean u_j, standard deviation S_j (ddof 1) and kurtosis
beta2_j = m4 / m2^2 with central moments m_x = mean((u - u_j)^x). If the
scores look normal (2 <= beta2 <= 4) an outlier lies beyond 2 S_j from the
mean, otherwise beyond sqrt(20) S_j.

For every rater i: P_i counts their scores above u_j + threshold, Q_i those
below u_j - threshold, N_i the items they rated. Reject the rater if

    (P_i + Q_i) / N_i > 0.05   and   |P_i - Q_i| / (P_i + Q_i) < 0.3

i.e. they are often far from consensus *and* not simply consistently
strict or lenient (a bias that z-scoring removes anyway).

Deviation from the letter of BT.500: the comparisons are strict (> and <,
not >= and <=). On an item where everyone agrees S_j = 0, and the
non-strict rule would count every rater as an outlier in both directions
and reject raters who match the consensus exactly. Items with a single
rating have no S_j and are never counted, but still count in N_i.

Known weakness (of the rule, not this code): one rater's own deviation is at
most (n - 1) / sqrt(n) item standard deviations, and a single gross outlier
pushes beta2 above 4 (threshold sqrt(20) S). With panels under ~20 raters a
*wildly* random rater can therefore escape, while a moderately erratic one is
caught. BT.500 assumes at least 15 observers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.science.codes import RatingCodes, appearance_order
from analysis.science.zmos import model_mos_of_subsets, model_mos_of_z

NORMAL_KURTOSIS = (2.0, 4.0)
OUTLIER_SHARE = 0.05
SYMMETRY_LIMIT = 0.3


@dataclass
class ScreeningResult:
    """``raters``: one row per rater with n, P, Q, rejected, reason.

    ``items``: per item mean, std, beta2 and the threshold used.
    """

    raters: pd.DataFrame
    items: pd.DataFrame

    @property
    def rejected(self) -> list[str]:
        return [str(r) for r in self.raters.index[self.raters["rejected"]]]


def screen_observers(
    ratings: pd.DataFrame, *, score: str = "score", rater: str = "rater", item: str = "item",
    codes: RatingCodes | None = None,
) -> ScreeningResult:
    """Apply the BT.500 rule to raw scores; see the module docstring.

    Items are identified by ``(model, item)`` when a ``model`` column exists. ``codes``: the
    ratings' :class:`~analysis.science.codes.RatingCodes`, to not code raters and items again (same result).
    """
    present = ratings[score].notna()
    frame = ratings if present.all() else ratings[present]  # no 1.6M-row copy when nothing is missing
    keys = [c for c in ("model",) if c in frame.columns and c != item] + [item]
    rater_codes = rater_names = None
    if codes is not None:
        codes.check(ratings, rater=rater, item=item)
        coded = codes.take(present.to_numpy())
        item_codes, rater_codes, rater_names = coded.unit, coded.rater, coded.rater_names
    else:
        item_codes = np.zeros(len(frame), np.int64)
        for key in keys:  # (model, item) -> one integer per item
            key_codes, names = pd.factorize(frame[key])
            item_codes = np.where((item_codes < 0) | (key_codes < 0), -1, item_codes * max(len(names), 1) + key_codes)
    if (item_codes < 0).any():  # ratings of no item (missing key) screen nothing, as in a groupby
        frame = frame[item_codes >= 0]
        rater_codes = rater_codes[item_codes >= 0] if rater_codes is not None else None
        item_codes = item_codes[item_codes >= 0]
    # items numbered in order of appearance (the item table's order)
    codes = appearance_order(item_codes) if codes is not None else pd.factorize(item_codes)[0]
    values = frame[score].to_numpy(float)
    # per-item statistics stay per item (50,400 at EvalMi scale); only the mean and the threshold
    # are spread over the ratings
    n_item = np.bincount(codes).astype(float)
    item_mean = np.bincount(codes, weights=values) / n_item
    deviation = values - item_mean[codes]
    m2 = np.bincount(codes, weights=deviation**2) / n_item
    m4 = np.bincount(codes, weights=deviation**4) / n_item
    with np.errstate(divide="ignore", invalid="ignore"):
        std = np.sqrt(m2 * n_item / (n_item - 1))  # ddof 1; NaN for a single rating
        beta2 = np.where(m2 > 0, m4 / m2**2, np.nan)
    normal = (beta2 >= NORMAL_KURTOSIS[0]) & (beta2 <= NORMAL_KURTOSIS[1])
    item_threshold = np.where(normal, 2.0, np.sqrt(20.0)) * std
    threshold = item_threshold[codes]

    above = deviation > threshold  # NaN threshold compares False
    below = deviation < -threshold
    if rater_codes is None:
        rater_codes, rater_names = pd.factorize(frame[rater], sort=True)
    counted = rater_codes >= 0
    n_raters = len(rater_names)
    per_rater = pd.DataFrame(
        {
            "n": np.bincount(rater_codes[counted], minlength=n_raters),
            "P": np.bincount(rater_codes[counted], weights=above[counted], minlength=n_raters).astype(np.int64),
            "Q": np.bincount(rater_codes[counted], weights=below[counted], minlength=n_raters).astype(np.int64),
        },
        index=pd.Index(rater_names, name=rater),
    )
    per_rater = per_rater[per_rater["n"] > 0]  # coded raters without a score here (codes=) are not listed
    outliers = per_rater["P"] + per_rater["Q"]
    share = outliers / per_rater["n"]
    with np.errstate(divide="ignore", invalid="ignore"):
        asymmetry = (per_rater["P"] - per_rater["Q"]).abs() / outliers
    per_rater["outlier_share"] = share
    per_rater["asymmetry"] = asymmetry.where(outliers > 0)
    per_rater["rejected"] = (share > OUTLIER_SHARE) & (asymmetry < SYMMETRY_LIMIT)
    per_rater["reason"] = [
        _reason(row.P, row.Q, row.n, row.rejected) for row in per_rater.itertuples()
    ]  # one string per rater, not per rating

    first = np.full(len(n_item), -1)
    first[codes[::-1]] = np.arange(len(codes))[::-1]  # each item's first rating (codes follow appearance)
    item_table = pd.DataFrame({
        **{k: frame[k].iloc[first].to_numpy() for k in keys},  # take first: a categorical's to_numpy is per row
        "mean": item_mean, "std": std, "beta2": beta2, "threshold": item_threshold,
    })
    return ScreeningResult(per_rater, item_table)


def _reason(p: int, q: int, n: int, rejected: bool) -> str:
    share = (p + q) / n if n else 0.0
    if rejected:
        return (
            f"rejected (BT.500): {p + q} of {n} scores ({share:.1%}) are outliers, "
            f"{p} above and {q} below consensus, i.e. erratic rather than biased"
        )
    if share > OUTLIER_SHARE:
        return (
            f"kept: {p + q} of {n} scores ({share:.1%}) are outliers but one-sided "
            f"({p} above, {q} below): a consistent bias, removed by z-scoring"
        )
    return f"kept: {p + q} of {n} scores ({share:.1%}) are outliers (limit {OUTLIER_SHARE:.0%})"


def mos_with_and_without_screening(
    ratings: pd.DataFrame, *, score: str = "score", rater: str = "rater", item: str = "item",
    screening: ScreeningResult | None = None, codes: RatingCodes | None = None,
    zscored: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Model-level z-MOS with all raters and after dropping rejected ones.

    Columns: ``model, mos_all, mos_screened, shift`` (screened - all). Pass ``screening`` when
    :func:`screen_observers` already ran on these ratings, to not screen them twice.

    With ``codes`` (the ratings' :class:`~analysis.science.codes.RatingCodes`) and ``zscored`` (what
    :func:`~analysis.science.zmos.zscore_by_rater` returned for these ratings and ``score``, same row
    labels) both MOS are means of those z-scores: a rater's z-scores depend on their own ratings
    only, so dropping the rejected raters leaves the others' as they are. Same floats as z-scoring
    each subset afresh (same rows, sums in the same order) when every rating has a model and an
    item (else those ratings still count in their rater's mean and sigma, as in the z-MOS).
    """
    if screening is None:
        screening = screen_observers(ratings, score=score, rater=rater, item=item, codes=codes)
    if codes is not None and zscored is not None:
        return _shift_table(*_mos_of_zscored(ratings, zscored, screening, codes, rater=rater, item=item))
    codes, names = pd.factorize(ratings[rater])  # compare the few rater names, not 1.6M labels
    rejected = np.append(pd.Index(names).astype(str).isin(screening.rejected), False)  # [-1]: no rater
    kept = ~rejected[codes]
    everyone, screened = model_mos_of_subsets(ratings, [np.ones(len(ratings), bool), kept], score=score,
                                              rater=rater, item=item)
    return _shift_table(everyone, screened)


def _mos_of_zscored(ratings: pd.DataFrame, zscored: pd.DataFrame, screening: ScreeningResult, codes: RatingCodes,
                    *, rater: str, item: str) -> tuple[pd.Series, pd.Series]:
    """(model MOS of every rater, of the raters screening kept) from the ratings' z-scores."""
    codes.check(ratings, rater=rater, item=item)
    if "model" not in ratings.columns:
        raise ValueError("model_mos needs a 'model' column")
    rows = ratings.index.get_indexer(zscored.index)
    if (rows < 0).any():
        raise ValueError("zscored has rows that are not among the ratings")
    # items numbered in order of appearance among the ratings, as model_mos_of_subsets numbers them
    unit = appearance_order(codes.unit)
    model_of_item = np.full(int(unit.max(initial=-1)) + 1, -1)
    model_of_item[unit[unit >= 0]] = codes.model[unit >= 0]
    unit, rater_code = unit[rows], codes.rater[rows]
    z_scaled = zscored["z_scaled"].to_numpy(float)
    rejected = np.append(pd.Index(codes.rater_names).astype(str).isin(screening.rejected), False)  # [-1]: none
    everyone = unit >= 0
    kept = everyone & ~rejected[rater_code]
    return tuple(model_mos_of_z(z_scaled[subset], unit[subset], model_of_item, codes.model_names)
                 for subset in (everyone, kept))


def _shift_table(everyone: pd.Series, screened: pd.Series) -> pd.DataFrame:
    table = pd.DataFrame({"model": everyone.index, "mos_all": everyone.to_numpy(),
                          "mos_screened": screened.reindex(everyone.index).to_numpy()})
    table["shift"] = table["mos_screened"] - table["mos_all"]
    return table
