"""Study → :class:`analysis.science.exports.ExportInput`: the ORM side of the MOS dataset export.

Two reads of the ratings through the report's reader (:func:`analysis.data.ratings_query`), neither
holding model instances or decoded JSON for the whole study:

* the *numbers* (rater, item, instance, model, scores, yes/no answers) for the per-item and
  per-rater tables, read in chunks with the scores pulled out of the JSON inside the database
  (``KT`` cast to float, as analysis.data does) and kept as numpy columns;
* the *rows* of ``votes.*`` (adding timestamps, time on item, source), read again chunk by chunk
  while the zip is written (:attr:`ExportInput.vote_rows`).

Rater labels are pseudonymous (``rater<id>``); exclusions come from
:func:`raters.exclusion.excluded_raters` and attention-check answers are left out, as everywhere in
the analysis. The report is :func:`analysis.report.build_report`, built after the votes are out.
"""

from __future__ import annotations

from itertools import islice
from typing import Iterator

import numpy as np
import pandas as pd
from django.utils import timezone

from analysis import data as analysis_data
from analysis.dashboard import study_threshold
from analysis.science.exports import CSV_CHUNK_ROWS, ExportInput
from analysis.importers import IMAGENHUB_FOLDER_TASKS
from analysis.report import build_report
from analysis.science import protocols
from raters.quality import rater_rows
from tasks.models import Comparison, Study

PROTOCOL_VERSION = "1"
_CHUNK = 20_000
ANSWERS = ["yes", "no"]
_ROW_TAIL = ["created_at", "updated_at", "time_on_item_ms", "source"]


def rater_label(rater_id: int) -> str:
    return f"rater{rater_id}"


def imagenhub_folder(task_type: str) -> str:
    """The released ImagenHub task folder name for a task type (first match, e.g. Text-To-Image)."""
    return next((folder for folder, task in IMAGENHUB_FOLDER_TASKS.items() if task == task_type), task_type)


def study_meta(study: Study) -> dict:
    return {
        "slug": study.slug,
        "title": study.title,
        "protocol": study.protocol,
        "protocol_version": PROTOCOL_VERSION,
        "task_type": study.task_type,
        "settings": study.protocol_settings,
        "agreement_threshold": study_threshold(study),
        "raters_per_item": study.raters_per_item,
        "assignment_mode": study.assignment_mode,
        "rater_sampling": study.rater_sampling,  # which intervals the report gives (items, or items+raters)
        "state": study.state,
        "imagenhub_folder": imagenhub_folder(study.task_type) if "imagenhub" in study.protocol_def.export_layouts else None,
        "exported_at": timezone.now().isoformat(),
    }


def _labels(rater_ids: np.ndarray) -> np.ndarray:
    """``rater<id>`` per row; rows of one rater share one string object (no copy per row)."""
    unique, inverse = np.unique(rater_ids.astype(np.int64), return_inverse=True)
    return np.array([rater_label(r) for r in unique], dtype=object)[inverse]


def _chunks(rows, size: int) -> Iterator[list]:
    iterator = iter(rows)
    while chunk := list(islice(iterator, size)):
        yield chunk


