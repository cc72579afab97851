"""Importers for published human ratings and judge outputs (one service per format).

Every importer
* parses and validates *all* input first (the pure parsers in analysis.science.formats raise
  ``ValueError`` naming file and line), then writes inside one transaction: a bad file stores
  nothing;
* is idempotent: rows are keyed (study slug, instance key, model name, rater external id,
  judge name, dimension), so a second run of the same files creates nothing and reports
  everything as unchanged; changed values are updated (a rating edit keeps a RatingRevision);
* writes in batches (COPY or multi-row INSERTs via :func:`analysis.sql.fast_insert` for the big tables, bulk_update
  for changed rows) and never saves row by row.

Formats are described in analysis.science.formats and ../shared/datasets/README.md.

EvalMi-50K: the authors released per-image MOS (already z-scored, 0–100), not per-annotator
Likert ratings. Storing those MOS as ``Rating`` rows would break the rating contract (a Rating
is one person's 1–5 judgement, validated by the protocol), so they are stored as scores of a
*reference* judge ``evalmi-50k-published-human`` whose ``params["role"] == "human_reference"``.
The report treats that source as the study's human figures when the study has no ratings of
its own, and never lists it among the judges.
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from django.db import connection, models, transaction
from django.utils import timezone

from analysis.science import formats
from analysis.science.correlation import viescore_table
from analysis.science.report import HUMAN_REFERENCE
from analysis.models import Judge, JudgeRun, JudgeScore
from analysis.sql import cyclic_gc_paused, fast_insert
from raters.models import Rater
from analysis.science import protocols
from tasks.models import GenModel, Instance, Item, Rating, RatingRevision, Study

BATCH = 5_000

# ImagenHub folder name (without VIEScore's "ImagenHub_" prefix) → Study.task_type.
IMAGENHUB_FOLDER_TASKS = {
    "Text-To-Image": "text_to_image",
    "Text-Guided_IG": "text_to_image",
    "Mask-Guided_IE": "mask_guided_editing",
    "Text-Guided_IE": "text_guided_editing",
    "Subject-Driven_IG": "subject_driven_generation",
    "Subject-Driven_IE": "subject_driven_editing",
    "Multi-Subject_IG": "multi_concept_composition",
    "Multi-Concept_IC": "multi_concept_composition",
    "Control-Guided_IG": "control_guided_generation",
}
LOWER_IS_BETTER_METRICS = {"LPIPS"}
EVALMI_REFERENCE_JUDGE = "evalmi-50k-published-human"
# the long-format importer takes scores on scales: the protocols whose ratings are such scores
RATED_PROTOCOLS = tuple(key for key, definition in protocols.PROTOCOLS.items() if definition.has_scales)
_RATER_FILE_RE = re.compile(r"_rater(\d+)\.tsv$")


class ImportFailed(ValueError):
    """Input could not be imported; nothing was stored. The message names file and line."""


@dataclass
class ImportSummary:
    """What an import did, as counts (e.g. ``ratings_created``) plus notes for the researcher."""

    counts: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    @property
    def created(self) -> int:
        return sum(v for k, v in self.counts.items() if k.endswith("_created"))

    def __str__(self) -> str:
        parts = [f"{key.replace('_', ' ')}: {value}" for key, value in sorted(self.counts.items()) if value]
        text = "; ".join(parts) or "nothing to do"
        return "\n".join([text, *self.notes])


def _json_param(field_owner, field_name: str, value, cache: dict):
    """A JSON value prepared for the database once per distinct value (ratings repeat a lot)."""
    key = tuple(value.items()) if isinstance(value, dict) else tuple(value)
    if key not in cache:
        cache[key] = field_owner._meta.get_field(field_name).get_db_prep_save(value, connection)
    return cache[key]


def _ensure_study(slug: str, *, protocol: str, task_type: str, title: str, raters_per_item: int,
                  summary: ImportSummary) -> Study:
    study = Study.objects.filter(slug=slug).first()
    if study is not None:
        if study.protocol != protocol:
            raise ImportFailed(f"study {slug!r} exists with protocol {study.protocol!r}, not {protocol!r}")
        summary.counts["studies_unchanged"] += 1
        return study
    study = Study(
        slug=slug,
        title=title,
        protocol=protocol,
        task_type=task_type,
        raters_per_item=max(1, raters_per_item),
        assignment_mode=Study.AssignmentMode.WHOLE_SET,
        state=Study.State.CLOSED,  # imported data: nobody is asked to rate it here
        # ImagenHub's raters are its fixed expert panel: its intervals stay over items, as published
        rater_sampling=Study.RaterSampling(protocols.get(protocol).rater_sampling),
    )
    try:
        study.full_clean()
    except Exception as exc:  # ValidationError: show which field
        raise ImportFailed(f"study {slug!r}: {exc}") from exc
    study.save()
    summary.counts["studies_created"] += 1
    return study


def _ensure_gen_models(study: Study, names, summary: ImportSummary) -> dict[str, int]:
    existing = dict(GenModel.objects.filter(study=study).values_list("name", "id"))
    missing = [name for name in dict.fromkeys(names) if name not in existing]
    GenModel.objects.bulk_create([GenModel(study=study, name=name) for name in missing], batch_size=BATCH)
    summary.counts["models_created"] += len(missing)
    if missing:
        existing = dict(GenModel.objects.filter(study=study).values_list("name", "id"))
    return existing


def _ensure_instances(study: Study, instances: pd.DataFrame, summary: ImportSummary) -> dict[str, int]:
    """``instances``: one row per key with Instance field columns (``key`` required)."""
    existing = dict(Instance.objects.filter(study=study).values_list("key", "id"))
    fields = [c for c in instances.columns if c != "key"]
    missing = instances[~instances["key"].isin(existing)]
    Instance.objects.bulk_create(
        [Instance(study=study, key=row["key"], **{f: row[f] for f in fields}) for row in missing.to_dict("records")],
        batch_size=BATCH,
    )
    summary.counts["instances_created"] += len(missing)
    if len(missing):
        existing = dict(Instance.objects.filter(study=study).values_list("key", "id"))
    return existing


def _ensure_items(study: Study, pairs: pd.DataFrame, summary: ImportSummary) -> pd.Series:
    """``pairs``: columns instance_id, gen_model_id. Returns Item ids indexed like ``pairs``."""
    def lookup() -> dict[tuple[int, int], int]:
        return {
            (inst, model): pk
            for pk, inst, model in Item.objects.filter(study=study).values_list("id", "instance_id", "gen_model_id")
        }

    existing = lookup()
    keys = list(zip(pairs["instance_id"].tolist(), pairs["gen_model_id"].tolist()))
    missing = [key for key in dict.fromkeys(keys) if key not in existing]
    fast_insert(Item, ["study", "instance", "gen_model"], [(study.id, inst, model) for inst, model in missing])
    summary.counts["items_created"] += len(missing)
    if missing:
        existing = lookup()
    return pd.Series([existing[key] for key in keys], index=pairs.index, dtype="int64")


def _ensure_import_rater(external_id: str, summary: ImportSummary) -> int:
    rater, created = Rater.objects.get_or_create(platform=Rater.Platform.IMPORT, external_id=external_id)
    summary.counts["raters_created" if created else "raters_unchanged"] += 1
    return rater.id


def _store_ratings(study: Study, rows: pd.DataFrame, dimensions: list[str], summary: ImportSummary) -> None:
    """``rows``: rater_id, item_id, source_detail and one column per dimension (validated)."""
    existing = {
        (rater, item): (pk, values)
        for pk, rater, item, values in Rating.objects.filter(study=study, item__isnull=False).values_list(
            "id", "rater_id", "item_id", "values"
        )
    }
    now = timezone.now()
    new, changed, revisions = [], [], []
    # Ratings repeat a few value combinations (25 for two 5-point scales): each values dict and
    # its database parameter is built once and picked per row by its combination code.
    matrix = rows[dimensions].to_numpy(float) if dimensions else np.zeros((len(rows), 0))
    code = np.zeros(len(rows), np.int64)
    for column in matrix.T:
        column_code, uniques = pd.factorize(column, use_na_sentinel=False)
        code = pd.factorize(code * max(len(uniques), 1) + column_code)[0]  # 0…K-1 in order of appearance
    first = np.unique(code, return_index=True)[1]  # each combination's first row
    combinations = [dict(zip(dimensions, matrix[row].tolist())) for row in first]
    params = [_json_param(Rating, "values", values, {}) for values in combinations]
    source = Rating.Source.IMPORT
    # New rows go in by item: the indexes that lead with the item (or the study, then the item)
    # grow at their right end instead of 16 places at once (0.4 s less server CPU for 806K rows).
    order = np.argsort(rows["item_id"].to_numpy(), kind="stable")
    columns = (rows[name].to_numpy()[order].tolist() for name in ("rater_id", "item_id", "source_detail"))
    with cyclic_gc_paused():
        for rater, item, detail, k in zip(*columns, code[order].tolist()):
            found = existing.get((rater, item))
            if found is None:
                new.append((study.id, rater, item, params[k], source, detail))
            elif found[1] != combinations[k]:
                revisions.append(RatingRevision(rating_id=found[0], values=found[1]))
                changed.append(Rating(id=found[0], values=dict(combinations[k]), source_detail=detail, updated_at=now))
        fast_insert(Rating, ["study", "rater", "item", "values", "source", "source_detail"], new)
    RatingRevision.objects.bulk_create(revisions, batch_size=BATCH)
    Rating.objects.bulk_update(changed, ["values", "source_detail", "updated_at"], batch_size=BATCH)
    summary.counts["ratings_created"] += len(new)
    summary.counts["ratings_updated"] += len(changed)
    summary.counts["ratings_unchanged"] += len(rows) - len(new) - len(changed)


def _ensure_judge(name: str, *, kind: str, lower_is_better: bool = False, params: dict | None = None,
                  summary: ImportSummary) -> Judge:
    judge, created = Judge.objects.get_or_create(  # imports are the operator's: shared judges
        name=name, owner=None, defaults={"kind": kind, "lower_is_better": lower_is_better, "params": params or {}}
    )
    summary.counts["judges_created" if created else "judges_unchanged"] += 1
    return judge


def _import_run(judge: Judge, study: Study, detail: str, total: int) -> JudgeRun:
    run = JudgeRun.objects.filter(judge=judge, study=study, source=JudgeRun.Source.IMPORT).order_by("created_at").first()
    now = timezone.now()
    if run is None:
        run = JudgeRun.objects.create(
            judge=judge, study=study, source=JudgeRun.Source.IMPORT, source_detail=detail[:300],
            state=JudgeRun.State.DONE, total=total, done=total, started_at=now, finished_at=now,
        )
    return run


def _store_scores(run: JudgeRun, rows: pd.DataFrame, summary: ImportSummary) -> None:
    """``rows``: item_id, dimension, value (NaN → null, parse_status failed), sub_scores, rationale."""
    existing = {
        (item, dim): (pk, value, subs)
        for pk, item, dim, value, subs in JudgeScore.objects.filter(run=run).values_list(
            "id", "item_id", "dimension", "value", "sub_scores"
        )
    }
    new, changed = [], []
    prepared: dict = {}
    subs_column = rows["sub_scores"].tolist() if "sub_scores" in rows else [[]] * len(rows)
    rationale_column = rows["rationale"].tolist() if "rationale" in rows else [""] * len(rows)
    for item, dim, value, subs, rationale in zip(
        rows["item_id"].tolist(), rows["dimension"].tolist(), rows["value"].tolist(), subs_column, rationale_column
    ):
        value = None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
        status = JudgeScore.ParseStatus.OK if value is not None else JudgeScore.ParseStatus.FAILED
        found = existing.get((item, dim))
        if found is None:
            new.append((run.id, item, dim, value, _json_param(JudgeScore, "sub_scores", subs, prepared),
                        rationale or "", status))
        elif found[1] != value or found[2] != subs:
            changed.append(JudgeScore(id=found[0], value=value, sub_scores=subs, rationale=rationale or "",
                                      parse_status=status))
    fast_insert(JudgeScore, ["run", "item", "dimension", "value", "sub_scores", "rationale", "parse_status"], new)
    JudgeScore.objects.bulk_update(changed, ["value", "sub_scores", "rationale", "parse_status"], batch_size=BATCH)
    summary.counts["scores_created"] += len(new)
    summary.counts["scores_updated"] += len(changed)
    summary.counts["scores_unchanged"] += len(rows) - len(new) - len(changed)
    total = JudgeScore.objects.filter(run=run).count()
    JudgeRun.objects.filter(id=run.id).update(total=total, done=total)


def _validate_dimensions(frame: pd.DataFrame, study_protocol: str, where) -> list[str]:
    """``where(row_index)`` names the place of a row ("file: line 4 (model)") for the error."""
    # Check every value against the protocol's allowed choices, vectorised; return dimension keys.
    protocol = protocols.get_protocol(study_protocol)
    settings = protocol.clean_settings({})
    dims = protocol.dimensions(settings)
    for dim in dims:
        values = frame[dim.key].to_numpy(float)
        bad = ~np.isin(values, dim.choices)
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            allowed = " / ".join(f"{c:g}" for c in dim.choices)
            raise ImportFailed(f"{where(first)}: {dim.key} must be one of {allowed}, got {float(values[first])!r}")
    return [d.key for d in dims]


# ------------------------------------------------------------------ ImagenHub


def imagenhub_task_type(folder_name: str) -> str:
    task = folder_name.removeprefix("ImagenHub_")
    try:
        return IMAGENHUB_FOLDER_TASKS[task]
    except KeyError:
        raise ImportFailed(
            f"{folder_name}: unknown ImagenHub task folder; expected one of {', '.join(IMAGENHUB_FOLDER_TASKS)}"
        ) from None


def imagenhub_folders(path: Path) -> list[Path]:
    """``path`` itself when it holds ``*_raterN.tsv`` files, else its sub-folders that do."""
    path = Path(path)
    if not path.is_dir():
        raise ImportFailed(f"{path}: not a directory")
    if any(path.glob("*_rater*.tsv")):
        return [path]
    folders = sorted(p for p in path.iterdir() if p.is_dir() and any(p.glob("*_rater*.tsv")))
    if not folders:
        raise ImportFailed(f"{path}: no '<Task>/<Task>_raterN.tsv' files")
    return folders


def _read_imagenhub_folder(folder: Path) -> pd.DataFrame:
    frames = []
    for file in sorted(folder.glob("*_rater*.tsv")):
        match = _RATER_FILE_RE.search(file.name)
        rater = f"rater{match.group(1)}" if match else file.stem
        try:
            frame = formats.parse_imagenhub_tsv(file, rater=rater)
        except ValueError as exc:
            raise ImportFailed(str(exc)) from exc
        frame["file"] = file.name
        # melt order is column by column: row r of a file is line (r mod n_uids) + 2
        frame["line"] = np.arange(len(frame)) % max(frame["uid"].nunique(), 1) + 2
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


@transaction.atomic
def imagenhub_import(*, path: Path | str) -> ImportSummary:
    """Import ImagenHub rater TSVs: one study per task folder (slug = folder name exactly).

    One Rater per file (platform import, external id ``imagenhub/<slug>/raterN``); Instances keyed
    by uid in file order; one GenModel per column; Items without images; Ratings with
    ``source=import`` and ``source_detail`` = file name.
    """
    summary = ImportSummary()
    parsed = []
    for folder in imagenhub_folders(Path(path)):
        task_type = imagenhub_task_type(folder.name)
        frame = _read_imagenhub_folder(folder)
        dimensions = _validate_dimensions(
            frame, protocols.IMAGENHUB,
            lambda row: f"{folder / frame['file'].iloc[row]}: line {frame['line'].iloc[row]} ({frame['model'].iloc[row]})",
        )
        parsed.append((folder, task_type, frame, dimensions))

    for folder, task_type, frame, dimensions in parsed:
        slug = folder.name
        study = _ensure_study(
            slug, protocol=protocols.IMAGENHUB, task_type=task_type,
            title=f"ImagenHub {slug.removeprefix('ImagenHub_').replace('_', ' ')}",
            raters_per_item=frame["rater"].nunique(), summary=summary,
        )
        models = _ensure_gen_models(study, frame["model"].unique().tolist(), summary)
        uids = pd.unique(frame["uid"])
        instances = _ensure_instances(
            study, pd.DataFrame({"key": uids, "position": np.arange(1, len(uids) + 1)}), summary
        )
        pairs = pd.DataFrame({"instance_id": frame["uid"].map(instances), "gen_model_id": frame["model"].map(models)})
        frame["item_id"] = _ensure_items(study, pairs, summary)
        raters = {name: _ensure_import_rater(f"imagenhub/{slug}/{name}", summary) for name in frame["rater"].unique()}
        frame["rater_id"] = frame["rater"].map(raters)
        _store_ratings(study, frame.rename(columns={"file": "source_detail"}), dimensions, summary)
    return summary


# ------------------------------------------------------------------ judges


def _study_items(slug: str, where: str) -> tuple[Study, dict[tuple[str, str], int]]:
    study = Study.objects.filter(slug=slug).first()
    if study is None:
        raise ImportFailed(f"{where}: no study with slug {slug!r}; import its human ratings first")
    items = {
        (model, key): pk
        for pk, model, key in Item.objects.filter(study=study).values_list("id", "gen_model__name", "instance__key")
    }
    return study, items


def _attach_items(frame: pd.DataFrame, items: dict, where_column: str) -> pd.Series:
    ids = pd.Series([items.get(key) for key in zip(frame["model"], frame["uid"])], index=frame.index, dtype=object)
    missing = ids.isna()
    if missing.any():
        row = frame[missing].iloc[0]
        raise ImportFailed(
            f"{row[where_column]}: uid {row['uid']!r} of model {row['model']!r} is not an item of the study "
            f"({int(missing.sum())} such rows)"
        )
    return ids.astype("int64")


def _viescore_rows(root: Path, summary: ImportSummary | None = None) -> pd.DataFrame:
    try:
        long = formats.read_viescore_judge(root)
    except ValueError as exc:
        raise ImportFailed(str(exc)) from exc
    reshaped = int(long["reshaped"].sum())
    if summary is not None and reshaped:
        summary.counts["scores_reshaped"] += reshaped
        summary.notes.append(
            f"{reshaped} of {len(long)} judge outputs gave 'score' as a bare number or numeric text instead of a "
            "list of numbers; read as a one-element list / numbers, as the VIEScore analysis reads them")
    long["where"] = [str(root / t / m / f"{a}.json") for t, m, a in zip(long["task"], long["model"], long["aspect"])]
    aspects = long.assign(
        dimension=long["aspect"],
        value=np.clip(long["scores"].map(min).to_numpy(float) / 10.0, 0.0, 1.0),
        sub_scores=long["scores"].map(lambda s: [int(v) if float(v).is_integer() else v for v in s]),
        rationale=long["reasoning"].fillna("").astype(str),
    )
    overall = viescore_table(long).dropna(subset=["O"])
    overall = overall.assign(
        dimension="O", value=overall["O"], sub_scores=[[]] * len(overall), rationale="",
        where=[str(root / t / m) for t, m in zip(overall["task"], overall["model"])],
    )
    columns = ["task", "model", "uid", "dimension", "value", "sub_scores", "rationale", "where"]
    return pd.concat([aspects[columns], overall[columns]], ignore_index=True)


def _autometrics_rows(root: Path) -> pd.DataFrame:
    try:
        long = formats.read_autometrics(root)
    except ValueError as exc:
        raise ImportFailed(str(exc)) from exc
    return long.assign(
        dimension=long["metric"], where=[str(root / t / f"{m}.json") for t, m in zip(long["task"], long["model"])]
    )


_CSV_COLUMNS = ("study", "model", "item", "judge", "dimension", "value")


def _csv_rows(path: Path) -> pd.DataFrame:
    files = [path] if path.is_file() else sorted(path.glob("*.csv"))
    if not files:
        raise ImportFailed(f"{path}: no .csv files")
    rows = []
    for file in files:
        with file.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in _CSV_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise ImportFailed(f"{file}: line 1: missing columns {', '.join(missing)}")
            for line, record in enumerate(reader, start=2):
                where = f"{file}: line {line}"
                for column in ("study", "model", "item", "judge", "dimension"):
                    if not (record[column] or "").strip():
                        raise ImportFailed(f"{where}: empty {column!r}")
                text = (record["value"] or "").strip()
                try:
                    value = float(text) if text else float("nan")
                except ValueError:
                    raise ImportFailed(f"{where}: value {text!r} is not a number") from None
                if math.isinf(value):
                    raise ImportFailed(f"{where}: value {text!r} is not finite")
                rows.append((record["study"].strip(), record["model"].strip(), record["item"].strip(),
                             record["judge"].strip(), record["dimension"].strip(), value, where))
    return pd.DataFrame(rows, columns=["task", "model", "uid", "judge", "dimension", "value", "where"])


JUDGE_FORMATS = ("viescore", "autometrics", "csv")


@transaction.atomic
def judge_import(*, path: Path | str, fmt: str, judge_name: str = "") -> ImportSummary:
    """Import judge scores for items of existing studies (``JudgeRun`` with ``source=import``).

    * ``viescore``: ``<study-slug>/<Model>/{SC,PQ}.json``; per aspect min(score)/10 clipped to
      [0, 1] (sub-scores and reasoning kept), plus ``O = sqrt(SC * PQ)``. Needs ``judge_name``.
    * ``autometrics``: ``<study-slug>/<Model>.json`` (uid → {metric: value}); one judge per
      metric, named after it (prefixed ``<judge_name>:`` when given); dimension = metric;
      LPIPS is marked lower-is-better.
    * ``csv``: columns study, model, item (instance key), judge, dimension, value (empty = failed).
    """
    path = Path(path)
    if fmt not in JUDGE_FORMATS:
        raise ImportFailed(f"unknown format {fmt!r}; use one of {', '.join(JUDGE_FORMATS)}")
    if not path.exists():
        raise ImportFailed(f"{path}: does not exist")
    summary = ImportSummary()
    if fmt == "viescore":
        if not judge_name:
            raise ImportFailed("--judge NAME is required for the viescore format")
        rows = _viescore_rows(path, summary).assign(judge=judge_name)
        kinds = {judge_name: (Judge.Kind.VIESCORE, False)}
    elif fmt == "autometrics":
        rows = _autometrics_rows(path)
        rows["judge"] = [f"{judge_name}:{m}" if judge_name else m for m in rows["metric"]]
        kinds = {
            name: (Judge.Kind.METRIC, metric in LOWER_IS_BETTER_METRICS)
            for name, metric in zip(rows["judge"], rows["metric"])
        }
    else:
        rows = _csv_rows(path)
        if judge_name:
            rows["judge"] = judge_name
        kinds = {name: (Judge.Kind.IMPORTED, False) for name in rows["judge"].unique()}

    # Resolve every study and item before writing anything.
    resolved = []
    for slug, group in rows.groupby("task", sort=True):
        study, items = _study_items(slug, group["where"].iloc[0])
        group = group.assign(item_id=_attach_items(group, items, "where"))
        duplicated = group.duplicated(subset=["judge", "item_id", "dimension"])
        if duplicated.any():
            row = group[duplicated].iloc[0]
            raise ImportFailed(f"{row['where']}: duplicate score for {row['model']}/{row['uid']} {row['dimension']}")
        resolved.append((study, group))

    judges = {
        name: _ensure_judge(name, kind=kind, lower_is_better=lower, summary=summary)
        for name, (kind, lower) in kinds.items()
    }
    for study, group in resolved:
        for name, scores in group.groupby("judge", sort=True):
            run = _import_run(judges[name], study, str(path), len(scores))
            _store_scores(run, scores, summary)
    return summary


# ------------------------------------------------------------------ EvalMi-50K


def evalmi_read(*, mos_path: Path | str, questions_path: Path | str, tasks_path: Path | str
                ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Parse the three EvalMi-50K files (errors name file and line)."""
    try:
        return (
            formats.read_evalmi_mos(mos_path),
            formats.read_evalmi_questions(questions_path),
            formats.read_evalmi_prompt_tasks(tasks_path),
        )
    except (ValueError, OSError) as exc:
        raise ImportFailed(str(exc)) from exc


