"""Which protocol a rating was cast under: versions of what raters were shown, and their hash.

A study's *protocol version* is the full text of everything that shapes a vote, taken together:

* ``scale``: the protocol, task, dimensions with their labels and allowed values, yes/no questions
  and the protocol settings (with defaults filled in);
* ``instructions``: the study's own instructions;
* ``worked_examples``: the rubric raters read (templates/rating/_rubric.html rendered for the
  study, as text), and ``examples``: the study's own worked examples (image hash and caption), where
  the site has them (a ``tasks.WorkedExample`` model);
* ``screen_layout``: :data:`SCREEN_LAYOUT_VERSION`, a hash of the rating screen's templates;
* ``gold_set``: every gold answer (items and comparisons) and attention check with what it expects;
* ``quality_policy``: the study's rater-quality rules (raters.QualityPolicy), or none.

``content_hash`` is the SHA-256 of that content as canonical JSON. :func:`refresh_protocol_version`
recomputes it when any part changes (signals below, and when a study opens: bulk writes of gold
send no signal) and, if new, stores a :class:`tasks.models.ProtocolVersion` and points
``Study.current_protocol_version`` at it. The submit path copies that id from the study it has
already loaded onto each new rating: recording the version costs no query per submit.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import threading
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.db.models.signals import post_save
from django.template.loader import render_to_string

from analysis.science import protocols
from raters.models import AttentionCheck, QualityPolicy
from tasks.models import ComparisonGold, GoldAnswer, ProtocolVersion, Study, WorkedExample
from tasks.rating_context import rubric_context

_SCREEN_TEMPLATES = ("rating/layout.html", "rating/screen.html", "rating/_rubric.html")


@lru_cache(maxsize=1)
def screen_layout_version() -> str:
    """A hash of the rating screen's templates: changes whenever a deploy changes the screen."""
    digest = hashlib.sha256()
    for name in _SCREEN_TEMPLATES:
        for folder in django_settings.TEMPLATES[0].get("DIRS", []):
            path = Path(folder) / name
            if path.exists():
                digest.update(name.encode() + b"\0" + path.read_bytes())
                break
    return "layout-" + digest.hexdigest()[:16]


_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"[ \t]+")


@lru_cache(maxsize=64)
def _rubric_text(protocol: str, task: str, settings_json: str) -> str:
    study = Study(protocol=protocol, task_type=task, settings=json.loads(settings_json))
    rendered = render_to_string("rating/_rubric.html", rubric_context(study))  # the rubric's own context, as raters get it
    text = html.unescape(_TAG.sub(" ", rendered))
    lines = [_SPACE.sub(" ", line).strip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line)


def protocol_content(study: Study) -> dict:
    """The full text of the study's protocol as raters meet it now (see module docstring)."""
    settings = study.protocol_settings
    max_subs = max((len(s) for s in study.instances.values_list("sub_questions", flat=True)), default=0)
    definition = study.protocol_def
    scale = {
        "protocol": study.protocol,
        "task_type": study.task_type,
        "dimensions": [{"key": d.key, "label": d.label, "choices": list(d.choices)}
                       for d in definition.dimensions(settings)],
        "questions": definition.questions(settings, max_subs),
        "settings": settings,
    }
    if study.protocol == protocols.PAIRWISE:
        scale["choices"] = list(protocols.PAIRWISE_CHOICES)
    gold = [
        {"item": item, "values": values, "answers": answers, "tolerance": tolerance}
        for item, values, answers, tolerance in GoldAnswer.objects.filter(item__study=study)
        .order_by("item_id").values_list("item_id", "values", "answers", "tolerance")
    ]
    gold += [
        {"comparison": comparison, "preference": preference}
        for comparison, preference in ComparisonGold.objects.filter(comparison__study=study)
        .order_by("comparison_id").values_list("comparison_id", "preference")
    ]
    attention = [
        {"item": item, "instruction": instruction, "expected_values": values, "expected_answers": answers,
         "after_items": after}
        for item, instruction, values, answers, after in AttentionCheck.objects.filter(study=study)
        .order_by("item_id").values_list("item_id", "instruction", "expected_values", "expected_answers",
                                         "after_items")
    ]
    policy = QualityPolicy.objects.filter(study=study).values().first()
    if policy is not None:
        for key in ("id", "study_id"):
            policy.pop(key, None)
    return {
        "scale": scale,
        "instructions": study.instructions,
        "examples": _worked_examples(study),
        "worked_examples": _rubric_text(study.protocol, study.task_type,
                                        json.dumps(settings, sort_keys=True, default=str)),
        "screen_layout": screen_layout_version(),
        "gold_set": {"gold": gold, "attention_checks": attention},
        "quality_policy": policy,
    }


