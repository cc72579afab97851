"""One builder for the rater-quality numbers of a study: the page, the rules and exports use it.

Loads the study's ratings into the long frame ``analysis.science.rater_flags`` expects (scores rescaled to
0-1 per dimension), adds gold accuracy and attention-check failures, and returns per-rater rows.
Attention-check items are left out of the frame (their answer was instructed, not judged).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta

import pandas as pd

from analysis.science.rater_flags import Flag, RaterQuality, Thresholds, rater_quality
from raters.gold import attention_failures_by_rater, gold_accuracy_by_rater, reserved_item_ids
from raters.models import QualityPolicy, Rater, RaterStanding
from tasks.models import Rating, Study

BEHAVIOUR_CODES = ("too_fast", "straight_lining", "low_consensus", "bt500")
SESSION_GAP = timedelta(minutes=30)  # a pause this long starts a new working session
PAIRWISE_SCORE = {"A": 1.0, "tie": 0.5, "B": 0.0}  # "both_bad" has no place on the scale


def thresholds_for(policy: QualityPolicy) -> Thresholds:
    return Thresholds(
        min_median_time_ms=float(policy.min_median_time_ms),
        straightline_max_std=policy.straightline_max_std,
        straightline_min_items=policy.straightline_min_items,
        min_consensus_r=policy.min_consensus_r,
        consensus_min_items=policy.consensus_min_items,
        attention_max_failures=policy.attention_max_failures,
        gold_min_accuracy=policy.gold_min_accuracy,
        gold_min_items=policy.gold_min_items,
        use_bt500=policy.use_bt500,
    )


def _scales(study: Study) -> dict[str, tuple[float, float]]:
    dims = study.protocol_def.dimensions(study.protocol_settings)
    return {d.key: (d.choices[0], d.choices[-1]) for d in dims}


def study_frame(study: Study) -> pd.DataFrame:
    """Long frame: rater (id), item, dimension, score (0-1), raw (scale units), time_ms, session."""
    scales = _scales(study)
    reserved = reserved_item_ids(study)
    rows = []
    ratings = (
        Rating.objects.filter(study=study)
        .exclude(item_id__in=reserved)
        .order_by("rater_id", "created_at", "pk")
        .values("rater_id", "item_id", "comparison_id", "values", "time_on_item_ms", "created_at")
    )
    last_rater, last_time, session = None, None, 0
    for r in ratings:
        if r["rater_id"] != last_rater:
            last_rater, session = r["rater_id"], 0
        elif r["created_at"] - last_time >= SESSION_GAP:
            session += 1
        last_time = r["created_at"]
        unit = r["item_id"] if r["item_id"] is not None else f"c{r['comparison_id']}"
        base = {"rater": r["rater_id"], "item": unit, "time_ms": r["time_on_item_ms"], "session": session}
        if not study.protocol_def.has_scales:  # a preference, coded on PAIRWISE_SCORE
            raw = PAIRWISE_SCORE.get(r["values"].get("preference"))
            rows.append({**base, "dimension": "preference", "raw": raw, "score": raw})
            continue
        for dim, (lo, hi) in scales.items():
            value = r["values"].get(dim)
            if value is None:
                continue
            rows.append({**base, "dimension": dim, "raw": float(value), "score": (float(value) - lo) / (hi - lo)})
    frame = pd.DataFrame(rows, columns=["rater", "item", "dimension", "raw", "score", "time_ms", "session"])
    frame["time_ms"] = frame["time_ms"].astype(float)
    return frame


def study_quality(study: Study, frame: pd.DataFrame | None = None) -> dict[int, RaterQuality]:
    """rater id -> RaterQuality (numbers and flags) under the study's policy."""
    policy = QualityPolicy.for_study(study)
    frame = study_frame(study) if frame is None else frame
    thresholds = thresholds_for(policy)
    if not study.protocol_def.has_scales:  # A / tie / B is no rating scale for the subject model
        thresholds = replace(thresholds, use_subject_model=False)
    return rater_quality(
        frame.dropna(subset=["score"]),
        thresholds,
        attention=attention_failures_by_rater(study),
        gold=gold_accuracy_by_rater(study),
    )


@dataclass
class RaterRow:
    rater: Rater
    standing: RaterStanding
    items_done: int
    gold_correct: int
    gold_total: int
    median_time_ms: float | None
    consensus_r: float | None
    attention_failed: int
    attention_total: int
    flags: list[Flag] = field(default_factory=list)
    subject: dict[str, dict] = field(default_factory=dict)  # dimension -> bias and inconsistency (subject model)

    @property
    def gold_accuracy(self) -> float | None:
        return self.gold_correct / self.gold_total if self.gold_total else None

    @property
    def state(self) -> str:
        """Blocked site-wide wins over the study standing."""
        if self.rater.state == Rater.State.BLOCKED:
            return RaterStanding.State.BLOCKED
        return self.standing.state

    @property
    def excluded(self) -> bool:
        return self.state in (RaterStanding.State.REJECTED, RaterStanding.State.BLOCKED)

    @property
    def flag_codes(self) -> list[str]:
        return [f.code for f in self.flags]


def rater_rows(study: Study) -> list[RaterRow]:
    """One row per rater who has an assignment or a rating in the study, ordered by rater id."""
    frame = study_frame(study)
    quality = study_quality(study, frame)
    gold = gold_accuracy_by_rater(study)
    attention = attention_failures_by_rater(study)
    raters = list(Rater.objects.with_work_in(study).select_related("user").order_by("pk"))
    rater_ids = [rater.pk for rater in raters]
    standings = {s.rater_id: s for s in RaterStanding.objects.filter(study=study)}
    done = (
        Rating.objects.filter(study=study, rater_id__in=rater_ids).values_list("rater_id", flat=True)
    )
    done_count: dict[int, int] = {}
    for rater_id in done:
        done_count[rater_id] = done_count.get(rater_id, 0) + 1
    rows = []
    for rater in raters:
        q = quality.get(rater.pk) or RaterQuality(rater=rater.pk)
        correct, total = gold.get(rater.pk, (0, 0))
        failed, checks = attention.get(rater.pk, (0, 0))
        rows.append(
            RaterRow(
                rater=rater,
                standing=standings.get(rater.pk) or RaterStanding(study=study, rater=rater),
                items_done=done_count.get(rater.pk, 0),
                gold_correct=correct,
                gold_total=total,
                median_time_ms=q.median_time_ms,
                consensus_r=q.consensus_r,
                attention_failed=failed,
                attention_total=checks,
                flags=q.flags,
                subject=q.subject,
            )
        )
    return rows
