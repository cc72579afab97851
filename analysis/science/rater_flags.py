"""Behaviour flags for raters: pure computations, no Django.

Input is a long DataFrame with one row per (rater, item, dimension):

    rater       any hashable label
    item        the rated unit
    dimension   e.g. "SC", "PQ", "perception"
    score       the rating rescaled to 0-1 over the study's scale
                (0 = scale minimum, 1 = maximum), so thresholds mean the
                same on a 3-point ImagenHub scale and a 5-point Likert one
    time_ms     optional: time on item in milliseconds (one value per item;
                repeated over its dimensions is fine, it is de-duplicated)
    session     optional: a rater's working session; straight-lining is
                judged per session, and the study counts as one session
                when the column is absent

Every flag carries a reason a researcher can read ("median 850 ms per item,
study minimum 2000 ms"). Thresholds live in :class:`Thresholds`; the site
fills them from the study's quality policy.

Flags:

``too_fast``
    median time per item below ``min_median_time_ms``.
``straight_lining``
    in some session of at least ``straightline_min_items`` items, every
    dimension's scores have a standard deviation (ddof 0, 0-1 units) at or
    below ``straightline_max_std`` -- i.e. the same answer over and over.
``low_consensus``
    Pearson r between the rater's scores and the leave-one-out consensus
    (mean of the *other* raters on the same item and dimension) below
    ``min_consensus_r``, over at least ``consensus_min_items`` pairs. A rater
    whose scores never vary while the consensus does has no r and is flagged
    with that reason; when the consensus itself never varies nothing is flagged.
``bt500``
    rejected by the ITU-R BT.500 observer screening of
    :mod:`analysis.science.screening`, run on (item, dimension) units.
``attention``
    failed attention checks reached ``attention_max_failures`` (Prolific:
    two failures before a rejection in longer studies).
``gold``
    gold accuracy below ``gold_min_accuracy`` after ``gold_min_items`` gold
    items (counted and passed in by the caller, see :func:`gold_flag`).
``inconsistent``
    the P.913 subject model (:mod:`analysis.science.subject_model`, fitted per
    dimension on the raw scores) finds the rater's noise well above the
    typical rater's: the low end of their inconsistency's 95 % CI exceeds
    1.5 × the median rater's. Needs no gold answer. Reported only: it is not
    one of the behaviour flags the automatic rules act on (raters.quality
    ``BEHAVIOUR_CODES``), so screening decisions stay as they were.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.science.screening import screen_observers
from analysis.science.subject_model import INCONSISTENCY_FACTOR, subject_model

FLAG_CODES = ("too_fast", "straight_lining", "low_consensus", "bt500", "attention", "gold", "inconsistent")
FLAG_LABELS = {
    "too_fast": "Too fast",
    "straight_lining": "Straight-lining",
    "low_consensus": "Low agreement with consensus",
    "bt500": "BT.500 rejection",
    "attention": "Failed attention checks",
    "gold": "Low gold accuracy",
    "inconsistent": "Inconsistent (subject model, no gold)",
}


@dataclass(frozen=True)
class Thresholds:
    min_median_time_ms: float = 2000.0
    straightline_max_std: float = 0.05
    straightline_min_items: int = 10
    min_consensus_r: float = 0.3
    consensus_min_items: int = 10
    attention_max_failures: int = 2
    gold_min_accuracy: float = 0.7
    gold_min_items: int = 10
    use_bt500: bool = True
    use_subject_model: bool = True  # the ``inconsistent`` flag and the per-dimension bias/inconsistency


@dataclass(frozen=True)
class Flag:
    code: str
    reason: str
    value: float | None = None
    threshold: float | None = None

    @property
    def label(self) -> str:
        return FLAG_LABELS[self.code]


@dataclass
class RaterQuality:
    """Per-rater numbers behind the flags; ``None`` where undefined (with the reason in flags or notes)."""

    rater: object
    n_items: int = 0
    median_time_ms: float | None = None
    consensus_r: float | None = None
    consensus_pairs: int = 0
    mean_abs_deviation: float | None = None
    flags: list[Flag] = field(default_factory=list)
    # dimension -> the rater in the subject model: bias, bias_ci95, inconsistency, inconsistency_ci95,
    # median_inconsistency (of the study's raters), ratings, inconsistent
    subject: dict[str, dict] = field(default_factory=dict)

    def has(self, code: str) -> bool:
        return any(f.code == code for f in self.flags)


def too_fast_flag(times_ms, threshold_ms: float) -> Flag | None:
    """Flag when the median of the known times is below ``threshold_ms``; unknown times are ignored."""
    times = np.asarray([t for t in times_ms if t is not None and np.isfinite(t)], dtype=float)
    if times.size == 0 or threshold_ms <= 0:
        return None
    median = float(np.median(times))
    if median < threshold_ms:
        return Flag(
            "too_fast",
            f"median {median:.0f} ms per item over {times.size} items, study minimum {threshold_ms:.0f} ms",
            median,
            float(threshold_ms),
        )
    return None


def straight_lining_flag(session_scores: dict[object, pd.DataFrame], *, max_std: float, min_items: int) -> Flag | None:
    """``session_scores``: session -> frame with ``item, dimension, score`` of one rater.

    Returns the flag for the first session (in sorted order) whose every dimension is flat.
    """
    for session in sorted(session_scores, key=str):
        frame = session_scores[session]
        n_items = frame["item"].nunique()
        if n_items < min_items:
            continue
        spreads = frame.groupby("dimension")["score"].std(ddof=0)
        if len(spreads) and float(spreads.max()) <= max_std + 1e-12:
            dims = ", ".join(f"{d} sd {s:.2f}" for d, s in spreads.items())
            where = "" if session is None else f" in session {session}"
            return Flag(
                "straight_lining",
                f"near-identical scores on {n_items} items{where} ({dims}; limit {max_std:.2f} on the 0-1 scale)",
                float(spreads.max()),
                float(max_std),
            )
    return None


def consensus_agreement(frame: pd.DataFrame) -> pd.DataFrame:
    """Per rater: ``r`` (Pearson with the leave-one-out consensus), ``pairs``, ``mad``, ``own_constant``,
    ``consensus_constant``. Units rated by a single rater have no consensus and are skipped."""
    data = frame[["rater", "item", "dimension", "score"]].dropna(subset=["score"])
    unit = data.groupby(["item", "dimension"])["score"]
    total = unit.transform("sum")
    count = unit.transform("size")
    data = data.assign(others=(total - data["score"]) / (count - 1)).loc[count > 1]
    rows = []
    for rater, group in data.groupby("rater", sort=True):
        own, others = group["score"].to_numpy(float), group["others"].to_numpy(float)
        own_constant = bool(np.ptp(own) < 1e-12) if own.size else True
        consensus_constant = bool(np.ptp(others) < 1e-12) if others.size else True
        r = None
        if own.size >= 2 and not own_constant and not consensus_constant:
            r = float(np.corrcoef(own, others)[0, 1])
        rows.append(
            {
                "rater": rater,
                "r": r,
                "pairs": int(own.size),
                "mad": float(np.mean(np.abs(own - others))) if own.size else None,
                "own_constant": own_constant,
                "consensus_constant": consensus_constant,
            }
        )
    return pd.DataFrame(rows, columns=["rater", "r", "pairs", "mad", "own_constant", "consensus_constant"]).set_index(
        "rater"
    )


def consensus_flag(row, *, min_r: float, min_pairs: int) -> Flag | None:
    if row is None or row["pairs"] < min_pairs:
        return None
    if row["r"] is None or pd.isna(row["r"]):
        if row["own_constant"] and not row["consensus_constant"]:
            return Flag(
                "low_consensus",
                f"the same score on all {row['pairs']} shared scores while the other raters' consensus varies",
                None,
                float(min_r),
            )
        return None
    if row["r"] < min_r:
        return Flag(
            "low_consensus",
            f"r = {row['r']:.2f} with the leave-one-out consensus over {row['pairs']} scores (minimum {min_r:.2f})",
            float(row["r"]),
            float(min_r),
        )
    return None


def attention_flag(failures: int, checks: int, *, max_failures: int) -> Flag | None:
    if max_failures > 0 and failures >= max_failures:
        return Flag(
            "attention",
            f"failed {failures} of {checks} attention checks (limit {max_failures})",
            float(failures),
            float(max_failures),
        )
    return None


def gold_flag(correct: int, total: int, *, min_accuracy: float, min_items: int) -> Flag | None:
    """Gold accuracy is judged only once ``total >= min_items`` (early misses are noise)."""
    if total < max(min_items, 1):
        return None
    accuracy = correct / total
    if accuracy < min_accuracy:
        return Flag(
            "gold",
            f"gold accuracy {accuracy:.0%} ({correct} of {total}), minimum {min_accuracy:.0%} after {min_items} gold items",
            accuracy,
            float(min_accuracy),
        )
    return None


def rater_quality(
    frame: pd.DataFrame,
    thresholds: Thresholds = Thresholds(),
    *,
    attention: dict[object, tuple[int, int]] | None = None,
    gold: dict[object, tuple[int, int]] | None = None,
) -> dict[object, RaterQuality]:
    """All flags for every rater in ``frame`` (see module docstring for columns).

    ``attention``: rater -> (failures, checks seen); ``gold``: rater -> (correct, gold items rated).
    Raters that appear only in ``attention``/``gold`` get an entry too.
    """
    attention = attention or {}
    gold = gold or {}
    results: dict[object, RaterQuality] = {}
    raters = list(dict.fromkeys([*frame["rater"].tolist(), *attention, *gold])) if len(frame) else [*dict.fromkeys([*attention, *gold])]
    for rater in raters:
        results[rater] = RaterQuality(rater=rater)

    if len(frame):
        consensus = consensus_agreement(frame)
        bt500_rejected: dict[object, str] = {}
        if thresholds.use_bt500:
            units = frame.assign(unit=frame["item"].astype(str) + "|" + frame["dimension"].astype(str))
            screening = screen_observers(units.dropna(subset=["score"]), score="score", rater="rater", item="unit")
            for rater, row in screening.raters.iterrows():
                if row["rejected"]:
                    bt500_rejected[rater] = row["reason"]
        if thresholds.use_subject_model:
            _subject_numbers(frame, results)
        has_session = "session" in frame.columns
        for rater, group in frame.groupby("rater", sort=False):
            quality = results[rater]
            quality.n_items = int(group["item"].nunique())
            if "time_ms" in group.columns:
                times = group.drop_duplicates("item")["time_ms"].astype(float).to_numpy()
                known = times[np.isfinite(times)]
                quality.median_time_ms = float(np.median(known)) if known.size else None
                flag = too_fast_flag(known, thresholds.min_median_time_ms)
                if flag:
                    quality.flags.append(flag)
            sessions = {k: g for k, g in group.groupby("session", sort=False)} if has_session else {None: group}
            flag = straight_lining_flag(
                sessions, max_std=thresholds.straightline_max_std, min_items=thresholds.straightline_min_items
            )
            if flag:
                quality.flags.append(flag)
            row = consensus.loc[rater] if rater in consensus.index else None
            if row is not None:
                quality.consensus_r = None if row["r"] is None or pd.isna(row["r"]) else float(row["r"])
                quality.consensus_pairs = int(row["pairs"])
                quality.mean_abs_deviation = None if row["mad"] is None else float(row["mad"])
            flag = consensus_flag(row, min_r=thresholds.min_consensus_r, min_pairs=thresholds.consensus_min_items)
            if flag:
                quality.flags.append(flag)
            if rater in bt500_rejected:
                quality.flags.append(Flag("bt500", bt500_rejected[rater]))
            flag = inconsistent_flag(quality.subject)
            if flag:
                quality.flags.append(flag)

    for rater, (failures, checks) in attention.items():
        flag = attention_flag(failures, checks, max_failures=thresholds.attention_max_failures)
        if flag:
            results[rater].flags.append(flag)
    for rater, (correct, total) in gold.items():
        flag = gold_flag(correct, total, min_accuracy=thresholds.gold_min_accuracy, min_items=thresholds.gold_min_items)
        if flag:
            results[rater].flags.append(flag)
    return results


def _subject_numbers(frame: pd.DataFrame, results: dict[object, RaterQuality]) -> None:
    """Fill ``RaterQuality.subject`` per dimension from the subject model of that dimension's scores
    (``raw`` scale units when the frame has them, else the 0-1 ``score``)."""
    column = "raw" if "raw" in frame.columns else "score"
    for dimension, group in frame.dropna(subset=[column]).groupby("dimension", sort=True):
        if group["rater"].nunique() < 2:
            continue
        fitted = subject_model(group[["rater", "item", column]], score=column)
        raters = fitted.raters
        median = float(np.nanmedian(raters["inconsistency"])) if len(raters) else float("nan")
        for rater, row in raters.iterrows():
            if rater not in results:
                continue
            results[rater].subject[str(dimension)] = {
                "bias": _finite(row["bias"]), "bias_ci95": _pair(row["bias_ci_low"], row["bias_ci_high"]),
                "inconsistency": _finite(row["inconsistency"]),
                "inconsistency_ci95": _pair(row["inconsistency_ci_low"], row["inconsistency_ci_high"]),
                "median_inconsistency": _finite(median), "ratings": int(row["n"]),
                "inconsistent": bool(row["inconsistent"]),
            }


def _finite(value) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None


def _pair(low, high) -> list[float] | None:
    low, high = _finite(low), _finite(high)
    return None if low is None or high is None else [low, high]


def inconsistent_flag(subject: dict[str, dict]) -> Flag | None:
    """The ``inconsistent`` flag from a rater's per-dimension subject-model numbers, or None."""
    # Against a median rater with no noise at all (a handful of raters who agree exactly) the ratio
    # is undefined: no flag from that dimension.
    hits = [(dim, numbers) for dim, numbers in sorted(subject.items())
            if numbers.get("inconsistent") and numbers.get("median_inconsistency")]
    if not hits:
        return None
    parts = [f"{dim}: inconsistency {n['inconsistency']:.2f} (95 % CI {n['inconsistency_ci95'][0]:.2f}–"
             f"{n['inconsistency_ci95'][1]:.2f}) against a median rater's {n['median_inconsistency']:.2f}"
             for dim, n in hits]
    worst = max(n["inconsistency"] / n["median_inconsistency"] for _, n in hits)
    return Flag("inconsistent", "; ".join(parts) + f" (limit: CI above {INCONSISTENCY_FACTOR:g} × the median)",
                float(worst), float(INCONSISTENCY_FACTOR))
