"""Study → :class:`analysis.exports.ExportInput`: the ORM side of the MOS dataset export.

Raw votes are read with ``values_list`` in chunks; rater labels are pseudonymous (``rater<id>``),
exclusions come from :func:`analysis.data.excluded_raters` (the one place that decides them).
"""

from __future__ import annotations

import pandas as pd
from django.utils import timezone

from analysis.data import excluded_raters
from analysis.exports import ExportInput
from analysis.importers import IMAGENHUB_FOLDER_TASKS
from tasks import protocols
from tasks.models import Rating, Study

PROTOCOL_VERSION = "1"
_CHUNK = 20_000


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
        "raters_per_item": study.raters_per_item,
        "assignment_mode": study.assignment_mode,
        "state": study.state,
        "imagenhub_folder": imagenhub_folder(study.task_type) if study.protocol == protocols.IMAGENHUB else None,
        "exported_at": timezone.now().isoformat(),
    }


def study_export_input(study: Study) -> ExportInput:
    settings = study.protocol_settings
    dimensions = [d.key for d in study.protocol_def.dimensions(settings)]
    pairwise = study.protocol == protocols.PAIRWISE
    fields = ["rater_id", "values", "answers", "created_at", "updated_at", "time_on_item_ms", "source"]
    if pairwise:
        fields += ["comparison_id", "comparison__item_a__instance__key", "comparison__item_a__gen_model__name",
                   "comparison__item_b__gen_model__name"]
    else:
        fields += ["item_id", "item__instance__key", "item__gen_model__name"]
    rows = Rating.objects.filter(study=study).order_by("id").values_list(*fields).iterator(chunk_size=_CHUNK)
    max_subs = max((len(s) for s in study.instances.values_list("sub_questions", flat=True)), default=0)
    questions = study.protocol_def.questions(settings, max_subs)
    records = []
    for rater_id, values, answers, created, updated, time_ms, source, unit, instance, model, *rest in rows:
        record = {"rater": rater_label(rater_id), "instance": instance, "created_at": created,
                  "updated_at": updated, "time_on_item_ms": time_ms, "source": source}
        if pairwise:
            record.update(comparison=unit, model_a=model, model_b=rest[0], preference=(values or {}).get("preference"))
        else:
            record.update(item=unit, model=model)
            for dim in dimensions:
                value = (values or {}).get(dim)
                record[dim] = float(value) if isinstance(value, (int, float)) else None
            for question in questions:
                record[question] = (answers or {}).get(question)
        records.append(record)
    columns = ["rater", "instance", "comparison", "model_a", "model_b", "preference"] if pairwise else [
        "rater", "item", "instance", "model", *dimensions, *questions]
    columns += ["created_at", "updated_at", "time_on_item_ms", "source"]
    votes = pd.DataFrame.from_records(records, columns=columns)
    for dim in dimensions:
        votes[dim] = votes[dim].astype(float)
    for column in ("created_at", "updated_at"):
        votes[column] = pd.to_datetime(votes[column], utc=True)
    instances = pd.DataFrame.from_records(
        list(study.instances.values_list("key", "prompt", "question", "sub_questions")),
        columns=["key", "prompt", "question", "sub_questions"],
    )
    excluded = {rater_label(pk): reason for pk, reason in excluded_raters(study).items()}
    return ExportInput(votes=votes, dimensions=dimensions, meta=study_meta(study), questions=questions,
                       excluded=excluded, instances=instances)
