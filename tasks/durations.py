"""Durations as people read them: ``timedelta(hours=3, minutes=20)`` → "about 3 h 20 min"."""

from __future__ import annotations

from datetime import timedelta


def readable_duration(value: timedelta | None) -> str:
    """Two units at most, rounded to the smaller one; "less than a minute" below 60 s.

    The ETA this shows is an extrapolation of a recent rate, so minutes on a three-day wait or
    seconds on an hour's would be false precision."""
    if value is None:
        return ""
    seconds = max(0, round(value.total_seconds()))
    if seconds < 60:
        return "less than a minute"
    minutes = round(seconds / 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        hours += round(minutes / 60)
        if hours == 24:
            days, hours = days + 1, 0
        parts = [f"{days} day{'s' if days != 1 else ''}"] + ([f"{hours} h"] if hours else [])
    elif hours:
        parts = [f"{hours} h"] + ([f"{minutes} min"] if minutes else [])
    else:
        parts = [f"{minutes} min"]
    return "about " + " ".join(parts)
