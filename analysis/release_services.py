"""Dataset releases of a study: request one (a background job builds it), build it, serve it.

The build writes the package into a temporary folder (analysis.science.release.write_release streams the
images and votes a chunk at a time), zips it into a temporary file and stores the zip in the media
storage; only the zip's name, size, reporting card and manifest go in the database.
"""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

import pandas as pd
from django.core.files import File
from django.db import transaction
from django.db.models import Count
from django.dispatch import Signal
from django.utils import timezone

from analysis import data
from analysis.models import DatasetRelease, export_storage
from analysis.release_input import study_release_input
from analysis.report import build_report
from analysis.science.release import LICENSES, write_release, zip_folder
from tasks.models import ProtocolVersion, Rating, Study


# A release was requested (``release_id``): its receiver (analysis.jobs, connected in analysis.apps)
# queues the job, which sits above this module.
release_queued = Signal()


# A release still queued or running this long after it was asked for lost its worker (killed,
# out of memory, a redeploy): the build job's hard time limit (analysis.jobs) is 3 h 5 min, and a
# redelivered job claims queued releases only. Such a release is failed when a new one is asked
# for, so it does not refuse every later release of the study.
STALE_AFTER = timedelta(hours=8)


class ReleaseRefused(ValueError):
    """A release that cannot be requested; the message is for the researcher."""


def release_request(*, study: Study, user, license: str = "cc-by-4.0", payment_list: bool = False,
                    pay_per_item: float | None = None, currency: str = "") -> DatasetRelease:
    """Queue a release of ``study``; the job starts when this transaction commits."""
    if license not in LICENSES:
        raise ReleaseRefused(f"licence must be one of {', '.join(LICENSES)}")
    if pay_per_item is not None and not (0 <= pay_per_item <= 10_000):
        raise ReleaseRefused("pay per item must be between 0 and 10,000")
    if currency and (len(currency) > 8 or not currency.isalpha()):
        raise ReleaseRefused("currency must be letters only, e.g. GBP")
    building = DatasetRelease.objects.filter(study=study, state__in=[DatasetRelease.State.QUEUED,
                                                                    DatasetRelease.State.RUNNING])
    building.filter(created_at__lt=timezone.now() - STALE_AFTER).update(
        state=DatasetRelease.State.FAILED, finished_at=timezone.now(),
        error="The build stopped without finishing (its worker was lost); request a new release.")
    if building.exists():
        raise ReleaseRefused("a release of this study is being built: wait for it to finish")
    release = DatasetRelease.objects.create(study=study, requested_by=user, license=license,
                                            payment_list=payment_list, pay_per_item=pay_per_item,
                                            currency=currency.upper())
    transaction.on_commit(lambda: release_queued.send(sender=DatasetRelease, release_id=release.pk), robust=True)
    return release


def release_execute(*, release_id: int) -> DatasetRelease | None:
    """Build a queued release (claimed with a conditional UPDATE: a second delivery does nothing)."""
    claimed = DatasetRelease.objects.filter(pk=release_id, state=DatasetRelease.State.QUEUED).update(
        state=DatasetRelease.State.RUNNING)
    if not claimed:
        return None
    release = DatasetRelease.objects.select_related("study").get(pk=release_id)
    scratch = Path(tempfile.mkdtemp(prefix="release-"))
    try:
        folder = scratch / f"{release.study.slug}-release-{release.pk}"
        data = study_release_input(release.study, license=release.license, payment_list=release.payment_list,
                                   pay_per_item=release.pay_per_item, currency=release.currency)
        manifest = write_release(data, folder)
        archive = scratch / "package.zip"
        zip_folder(folder, archive)
        with archive.open("rb") as handle:
            name = export_storage().save(
                f"releases/{release.study.slug}/{release.pk}-{secrets.token_hex(8)}.zip", File(handle))
        release.card = json.loads((folder / "reporting_card.json").read_text())
        release.manifest = manifest
        release.file, release.size = name, archive.stat().st_size
        release.state, release.finished_at = DatasetRelease.State.DONE, timezone.now()
        release.save(update_fields=["card", "manifest", "file", "size", "state", "finished_at"])
        return release
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def release_fail(*, release_id: int, error: str) -> None:
    DatasetRelease.objects.filter(pk=release_id).update(state=DatasetRelease.State.FAILED, error=error[:2000],
                                                        finished_at=timezone.now())


def version_mix(study: Study) -> dict:
    """Which protocol versions the study's ratings were cast under (one query): ``versions`` as
    (number, hash prefix, votes, created_at), ``unrecorded`` votes without one, ``mixed``."""
    counts = dict(Rating.objects.filter(study=study).values_list("protocol_version_id").annotate(n=Count("id"))
                  .values_list("protocol_version_id", "n"))
    versions = [
        {"number": v.number, "hash": v.content_hash[:12], "votes": counts.get(v.pk, 0), "created_at": v.created_at,
         "current": v.pk == study.current_protocol_version_id}
        for v in ProtocolVersion.objects.filter(study=study).order_by("number")
    ]
    used = [v for v in versions if v["votes"]]
    return {"versions": versions, "unrecorded": counts.get(None, 0), "mixed": len(used) > 1}


class StudyVersion:
    """A study seen through the ratings of one protocol version: what ``build_report`` reads of a
    study, with every frame of analysis.data cut to the ratings cast under version ``number``."""

    is_packaged = True  # analysis.data asks this object for its frames

    def __init__(self, study: Study, number: int):
        self._data, self.study, self.number = data, study, number
        self.slug, self.title, self.protocol, self.task_type = study.slug, study.title, study.protocol, study.task_type
        self.rater_sampling = study.rater_sampling
        unit = f"{study.protocol_def.unit_kind}_id"

        self._keys = pd.DataFrame.from_records(
            list(Rating.objects.filter(study=study, protocol_version__number=number).values_list("rater_id", unit)),
            columns=["rater", "unit"]).astype({"rater": str})

    def _cut(self, frame, unit: str):
        keys = self._keys.rename(columns={"unit": unit})
        return frame.merge(keys.astype({unit: frame[unit].dtype}) if len(frame) else keys, on=["rater", unit],
                           how="inner")[list(frame.columns)].reset_index(drop=True)

    def excluded_raters(self):
        return self._data.excluded_raters.__wrapped__(self.study)

    def ratings_frame(self, *, include_excluded: bool = False):
        return self._cut(self._data.ratings_frame.__wrapped__(self.study, include_excluded=include_excluded), "item")

    def answers_frame(self, *, include_excluded: bool = False):
        return self._cut(self._data.answers_frame.__wrapped__(self.study, include_excluded=include_excluded), "item")

    def comparisons_frame(self, *, include_excluded: bool = False):
        return self._cut(self._data.comparisons_frame.__wrapped__(self.study, include_excluded=include_excluded),
                         "comparison")

    def judge_scores_frame(self):
        return self._data.judge_scores_frame.__wrapped__(self.study)

    def item_table(self):
        return self._data.item_table.__wrapped__(self.study)


def reports_by_version(study: Study, **options) -> dict[int, dict]:
    """The study report once per protocol version that has ratings (``build_report`` options)."""
    numbers = sorted(set(Rating.objects.filter(study=study, protocol_version__isnull=False)
                         .values_list("protocol_version__number", flat=True)))
    return {number: build_report(StudyVersion(study, number), **options) for number in numbers}
