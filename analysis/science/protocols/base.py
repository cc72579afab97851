"""What every rating protocol shares: the Protocol base class, its errors and dimension type.

A protocol object answers every question the rest of the site asks about a study's protocol: its
dimensions and scales, what one rating is of (an item or a comparison), how a screen is laid out,
which analyses apply (agreement level, headline dimension, plots, export layouts), and how its
settings and ratings are checked. Pure Python (no Django); each protocol is one module beside this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

YES, NO = "yes", "no"
# Krippendorff's α at or above this counts as acceptable agreement on the dashboard. Every
# protocol accepts an optional ``agreement_threshold`` setting in (0, 1]; a study without one
# follows the site's AGREEMENT_THRESHOLD, whose default is this value.
DEFAULT_AGREEMENT_THRESHOLD = 0.4
# ``exclude_phones``: raters on a phone are told before consent that the study needs a larger
# screen, and cannot take part (tasks.devices).
OPTIONAL_SETTINGS = ("agreement_threshold", "exclude_phones")

# What one rating is of (``Protocol.unit_kind``); the unit's id column is ``<unit_kind>_id``.
ITEM = "item"
COMPARISON = "comparison"
# What one rating screen holds (``Protocol.screen_kind``): one item, a trial of several items of
# one instance, or one comparison of two items.
TRIAL = "trial"


class ProtocolError(ValueError):
    """A study setting or a rating does not fit its protocol."""


@dataclass(frozen=True)
class Dimension:
    key: str
    label: str
    choices: tuple[float, ...]  # allowed values, ascending


def _as_number(dim: str, value: Any) -> float:
    if isinstance(value, bool) or value is None:
        raise ProtocolError(f"{dim}: a number is required, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ProtocolError(f"{dim}: {value!r} is not a number") from None
    return number


def _check_keys(kind: str, given: dict, allowed: set[str]) -> None:
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ProtocolError(f"unknown {kind}: {', '.join(unknown)}")


class Protocol:
    key: str
    title: str  # the name people read ("ImagenHub")
    default_settings: dict[str, Any] = {}

    # What one rating is of, and what one screen holds (ITEM / TRIAL / COMPARISON).
    unit_kind: str = ITEM
    screen_kind: str = ITEM
    # Ratings are numbers on the protocol's scales: agreement (α), MOS, the subject model, the
    # planning card and the score plots apply. A preference (A / tie / B) is no such scale.
    has_scales: bool = True
    agreement_level: str = "interval"  # Krippendorff level of the scales (Likert MOS scales: interval)
    headline_dimension: str | None = None  # the dimension a ranking is by when nobody picks one
    derived_dimensions: tuple[str, ...] = ()  # scores computed from the rated ones (derived_scores)
    # an imported study's published human scores are stored beside the judges' (role "human reference")
    has_reference_scores: bool = False
    score_scale: str = "raw"  # the human score judges and rankings see: "raw" means or "z-MOS"
    plots: tuple[str, ...] = ()  # the research page plots that apply
    export_layouts: tuple[str, ...] = ()  # published layouts the export writes beside votes/items
    takes_attention_checks: bool = True
    needs_condition_images: bool = False  # each instance brings its task's condition images
    min_outputs_per_instance: int = 1
    instance_text_columns: tuple[str, ...] = ()  # extra per-instance manifest columns
    rater_sampling: str = "sampled"  # of an imported study: a crowd ("sampled") or a fixed panel
    # planning card defaults: the CI half-width and the model gap to resolve, on the scale's units
    planning_targets: dict[str, float] = {"halfwidth": 0.25, "gap": 0.2}
    scale_unit: str = "Likert points"  # what one step of a score is called
    takes_checklist: bool = False  # an answer may come as a checklist (derive_from_checklist)
    all_choices: tuple[str, ...] = ()  # a preference protocol's every possible answer
    task_types: dict[str, str] = {}  # the builder's task-type choices: key -> label shown to people
    # task types a study of this protocol must have (None: the builder's list is checked there)
    required_task_types: dict[str, str] | None = None

    @property
    def unit_plural(self) -> str:
        return f"{self.unit_kind}s"

    def analysis_dimensions(self, settings: dict) -> list[str]:
        """The rated dimensions, then the derived ones: what the analysis reports on."""
        return [d.key for d in self.dimensions(settings)] + list(self.derived_dimensions)

    def derived_scores(self, frame):
        """``frame`` (one row per rating, a column per dimension) with the derived dimensions added."""
        return frame

    def layout_name(self, task_type: str) -> str:
        """The rating screen's layout (templates/tasks/layouts/<name>)."""
        return self.key

    def screen_task(self, task_type: str) -> str:
        """The task whose condition images and prompt label a rating screen shows."""
        return "text_to_image"

    def images_per_screen(self, settings: dict) -> int:
        return 1

    def uses_checklist(self, settings: dict) -> bool:
        """Raters answer the checklist instead of giving the values."""
        return False

    def needs_task_question(self, settings: dict) -> bool:
        """Each instance must carry a yes/no task question."""
        return False

    def clean_settings(self, settings: dict | None) -> dict:
        merged = {**self.default_settings, **(settings or {})}
        _check_keys("setting", merged, set(self.default_settings) | set(OPTIONAL_SETTINGS))
        share = merged.get("gold_share", 0.0)
        if not isinstance(share, (int, float)) or isinstance(share, bool) or not 0 <= share < 1:
            raise ProtocolError(f"gold_share must be a number in [0, 1), got {share!r}")
        if "agreement_threshold" in merged:
            threshold = merged["agreement_threshold"]
            if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not 0 < threshold <= 1:
                raise ProtocolError(f"agreement_threshold must be a number in (0, 1], got {threshold!r}")
        if "exclude_phones" in merged and not isinstance(merged["exclude_phones"], bool):
            raise ProtocolError("exclude_phones must be true or false")
        return merged

    def dimensions(self, settings: dict) -> list[Dimension]:
        raise NotImplementedError

    def questions(self, settings: dict, sub_question_count: int) -> list[str]:
        """Keys of the yes/no answers a rating must carry for an item of this study."""
        return []

    def clean_rating(self, settings: dict, values: dict, answers: dict | None = None, *, sub_question_count: int = 0) -> tuple[dict, dict]:
        """Return (values, answers) normalised; raise ProtocolError naming the first problem."""
        if not isinstance(values, dict):
            raise ProtocolError("values must be an object mapping dimension to value")
        answers = answers or {}
        if not isinstance(answers, dict):
            raise ProtocolError("answers must be an object mapping question to yes/no")
        dims = self.dimensions(settings)
        _check_keys("dimension", values, {d.key for d in dims})
        cleaned: dict[str, Any] = {}
        for dim in dims:
            if dim.key not in values:
                raise ProtocolError(f"{dim.label} ({dim.key}) is missing")
            number = _as_number(dim.key, values[dim.key])
            if number not in dim.choices:
                allowed = " / ".join(f"{c:g}" for c in dim.choices)
                raise ProtocolError(f"{dim.label} ({dim.key}) must be one of {allowed}, got {values[dim.key]!r}")
            cleaned[dim.key] = number
        wanted = self.questions(settings, sub_question_count)
        _check_keys("question", answers, set(wanted))
        cleaned_answers: dict[str, str] = {}
        for key in wanted:
            answer = answers.get(key)
            if isinstance(answer, bool):
                answer = YES if answer else NO
            if isinstance(answer, str):
                answer = answer.strip().lower()
            if answer not in (YES, NO):
                raise ProtocolError(f"question {key} needs a yes/no answer, got {answers.get(key)!r}")
            cleaned_answers[key] = answer
        return cleaned, cleaned_answers

    def clean_answer(self, settings: dict, task_type: str, values: dict, answers: dict | None,
                     checklist: dict | None, *, sub_question_count: int = 0,
                     checklist_required: bool = False) -> tuple[dict, dict, dict]:
        """(values, answers, checklist) of one answer given as values or, in ImagenHub, as the
        Table 9 checklist (SC and PQ then derive from it). ``checklist_required``: a study in
        checklist mode refuses plain values (its rating screens show the checklist)."""
        clean_checklist: dict = {}
        if checklist is not None:
            if not self.takes_checklist:
                raise ProtocolError("only ImagenHub studies take a checklist")
            if values:
                raise ProtocolError("give either the checklist or SC/PQ values, not both")
            values, clean_checklist = self.derive_from_checklist(task_type, checklist)
        elif checklist_required and self.uses_checklist(settings):
            raise ProtocolError("this study rates with the checklist: mark every row")
        clean_values, clean_answers = self.clean_rating(settings, values, answers,
                                                        sub_question_count=sub_question_count)
        return clean_values, clean_answers, clean_checklist