def evalmi_instance_key(prompt_number: int) -> str:
    return f"{int(prompt_number):04d}"


@transaction.atomic
def evalmi_store(*, mos: pd.DataFrame, questions: pd.DataFrame, tasks: pd.DataFrame, study_slug: str,
                 source_detail: str = "AIGI2025_MOS_yn.xlsx", title: str = "EvalMi-50K") -> ImportSummary:
    """Store parsed EvalMi-50K data as an EvalMi study with a published-MOS reference source.

    Instances = prompts (key ``0001``…, prompt from question.xlsx, task tag and ``include``
    from prompt_tasks.jsonl, task question and sub-questions); Items = (prompt, model) without
    images. Per image the reference judge stores ``perception`` and ``correspondence`` (0–100
    MOS as published) and ``qa`` (majority answer 1/0; sub-answers in ``sub_scores``).
    """
    summary = ImportSummary()
    if len(questions) != len(tasks):
        raise ImportFailed(f"question.xlsx has {len(questions)} prompts but prompt_tasks.jsonl has {len(tasks)}")
    known = set(questions["prompt_number"])
    unknown = mos[~mos["prompt_number"].isin(known)]
    if len(unknown):
        raise ImportFailed(
            f"{source_detail}: line {int(unknown.index[0]) + 2}: prompt number {unknown['prompt_number'].iloc[0]} "
            f"has no row in question.xlsx ({len(questions)} prompts)"
        )
    duplicated = mos.duplicated(subset=["model", "prompt_number"])
    if duplicated.any():
        row = int(np.flatnonzero(duplicated.to_numpy())[0])
        raise ImportFailed(f"{source_detail}: line {row + 2}: duplicate image {mos['image'].iloc[row]!r}")
    for column in ("perception", "correspondence"):
        values = mos[column].to_numpy(float)
        bad = ~np.isfinite(values)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ImportFailed(f"{source_detail}: line {row + 2}: {column} MOS is missing")
    mismatched = int((questions["prompt"].to_numpy() != tasks["prompt"].to_numpy()).sum())
    if mismatched:
        summary.notes.append(
            f"note: {mismatched} prompt(s) differ between question.xlsx and prompt_tasks.jsonl; "
            "question.xlsx is used (it defines the questions)"
        )

    study = _ensure_study(study_slug, protocol=protocols.EVALMI, task_type="mixed", title=title,
                          raters_per_item=1, summary=summary)
    sub_columns = [c for c in ("question_2", "question_3", "question_4", "question_5") if c in questions.columns]
    instances = pd.DataFrame({
        "key": [evalmi_instance_key(n) for n in questions["prompt_number"]],
        "position": questions["prompt_number"].astype(int).to_numpy(),
        "prompt": questions["prompt"].fillna("").astype(str).to_numpy(),
        "task_tag": tasks["tag"].astype(str).to_numpy(),
        "question": questions["question_1"].fillna("").astype(str).to_numpy(),
        "sub_questions": [[q for q in row if q] for row in questions[sub_columns].itertuples(index=False)],
        "facts": [{"include": inc} if inc is not None else {} for inc in tasks["include"]],
    })
    instance_ids = _ensure_instances(study, instances, summary)
    models = _ensure_gen_models(study, mos["model"].unique().tolist(), summary)
    pairs = pd.DataFrame({
        "instance_id": mos["prompt_number"].map(lambda n: instance_ids[evalmi_instance_key(n)]),
        "gen_model_id": mos["model"].map(models),
    })
    item_ids = _ensure_items(study, pairs, summary)

    judge = _ensure_judge(
        EVALMI_REFERENCE_JUDGE, kind=Judge.Kind.IMPORTED, summary=summary,
        params={"role": HUMAN_REFERENCE, "source": "EvalMi-50K published MOS (Wang et al., seed 004)",
                "scale": "perception/correspondence: z-MOS 0-100; qa: majority answer 1/0"},
    )
    run = _import_run(judge, study, source_detail, 0)
    sub_answers = mos[list(formats.EVALMI_SUB_ANSWER_COLUMNS)].to_numpy(float)
    subs = [[int(v) for v in row if np.isfinite(v)] for row in sub_answers]
    rows = pd.concat([
        pd.DataFrame({"item_id": item_ids, "dimension": "perception", "value": mos["perception"].to_numpy(float)}),
        pd.DataFrame({"item_id": item_ids, "dimension": "correspondence", "value": mos["correspondence"].to_numpy(float)}),
        pd.DataFrame({"item_id": item_ids, "dimension": "qa", "value": mos["answer"].to_numpy(float), "sub_scores": subs}),
    ], ignore_index=True)
    rows["sub_scores"] = [s if isinstance(s, list) else [] for s in rows["sub_scores"]]
    _store_scores(run, rows, summary)
    return summary


