"""EvalMi-50K (seed 004): Likert perception and text–image correspondence, plus yes/no task questions.

Scores are z-MOS (per-rater z, rescaled to 0–100, analysis.science.zmos); a screen is a trial of
``images_per_trial`` outputs of one instance.
"""

from __future__ import annotations

from analysis.science.protocols.base import TRIAL, Dimension, Protocol, ProtocolError

EVALMI = "evalmi"


class EvalMiProtocol(Protocol):
    """Likert perception and text-image correspondence plus yes/no task questions (seed 004)."""

    key = EVALMI
    title = "EvalMi"
    default_settings = {"likert_min": 1, "likert_max": 5, "qa": True, "images_per_trial": 3, "gold_share": 0.0}
    # EvalMi-50K: text-to-image outputs whose instances carry a task tag (counting, colour, …)
    task_types = {"mixed": "Text-to-image, mixed task tags (EvalMi-50K)", "text_to_image": "Text-guided image generation"}
    screen_kind = TRIAL
    agreement_level = "interval"  # Likert MOS scales
    headline_dimension = "correspondence"
    score_scale = "z-MOS"
    has_reference_scores = True  # EvalMi-50K's published MOS
    plots = ("histograms", "mos", "alpha")
    instance_text_columns = ("task_tag", "question", "sub_questions")
    export_layouts = ("evalmi",)  # EvalMi-50K's sheets (xlsx)

    def clean_settings(self, settings: dict | None) -> dict:
        merged = super().clean_settings(settings)
        lo, hi = merged["likert_min"], merged["likert_max"]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)):
            raise ProtocolError("likert_min and likert_max must be whole numbers")
        if hi - lo < 1 or hi - lo > 100:
            raise ProtocolError(f"Likert range {lo}–{hi} must have between 2 and 101 points")
        if not isinstance(merged["qa"], bool):
            raise ProtocolError("qa must be true or false")
        n = merged["images_per_trial"]
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 6:
            raise ProtocolError("images_per_trial must be a whole number from 1 to 6")
        return merged

    def dimensions(self, settings: dict) -> list[Dimension]:
        scale = tuple(float(v) for v in range(settings["likert_min"], settings["likert_max"] + 1))
        return [
            Dimension("perception", "Perception", scale),
            Dimension("correspondence", "Text–image correspondence", scale),
        ]

    def questions(self, settings: dict, sub_question_count: int) -> list[str]:
        if not settings.get("qa", True):
            return []
        return ["q1"] + [f"q{i}" for i in range(2, 2 + sub_question_count)]

    def images_per_screen(self, settings: dict) -> int:
        return settings.get("images_per_trial", 1)

    def needs_task_question(self, settings: dict) -> bool:
        return bool(settings.get("qa", True))
