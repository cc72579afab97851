"""Zip bundles for the study builder tests: ``make_bundle(rows, files)`` returns the zip bytes."""

from __future__ import annotations

import csv
import io
import json
import zipfile

from tests.factories import png_bytes


def csv_manifest(rows: list[dict], columns: list[str] | None = None) -> bytes:
    columns = columns or list(dict.fromkeys(key for row in rows for key in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row)
    return buffer.getvalue().encode()


def jsonl_manifest(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def make_bundle(files: dict[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    buffer.seek(0)
    return buffer


def text_to_image_bundle(models=("ModelA", "ModelB"), instances=("s1", "s2"), *, fmt: str = "csv") -> io.BytesIO:
    """A valid text-to-image bundle: one distinct PNG per (instance, model)."""
    files, rows = {}, []
    shade = 10
    for key in instances:
        for model in models:
            shade += 20
            path = f"outputs/{model}/{key}.png"
            files[path] = png_bytes(color=(shade % 255, 100, 50))
            rows.append({"instance": key, "model": model, "output": path, "prompt": f"a photo of {key}"})
    files["manifest.csv" if fmt == "csv" else "manifest.jsonl"] = csv_manifest(rows) if fmt == "csv" else jsonl_manifest(rows)
    return make_bundle(files)
