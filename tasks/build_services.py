"""Study builds: a bundle upload is stored, then turned into a draft study by a background job.

``study_build_start`` (the page and the API) checks the study fields, stores the zip as a
StudyBuild and queues :func:`tasks.jobs.study_build_job` once that row commits (through the
``build_queued`` signal, which ``tasks.apps`` connects to the job module); in eager mode
(the embedded default) the job has then already run when the request continues, so small
bundles still answer at once. ``study_build_run`` is what the job does: claim the build with a
conditional UPDATE (a second delivery finds nothing to claim), remove what a killed earlier
attempt left, build with progress written to the row, and end with the study or its problems.
"""

from __future__ import annotations

import dataclasses
import time
import uuid

from django.db import transaction
from django.db.models import F, Q
from django.dispatch import Signal
from django.utils import timezone

from tasks.builder import BundleInvalid, Problem, StudySpec, check_spec, study_build_from_bundle
from tasks.images import images_discard
from tasks.models import Study, StudyBuild

STALE_AFTER = StudyBuild.STALE_AFTER
PROGRESS_SECONDS = 1.0  # progress is written at most this often (and at each stage change)
# A build was stored (``build_id``): its receiver queues the job.
build_queued = Signal()


@transaction.atomic
def study_build_start(*, upload, spec: StudySpec, owner=None) -> StudyBuild:
    """Store the upload as a queued build; raise :class:`BundleInvalid` (nothing stored) when the
    study fields are wrong or the slug is taken or already being built."""
    problems: list[Problem] = []
    check_spec(spec, problems)
    under_way = Q(state=StudyBuild.State.QUEUED) | Q(state=StudyBuild.State.RUNNING,
                                                     heartbeat_at__gte=timezone.now() - STALE_AFTER)
    if not problems and StudyBuild.objects.filter(under_way, slug=spec.slug).exists():
        problems.append(Problem(f"a study with slug {spec.slug!r} is already being built", file="study"))
    if problems:
        raise BundleInvalid(problems)
    build = StudyBuild(owner=owner, slug=spec.slug, spec=dataclasses.asdict(spec))
    build.upload.save(f"{uuid.uuid4().hex}.zip", upload, save=False)
    build.save()
    _queue(build)
    return build


def _queue(build: StudyBuild) -> None:
    # robust: an error of the job (already recorded on the build) must not fail the upload request
    transaction.on_commit(lambda: build_queued.send(sender=StudyBuild, build_id=build.pk), robust=True)


def study_build_run(*, build_id: int, task_id: str = "") -> StudyBuild | None:
    """Do the build; None when there is nothing to claim (done, failed, or running elsewhere)."""
    now = timezone.now()
    # Running: its worker died. Either its progress is stale, or this is the same task delivered
    # again (acks_late redelivers a killed worker's task under its id at once, before it is stale).
    claimable = Q(state=StudyBuild.State.QUEUED) | Q(state=StudyBuild.State.RUNNING, heartbeat_at__lt=now - STALE_AFTER)
    if task_id:
        claimable |= Q(state=StudyBuild.State.RUNNING, task_id=task_id[:64])
    claimed = StudyBuild.objects.filter(claimable, pk=build_id).update(
        state=StudyBuild.State.RUNNING, stage=StudyBuild.Stage.CHECKING, done=0, total=0, started_at=now,
        heartbeat_at=now, task_id=task_id[:64],
    )
    if not claimed:
        return None
    build = StudyBuild.objects.select_related("owner").get(pk=build_id)
    images_discard(folder=build.image_folder)  # an attempt killed before us may have left images
    last = [0.0, ""]

    def progress(stage: str, done: int, total: int) -> None:
        if stage == last[1] and time.monotonic() - last[0] < PROGRESS_SECONDS and done < total:
            return
        last[:] = [time.monotonic(), stage]
        StudyBuild.objects.filter(pk=build_id).update(stage=stage, done=done, total=total, heartbeat_at=timezone.now())

    def created(study: Study) -> None:  # inside the study's transaction: both commit or neither
        StudyBuild.objects.filter(pk=build_id).update(
            state=StudyBuild.State.DONE, stage=StudyBuild.Stage.FINISHED, study=study, done=F("total"),
            finished_at=timezone.now())

    try:
        with build.upload.open("rb") as upload:
            study_build_from_bundle(upload=upload, spec=StudySpec(**build.spec), owner=build.owner,
                                    progress=progress, image_folder=build.image_folder, on_created=created)
    except BundleInvalid as exc:
        _finish(build, problems=[p.as_dict() for p in exc.problems])
    except Exception as exc:
        study_build_fail(build_id=build_id, error=f"{type(exc).__name__}: {exc}")
        raise
    else:
        _delete_upload(build)
    build.refresh_from_db()
    return build


def study_build_fail(*, build_id: int, error: str) -> None:
    """End a build on an unexpected error (not a problem of the bundle), leaving no file behind."""
    build = StudyBuild.objects.get(pk=build_id)
    images_discard(folder=build.image_folder)
    _finish(build, error=error.encode("utf-8", "backslashreplace").decode().replace("\x00", "\\x00")[:2000])


def _finish(build: StudyBuild, *, problems: list | None = None, error: str = "") -> None:
    StudyBuild.objects.filter(pk=build.pk).update(
        state=StudyBuild.State.FAILED, stage=StudyBuild.Stage.FINISHED, problems=problems or [], error=error,
        finished_at=timezone.now())
    _delete_upload(build)


def _delete_upload(build: StudyBuild) -> None:
    if build.upload:
        build.upload.storage.delete(build.upload.name)
        StudyBuild.objects.filter(pk=build.pk).update(upload="")


def study_build_problems(build: StudyBuild) -> list[Problem]:
    return [Problem.from_dict(p) for p in build.problems]
