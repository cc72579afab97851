"""Leaderboard ranking with a paired bootstrap test of adjacent differences. No Django.

Input: per-item scores in long form (``model``, ``instance``, ``score``), e.g. the rater-averaged
O of every (model, instance) in an ImagenHub study or the z-MOS per item in an EvalMi study.
Models are ranked by their mean score; for each pair of neighbours in the ranking the difference
of means is bootstrapped over *instances* (paired: the same resampled instances for both models,
since all models answer the same prompts), giving a 95 % percentile CI of the gap and a
two-sided bootstrap p-value (twice the share of replicates on the other side of zero, capped at
1). Instances that one of the two models lacks are left out of that pair's test.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats


@dataclass(frozen=True)
class LeaderboardRow:
    rank: int
    model: str
    mean: float
    ci_low: float | None
    ci_high: float | None
    n_items: int
    gap_to_next: float | None = None  # this model's mean minus the next model's (paired)
    gap_ci: tuple[float, float] | None = None
    gap_p: float | None = None  # bootstrap p-value of the gap; None for the last model

    @property
    def separated(self) -> bool | None:
        """True when the gap to the next model is significant at 5 % (its CI excludes 0)."""
        if self.gap_ci is None:
            return None
        return self.gap_ci[0] > 0 or self.gap_ci[1] < 0


def _t_ci(values: np.ndarray) -> tuple[float | None, float | None]:
    if len(values) < 2:
        return None, None
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return float(values.mean() - half), float(values.mean() + half)


def rank_models(items: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0, higher_is_better: bool = True,
                order: list[str] | None = None) -> list[LeaderboardRow]:
    """Rank models by mean item score; CIs are Student-t over items; gaps bootstrapped (see module).

    ``order`` imposes a ranking computed elsewhere (e.g. by the study report); models of
    ``order`` without item scores are left out.
    """
    frame = items.dropna(subset=["score"])
    if frame.empty:
        return []
    wide = frame.pivot_table(index="instance", columns="model", values="score", aggfunc="mean")
    means = wide.mean(axis=0).sort_values(ascending=not higher_is_better, kind="stable")
    order = [m for m in order if m in means.index] if order is not None else list(means.index)
    rng = np.random.default_rng(seed)
    rows = []
    for rank, model in enumerate(order, start=1):
        values = wide[model].dropna().to_numpy(float)
        low, high = _t_ci(values)
        gap = gap_ci = gap_p = None
        if rank < len(order):
            pair = wide[[model, order[rank]]].dropna().to_numpy(float)
            if len(pair) >= 2 and n_boot > 0:
                diffs = pair[:, 0] - pair[:, 1]
                draws = rng.integers(0, len(diffs), size=(n_boot, len(diffs)))
                boot = diffs[draws].mean(axis=1)
                gap = float(diffs.mean())
                gap_ci = (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)))
                side = (boot <= 0).mean() if gap > 0 else (boot >= 0).mean()
                gap_p = float(min(1.0, 2 * side))
        rows.append(LeaderboardRow(rank, str(model), float(means[model]), low, high, len(values), gap, gap_ci, gap_p))
    return rows


def rank_agreement(first: list[str], second: list[str]) -> dict:
    """Spearman rho between two rankings of the models they share (best first)."""
    shared = [m for m in first if m in second]
    if len(shared) < 2:
        return {"models": shared, "spearman": None, "reason": "fewer than two models in both rankings"}
    a = [first.index(m) for m in shared]
    b = [second.index(m) for m in shared]
    rho = stats.spearmanr(a, b).statistic if len(shared) > 2 else (1.0 if (a[0] - a[1]) * (b[0] - b[1]) > 0 else -1.0)
    return {"models": shared, "spearman": float(rho), "reason": None}
