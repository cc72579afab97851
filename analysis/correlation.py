"""Judge-vs-human correlation (VIEScore, EvalMi-50K style).

Sample level (per model, then averaged across models):
SRCC (Spearman), PLCC (Pearson), KRCC (Kendall tau-b), and PLCC after a
4-parameter logistic fit of the judge scores to the human scores (the usual
IQA practice; reported separately, ``None`` with a reason if the fit fails).

Averaging correlations across models uses the Fisher z transform:
``tanh(mean(atanh(r)))`` with |r| clipped below 1. The VIEScore paper instead
reports ``tanh(mean(r))`` (no atanh); :func:`tanh_of_mean` reproduces its
tables but is not a Fisher average.

Model level: Spearman rho and Spearman's footrule between model rankings,
and RMSE between model means on a common scale.

Metrics where lower is better (LPIPS, a distance) are sign-flipped with
``lower_is_better=True`` so that positive always means "agrees with humans".

Float noise: means of sqrt() values differ in the last bits
(0.7071067811865476 vs ...475); values are snapped to 9 decimals before
ranking so such values tie as they should.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, asdict
from typing import Iterable

import numpy as np
import pandas as pd
from scipy import optimize, stats

SNAP_DECIMALS = 9
_R_CLIP = 1.0 - 1e-12


def snap(values) -> np.ndarray:
    """Round to 9 decimals so float-noise duplicates become exact ties."""
    return np.round(np.asarray(values, dtype=float), SNAP_DECIMALS)


@dataclass(frozen=True)
class CorrelationSet:
    """Correlations of one judge/human pairing; None = undefined (see reason)."""

    n: int
    srcc: float | None
    plcc: float | None
    krcc: float | None
    plcc_logistic: float | None = None
    reason: str | None = None
    logistic_reason: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def logistic4(x, b1, b2, b3, b4):
    """4-parameter logistic: b2 + (b1 - b2) / (1 + exp(-(x - b3) / |b4|))."""
    return b2 + (b1 - b2) / (1.0 + np.exp(-(x - b3) / np.abs(b4)))


def _logistic_plcc(x: np.ndarray, y: np.ndarray) -> tuple[float | None, str | None]:
    spread = float(np.std(x)) or 1.0
    p0 = [float(np.max(y)), float(np.min(y)), float(np.mean(x)), spread]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            params, _ = optimize.curve_fit(logistic4, x, y, p0=p0, maxfev=20000)
            fitted = logistic4(x, *params)
    except (RuntimeError, ValueError, optimize.OptimizeWarning, FloatingPointError) as exc:
        return None, f"logistic fit failed: {exc}"
    if not np.all(np.isfinite(fitted)) or np.ptp(fitted) == 0:
        return None, "logistic fit failed: fitted curve is flat or not finite"
    return float(stats.pearsonr(fitted, y)[0]), None


def sample_correlations(
    judge, human, *, lower_is_better: bool = False, logistic: bool = True
) -> CorrelationSet:
    """SRCC, PLCC, KRCC (and logistic PLCC) between paired score arrays.

    Pairs with a missing value on either side are dropped. Undefined (None +
    reason) with fewer than 3 pairs or when either side is constant.
    Symmetric in its arguments apart from the logistic fit, which maps the
    judge onto the human scale.
    """
    x = snap(judge)
    y = snap(human)
    if x.shape != y.shape:
        raise ValueError(f"judge and human must have the same length, got {x.shape} and {y.shape}")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if lower_is_better:
        x = -x
    n = len(x)
    if n < 3:
        return CorrelationSet(n, None, None, None, None, f"only {n} paired samples: need at least 3")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        side = "judge" if np.ptp(x) == 0 else "human"
        return CorrelationSet(n, None, None, None, None, f"{side} scores are constant: correlation undefined")
    srcc = float(stats.spearmanr(x, y)[0])
    plcc = float(stats.pearsonr(x, y)[0])
    krcc = float(stats.kendalltau(x, y)[0])
    fitted, fit_reason = _logistic_plcc(x, y) if logistic else (None, "logistic fit not requested")
    return CorrelationSet(n, srcc, plcc, krcc, fitted, None, fit_reason)


def fisher_z_mean(values: Iterable[float | None]) -> float | None:
    """tanh(mean(atanh(r))) over the defined values; None if there are none."""
    r = np.array([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if not len(r):
        return None
    return float(np.tanh(np.mean(np.arctanh(np.clip(r, -_R_CLIP, _R_CLIP)))))


def tanh_of_mean(values: Iterable[float | None]) -> float | None:
    """tanh(mean(r)): what the VIEScore paper reports as its average.

    Kept only to reproduce published tables; use :func:`fisher_z_mean`.
    """
    r = np.array([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    return float(np.tanh(np.mean(r))) if len(r) else None


def per_group_correlations(
    frame: pd.DataFrame,
    *,
    judge: str,
    human: str,
    by: Iterable[str] = ("model",),
    lower_is_better: bool = False,
    logistic: bool = True,
) -> pd.DataFrame:
    """:func:`sample_correlations` for each group (default: per model).

    ``by=()`` gives the pooled sample-level correlation over all rows.

    Returns one row per group: ``*by, n, srcc, plcc, krcc, plcc_logistic,
    reason, logistic_reason``; undefined values are None.
    """
    by = list(by)
    rows = []
    groups = frame.groupby(by, sort=True) if by else [((), frame)]  # by=() -> one pooled row
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        result = sample_correlations(
            group[judge].to_numpy(), group[human].to_numpy(), lower_is_better=lower_is_better, logistic=logistic
        )
        rows.append({**dict(zip(by, key)), **result.as_dict()})
    table = pd.DataFrame(rows, columns=[*by, *CorrelationSet.__dataclass_fields__])
    return table.astype(object).where(table.notna(), None)


def summarise_across_groups(table: pd.DataFrame) -> dict[str, float | None]:
    """Fisher-z mean of each correlation column of :func:`per_group_correlations`."""
    return {
        column: fisher_z_mean(table[column]) for column in ("srcc", "plcc", "krcc", "plcc_logistic")
    }


# ----------------------------------------------------------------- model level


@dataclass(frozen=True)
class RankingAgreement:
    """Agreement of model-level scores; None = undefined (see reason)."""

    n_models: int
    spearman_rho: float | None
    footrule: float | None
    rmse: float | None
    reason: str | None = None


def model_level_agreement(
    judge_means: pd.Series, human_means: pd.Series, *, lower_is_better: bool = False
) -> RankingAgreement:
    """Compare model-level scores (Series indexed by model).

    ``footrule`` = sum |rank_human - rank_judge| over models (average ranks for
    ties; 0 = identical ranking). ``rmse`` assumes both series are on the same
    scale (e.g. 0-100 MOS) and is None for lower-is-better metrics, whose
    scale is not the human one.
    """
    joined = pd.concat({"judge": judge_means, "human": human_means}, axis=1).dropna()
    n = len(joined)
    judge = snap(joined["judge"]) * (-1 if lower_is_better else 1)
    human = snap(joined["human"])
    if n < 2:
        return RankingAgreement(n, None, None, None, f"only {n} model(s) with both scores: need at least 2")
    judge_rank = stats.rankdata(-judge)
    human_rank = stats.rankdata(-human)
    footrule = float(np.abs(judge_rank - human_rank).sum())
    rmse = None if lower_is_better else float(np.sqrt(np.mean((joined["judge"] - joined["human"]) ** 2)))
    if np.ptp(judge) == 0 or np.ptp(human) == 0:
        return RankingAgreement(n, None, footrule, rmse, "all models tie on one side: rho undefined")
    rho = float(stats.spearmanr(judge, human)[0])
    return RankingAgreement(n, rho, footrule, rmse)


# ----------------------------------------------------------------- VIEScore


def viescore_aspect(scores: pd.Series) -> pd.Series:
    """Per VIEScore: min of the sub-scores / 10, clipped to [0, 1].

    ``scores`` holds lists of numbers (0-10) per sample; an empty list gives
    NaN.
    """
    exploded = pd.to_numeric(scores.explode(), errors="coerce")
    lowest = exploded.groupby(level=0).min().reindex(scores.index)
    return (lowest / 10.0).clip(0.0, 1.0)


def viescore_table(judge_long: pd.DataFrame) -> pd.DataFrame:
    """Judge records (``task, model, uid, aspect, scores``) to one row per sample.

    Returns ``task, model, uid, SC, PQ, O`` with ``O = sqrt(SC * PQ)``;
    O is NaN when either aspect is missing.
    """
    frame = judge_long.reset_index(drop=True)
    frame = frame.assign(value=viescore_aspect(frame["scores"]))
    wide = frame.pivot_table(index=["task", "model", "uid"], columns="aspect", values="value", aggfunc="first")
    wide = wide.reindex(columns=["SC", "PQ"]).reset_index()
    wide.columns.name = None
    wide["O"] = np.sqrt(wide["SC"] * wide["PQ"])
    return wide
