"""Study → :class:`analysis.science.release.ReleaseInput`: the ORM side of a dataset release.

Builds on the zip export's reads (analysis.export_input): the numbers in one read, the vote rows
chunk by chunk while ``votes.parquet`` is written, now with the protocol version of each vote;
items stream with their image bytes read from storage a chunk at a time. Rater labels become
pseudonyms (analysis.science.release.pseudonym, keyed per study from ``SECRET_KEY``) everywhere,
report included; crowd ids leave only in the payment list, and only when asked for.
"""

from __future__ import annotations

import re
from typing import Iterator

import numpy as np
import pandas as pd
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection
from django.db.models import Count, Q

from analysis import data as analysis_data
from analysis import export_input
from analysis.export_input import _Plan, study_export_input
from analysis.report import build_report
from analysis.science.release import ReleaseInput, pseudonym, scrub_text, study_key
from analysis.sql import epoch_microseconds
from raters import exclusion
from raters.gold import attention_failures_by_rater, gold_accuracy_by_rater
from raters.models import AttentionCheck, QualificationAttempt, QualityPolicy, Rater
from tasks import provenance
from tasks.models import ConditionImage, Item, Participation, ProtocolVersion, Rating, ScreenReport, Study

_ITEM_CHUNK = 200
_VERSION_COLUMN = "protocol_version__number"


class Pseudonyms:
    """Rater id → pseudonym for one study (same key for every release of the study)."""

    def __init__(self, study: Study):
        self.key = study_key(settings.SECRET_KEY, study.pk)
        self._cache: dict[int, str] = {}

    def __call__(self, rater_id: int) -> str:
        if rater_id not in self._cache:
            self._cache[rater_id] = pseudonym(self.key, rater_id)
        return self._cache[rater_id]

    def of_label(self, label: str) -> str:
        return self(int(str(label).removeprefix("rater")))

    def labels(self, labels: pd.Series | np.ndarray) -> np.ndarray:
        """Pseudonyms of ``rater<id>`` labels, one HMAC per distinct rater."""
        values = np.asarray(labels, dtype=object)
        unique, inverse = np.unique(values.astype(str), return_inverse=True) if len(values) else (np.array([]), [])
        return np.array([self.of_label(u) for u in unique], dtype=object)[inverse] if len(values) else values


def pseudonymise_report(report: dict, names: Pseudonyms, known: list[str] = ()) -> dict:
    """The report with every rater id (excluded raters, screening, reasons) replaced by its pseudonym
    and the exclusion reasons (free text) scrubbed as in the tables (``known``: the crowd ids)."""
    pattern = re.compile(r"\brater (\d+)\b")

    def walk(value, key: str = ""):
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                # rater-keyed blocks: reasons, and the subject model's per-rater bias and inconsistency
                new_key = names(int(k)) if key == "reasons_by_rater" or (
                    key in ("reasons", "raters") and str(k).isdigit()) else k
                out[new_key] = walk(v, k)
            return out
        if isinstance(value, list):
            if key == "rejected":
                return [names(int(v)) for v in value]
            return [walk(v, key) for v in value]
        if isinstance(value, str):
            return pattern.sub(lambda m: f"rater {names(int(m.group(1)))}", value)
        return value

    out = walk(report)
    for entry in out.get("excluded_raters", []):
        entry["rater"] = names(int(entry["rater"]))
        entry["reason"] = scrub_text(entry.get("reason"), known)
    return out


_TIMES = ("created_at", "updated_at")


class _ReleasePlan(_Plan):
    """The export's plan, its vote rows carrying the protocol version number of each vote.

    On PostgreSQL the two timestamps come as microseconds since the epoch (integers): turning
    1.6M timestamps into datetime objects one by one (the driver, then Django's time-zone
    converter) was half the time of writing 806K votes (`bench.release_scale --profile`).
    """

    def rows(self) -> Iterator[pd.DataFrame]:
        epoch = connection.vendor == "postgresql"
        queryset = self.queryset
        if epoch:
            queryset = queryset.annotate(**{f"_us_{name}": epoch_microseconds(Rating, name) for name in _TIMES})
        times = [f"_us_{name}" for name in _TIMES] if epoch else list(_TIMES)
        tail = [*times, *(c for c in export_input._ROW_TAIL if c not in _TIMES), _VERSION_COLUMN]
        rows = (queryset.order_by("id").values_list("rater_id", self.unit, *self.annotations, *tail)
                .iterator(chunk_size=export_input.CSV_CHUNK_ROWS))
        produced = False
        for chunk in export_input._chunks(rows, export_input.CSV_CHUNK_ROWS):
            produced = True
            yield self._finish(self.frame(chunk, tail), epoch)
        if not produced:
            yield self._finish(self.frame([], tail), epoch)

    def _finish(self, frame: pd.DataFrame, epoch: bool) -> pd.DataFrame:
        if epoch:
            for name in _TIMES:
                frame[name] = pd.to_datetime(frame.pop(f"_us_{name}").astype("Int64"), unit="us", utc=True)
        frame = self._with_times(frame).rename(columns={_VERSION_COLUMN: "protocol_version"})
        frame["protocol_version"] = frame["protocol_version"].astype("Int64")
        columns = [c for c in frame.columns if c not in (*_TIMES, *export_input._ROW_TAIL, "protocol_version")]
        return frame[[*columns, *export_input._ROW_TAIL, "protocol_version"]]


