"""Resized copies of stored images for the rating screens, made once and then served from disk.

A derivative is a WebP no wider or taller than the requested size, kept at
``MEDIA_ROOT/derived/<sha[:2]>/<sha>_<size>.webp``. The first request renders it with Pillow;
every later request only checks that the file exists (no Pillow work). Images smaller than the
size are served at their own size (never upscaled).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from django.conf import settings
from PIL import Image

from tasks.models import StoredImage

# Widths the templates ask for: thumbnails of subject sets, condition images, the output image.
SIZES = (160, 384, 768)


class UnknownSize(ValueError):
    """A size the site does not render (keeps the cache from being filled with arbitrary sizes)."""


def derivative_path(image: StoredImage, size: int) -> Path:
    return Path(settings.MEDIA_ROOT) / "derived" / image.sha256[:2] / f"{image.sha256}_{size}.webp"


def derivative_ensure(image: StoredImage, size: int) -> Path:
    """Return the path of the resized copy, rendering it the first time."""
    if size not in SIZES:
        raise UnknownSize(f"size must be one of {', '.join(map(str, SIZES))}")
    path = derivative_path(image, size)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with image.file.open("rb") as source, Image.open(source) as picture:
        picture.load()
        picture = picture.convert("RGBA" if picture.mode in ("RGBA", "LA", "P") else "RGB")
        picture.thumbnail((size, size), Image.Resampling.LANCZOS)
        # Write beside the target and rename: a concurrent request never reads a half file.
        handle, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "wb") as out:
            picture.save(out, format="WEBP", quality=88, method=4)
    os.replace(tmp, path)
    return path
