"""Rating protocols: which dimensions a study asks for, their scales, and how a rating is checked.

Pure Python (no Django) so the analysis layer, importers and the rating UI share one definition.
Each protocol validates the study's settings (filling defaults) and validates one rating's values
and answers against those settings. Errors are ``ProtocolError`` with a message a rater or a
researcher can act on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

IMAGENHUB = "imagenhub"
EVALMI = "evalmi"
PAIRWISE = "pairwise"

# The seven ImagenHub tasks (seed 003, section 3); value = label shown to people.
IMAGENHUB_TASKS = {
    "text_to_image": "Text-guided image generation",
    "mask_guided_editing": "Mask-guided image editing",
    "text_guided_editing": "Text-guided image editing",
    "subject_driven_generation": "Subject-driven image generation",
    "multi_concept_composition": "Multi-concept image composition",
    "subject_driven_editing": "Subject-driven image editing",
    "control_guided_generation": "Control-guided image generation",
}
IMAGENHUB_VALUES = (0.0, 0.5, 1.0)

# Checklist mode (ImagenHub Table 9): the conditions a rater checks, per task, in screen order.
IMAGENHUB_CONDITIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "text_to_image": (("prompt", "Prompt"),),
    "mask_guided_editing": (("edit", "Edit inside the mask"), ("source", "Rest of the source image kept")),
    "text_guided_editing": (("edit", "Edit instruction"), ("source", "Rest of the source image kept")),
    "subject_driven_generation": (("subject_1", "Subject [V]"), ("prompt", "Prompt")),
    "multi_concept_composition": (("subject_1", "Subject 1"), ("subject_2", "Subject 2"), ("prompt", "Prompt")),
    "subject_driven_editing": (("subject_1", "Subject [V]"), ("source", "Rest of the source image kept")),
    "control_guided_generation": (("control", "Control image layout"), ("prompt", "Prompt")),
}
FOLLOWING = {"no": 0.0, "some": 0.5, "most": 1.0}  # no following at all / some part / most part
OBJECTS = ("recognizable", "unrecognizable")
ARTIFACTS = ("none", "some", "serious")  # none or little / moderate / serious
UNUSUAL_SENSE = ("none", "some")  # none or little / moderate

# Text-guided editors that take a description of the wanted image rather than an instruction
# (ImagenHub's text-guided editing models); raters see the form their model received.
DESCRIPTION_EDITORS = ("CycleDiffusion", "DiffEdit", "Pix2PixZero", "Prompt2prompt", "SDEdit", "Text2Live", "Imagic")
PAIRWISE_CHOICES = ("A", "B", "tie", "both_bad")
YES, NO = "yes", "no"
# Krippendorff's α at or above this counts as acceptable agreement on the dashboard. Every
# protocol accepts an optional ``agreement_threshold`` setting in (0, 1]; a study without one
# follows the site's AGREEMENT_THRESHOLD, whose default is this value.
DEFAULT_AGREEMENT_THRESHOLD = 0.4
# ``exclude_phones``: raters on a phone are told before consent that the study needs a larger
# screen, and cannot take part (tasks.devices).
OPTIONAL_SETTINGS = ("agreement_threshold", "exclude_phones")


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
    default_settings: dict[str, Any] = {}

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
            if self.key != IMAGENHUB:
                raise ProtocolError("only ImagenHub studies take a checklist")
            if values:
                raise ProtocolError("give either the checklist or SC/PQ values, not both")
            values, clean_checklist = self.derive_from_checklist(task_type, checklist)
        elif checklist_required and settings.get("checklist_mode"):
            raise ProtocolError("this study rates with the checklist: mark every row")
        clean_values, clean_answers = self.clean_rating(settings, values, answers,
                                                        sub_question_count=sub_question_count)
        return clean_values, clean_answers, clean_checklist


class ImagenHubProtocol(Protocol):
    """Semantic Consistency and Perceptual Quality, each 0 / 0.5 / 1 (ImagenHub, seed 003)."""

    key = IMAGENHUB
    default_settings = {"checklist_mode": False, "gold_share": 0.0, "description_models": list(DESCRIPTION_EDITORS)}

    def clean_settings(self, settings: dict | None) -> dict:
        merged = super().clean_settings(settings)
        if not isinstance(merged["checklist_mode"], bool):
            raise ProtocolError("checklist_mode must be true or false")
        names = merged["description_models"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ProtocolError("description_models must be a list of model names")
        return merged

    def dimensions(self, settings: dict) -> list[Dimension]:
        return [
            Dimension("SC", "Semantic consistency", IMAGENHUB_VALUES),
            Dimension("PQ", "Perceptual quality", IMAGENHUB_VALUES),
        ]

    def derive_from_checklist(self, task_type: str, checklist: dict) -> tuple[dict, dict]:
        """Return ({SC, PQ}, cleaned checklist) from Table 9 marks; raise ProtocolError.

        ``checklist``: one of no/some/most per condition of the task (IMAGENHUB_CONDITIONS),
        plus ``objects`` (recognizable/unrecognizable), ``artifacts`` (none/some/serious) and
        ``unusual`` (none/some). SC is the minimum over the conditions (no → 0, some → 0.5,
        most → 1). PQ is 0 when objects are unrecognizable or artifacts serious, 0.5 with some
        artifacts or some unusual sense, else 1.
        """
        if task_type not in IMAGENHUB_CONDITIONS:
            raise ProtocolError(f"no checklist for task {task_type!r}")
        if not isinstance(checklist, dict):
            raise ProtocolError("checklist must be an object")
        conditions = IMAGENHUB_CONDITIONS[task_type]
        fields: list[tuple[str, str, tuple[str, ...]]] = [(key, label, tuple(FOLLOWING)) for key, label in conditions]
        fields += [("objects", "Objects in image", OBJECTS), ("artifacts", "Artifacts", ARTIFACTS),
                   ("unusual", "Unusual sense", UNUSUAL_SENSE)]
        _check_keys("checklist entry", checklist, {key for key, _, _ in fields})
        cleaned: dict[str, str] = {}
        for key, label, allowed in fields:
            mark = checklist.get(key)
            if mark is None or mark == "":
                raise ProtocolError(f"{label} is missing")
            if mark not in allowed:
                raise ProtocolError(f"{label} must be one of {' / '.join(allowed)}, got {mark!r}")
            cleaned[key] = mark
        sc = min(FOLLOWING[cleaned[key]] for key, _ in conditions)
        if cleaned["objects"] == "unrecognizable" or cleaned["artifacts"] == "serious":
            pq = 0.0
        elif cleaned["artifacts"] == "some" or cleaned["unusual"] == "some":
            pq = 0.5
        else:
            pq = 1.0
        return {"SC": sc, "PQ": pq}, cleaned


class EvalMiProtocol(Protocol):
    """Likert perception and text-image correspondence plus yes/no task questions (seed 004)."""

    key = EVALMI
    default_settings = {"likert_min": 1, "likert_max": 5, "qa": True, "images_per_trial": 3, "gold_share": 0.0}

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


def pairwise_side(preference: str, left: str) -> str:
    """A stored preference (A/B terms) as the rater saw it when ``left`` ("A" or "B") was on the
    left: ``left`` or ``right``; ``tie`` and ``both_bad`` are the same on either side."""
    if preference not in ("A", "B"):
        return preference
    return "left" if preference == left else "right"


class PairwiseProtocol(Protocol):
    """Two outputs of one instance: A, B, tie, optionally 'both bad'."""

    key = PAIRWISE
    default_settings = {"allow_both_bad": True, "gold_share": 0.0}

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


PROTOCOLS: dict[str, Protocol] = {p.key: p for p in (ImagenHubProtocol(), EvalMiProtocol(), PairwiseProtocol())}


def get_protocol(key: str) -> Protocol:
    try:
        return PROTOCOLS[key]
    except KeyError:
        raise ProtocolError(f"unknown protocol {key!r}; use one of {', '.join(PROTOCOLS)}") from None