def _worked_examples(study: Study) -> list[dict]:
    return [{"position": position, "caption": caption, "image_sha256": sha}
            for position, caption, sha in WorkedExample.objects.filter(study=study).order_by("position", "id")
            .values_list("position", "caption", "image__sha256")]


def content_hash(content: dict) -> str:
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str, ensure_ascii=False).encode()).hexdigest()


def refresh_protocol_version(study: Study) -> ProtocolVersion:
    """The study's current version, made (numbered next) if the content changed; the study row and
    the given instance point at it afterwards."""
    content = json.loads(json.dumps(protocol_content(study), default=str))
    digest = content_hash(content)
    version = ProtocolVersion.objects.filter(study=study, content_hash=digest).first()
    if version is None:
        try:
            with transaction.atomic():
                number = (ProtocolVersion.objects.filter(study=study).aggregate(n=Max("number"))["n"] or 0) + 1
                version = ProtocolVersion.objects.create(study=study, number=number, content_hash=digest,
                                                         content=content)
        except IntegrityError:  # a concurrent refresh stored the same content (or number) first
            version = ProtocolVersion.objects.filter(study=study, content_hash=digest).first()
            if version is None:
                raise
    if study.current_protocol_version_id != version.pk:
        Study.objects.filter(pk=study.pk).update(current_protocol_version=version)
        study.current_protocol_version_id = version.pk
    return version


# ------------------------------------------------------------------ signals
# Saves refresh at once (a handful of queries, never on the submit path). Deletions send no
# refresh: a delete signal would make Django load every gold row of a study it deletes; the
# refresh when a study opens, and on the next save of any part, catches a deleted gold item.

_local = threading.local()


@contextmanager
def deferred(study: Study) -> Iterator[None]:
    """Refresh once at the end instead of once per gold row (copying a study with its gold set)."""
    held = getattr(_local, "held", set())
    _local.held = held | {study.pk}
    try:
        yield
    finally:
        _local.held = held
    refresh_protocol_version(study)


def _refresh_by_pk(study_pk: int | None, instance: Study | None = None) -> None:
    if study_pk is None or study_pk in getattr(_local, "held", ()):
        return
    study = instance if instance is not None else Study.objects.filter(pk=study_pk).first()
    if study is not None:
        refresh_protocol_version(study)


def _after_study_save(sender, instance: Study, raw: bool = False, update_fields=None, **kwargs) -> None:
    if raw:
        return
    if update_fields is not None and set(update_fields) <= {"state", "current_protocol_version"}:
        return  # opening runs study_publish, which refreshes; a state change alone changes no text
    _refresh_by_pk(instance.pk, instance)


def _after_part_change(sender, instance, raw: bool = False, **kwargs) -> None:
    if raw:
        return
    if isinstance(instance, GoldAnswer):
        unit, field = "item", GoldAnswer.item
    elif isinstance(instance, ComparisonGold):
        unit, field = "comparison", ComparisonGold.comparison
    else:  # AttentionCheck, QualityPolicy, WorkedExample
        _refresh_by_pk(instance.study_id)
        return
    if field.is_cached(instance):
        study_id = getattr(instance, unit).study_id
    else:
        model = field.field.related_model
        study_id = model.objects.filter(pk=getattr(instance, f"{unit}_id")).values_list("study_id", flat=True).first()
    _refresh_by_pk(study_id)


def connect_signals() -> None:
    post_save.connect(_after_study_save, sender=Study, dispatch_uid="provenance-study")
    for model in (GoldAnswer, ComparisonGold, AttentionCheck, QualityPolicy, WorkedExample):
        post_save.connect(_after_part_change, sender=model, dispatch_uid=f"provenance-save-{model.__name__}")