def _image(name: str | None) -> dict | None:
    if not name:
        return None
    with default_storage.open(name, "rb") as handle:
        return {"bytes": handle.read(), "path": name.rsplit("/", 1)[-1]}


def item_rows(study: Study) -> Iterator[list[dict]]:
    """The study's items (attention-check items left out: they are instructions, not content) in
    chunks, each with its output image and condition images read from storage."""
    queryset = (Item.objects.filter(study=study, attention_check__isnull=True).order_by("id")
                .annotate(_gold=Count("gold")).values_list(
                    "id", "instance_id", "instance__key", "gen_model__name", "instance__prompt",
                    "instance__task_tag", "instance__question", "instance__sub_questions", "image__file", "_gold"))
    chunk: list[tuple] = []
    for row in queryset.iterator(chunk_size=_ITEM_CHUNK):
        chunk.append(row)
        if len(chunk) == _ITEM_CHUNK:
            yield _item_chunk(chunk)
            chunk = []
    if chunk:
        yield _item_chunk(chunk)


def _item_chunk(rows: list[tuple]) -> list[dict]:
    instance_ids = {row[1] for row in rows}
    conditions: dict[int, list[tuple[str, str]]] = {}
    for instance_id, role, name in (ConditionImage.objects.filter(instance_id__in=instance_ids)
                                    .order_by("instance_id", "position", "id")
                                    .values_list("instance_id", "role", "image__file")):
        conditions.setdefault(instance_id, []).append((role, name))
    out = []
    for item, instance_id, key, model, prompt, tag, question, subs, image, gold in rows:
        held = conditions.get(instance_id, [])
        out.append({
            "item": item, "instance": key, "model": model, "prompt": prompt, "task_tag": tag,
            "question": question, "sub_questions": [str(s) for s in (subs or [])], "is_gold": bool(gold),
            "image": _image(image), "condition_images": [_image(name) for _, name in held],
            "condition_roles": [role for role, _ in held],
        })
    return out


def _rater_extras(study: Study, names: Pseudonyms, rater_ids: list[int]) -> pd.DataFrame:
    platforms = dict(Rater.objects.filter(pk__in=rater_ids).values_list("id", "platform"))
    attention = attention_failures_by_rater(study)
    gold = gold_accuracy_by_rater(study)
    qualified = dict(QualificationAttempt.objects.filter(study=study, passed=True).values_list("rater_id", "passed"))
    return pd.DataFrame({
        "rater": [names(r) for r in rater_ids],
        "platform": [platforms.get(r, "") for r in rater_ids],
        "qualified": [bool(qualified.get(r, False)) for r in rater_ids],
        "attention_failed": [attention.get(r, (0, 0))[0] for r in rater_ids],
        "attention_answered": [attention.get(r, (0, 0))[1] for r in rater_ids],
        "gold_correct": [gold.get(r, (0, 0))[0] for r in rater_ids],
        "gold_rated": [gold.get(r, (0, 0))[1] for r in rater_ids],
    })


