"""Study progress: coverage of the rating target and an ETA from the recent rate. No Django."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

RECENT_WINDOW = timedelta(hours=1)
MIN_RECENT = 5  # below this many ratings in the window, use the last RECENT_FALLBACK ratings instead
RECENT_FALLBACK = 50


@dataclass(frozen=True)
class Progress:
    units: int
    target_per_unit: int
    ratings: int
    counted: int  # ratings that count towards the target (at most target per unit)
    units_complete: int
    histogram: dict[int, int]  # ratings on a unit (capped at target) -> number of units
    rate_per_hour: float | None
    eta: timedelta | None
    eta_reason: str | None

    @property
    def needed(self) -> int:
        return self.units * self.target_per_unit

    @property
    def share(self) -> float:
        return self.counted / self.needed if self.needed else 0.0


def recent_rate(timestamps: list[datetime], now: datetime) -> tuple[float | None, str | None]:
    """Ratings per hour: over the last hour, or over the last 50 ratings if the hour was quiet."""
    if not timestamps:
        return None, "no ratings yet"
    stamps = sorted(timestamps)
    recent = [t for t in stamps if now - t <= RECENT_WINDOW]
    if len(recent) >= MIN_RECENT:
        return len(recent) / (RECENT_WINDOW.total_seconds() / 3600), None
    tail = stamps[-RECENT_FALLBACK:]
    if len(tail) < 2:
        return None, "one rating so far: no rate yet"
    span = (now - tail[0]).total_seconds() / 3600
    if span <= 0:
        return None, "ratings have no time spread yet"
    return len(tail) / span, None


def study_progress(per_unit_counts: list[int], target: int, timestamps: list[datetime], now: datetime) -> Progress:
    """Coverage of ``target`` ratings per unit and the time left at the recent rate."""
    counts = np.asarray(per_unit_counts, dtype=int)
    capped = np.minimum(counts, target)
    histogram = {k: int((capped == k).sum()) for k in range(target + 1)}
    counted = int(capped.sum())
    remaining = len(counts) * target - counted
    rate, reason = recent_rate(timestamps, now)
    eta = None
    if remaining == 0:
        eta, reason = timedelta(0), None
    elif rate:
        eta = timedelta(hours=remaining / rate)
    return Progress(len(counts), target, int(counts.sum()), counted, int((capped >= target).sum()), histogram, rate,
                    eta, reason)
