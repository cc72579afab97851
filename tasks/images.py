"""Storing images once per content hash, with Pillow checks on what comes in."""

from __future__ import annotations

import hashlib
import io
import re
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.db.models.deletion import ProtectedError
from django.utils import timezone
from PIL import Image, UnidentifiedImageError

from tasks.derivatives import SIZES, derivative_path
from tasks.models import StoredImage, StudyBuild

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
    except UnidentifiedImageError:
        # its message names the in-memory buffer ("cannot identify image file <_io.BytesIO object at 0x…>")
        raise ImageRejected(f"{name}: not a readable image (not a PNG, JPEG, WebP, GIF, BMP or TIFF file)") from None
    except (OSError, SyntaxError, ValueError) as exc:
        detail = re.sub(r"<_io\.\w+ object at 0x[0-9a-fA-F]+>", "the file", str(exc))
        raise ImageRejected(f"{name}: not a readable image ({detail})") from None
    return fmt, width, height


def store_image(data: bytes, *, name: str = "image", folder: str = "",
                inspected: tuple[str, int, int] | None = None) -> StoredImage:
    """Store bytes as an image, or return the existing row with the same SHA-256.

    ``folder``: a subfolder of the images' upload path for a new file (a study build writes its
    images under its own, so they can be found if it fails). ``inspected``: (format, width,
    height) when the caller already decoded the bytes with :func:`inspect_image`.
    """
    digest = hashlib.sha256(data).hexdigest()
    existing = StoredImage.objects.filter(sha256=digest).first()
    if existing:
        return existing
    fmt, width, height = inspected or inspect_image(data, name=name)
    extension = {"JPEG": "jpg"}.get(fmt, fmt.lower())
    image = StoredImage(sha256=digest, width=width, height=height, format=fmt)
    image.file.save(f"{folder + '/' if folder else ''}{digest[:2]}/{digest}.{extension}", ContentFile(data), save=False)
    try:
        with transaction.atomic():
            image.save()
    except IntegrityError:  # another process stored the same bytes meanwhile
        image.file.delete(save=False)
        return StoredImage.objects.get(sha256=digest)
    return image


def images_store_many(images: list[tuple[bytes, str, tuple[str, int, int]]], *, folder: str = "") -> dict[str, StoredImage]:
    """Store several images checked already (bytes, name, (format, width, height)); returns
    sha256 → row. Like :func:`store_image` but in three statements instead of two per image (a
    round trip, and a commit outside a transaction, each): one lookup, one insert, one read back.

    Bytes already stored reuse their row. When another process stores the same bytes meanwhile,
    its row wins (the insert skips the conflict) and the file written here is removed.
    """
    by_digest = {hashlib.sha256(data).hexdigest(): (data, name, inspected) for data, name, inspected in images}
    found = {image.sha256: image for image in StoredImage.objects.filter(sha256__in=list(by_digest))}
    written: dict[str, str] = {}
    new = []
    for digest, (data, _name, (fmt, width, height)) in by_digest.items():
        if digest in found:
            continue
        extension = {"JPEG": "jpg"}.get(fmt, fmt.lower())
        image = StoredImage(sha256=digest, width=width, height=height, format=fmt)
        image.file.save(f"{folder + '/' if folder else ''}{digest[:2]}/{digest}.{extension}", ContentFile(data),
                        save=False)
        written[digest] = image.file.name
        new.append(image)
    if new:
        StoredImage.objects.bulk_create(new, ignore_conflicts=True)
        for image in StoredImage.objects.filter(sha256__in=list(written)):
            if image.file.name != written[image.sha256]:  # another upload's row won: ours is a stray file
                image.file.storage.delete(written[image.sha256])
            found[image.sha256] = image
    return found


def store_pil_image(picture: Image.Image, *, fmt: str = "PNG", name: str = "image") -> StoredImage:
    buffer = io.BytesIO()
    picture.save(buffer, format=fmt, optimize=False)
    return store_image(buffer.getvalue(), name=name)


def _unused_images(cutoff):
    """Stored images older than ``cutoff`` that no row refers to (every relation that points at
    StoredImage, found from the models, so a new one is covered without a change here)."""
    unused = StoredImage.objects.filter(created_at__lt=cutoff)
    for relation in StoredImage._meta.get_fields(include_hidden=True):
        if relation.is_relation and relation.auto_created and not relation.concrete:
            users = relation.related_model._base_manager.filter(**{relation.field.name: OuterRef("pk")})
            unused = unused.exclude(Exists(users))
    return unused