def _card_facts(study: Study, extras: pd.DataFrame, versions: list[dict], used: dict, *,
                pay_per_item: float | None, currency: str) -> dict:
    policy = QualityPolicy.objects.filter(study=study).first()
    times = np.asarray(
        [t for t in exclusion.analysis_ratings(study, include_excluded=True)
         .filter(time_on_item_ms__isnull=False).values_list("time_on_item_ms", flat=True).iterator(chunk_size=20_000)],
        dtype=float)
    attempts = QualificationAttempt.objects.filter(study=study).aggregate(
        n=Count("id"), passed=Count("id", filter=Q(passed=True)))
    checks = AttentionCheck.objects.filter(study=study).count()
    latest = versions[-1]["content"] if versions else {}
    gold_rated = int(extras["gold_rated"].sum()) if len(extras) else 0
    return {
        "rater_source": {k: int(v) for k, v in extras["platform"].value_counts().sort_index().items()}
        if len(extras) else {},
        "qualification": {
            "required": bool(policy and policy.qualification_required),
            "attempts": attempts["n"], "passed": attempts["passed"],
            "pass_share": policy.qualification_pass_share if policy and policy.qualification_required else None,
        },
        "median_seconds_per_item": round(float(np.median(times)) / 1000.0, 2) if len(times) else None,
        "timed_votes": int(len(times)),
        "pay_per_item": pay_per_item,
        "currency": currency,
        "instructions": study.instructions,
        "examples": latest.get("worked_examples", ""),
        "interface": (f"web rating screen ({latest.get('screen_layout', provenance.screen_layout_version())}), "
                      f"{study.units_per_session} units per session, assignment {study.assignment_mode}"),
        "protocol_versions": len(used) or len(versions),
        "attention_checks": {
            "checks": checks, "answers": int(extras["attention_answered"].sum()) if len(extras) else 0,
            "failed": int(extras["attention_failed"].sum()) if len(extras) else 0,
        },
        "gold": {
            "items": (study.items.filter(gold__isnull=False).count()
                      + study.comparisons.filter(gold__isnull=False).count()),
            "ratings": gold_rated,
            "accuracy": round(float(extras["gold_correct"].sum()) / gold_rated, 3) if gold_rated else None,
        },
    }


def study_release_input(study: Study, *, license: str = "cc-by-4.0", payment_list: bool = False,
                        pay_per_item: float | None = None, currency: str = "") -> ReleaseInput:
    """The release of ``study``: numbers now; items, vote rows and the report when written."""
    names = Pseudonyms(study)
    rater_ids = sorted(Rating.objects.filter(study=study).values_list("rater_id", flat=True).distinct())
    reporter_ids = set(ScreenReport.objects.filter(study=study).values_list("rater_id", flat=True))
    # every crowd id (or imported rater name) of the study's raters is scrubbed from free text
    known = [e for e in Rater.objects.filter(pk__in=set(rater_ids) | reporter_ids)
             .exclude(external_id="").values_list("external_id", flat=True) if len(e) >= 4]
    export = study_export_input(study)
    plan = _ReleasePlan(study)
    inner_rows = plan.rows

    def vote_rows() -> Iterator[pd.DataFrame]:
        for frame in inner_rows():
            frame["rater"] = names.labels(frame["rater"])
            yield frame

    export.votes["rater"] = names.labels(export.votes["rater"])
    export.excluded = {names.of_label(label): scrub_text(why, known) for label, why in export.excluded.items()}
    export.vote_rows = vote_rows
    export.meta = {**export.meta, "dimensions": plan.dimensions, "questions": plan.questions,
                   "protocol_version": study.current_protocol_version_id and
                   ProtocolVersion.objects.filter(pk=study.current_protocol_version_id)
                   .values_list("number", flat=True).first()}
    extras = _rater_extras(study, names, rater_ids)
    versions = [
        {"number": v.number, "content_hash": v.content_hash, "created_at": v.created_at.isoformat(),
         "content": v.content}
        for v in ProtocolVersion.objects.filter(study=study).order_by("number")
    ]
    used = dict(Rating.objects.filter(study=study, protocol_version__isnull=False)
                .values_list("protocol_version__number").annotate(n=Count("id")))
    reports = [
        {"rater": names(r), "position": p, "broken_image": b, "comment": scrub_text(c, known), "created_at": t}
        for r, p, b, c, t in ScreenReport.objects.filter(study=study).order_by("id")
        .values_list("rater_id", "position", "broken_image", "comment", "created_at")
    ]
    payments = None
    if payment_list:
        crowd = {r: (c, done) for r, c, done in Participation.objects.filter(study=study)
                 .values_list("rater_id", "crowd", "completed_at")}
        people = dict(Rater.objects.filter(pk__in=rater_ids).values_list("id", "external_id"))
        payments = pd.DataFrame({
            "rater": [names(r) for r in rater_ids],
            "platform": extras["platform"].tolist(),
            "crowd_id": [people.get(r, "") for r in rater_ids],
            "completed_at": [crowd.get(r, (None, None))[1] for r in rater_ids],
        })
    judges = analysis_data.judge_scores_frame(study)
    return ReleaseInput(
        export=export, item_rows=lambda: item_rows(study), raters=extras, versions=versions,
        card_facts=_card_facts(study, extras, versions, used, pay_per_item=pay_per_item, currency=currency),
        license=license, judge_scores=judges if len(judges) else None,
        screen_reports=pd.DataFrame(reports) if reports else None, payment_list=payments,
        report=pseudonymise_report(build_report(study), names, known),
        extra={"versions_used": sorted(used), "votes_per_version": used},
    )
