"""Every pair of models compared, with Holm's multiplicity control, and bootstrap intervals on ranks. No Django.

A leaderboard that tests only neighbours (analysis.science.leaderboard) says nothing about the 2nd against the
5th model, and testing all K(K-1)/2 pairs at 5 % each finds "differences" by chance. Here:

* every pair's difference of mean item scores is bootstrapped over *instances* (prompts), paired: one
  resample of instances serves every model, since all models answer the same prompts; an instance a
  model lacks leaves the pair's shared instances only. Percentile 95 % CI, two-sided p from the
  bootstrap standard error (``p_counted``, the resample count, beside it; see
  analysis.science.correlation_tests.summarise_replicates), and ``p_holm``: Holm's step-down
  adjustment over all pairs of the dimension, which keeps the chance of any false "separated" at 5 %.
* each model's rank (1 = best) is recomputed in every resample from the resampled means; its 95 %
  interval is the 2.5th and 97.5th percentiles of those ranks (ties share the better rank). A rank
  interval [1, 3] says the data cannot tell whether the model is first or third.

A resample in which a model has no instance (it answered few prompts) leaves its mean, its rank and its
pairs undefined there; such resamples are counted (``bootstrap_undefined_share``), not dropped silently.
Resampling is over instances only: raters are held fixed (their sampling is the concern of the
rater-inclusive intervals of the model means).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from analysis.science.correlation_tests import bootstrap_counts, holm, summarise_columns, summarise_replicates

METHOD = ("paired bootstrap over instances (one resample serves every model); pairs: percentile 95% CI of the "
          "difference of means, two-sided p from the bootstrap standard error, p_holm: Holm over all pairs of the dimension; "
          "ranks: 2.5th-97.5th percentile of the model's rank across resamples (1 = best)")


def compare_models(items: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0, higher_is_better: bool = True,
                   reuse: dict | None = None) -> dict:
    """All pairs and rank intervals from per-item scores ``model, instance, score`` (one score per
    (model, instance); several are averaged). Models are listed best first by their mean.

    Returns ``{"method", "n_boot", "instances", "ranks": {model: {"rank", "mean", "instances",
    "rank_ci95", "bootstrap_undefined_share"}}, "pairs": [{"first", "second", "difference", "ci95",
    "p", "p_holm", "separated", "instances", "bootstrap_undefined_share"}]}``; intervals are None with
    ``n_boot`` = 0. ``reuse``: a dict the caller keeps between calls (a report's dimensions): the
    resample counts of the same number of instances, ``n_boot`` and ``seed`` are drawn once.
    """
    frame = items.dropna(subset=["score"])
    out: dict = {"method": METHOD, "n_boot": n_boot, "instances": 0, "ranks": {}, "pairs": []}
    if frame.empty:
        return out
    wide = frame.pivot_table(index="instance", columns="model", values="score", aggfunc="mean", observed=True)
    sign = 1.0 if higher_is_better else -1.0
    means = wide.mean(axis=0)
    order = list((sign * means).sort_values(ascending=False, kind="stable").index)
    wide = wide[order]
    values = wide.to_numpy(float)
    present = np.isfinite(values)
    filled = np.where(present, values, 0.0)
    n_instances, n_models = values.shape
    out["instances"] = int(n_instances)
    point_rank = stats.rankdata(-sign * means[order].to_numpy(float), method="min")

    rep_means = None
    if n_boot > 0:
        key = ("counts", n_instances, n_boot, seed)
        counts = reuse.get(key) if reuse is not None else None
        if counts is None:
            counts = bootstrap_counts(n_instances, n_boot, np.random.default_rng(seed))
            if reuse is not None:
                reuse[key] = counts
        rep_sums, rep_counts = counts @ filled, counts @ present
        with np.errstate(divide="ignore", invalid="ignore"):
            rep_means = rep_sums / rep_counts  # NaN where a model drew no instance
        undefined = ~np.isfinite(rep_means).all(axis=1)
        ranks = stats.rankdata(-sign * np.nan_to_num(rep_means), method="min", axis=1)
    for k, model in enumerate(order):
        entry = {"rank": int(point_rank[k]), "mean": float(means[model]), "instances": int(present[:, k].sum()),
                 "rank_ci95": None, "bootstrap_undefined_share": None}
        if rep_means is not None:
            defined = ranks[~undefined, k]
            if len(defined):
                entry["rank_ci95"] = [int(np.percentile(defined, 2.5, method="lower")),
                                      int(np.percentile(defined, 97.5, method="higher"))]
            entry["bootstrap_undefined_share"] = float(undefined.mean())
        out["ranks"][str(model)] = entry

    pairs, complete = [], []
    for a in range(n_models):
        for b in range(a + 1, n_models):
            both = present[:, a] & present[:, b]
            difference = values[both, a] - values[both, b]
            pair = {"first": str(order[a]), "second": str(order[b]), "instances": int(both.sum()),
                    "difference": float(difference.mean()) if both.any() else None, "ci95": None, "p": None,
                    "p_counted": None, "bootstrap_undefined_share": None}
            pairs.append(pair)
            if rep_means is None or not both.any():
                continue
            if both.all():  # the usual complete design: summarised together below
                complete.append((pair, a, b))
                continue
            gaps = np.where(both, np.nan_to_num(values[:, a] - values[:, b]), 0.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                replicates = (counts @ gaps) / (counts @ both.astype(float))
            _put_summary(pair, summarise_replicates(pair["difference"], replicates), n_boot)
    if complete:  # every instance in both: the pairs' replicates are differences of the models' replicate sums
        first = np.array([a for _, a, _ in complete])
        second = np.array([b for _, _, b in complete])
        with np.errstate(divide="ignore", invalid="ignore"):
            replicates = (rep_sums[:, first] - rep_sums[:, second]) / rep_counts[:, first]
        estimates = np.array([pair["difference"] for pair, _, _ in complete])
        for (pair, _, _), summary in zip(complete, summarise_columns(estimates, replicates)):
            _put_summary(pair, summary, n_boot)
    for pair, adjusted in zip(pairs, holm([p["p"] for p in pairs])):
        pair["p_holm"] = adjusted
        pair["separated"] = None if adjusted is None else bool(adjusted < 0.05)
    out["pairs"] = pairs
    return out


def _put_summary(pair: dict, summary, n_boot: int) -> None:
    pair.update(ci95=list(summary.ci95) if summary.ci95 else None, p=summary.p_value, p_counted=summary.p_counted,
                bootstrap_undefined_share=summary.undefined / n_boot)


BT_METHOD = ("bootstrap over judgements (the pairwise report's replicates); pairs: percentile 95% CI of the "
             "difference of Bradley-Terry scores (log-strengths), two-sided p from the bootstrap standard error, p_holm: Holm "
             "over all pairs; ranks: 2.5th-97.5th percentile of the model's BT rank across replicates (1 = best)")


def compare_bradley_terry(models: list[str], scores, replicates) -> dict:
    """:func:`compare_models` for a pairwise study: ranks and all pairs from Bradley-Terry scores
    (``scores``, one per model of ``models``) and their bootstrap ``replicates`` (n_boot, models), as
    analysis.science.pairwise.pairwise_summary returns them. Same output shape (``instances`` is absent)."""
    scores = np.asarray(scores, float)
    order = list(np.argsort(-scores, kind="stable"))
    n_boot = 0 if replicates is None else int(len(replicates))
    out: dict = {"method": BT_METHOD, "n_boot": n_boot, "ranks": {}, "pairs": []}
    point_rank = stats.rankdata(-scores, method="min")
    ranks = stats.rankdata(-replicates, method="min", axis=1) if n_boot else None
    for k in order:
        entry = {"rank": int(point_rank[k]), "bt_score": float(scores[k]), "rank_ci95": None,
                 "bootstrap_undefined_share": 0.0 if n_boot else None}
        if ranks is not None:
            entry["rank_ci95"] = [int(np.percentile(ranks[:, k], 2.5, method="lower")),
                                  int(np.percentile(ranks[:, k], 97.5, method="higher"))]
        out["ranks"][str(models[k])] = entry
    pairs = []
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            difference = float(scores[a] - scores[b])
            pair = {"first": str(models[a]), "second": str(models[b]), "difference": difference, "ci95": None,
                    "p": None, "p_counted": None, "bootstrap_undefined_share": None}
            if n_boot:
                summary = summarise_replicates(difference, replicates[:, a] - replicates[:, b])
                pair.update(ci95=list(summary.ci95) if summary.ci95 else None, p=summary.p_value,
                            p_counted=summary.p_counted, bootstrap_undefined_share=summary.undefined / n_boot)
            pairs.append(pair)
    for pair, adjusted in zip(pairs, holm([p["p"] for p in pairs])):
        pair["p_holm"] = adjusted
        pair["separated"] = None if adjusted is None else bool(adjusted < 0.05)
    out["pairs"] = pairs
    return out
