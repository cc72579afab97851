"""ImagenHub aggregation (Ku et al., ImagenHub, Table 4).

Each rater gives every (item, model) two scores in {0, 0.5, 1}: semantic
consistency ``SC`` and perceptual quality ``PQ``. The overall score is the
geometric mean ``O = sqrt(SC * PQ)`` per rating, so an image that ignores the
prompt (SC = 0) scores 0 however pretty it is.

Model summary (the "mean ± std" cells of Table 4): for each model and
dimension, average over items separately for each rater, then take the mean
and the *population* standard deviation (ddof = 0) of those per-rater
averages. The ± is therefore disagreement between raters about the model's
level, not item spread.

Input: long DataFrame with columns ``rater, item, model, SC, PQ``.
"""

from __future__ import annotations

import pandas as pd

from analysis.science.protocols.imagenhub import overall

DIMENSIONS = ("SC", "PQ", "O")


def add_overall(ratings: pd.DataFrame) -> pd.DataFrame:
    """Return a copy with ``O = sqrt(SC * PQ)`` per rating (range 0-1)."""
    missing = {"SC", "PQ"} - set(ratings.columns)
    if missing:
        raise ValueError(f"ratings need columns SC and PQ; missing {sorted(missing)}")
    return ratings.assign(O=overall(ratings["SC"].to_numpy(float), ratings["PQ"].to_numpy(float)))


def per_rater_means(ratings: pd.DataFrame, *, dimensions=DIMENSIONS) -> pd.DataFrame:
    """Mean over items per (model, rater) for each dimension.

    ``O`` is computed from SC and PQ if the column is absent.
    """
    if "O" in dimensions and "O" not in ratings.columns:
        ratings = add_overall(ratings)
    return ratings.groupby(["model", "rater"], sort=True)[list(dimensions)].mean()


def model_summary(ratings: pd.DataFrame, *, dimensions=DIMENSIONS) -> pd.DataFrame:
    """ImagenHub Table 4 numbers, one row per model.

    Columns per dimension ``d``: ``d_mean`` and ``d_std`` (population std
    across raters of their per-rater item means; 0 when there is one rater),
    plus ``O_sum`` (sum over items of the rater-averaged O, the leaderboard's
    total), ``n_items`` and ``n_raters``. Items missing for some raters are
    averaged over the raters who rated them.
    """
    if "O" not in ratings.columns:
        ratings = add_overall(ratings)
    rater_means = per_rater_means(ratings, dimensions=dimensions)
    grouped = rater_means.groupby(level="model")
    summary = pd.DataFrame(index=grouped.size().index)
    for dimension in dimensions:
        summary[f"{dimension}_mean"] = grouped[dimension].mean()
        summary[f"{dimension}_std"] = grouped[dimension].std(ddof=0)
    item_means = ratings.groupby(["model", "item"], sort=True)["O"].mean()
    summary["O_sum"] = item_means.groupby(level="model").sum()
    summary["n_items"] = ratings.groupby("model")["item"].nunique()
    summary["n_raters"] = ratings.groupby("model")["rater"].nunique()
    return summary


def item_scores(ratings: pd.DataFrame, *, dimensions=DIMENSIONS) -> pd.DataFrame:
    """Rater-averaged score per (model, item); what a judge is compared with.

    VIEScore correlates judges with these means (values in
    {0, 1/6, ..., 1} for SC and PQ with three raters).
    """
    if "O" in dimensions and "O" not in ratings.columns:
        ratings = add_overall(ratings)
    return ratings.groupby(["model", "item"], sort=True)[list(dimensions)].mean().reset_index()
