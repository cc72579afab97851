"""Study exports built in the background, watched in the page and the API, downloaded when ready.

The MOS dataset zip (:func:`analysis.science.exports.iter_export_zip`) of a large study takes minutes and
reads every vote twice; inside a web request it would hold a server worker (and, in eager mode,
the request itself) that long. ``study_export_start`` stores a queued :class:`StudyExport` and
queues :func:`analysis.jobs.study_export_job` after the commit; ``study_export_run`` (the job)
claims the row with a conditional UPDATE, writes the zip to the private export storage with
progress (votes written of the study's votes) and ends it ready or failed.

``EXPORT_KINDS`` maps a kind to what it writes (the chunks and the download's file name), so
other exports (e.g. a dataset package) reuse the same job, progress partial and download view by
registering a kind. Small studies (at most ``settings.EXPORT_INLINE_MAX_VOTES`` votes) may still
be streamed straight from the request: :func:`export_fits_in_a_request`.
"""

from __future__ import annotations

import dataclasses
import io
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator

from django.conf import settings
from django.core.files.base import File
from django.db import transaction
from django.db.models import Q
from django.dispatch import Signal
from django.utils import timezone

from analysis.export_input import study_export_input
from analysis.models import StudyExport
from analysis.science.exports import iter_export_zip
from tasks.models import Rating, Study


PROGRESS_SECONDS = 1.0  # progress is written at most this often


class ExportError(ValueError):
    """An export cannot be started; the message says why."""


def sparse_layouts(study: Study) -> list[str]:
    """Why the export's per-rater layouts will have gaps for this study ('' list when none).

    The ImagenHub TSVs hold one file per rater with a row per sample only where that rater rated
    every model on it; in balanced mode raters get a share of the items, so most rows are
    missing. The per-vote and per-item tables are complete in every mode.
    """
    notes = []
    if "imagenhub" in study.protocol_def.export_layouts and study.assignment_mode != Study.AssignmentMode.WHOLE_SET:
        notes.append(
            "This study hands each rater a share of the items (balanced assignment), so the ImagenHub TSVs "
            "(one file per rater, a row only where that rater rated every model on a sample) are sparse: "
            "most samples are missing from each rater's file. Use votes.csv or items.csv for analysis; the "
            "TSVs match ImagenHub's layout only for whole-set studies.")
    return notes


@dataclass(frozen=True)
class ExportKind:
    """What an export writes: ``chunks(study, progress)`` yields the file's bytes and calls
    ``progress(stage, done, total)`` as it goes; ``filename(study)`` names the download."""

    label: str
    chunks: Callable[[Study, Callable[[str, int, int], None]], Iterator[bytes]]
    filename: Callable[[Study], str]
    content_type: str = "application/zip"


def _dataset_chunks(study: Study, progress: Callable[[str, int, int], None]) -> Iterator[bytes]:

    progress("reading the votes", 0, 0)
    data = study_export_input(study)
    total = len(data.votes)
    progress("writing the votes", 0, total)
    rows = data.vote_rows

    def counted() -> Iterator:
        written = 0
        for chunk in rows():
            yield chunk
            written += len(chunk)
            progress("writing the votes", written, total)
        progress("writing the tables, layouts and report", total, total)

    yield from iter_export_zip(dataclasses.replace(data, vote_rows=counted))


EXPORT_KINDS: dict[str, ExportKind] = {
    "dataset": ExportKind(label="MOS dataset (.zip)", chunks=_dataset_chunks,
                          filename=lambda study: f"{study.slug}-ratings.zip"),
}


def study_vote_count(study: Study) -> int:
    return Rating.objects.filter(study=study).count()


def export_fits_in_a_request(study: Study) -> bool:
    """Whether the study is small enough to stream its dataset from the request itself."""
    return study_vote_count(study) <= settings.EXPORT_INLINE_MAX_VOTES


def exports_for(*, study: Study, user) -> list[StudyExport]:
    """The exports of ``study`` this researcher asked for, newest first (others' are not theirs)."""
    return list(StudyExport.objects.filter(study=study, requested_by=user))