class _Plan:
    """What to read for a study: the annotations and columns of both reads."""

    def __init__(self, study: Study):
        settings = study.protocol_settings
        self.study = study
        self.pairwise = study.protocol_def.unit_kind == protocols.COMPARISON
        self.dimensions = [d.key for d in study.protocol_def.dimensions(settings)]
        max_subs = max((len(s) for s in study.instances.values_list("sub_questions", flat=True)), default=0)
        self.questions = study.protocol_def.questions(settings, max_subs)
        self.unit = "comparison_id" if self.pairwise else "item_id"
        self.scores = ["preference"] if self.pairwise else [*self.dimensions, *self.questions]
        # The report's reader (analysis.data.ratings_query), every rater included: the export marks the excluded.
        self.queryset, self.annotations = analysis_data.ratings_query(
            study, unit=self.unit[:-3], include_excluded=True, questions=self.questions)
        if self.pairwise:
            pairs = Comparison.objects.filter(study=study).values_list(
                "id", "item_a__instance__key", "item_a__gen_model__name", "item_b__gen_model__name")
            self.units = pd.DataFrame.from_records(list(pairs), columns=["comparison", "instance", "model_a", "model_b"])
            self.units = self.units.set_index("comparison")
        else:
            self.units = analysis_data.item_table(study).set_index("item")[["instance", "model"]]

    def frame(self, records: list, extra: list[str]) -> pd.DataFrame:
        """A chunk of ``values_list`` rows → the export's columns, strings shared, not copied."""
        unit = "comparison" if self.pairwise else "item"
        raw = pd.DataFrame.from_records(records, columns=["rater", unit, *self.scores, *extra])
        units = self.units.reindex(raw[unit].to_numpy())
        columns = {"rater": _labels(raw["rater"].to_numpy()) if len(raw) else np.array([], dtype=object)}
        if self.pairwise:
            columns.update(instance=units["instance"].to_numpy(), comparison=raw[unit].to_numpy(),
                           model_a=units["model_a"].to_numpy(), model_b=units["model_b"].to_numpy(),
                           preference=raw["preference"].to_numpy(object))
        else:
            columns.update(item=raw[unit].to_numpy(), instance=units["instance"].to_numpy(),
                           model=units["model"].to_numpy())
            for dim in self.dimensions:
                columns[dim] = raw[dim].to_numpy(float)
            for question in self.questions:
                columns[question] = pd.Categorical(raw[question], categories=ANSWERS)
        for name in extra:
            columns[name] = raw[name]
        return pd.DataFrame(columns)

    def numbers(self) -> pd.DataFrame:
        rows = self.queryset.values_list("rater_id", self.unit, *self.annotations).iterator(chunk_size=_CHUNK)
        frames = [self.frame(chunk, []) for chunk in _chunks(rows, _CHUNK)]
        return pd.concat(frames, ignore_index=True) if frames else self.frame([], [])

    def rows(self) -> Iterator[pd.DataFrame]:
        """The rows of ``votes.*`` in order of arrival, one frame per chunk (at least one, maybe empty)."""
        rows = (self.queryset.order_by("id").values_list("rater_id", self.unit, *self.annotations, *_ROW_TAIL)
                .iterator(chunk_size=CSV_CHUNK_ROWS))
        produced = False
        for chunk in _chunks(rows, CSV_CHUNK_ROWS):
            produced = True
            yield self._with_times(self.frame(chunk, _ROW_TAIL))
        if not produced:
            yield self._with_times(self.frame([], _ROW_TAIL))

    @staticmethod
    def _with_times(frame: pd.DataFrame) -> pd.DataFrame:
        for column in ("created_at", "updated_at"):
            frame[column] = pd.to_datetime(frame[column], utc=True)
        frame["time_on_item_ms"] = frame["time_on_item_ms"].astype("Int64")
        return frame


def study_export_input(study: Study) -> ExportInput:
    """The export of ``study``: its numbers now, its vote rows and report when the zip asks."""
    plan = _Plan(study)
    instances = pd.DataFrame.from_records(
        list(study.instances.values_list("key", "prompt", "question", "sub_questions")),
        columns=["key", "prompt", "question", "sub_questions"],
    )
    excluded = {rater_label(pk): reason for pk, reason in analysis_data.excluded_raters(study).items()}
    return ExportInput(
        votes=plan.numbers(), dimensions=plan.dimensions, meta=study_meta(study), questions=plan.questions,
        excluded=excluded, instances=instances, vote_rows=plan.rows, report=lambda: build_report(study),
        item_info=item_info(study), rater_info=rater_info(study),
    )


def item_info(study: Study) -> pd.DataFrame:
    """Per item: its prompt, the output's path in the bundle it was built from, its image's SHA-256."""
    rows = study.items.order_by().values_list("id", "instance__prompt", "output_path", "image__sha256")
    return pd.DataFrame.from_records(list(rows), columns=["item", "prompt", "output_path", "image_sha256"])


def rater_info(study: Study) -> pd.DataFrame:
    """Per rater with work in the study: platform, crowd id (Prolific PID, MTurk worker id, the
    imported source's rater name; empty for invited site users, whose user names stay out), the
    standing in the study and the quality flags the raters page shows (codes, ``;``-separated)."""
    records = [(rater_label(row.rater.pk), row.rater.platform,
                row.rater.external_id if row.rater.platform != "local" else "", row.state,
                ";".join(row.flag_codes)) for row in rater_rows(study)]
    return pd.DataFrame.from_records(records, columns=["rater", "platform", "crowd_id", "standing", "quality_flags"])
