"""Storing images once per content hash, with Pillow checks on what comes in."""

from __future__ import annotations

import hashlib
import io

from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from PIL import Image, UnidentifiedImageError

from tasks.models import StoredImage

# Refuse images above 64 megapixels: larger files are decompression bombs, not study images.
MAX_PIXELS = 64_000_000
ALLOWED_FORMATS = {"PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF"}


class ImageRejected(ValueError):
    """The bytes are not an image the site accepts; the message says why."""


def inspect_image(data: bytes, *, name: str = "image") -> tuple[str, int, int]:
    """Return (format, width, height) after fully decoding the bytes; raise ImageRejected."""
    try:
        with Image.open(io.BytesIO(data)) as probe:
            fmt, (width, height) = probe.format, probe.size
            if width * height > MAX_PIXELS:
                raise ImageRejected(f"{name}: {width}×{height} is larger than {MAX_PIXELS:,} pixels")
            if fmt not in ALLOWED_FORMATS:
                raise ImageRejected(f"{name}: format {fmt} is not accepted ({', '.join(sorted(ALLOWED_FORMATS))})")
            probe.load()  # a truncated file fails here, not later in a rater's browser
    except ImageRejected:
        raise
    except Image.DecompressionBombError:
        raise ImageRejected(f"{name}: image is a decompression bomb") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ImageRejected(f"{name}: not a readable image ({exc})") from None
    return fmt, width, height


def store_image(data: bytes, *, name: str = "image") -> StoredImage:
    """Store bytes as an image, or return the existing row with the same SHA-256."""
    digest = hashlib.sha256(data).hexdigest()
    existing = StoredImage.objects.filter(sha256=digest).first()
    if existing:
        return existing
    fmt, width, height = inspect_image(data, name=name)
    extension = {"JPEG": "jpg"}.get(fmt, fmt.lower())
    image = StoredImage(sha256=digest, width=width, height=height, format=fmt)
    image.file.save(f"{digest[:2]}/{digest}.{extension}", ContentFile(data), save=False)
    try:
        with transaction.atomic():
            image.save()
    except IntegrityError:  # another process stored the same bytes meanwhile
        image.file.delete(save=False)
        return StoredImage.objects.get(sha256=digest)
    return image


def store_pil_image(picture: Image.Image, *, fmt: str = "PNG", name: str = "image") -> StoredImage:
    buffer = io.BytesIO()
    picture.save(buffer, format=fmt, optimize=False)
    return store_image(buffer.getvalue(), name=name)