def evalmi_import(*, mos_path: Path | str, questions_path: Path | str, tasks_path: Path | str,
                  study_slug: str) -> ImportSummary:
    """Parse the EvalMi-50K files then store them (see :func:`evalmi_store`)."""
    mos, questions, tasks = evalmi_read(mos_path=mos_path, questions_path=questions_path, tasks_path=tasks_path)
    return evalmi_store(mos=mos, questions=questions, tasks=tasks, study_slug=study_slug,
                        source_detail=Path(mos_path).name)


# ------------------------------------------------------------------ long-format ratings (CSV / Parquet)

LONG_COLUMNS = ("study", "item", "model", "rater", "dimension", "value")
_LONG_LIMITS = {"study": 100, "item": 200, "model": 100, "rater": 150, "dimension": 64}


def _read_long_ratings(path: Path) -> pd.DataFrame:
    """The file as text columns plus ``where`` ("file: line N" for CSV, "file: row N" for Parquet)."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
            label, first = "line", 2  # the header is line 1
        elif suffix == ".parquet":
            frame = pd.read_parquet(path).astype(object)
            frame = frame.where(frame.notna(), "").astype(str)
            label, first = "row", 1
        else:
            raise ImportFailed(f"{path}: expected a .csv or .parquet file")
    except ImportFailed:
        raise
    except (ValueError, UnicodeDecodeError, OSError, pd.errors.ParserError) as exc:
        raise ImportFailed(f"{path}: cannot read: {exc}") from exc
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in LONG_COLUMNS if c not in frame.columns]
    if missing:
        raise ImportFailed(f"{path}: {'line 1' if label == 'line' else 'columns'}: missing columns {', '.join(missing)}")
    frame = frame[[c for c in (*LONG_COLUMNS, "prompt") if c in frame.columns]].copy()
    frame["where"] = [f"{path}: {label} {first + i}" for i in range(len(frame))]
    return frame


def _check_long_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Strip and validate the text columns and parse ``value``; the first bad row raises ImportFailed."""
    for column, limit in _LONG_LIMITS.items():
        text = frame[column].str.strip()
        bad = (text == "") | (text.str.len() > limit) | text.str.contains("\x00", regex=False)
        if bad.any():
            row = frame[bad].iloc[0]
            shown = repr(row[column][:40])
            why = "is empty" if not text[bad].iloc[0] else (
                "contains a NUL byte" if "\x00" in row[column] else f"is longer than {limit} characters")
            raise ImportFailed(f"{row['where']}: {column} {shown} {why}")
        frame[column] = text
    values = pd.to_numeric(frame["value"].str.strip(), errors="coerce")
    bad = values.isna() | ~np.isfinite(values.to_numpy(float))
    if bad.any():
        row = frame[bad].iloc[0]
        raise ImportFailed(f"{row['where']}: value {row['value'][:40]!r} is not a finite number")
    frame["value"] = values.astype(float)
    if "prompt" in frame.columns and frame["prompt"].str.contains("\x00", regex=False).any():
        row = frame[frame["prompt"].str.contains("\x00", regex=False)].iloc[0]
        raise ImportFailed(f"{row['where']}: prompt contains a NUL byte")
    duplicated = frame.duplicated(subset=["study", "item", "model", "rater", "dimension"], keep=False)
    if duplicated.any():
        rows = frame[duplicated]
        first = rows.iloc[0]
        same = rows[(rows[["study", "item", "model", "rater", "dimension"]] == first[
            ["study", "item", "model", "rater", "dimension"]]).all(axis=1)]
        raise ImportFailed(f"{same['where'].iloc[1]}: {first['rater']} rated {first['model']}/{first['item']} "
                           f"{first['dimension']} again (first at {first['where'].split(': ')[-1]})")
    return frame


