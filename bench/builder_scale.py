"""Building a study from a large bundle: the upload request, the background job, a failure.

    .venv/bin/python -m bench.builder_scale [images]        # default 7,000 (the red team's timeout)

A text-to-image bundle of ``images`` distinct 256×256 PNGs (7 models) is posted to
``/api/studies/`` as with a Celery worker (the job is queued, not run in the request), then the
job runs here. Reports the request time, the job time by stage, and then a build that fails
after a quarter of its images were stored: how many image files and rows it leaves (must be 0).
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

from bench.common import NOISE_NOTE, Timer, django_setup, scratch_database, verdict


def _bundle(count: int, shade: int = 0) -> io.BytesIO:
    from PIL import Image

    models = [f"Model{m}" for m in range(7)]
    buffer = io.BytesIO()
    lines = ["instance,model,output,prompt"]
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:  # PNGs do not compress further
        for n in range(count):
            image = Image.new("RGB", (256, 256), ((n * 37) % 256, (n * 11) % 256, shade))
            image.putpixel((n % 256, (n // 256) % 256), (255, 255, 255))  # distinct bytes for each image
            data = io.BytesIO()
            image.save(data, format="PNG")
            path = f"out/{models[n % 7]}/{n // 7}.png"
            archive.writestr(path, data.getvalue())
            lines.append(f"s{n // 7},{models[n % 7]},{path},a photo number {n // 7}")
        archive.writestr("manifest.csv", "\n".join(lines) + "\n")
    buffer.seek(0)
    buffer.name = "bundle.zip"
    return buffer


def main(count: int) -> None:
    with scratch_database() as url:
        django_setup(url)
        from django.conf import settings
        from django.contrib.auth.models import User
        from django.test import Client

        from tasks import build_services, builder
        from tasks.jobs import study_build_job
        from tasks.models import StoredImage, StudyBuild

        with Timer() as made:
            data = _bundle(count).getvalue()
        print(f"bundle: {count:,} images, {len(data) / 1e6:.1f} MB zip (made in {made.seconds:.1f} s)")
        admin = User.objects.create_user("bench", is_staff=True)
        client = Client(HTTP_HOST="localhost")
        client.force_login(admin)
        build_services._queue = lambda build: None  # a worker would pick it up: nothing runs in the request

        def post(slug: str, data: bytes):
            upload = io.BytesIO(data)
            upload.name = "bundle.zip"
            return client.post("/api/studies/", {"bundle": upload, "slug": slug, "title": slug,
                                                 "protocol": "imagenhub", "task_type": "text_to_image"})

        client.get("/api/studies/")  # the first request imports every view (pandas, matplotlib): not the upload's cost
        with Timer() as request:
            response = post("big", data)
        print(f"POST /api/studies/ with a worker: {response.status_code} in {request.seconds * 1000:.0f} ms")
        build_id = response.json()["id"]
        with Timer() as job:
            result = study_build_job.delay(build_id).get()
        build = StudyBuild.objects.get(pk=build_id)
        print(f"job: {result['state']} in {job.seconds:.1f} s "
              f"({build.study.items.count():,} items; started {build.started_at:%H:%M:%S}, "
              f"finished {build.finished_at:%H:%M:%S})")

        real_store, stored = builder.images_store_many, []

        def store_then_fail(images, **kwargs):
            if len(stored) >= count // 4:
                raise OSError("disk full (simulated)")
            stored.extend(real_store(images, **kwargs).values())
            return {image.sha256: image for image in stored}

        builder.images_store_many = store_then_fail
        images_before = StoredImage.objects.count()
        files_before = sum(1 for p in (Path(settings.MEDIA_ROOT) / "images").rglob("*") if p.is_file())
        # other bytes: the first build's images would only be reused, no file written
        response = post("fails", _bundle(count, shade=128).getvalue())
        build_id = response.json()["id"]
        try:
            study_build_job.delay(build_id)
        except OSError:
            pass
        builder.images_store_many = real_store
        failed = StudyBuild.objects.get(pk=build_id)
        files_after = sum(1 for p in (Path(settings.MEDIA_ROOT) / "images").rglob("*") if p.is_file())
        left = (files_after - files_before, StoredImage.objects.count() - images_before)
        print(f"failed build ({failed.state}: {failed.error}) after {len(stored):,} images: "
              f"{left[0]} files and {left[1]} rows left  {verdict(left == (0, 0))}")
        print(NOISE_NOTE)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7000)
