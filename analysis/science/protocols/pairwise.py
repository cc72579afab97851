"""Pairwise preference: two outputs of one instance, A / B / tie, optionally 'both bad'.

A rating is of a comparison, not an item; a preference is no rating scale, so agreement, MOS,
the subject model and the score plots do not apply (the report ranks by Bradley–Terry instead).
"""

from __future__ import annotations

from analysis.science.protocols.base import COMPARISON, Dimension, Protocol, ProtocolError, _check_keys
from analysis.science.protocols.imagenhub import IMAGENHUB_TASKS

PAIRWISE = "pairwise"
PAIRWISE_CHOICES = ("A", "B", "tie", "both_bad")


def pairwise_side(preference: str, left: str) -> str:
    """A stored preference (A/B terms) as the rater saw it when ``left`` ("A" or "B") was on the
    left: ``left`` or ``right``; ``tie`` and ``both_bad`` are the same on either side."""
    if preference not in ("A", "B"):
        return preference
    return "left" if preference == left else "right"


class PairwiseProtocol(Protocol):
    """Two outputs of one instance: A, B, tie, optionally 'both bad'."""

    key = PAIRWISE
    title = "Pairwise"
    default_settings = {"allow_both_bad": True, "gold_share": 0.0}
    task_types = IMAGENHUB_TASKS  # two outputs of one instance, of any ImagenHub task
    unit_kind = COMPARISON
    screen_kind = COMPARISON
    has_scales = False
    takes_attention_checks = False  # attention checks are single items; pairs use gold comparisons
    min_outputs_per_instance = 2
    all_choices = PAIRWISE_CHOICES

    def clean_settings(self, settings: dict | None) -> dict:
        merged = super().clean_settings(settings)
        if not isinstance(merged["allow_both_bad"], bool):
            raise ProtocolError("allow_both_bad must be true or false")
        return merged

    def dimensions(self, settings: dict) -> list[Dimension]:
        return []

    def choices(self, settings: dict) -> tuple[str, ...]:
        return PAIRWISE_CHOICES if settings.get("allow_both_bad", True) else PAIRWISE_CHOICES[:3]

    def clean_rating(self, settings: dict, values: dict, answers: dict | None = None, *, sub_question_count: int = 0) -> tuple[dict, dict]:
        if not isinstance(values, dict):
            raise ProtocolError("values must be an object")
        _check_keys("dimension", values, {"preference"})
        if answers:
            raise ProtocolError("pairwise ratings take no question answers")
        choice = values.get("preference")
        if choice not in self.choices(settings):
            raise ProtocolError(f"preference must be one of {', '.join(self.choices(settings))}, got {choice!r}")
        return {"preference": choice}, {}