@transaction.atomic
def long_ratings_import(*, path: Path | str, protocol: str = "", task_type: str = "") -> ImportSummary:
    """Import human ratings collected elsewhere, one rating per row (CSV or Parquet): columns
    ``study, item, model, rater, dimension, value`` and optionally ``prompt``.

    ``study`` is a study slug: an existing study keeps its protocol; a new one is created (closed,
    nobody is asked to rate it here) with ``protocol`` and ``task_type``. ``item`` is the sample key
    shared by the models (an ImagenHub uid, an EvalMi prompt number); each (study, item, model) is
    an Item. A rater's ratings of one item must cover every dimension of the protocol (ImagenHub
    SC and PQ; EvalMi perception and correspondence), with the protocol's allowed values. Raters
    are imported raters ``long/<study>/<rater>``. All rows are validated before anything is written
    (errors name file and line); a second run of the same file changes nothing.
    """
    path = Path(path)
    if not path.is_file():
        raise ImportFailed(f"{path}: no such file")
    frame = _check_long_rows(_read_long_ratings(path))
    if frame.empty:
        raise ImportFailed(f"{path}: no ratings")
    summary = ImportSummary()
    plans = []
    for slug, rows in frame.groupby("study", sort=True):
        study = Study.objects.filter(slug=slug).first()
        study_protocol = study.protocol if study is not None else protocol
        if study_protocol not in RATED_PROTOCOLS:
            raise ImportFailed(f"{rows['where'].iloc[0]}: study {slug!r} does not exist: give --protocol "
                               f"{' or '.join(RATED_PROTOCOLS)} (and --task-type) to create it")
        keys = [d.key for d in protocols.get_protocol(study_protocol).dimensions(
            protocols.get_protocol(study_protocol).clean_settings({}))]
        unknown = ~rows["dimension"].isin(keys)
        if unknown.any():
            row = rows[unknown].iloc[0]
            raise ImportFailed(f"{row['where']}: dimension {row['dimension']!r} is not one of {', '.join(keys)} "
                               f"({study_protocol} study)")
        wide = rows.pivot(index=["item", "model", "rater"], columns="dimension", values="value")
        where = rows.pivot(index=["item", "model", "rater"], columns="dimension", values="where")
        wide = wide.reindex(columns=keys)
        incomplete = wide.isna().any(axis=1).to_numpy()
        if incomplete.any():
            k = int(np.flatnonzero(incomplete)[0])
            item, model, rater = wide.index[k]
            lacking = [d for d in keys if pd.isna(wide.iloc[k][d])]
            seen = where.iloc[k].dropna().iloc[0]
            raise ImportFailed(f"{seen}: {rater}'s rating of {model}/{item} has no {', '.join(lacking)} "
                               f"(every rating needs {', '.join(keys)})")
        wide = wide.reset_index()
        first_where = where.reindex(columns=keys).iloc[:, 0].to_numpy()
        _validate_dimensions(wide, study_protocol, lambda i: f"{first_where[i]} ({wide['model'].iloc[i]})")
        prompts = rows.groupby("item")["prompt"].first() if "prompt" in rows.columns else None
        plans.append((slug, study, study_protocol, keys, wide, prompts))

    for slug, study, study_protocol, keys, wide, prompts in plans:
        if study is None:
            study = _ensure_study(slug, protocol=study_protocol, task_type=task_type,
                                  title=slug.replace("-", " ").replace("_", " "),
                                  raters_per_item=int(wide.groupby(["item", "model"])["rater"].nunique().max()),
                                  summary=summary)
        else:
            summary.counts["studies_unchanged"] += 1
        models = _ensure_gen_models(study, wide["model"].unique().tolist(), summary)
        items = pd.unique(wide["item"])
        instances = pd.DataFrame({"key": items, "position": np.arange(1, len(items) + 1)})
        if prompts is not None:
            instances["prompt"] = instances["key"].map(prompts).fillna("")
        instance_ids = _ensure_instances(study, instances, summary)
        pairs = pd.DataFrame({"instance_id": wide["item"].map(instance_ids), "gen_model_id": wide["model"].map(models)})
        wide["item_id"] = _ensure_items(study, pairs, summary)
        raters = {name: _ensure_import_rater(f"long/{slug}/{name}", summary) for name in wide["rater"].unique()}
        wide["rater_id"] = wide["rater"].map(raters)
        wide["source_detail"] = path.name[:200]
        _store_ratings(study, wide, keys, summary)
    return summary
