"""ImagenHub (seed 003): Semantic Consistency and Perceptual Quality, each 0 / 0.5 / 1, per task.

The seven tasks share the scales; they differ in the conditions a rater checks (the Table 9
checklist), the condition images an instance brings and the screen layout. O = √(SC · PQ) is
the protocol's headline score and is computed here only (``overall``).
"""

from __future__ import annotations

import numpy as np

from analysis.science.protocols.base import Dimension, Protocol, ProtocolError, _check_keys

IMAGENHUB = "imagenhub"

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
SC_LABEL = "Semantic consistency"
PQ_LABEL = "Perceptual quality"

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
# The checklist's perceptual rows after the task's conditions: key, label, (mark, text shown).
PERCEPTUAL_MARKS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("objects", "Objects in the image", (("recognizable", "Recognisable"), ("unrecognizable", "Unrecognisable"))),
    ("artifacts", "Artifacts", (("none", "None or little"), ("some", "Some"), ("serious", "Serious"))),
    ("unusual", "Unusual sense", (("none", "None or little"), ("some", "Some"))),
)

# Text-guided editors that take a description of the wanted image rather than an instruction
# (ImagenHub's text-guided editing models); raters see the form their model received.
DESCRIPTION_EDITORS = ("CycleDiffusion", "DiffEdit", "Pix2PixZero", "Prompt2prompt", "SDEdit", "Text2Live", "Imagic")


def overall(sc, pq):
    """O = √(SC · PQ) (ImagenHub, Ku et al., 2023): an image that ignores the prompt or is
    unrecognisable scores 0 whatever the other dimension. Numbers or arrays."""
    return np.sqrt(np.asarray(sc, dtype=float) * np.asarray(pq, dtype=float))


class ImagenHubProtocol(Protocol):
    """Semantic Consistency and Perceptual Quality, each 0 / 0.5 / 1 (ImagenHub, seed 003)."""

    key = IMAGENHUB
    title = "ImagenHub"
    default_settings = {"checklist_mode": False, "gold_share": 0.0, "description_models": list(DESCRIPTION_EDITORS)}
    agreement_level = "ordinal"  # 3-point scales are ordinal (ImagenHub Table 4)
    headline_dimension = "O"
    derived_dimensions = ("O",)
    plots = ("histograms", "sc-pq", "mos", "alpha")
    export_layouts = ("imagenhub",)  # one TSV per rater in ImagenHub's folder layout
    needs_condition_images = True
    rater_sampling = "fixed"  # ImagenHub's raters are its fixed expert panel
    planning_targets = {"halfwidth": 0.1, "gap": 0.05}
    scale_unit = "0–1 scale points"
    takes_checklist = True
    task_types = IMAGENHUB_TASKS
    required_task_types = IMAGENHUB_TASKS

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
            Dimension("SC", SC_LABEL, IMAGENHUB_VALUES),
            Dimension("PQ", PQ_LABEL, IMAGENHUB_VALUES),
        ]

    def derived_scores(self, frame):
        return frame.assign(O=overall(frame["SC"].to_numpy(float), frame["PQ"].to_numpy(float)))

    def layout_name(self, task_type: str) -> str:
        return task_type

    def screen_task(self, task_type: str) -> str:
        return task_type

    def uses_checklist(self, settings: dict) -> bool:
        return bool(settings.get("checklist_mode"))

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
        fields += [(key, label, tuple(mark for mark, _ in marks)) for key, label, marks in PERCEPTUAL_MARKS]
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
