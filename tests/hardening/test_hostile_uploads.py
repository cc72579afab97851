"""Hostile study bundles through the API: a clean 400 naming the problem, and nothing stored.

Non-image bytes, a truncated PNG, a pixel bomb (a tiny PNG whose header claims 100,000² pixels),
a zip bomb (a member that inflates 1000:1), zip-slip member names, and a huge manifest.
"""

from __future__ import annotations

import io
import struct
import time
import zipfile
import zlib
from pathlib import Path

import pytest
from django.conf import settings

from tasks.models import Item, StoredImage, Study
from tests.factories import make_study, make_user, png_bytes

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("builds_run_at_once")]


def bundle(files: dict[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    buffer.seek(0)
    buffer.name = "bundle.zip"
    return buffer


def manifest(*paths: str) -> bytes:
    lines = ["instance,model,output,prompt"] + [f"s{i},Model{i % 2},{p},a cat" for i, p in enumerate(paths)]
    return ("\n".join(lines) + "\n").encode()


def pixel_bomb() -> bytes:
    """A valid PNG signature and IHDR claiming 100,000 × 100,000 pixels, with a tiny IDAT."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")


def good(name: str) -> tuple[str, bytes]:
    return name, png_bytes(color=(len(name) * 7 % 255, 20, 90))


CASES = {
    "non-image": ({"manifest.csv": manifest("a.png", "b.png"), "a.png": b"this is not an image at all", "b.png": png_bytes()},
                  "a.png"),
    "truncated image": ({"manifest.csv": manifest("a.png", "b.png"), "a.png": png_bytes(size=(64, 64))[:70],
                         "b.png": png_bytes()}, "a.png"),
    "pixel bomb": ({"manifest.csv": manifest("a.png", "b.png"), "a.png": pixel_bomb(), "b.png": png_bytes()}, "a.png"),
    "zip bomb": ({"manifest.csv": manifest("a.png", "b.png"), "a.png": b"\x00" * (8 * 1024 * 1024), "b.png": png_bytes()},
                 "a.png"),
    "zip-slip dot-dot": ({"manifest.csv": manifest("../../evil.png", "b.png"), "../../evil.png": png_bytes(),
                          "b.png": png_bytes()}, "evil.png"),
    "zip-slip absolute": ({"manifest.csv": manifest("/tmp/evil.png", "b.png"), "/tmp/evil.png": png_bytes(),
                           "b.png": png_bytes()}, "evil.png"),
    "not a zip": (None, "zip"),
}


@pytest.fixture
def researcher_client(client):
    researcher = make_user("uploader")
    make_study(slug="owned-already").owners.add(researcher)
    client.force_login(researcher)
    return client


def media_files() -> list[Path]:
    root = Path(settings.MEDIA_ROOT)
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def post_bundle(client, upload, slug="hostile"):
    return client.post("/api/studies/", {
        "bundle": upload, "slug": slug, "title": "Hostile", "protocol": "imagenhub", "task_type": "text_to_image",
    })


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_researcher_uploading_a_hostile_bundle_gets_a_400_naming_the_problem_and_nothing_is_stored(
    researcher_client, case
):
    files, mentioned = CASES[case]
    upload = bundle(files) if files is not None else io.BytesIO(b"PK\x03\x04 definitely not a zip")
    upload.name = "bundle.zip"
    studies, images = Study.objects.count(), StoredImage.objects.count()
    response = post_bundle(researcher_client, upload)
    assert response.status_code == 400, response.content[:500]
    problems = response.json()["problems"]
    assert problems and all(p["message"] for p in problems)
    assert any(mentioned in f"{p['file']} {p['message']}" for p in problems), problems
    assert (Study.objects.count(), StoredImage.objects.count(), Item.objects.count()) == (studies, images, 0)
    assert media_files() == []
    assert not Study.objects.filter(slug="hostile").exists()


@pytest.mark.slow
def test_a_huge_manifest_is_refused_quickly_with_a_bounded_answer(researcher_client):
    """100,000 rows naming images that are not in the zip: one clean 400, not a 100,000-line reply."""
    rows = ["instance,model,output,prompt"] + [f"s{i},M{i % 3},missing/{i}.png,a cat" for i in range(100_000)]
    upload = bundle({"manifest.csv": ("\n".join(rows) + "\n").encode()})
    started = time.perf_counter()
    response = post_bundle(researcher_client, upload)
    seconds = time.perf_counter() - started
    assert response.status_code == 400
    problems = response.json()["problems"]
    assert problems[0]["line"] == 2 and "missing/0.png" in problems[0]["message"]
    assert "more problems" in problems[-1]["message"]
    assert len(response.content) < 200_000, f"{len(response.content):,} bytes of problems"
    assert seconds < 30
    assert Study.objects.filter(slug="hostile").count() == 0 and media_files() == []


def test_a_valid_bundle_after_hostile_ones_still_builds(researcher_client):
    """Control: the same endpoint accepts a proper bundle, so the refusals above are about the input."""
    response = post_bundle(researcher_client, bundle({"manifest.csv": manifest("a.png", "b.png"),
                                                      "a.png": good("a")[1], "b.png": good("bb")[1]}), slug="fine")
    assert response.status_code == 201, response.content[:500]
    assert Item.objects.filter(study__slug="fine").count() == 2