@transaction.atomic
def study_export_start(*, study: Study, user, kind: str = "dataset") -> StudyExport:
    """Queue an export of ``study`` for ``user``; an export of theirs already under way is
    returned instead of starting a second one."""
    if kind not in EXPORT_KINDS:
        raise ExportError(f"unknown export kind {kind!r}; use {', '.join(EXPORT_KINDS)}")
    under_way = StudyExport.objects.select_for_update().filter(
        study=study, requested_by=user, kind=kind, state__in=[StudyExport.State.QUEUED, StudyExport.State.RUNNING],
        heartbeat_at__gte=timezone.now() - StudyExport.STALE_AFTER,
    ).first()
    if under_way:
        return under_way
    export = StudyExport.objects.create(study=study, requested_by=user, kind=kind, heartbeat_at=timezone.now(),
                                        total=study_vote_count(study))
    _queue(export)
    return export


# An export was stored (``export_id``): its receiver (analysis.jobs, connected in analysis.apps)
# queues the job, which sits above this module.
export_queued = Signal()


def _queue(export: StudyExport) -> None:
    # robust: an error of the job (recorded on the export) must not fail the request that asked
    transaction.on_commit(lambda: export_queued.send(sender=StudyExport, export_id=export.pk), robust=True)


def study_export_run(*, export_id: int, task_id: str = "") -> StudyExport | None:
    """Write the export; None when there is nothing to claim (finished, or running elsewhere)."""
    now = timezone.now()
    claimable = Q(state=StudyExport.State.QUEUED) | Q(state=StudyExport.State.RUNNING,
                                                     heartbeat_at__lt=now - StudyExport.STALE_AFTER)
    if task_id:  # the same task delivered again after its worker was killed
        claimable |= Q(state=StudyExport.State.RUNNING, task_id=task_id[:64])
    claimed = StudyExport.objects.filter(claimable, pk=export_id).update(
        state=StudyExport.State.RUNNING, started_at=now, heartbeat_at=now, task_id=task_id[:64], done=0,
        stage="starting")
    if not claimed:
        return None
    export = StudyExport.objects.select_related("study").get(pk=export_id)
    kind = EXPORT_KINDS[export.kind]
    last = [0.0, ""]

    def progress(stage: str, done: int, total: int) -> None:
        if stage == last[1] and time.monotonic() - last[0] < PROGRESS_SECONDS:
            return
        last[:] = [time.monotonic(), stage]
        StudyExport.objects.filter(pk=export_id).update(stage=stage[:64], done=done, total=total,
                                                        heartbeat_at=timezone.now())

    storage = export.file.storage
    name = f"exports/{export.study_id}/{uuid.uuid4().hex}.zip"
    try:
        name = storage.save(name, File(io.BytesIO(b"")))  # reserve the name, then write into it
        with storage.open(name, "wb") as handle:
            for chunk in kind.chunks(export.study, progress):
                handle.write(chunk)
        size = storage.size(name)
    except Exception as exc:
        storage.delete(name)
        study_export_fail(export_id=export_id, error=f"{type(exc).__name__}: {exc}")
        raise
    StudyExport.objects.filter(pk=export_id).update(
        state=StudyExport.State.DONE, stage="ready", file=name, size=size, finished_at=timezone.now(),
        heartbeat_at=timezone.now())
    _prune(export)
    export.refresh_from_db()
    return export


def _prune(export: StudyExport) -> None:
    """Delete this researcher's older finished exports of the same study and kind: a new file
    replaces the old one, so the disk holds one file per (study, researcher, kind)."""
    older = StudyExport.objects.filter(
        study_id=export.study_id, requested_by_id=export.requested_by_id, kind=export.kind,
        state__in=[StudyExport.State.DONE, StudyExport.State.FAILED],
    ).exclude(pk=export.pk)
    for old in older:
        if old.file:
            old.file.storage.delete(old.file.name)
        old.delete()


def study_export_fail(*, export_id: int, error: str) -> None:
    """End an export on an error (the job's time limit, a bug); it can be asked for again."""
    StudyExport.objects.filter(pk=export_id, state__in=[StudyExport.State.QUEUED, StudyExport.State.RUNNING]).update(
        state=StudyExport.State.FAILED, error=error.replace("\x00", "")[:2000], finished_at=timezone.now())


def export_for_download(*, export_id: int, user) -> StudyExport | None:
    """The finished export if ``user`` asked for it and may still see its study, else None."""
    return (StudyExport.objects.select_related("study")
            .filter(pk=export_id, requested_by=user, state=StudyExport.State.DONE,
                    study__in=Study.objects.visible_to(user)).exclude(file="").first())
