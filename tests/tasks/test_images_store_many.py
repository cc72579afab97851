"""Storing a chunk of images at once: existing bytes reuse their row; when another upload stores
the same bytes meanwhile, its row wins and the file written here is removed."""

from pathlib import Path

import pytest
from django.conf import settings

from tasks.images import images_store_many, store_image
from tasks.models import StoredImage
from tests.factories import png_bytes

pytestmark = pytest.mark.django_db


def _files() -> list[str]:
    root = Path(settings.MEDIA_ROOT)
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_existing_bytes_reuse_their_row_and_new_ones_get_one_in_the_folder():
    old = store_image(png_bytes(color=(1, 1, 1)))
    rows = images_store_many([(png_bytes(color=(1, 1, 1)), "a.png", ("PNG", 32, 32)),
                              (png_bytes(color=(2, 2, 2)), "b.png", ("PNG", 32, 32))], folder="build-9")
    assert len(rows) == 2 and old.sha256 in rows and rows[old.sha256].pk == old.pk
    new = next(image for digest, image in rows.items() if digest != old.sha256)
    assert "/build-9/" in new.file.name and (new.width, new.height, new.format) == (32, 32, "PNG")
    assert _files() == sorted([old.file.name, new.file.name])


def test_when_another_upload_stores_the_same_bytes_meanwhile_its_row_wins_and_our_file_goes(monkeypatch):
    data = png_bytes(color=(3, 3, 3))
    real_bulk_create = StoredImage.objects.bulk_create

    def another_upload_first(objs, **kwargs):
        store_image(data)  # commits its row (and file) between our lookup and our insert
        return real_bulk_create(objs, **kwargs)

    monkeypatch.setattr(StoredImage.objects, "bulk_create", another_upload_first)
    rows = images_store_many([(data, "a.png", ("PNG", 32, 32))], folder="build-10")
    (image,) = rows.values()
    assert StoredImage.objects.count() == 1 and "/build-10/" not in image.file.name
    assert _files() == [image.file.name]
