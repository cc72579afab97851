"""A small sample bundle per protocol and task type, made on request: the manifest a researcher
can copy, with every column the task needs and tiny images, which builds as it is.

Images are drawn with Pillow (a coloured shape per model and a label), 128 px: enough to show what
goes where, small enough that the zip is a few kilobytes. The manifest is CSV with a comment-free
header; JSONL would hold the same rows.
"""

from __future__ import annotations

import csv
import io
import zipfile

from PIL import Image, ImageDraw

from analysis.science import protocols
from tasks.builder import TASK_NEEDS
from analysis.science.protocols.task_types import TASK_TYPES

SIDE = 128
MODELS = ("ModelA", "ModelB", "ModelC")
PROMPTS = ("two red circles left of a blue square", "a green triangle above a yellow star")
# per prompt: the instance text columns a protocol may ask for (Protocol.instance_text_columns)
SAMPLE_TEXT = {
    "task_tag": ("counting", "position"),
    "question": ("Are there exactly two circles?", "Is the triangle above the star?"),
    "sub_questions": ("Is one circle red?|Is there a square?", ""),
}
COLOURS = {"ModelA": (200, 60, 60), "ModelB": (60, 120, 200), "ModelC": (60, 160, 90)}


def _png(label: str, colour: tuple[int, int, int], *, mask: bool = False) -> bytes:
    if mask:  # white = the region to edit, black = keep
        image = Image.new("L", (SIDE, SIDE), 0)
        ImageDraw.Draw(image).rectangle((SIDE // 4, SIDE // 4, 3 * SIDE // 4, 3 * SIDE // 4), fill=255)
    else:
        image = Image.new("RGB", (SIDE, SIDE), (245, 245, 240))
        draw = ImageDraw.Draw(image)
        draw.ellipse((24, 20, SIDE - 24, SIDE - 28), fill=colour)
        draw.text((8, SIDE - 20), label[:20], fill=(20, 20, 20))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def sample_bundle(protocol: str, task_type: str) -> bytes:
    """The zip's bytes; ValueError for a protocol or task type the builder does not take."""
    if task_type not in TASK_TYPES.get(protocol, {}):
        raise ValueError(f"no sample for {protocol!r} / {task_type!r}")
    definition = protocols.get(protocol)
    needs = TASK_NEEDS.get(task_type, ())  # EvalMi's tasks need no condition images
    # enough models to fill one default screen, and two to compare
    models = MODELS[:max(2, definition.images_per_screen(definition.clean_settings({})))]
    columns = ["instance", "model", "output", "prompt", *definition.instance_text_columns]
    for role in needs:
        columns.append(role)
        if role.startswith("subject_"):
            columns.append(f"{role}_token")
    files: dict[str, bytes] = {}
    rows = []
    for number, prompt in enumerate(PROMPTS, start=1):
        instance = f"sample_{number}"
        conditions: dict[str, str] = {}
        for role in needs:
            path = f"conditions/{instance}_{role}.png"
            files[path] = _png(f"{role} {number}", (150, 150, 150), mask=role == "mask")
            conditions[role] = path
        for model in models:
            path = f"outputs/{model}/{instance}.png"
            files[path] = _png(f"{model} {number}", COLOURS[model])
            row = {"instance": instance, "model": model, "output": path,
                   "prompt": ("[V] " if "subject_1" in needs else "") + prompt}
            row.update({column: SAMPLE_TEXT[column][number - 1] for column in definition.instance_text_columns})
            for role, path_ in conditions.items():
                row[role] = path_
                if role.startswith("subject_"):
                    row[f"{role}_token"] = "[V]" if role == "subject_1" else "[W]"
            rows.append(row)
    manifest = io.StringIO()
    writer = csv.DictWriter(manifest, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.csv", manifest.getvalue())
        for path, data in files.items():
            archive.writestr(path, data)
    return out.getvalue()
