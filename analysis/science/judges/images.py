"""Preparing images for an MLLM request: resize, concatenate, encode as base64 data URLs.

Pillow only, no Django. Sizes are in pixels; ``max_side`` bounds the longer side after resizing
(images already smaller are never enlarged). Output is always PNG, so the data URL and its hash
do not depend on the uploaded format's encoder settings.
"""

from __future__ import annotations

import base64
import io

from PIL import Image

DEFAULT_MAX_SIDE = 768


def _open_rgb(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as image:
        return image.convert("RGB")


def resized_png(data: bytes, *, max_side: int = DEFAULT_MAX_SIDE) -> bytes:
    """The image as PNG with its longer side at most ``max_side`` (aspect ratio kept)."""
    image = _open_rgb(data)
    if max(image.size) > max_side:
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def concat_horizontal(images: list[bytes], *, gap: int = 8) -> bytes:
    """Place images left to right on a white strip, each scaled to the tallest one's height.

    For models that accept a single image per request (VIEScore's "concatenate" option): the
    prompt then says the images appear side by side from left to right.
    """
    if not images:
        raise ValueError("nothing to concatenate")
    opened = [_open_rgb(data) for data in images]
    height = max(image.height for image in opened)
    scaled = [
        image if image.height == height else image.resize((max(1, round(image.width * height / image.height)), height))
        for image in opened
    ]
    width = sum(image.width for image in scaled) + gap * (len(scaled) - 1)
    strip = Image.new("RGB", (width, height), (255, 255, 255))
    x = 0
    for image in scaled:
        strip.paste(image, (x, 0))
        x += image.width + gap
    buffer = io.BytesIO()
    strip.save(buffer, format="PNG")
    return buffer.getvalue()


def data_url(data: bytes, *, max_side: int = DEFAULT_MAX_SIDE) -> str:
    """``data:image/png;base64,...`` of the resized image."""
    return "data:image/png;base64," + base64.b64encode(resized_png(data, max_side=max_side)).decode("ascii")