def images_prune(*, older_than, dry_run: bool = False, chunk: int = 5000, folder: str = "") -> tuple[int, int]:
    """Delete stored images nothing refers to any more (e.g. after a study was deleted) and created
    more than ``older_than`` (a timedelta) ago, with their files and resized copies; returns
    (images, bytes of their original files). ``dry_run``: count only.

    An upload reuses an existing image by its hash, so an image may gain a reference while this
    runs: each chunk is deleted in its own transaction and rows are re-checked there; a reference
    that arrives in between makes that chunk fail on the database's key (PROTECT) and it is skipped,
    left for the next run. Files go only after their rows' commit. ``folder``: only images whose
    file is in that subfolder (a failed study build's).
    """
    def unused():
        found = _unused_images(timezone.now() - older_than)
        return found.filter(file__contains=f"/{folder}/") if folder else found

    candidates = list(unused().order_by("pk").values_list("pk", flat=True))
    images = nbytes = 0
    for start in range(0, len(candidates), chunk):
        pks = candidates[start:start + chunk]
        try:
            with transaction.atomic():
                doomed = list(unused().filter(pk__in=pks).select_for_update())
                sizes = {image.pk: (image.file.size if image.file and image.file.storage.exists(image.file.name) else 0)
                         for image in doomed}
                if dry_run:
                    images, nbytes = images + len(doomed), nbytes + sum(sizes.values())
                    continue
                StoredImage.objects.filter(pk__in=[image.pk for image in doomed]).delete()
        except (ProtectedError, IntegrityError):
            continue
        for image in doomed:
            if image.file and image.file.storage.exists(image.file.name):
                image.file.storage.delete(image.file.name)
            for size in SIZES:
                derivative_path(image, size).unlink(missing_ok=True)
        images, nbytes = images + len(doomed), nbytes + sum(sizes.values())
    return images, nbytes


def orphan_files_prune(*, older_than, dry_run: bool = False, folder: str = "") -> tuple[int, int]:
    """Delete files under MEDIA_ROOT that no row refers to; returns (files, bytes).

    What a killed worker or a crash between a file write and its row's commit leaves behind:
    image originals under ``images/`` without a StoredImage row, resized copies under
    ``derived/`` whose image is gone, and bundle zips under ``builds/`` of no queued or running
    StudyBuild. Only files last modified more than ``older_than`` (a timedelta) ago, since an
    upload may be between its file write and its commit. ``folder``: only image originals in
    that subfolder (a failed study build's own, removed with the folder once empty).
    """
    root = Path(settings.MEDIA_ROOT)
    cutoff = time.time() - older_than.total_seconds()
    base = str(StoredImage._meta.get_field("file").upload_to).split("/")[0]
    known_images = set(StoredImage.objects.values_list("file", flat=True))
    known_hashes = set(StoredImage.objects.values_list("sha256", flat=True))
    active_uploads = set(StudyBuild.objects.filter(state__in=[StudyBuild.State.QUEUED, StudyBuild.State.RUNNING])
                         .exclude(upload="").values_list("upload", flat=True))

    def is_orphan(path: Path) -> bool:
        name = path.relative_to(root).as_posix()
        if name.startswith(f"{base}/"):
            return name not in known_images
        if name.startswith("derived/"):
            return path.name.split("_")[0] not in known_hashes
        return name not in active_uploads  # builds/

    if folder:
        trees = [p for p in (root / base).rglob(folder) if p.is_dir()] if (root / base).is_dir() else []
    else:
        trees = [root / sub for sub in (base, "derived", "builds")]
    files = nbytes = 0
    for tree in trees:
        for path in sorted(tree.rglob("*")) if tree.is_dir() else []:
            if not path.is_file() or path.stat().st_mtime > cutoff or not is_orphan(path):
                continue
            files, nbytes = files + 1, nbytes + path.stat().st_size
            if not dry_run:
                path.unlink(missing_ok=True)
        if folder and not dry_run:  # the build's folders, now empty, deepest first
            for directory in sorted((p for p in tree.rglob("*") if p.is_dir()), reverse=True) + [tree]:
                if not any(directory.iterdir()):
                    directory.rmdir()
    return files, nbytes


def images_discard(*, folder: str) -> None:
    """Remove what a failed upload wrote under ``folder``: its image rows nothing uses (another
    upload may have reused one meanwhile: that one stays) and then every file there without a row."""
    images_prune(older_than=timedelta(0), folder=folder)
    orphan_files_prune(older_than=timedelta(seconds=-60), folder=folder)
