"""The MOS dataset a researcher publishes: tables, file layouts and the datasheet. No Django.

Input is an :class:`ExportInput`: raw votes in long form plus study metadata. From it this module
derives

* ``items``: per-item MOS with 95 % CI and rater count, per dimension, on two scales: the raw
  rating scale (mean of votes, Student-t CI across the item's raters) and z-MOS 0–100 (EvalMi-50K
  section 3.3: per-rater z-scores rescaled by 100 (z + 3) / 6, then averaged; t CI);
* ``votes``: every vote of every rater with its z-score per dimension;
* ``raters``: screening flags (ITU-R BT.500 per dimension), z-score exclusions and the site's own
  exclusion reasons (e.g. blocked raters);

and writes them as CSV, JSONL and Parquet, plus the ImagenHub TSV layout (one file per rater) and
the EvalMi sheet layout (xlsx), with a README datasheet, into one zip that is produced chunk by
chunk (:func:`iter_export_zip`) so a large study streams instead of sitting in memory twice.

CSV cells holding text that starts with ``= + - @`` (or tab / carriage return) are prefixed with a
single quote so spreadsheet programs do not run them as formulas; numbers are written as numbers.
"""

from __future__ import annotations

import csv
import io
import json
import math
import zipfile
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import numpy as np
import pandas as pd
from scipy import stats

from analysis.screening import screen_observers
from analysis.zmos import zscore_by_rater

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
CSV_CHUNK_ROWS = 5_000


@dataclass
class ExportInput:
    """Everything an export needs.

    ``votes``: one row per vote with ``rater`` (label), ``item`` (id), ``instance`` (key), ``model``,
    one float column per name in ``dimensions``, optional answer columns named in ``questions``
    ('yes'/'no'), plus any extra columns (timestamps, source) which are passed through.
    For pairwise studies ``dimensions`` is empty and votes carry ``model_a``, ``model_b``,
    ``preference``. ``excluded``: rater label → reason the site leaves them out.
    ``meta``: study slug, title, protocol, protocol_version, task_type, settings, … (JSON-able).
    """

    votes: pd.DataFrame
    dimensions: list[str]
    meta: dict
    questions: list[str] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)
    instances: pd.DataFrame | None = None  # key, prompt, question, sub_questions (EvalMi sheet)


# ------------------------------------------------------------------ CSV safety


def escape_cell(value):
    """Make a text cell inert in spreadsheets; leave numbers and empty cells alone."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def _csv_value(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (np.floating, float)):
        return repr(float(value))
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_, bool)):
        return "true" if value else "false"
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return escape_cell(str(value))


def iter_csv(frame: pd.DataFrame, *, chunk_rows: int = CSV_CHUNK_ROWS) -> Iterator[bytes]:
    """CSV bytes in chunks, header first, every text cell escaped."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([escape_cell(str(c)) for c in frame.columns])
    for start in range(0, len(frame), chunk_rows):
        for row in frame.iloc[start : start + chunk_rows].itertuples(index=False, name=None):
            writer.writerow([_csv_value(v) for v in row])
        yield buffer.getvalue().encode()
        buffer.seek(0)
        buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue().encode()


def _json_value(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, np.floating):
        return None if math.isnan(value) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value


def iter_jsonl(frame: pd.DataFrame, *, chunk_rows: int = CSV_CHUNK_ROWS) -> Iterator[bytes]:
    columns = list(frame.columns)
    for start in range(0, len(frame), chunk_rows):
        lines = [
            json.dumps({c: _json_value(v) for c, v in zip(columns, row)}, ensure_ascii=False)
            for row in frame.iloc[start : start + chunk_rows].itertuples(index=False, name=None)
        ]
        yield ("\n".join(lines) + "\n").encode()


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False, engine="pyarrow")
    return buffer.getvalue()


# ------------------------------------------------------------------ tables


def _t_ci(mean: pd.Series, std: pd.Series, n: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    n_arr = n.to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        half = stats.t.ppf(0.975, np.where(n_arr >= 2, n_arr - 1, np.nan)) * std.to_numpy(float) / np.sqrt(n_arr)
    return mean.to_numpy(float) - half, mean.to_numpy(float) + half


def _usable_votes(data: ExportInput) -> pd.DataFrame:
    return data.votes[~data.votes["rater"].isin(list(data.excluded))]


def with_overall(data: ExportInput) -> ExportInput:
    """ImagenHub: add O = sqrt(SC · PQ) per vote as a third dimension (seed 003)."""
    if {"SC", "PQ"} <= set(data.dimensions) and "O" not in data.dimensions:
        votes = data.votes.assign(O=np.sqrt(data.votes["SC"].to_numpy(float) * data.votes["PQ"].to_numpy(float)))
        return ExportInput(votes, [*data.dimensions, "O"], data.meta, data.questions, data.excluded, data.instances)
    return data


def votes_table(data: ExportInput) -> tuple[pd.DataFrame, dict[str, dict[str, str]]]:
    """Every vote with ``<dim>_z`` per dimension; returns (table, z-exclusions per dimension).

    z is computed over the rater's non-excluded votes; it is empty for a rater whose votes in that
    dimension are all equal (sigma = 0) or who has a single vote, and for excluded raters.
    """
    table = data.votes.copy()
    table["excluded"] = table["rater"].isin(list(data.excluded))
    table["exclusion_reason"] = [data.excluded.get(r, "") for r in table["rater"]]
    z_excluded: dict[str, dict[str, str]] = {}
    usable = table[~table["excluded"]]
    for dim in data.dimensions:
        scored, excluded = zscore_by_rater(usable[["rater", dim]].rename(columns={dim: "score"}))
        table[f"{dim}_z"] = scored["z"].reindex(table.index)
        z_excluded[dim] = excluded
    return table, z_excluded


def items_table(data: ExportInput, votes: pd.DataFrame) -> pd.DataFrame:
    """Per item: rater count and, per dimension, mean and z-MOS (0–100) with 95 % t CIs.

    Excluded raters' votes do not count. An item with one rater has no CI (empty cells).
    """
    usable = votes[~votes["excluded"]]
    keys = ["item", "instance", "model"]
    grouped = usable.groupby(keys, sort=True)
    table = grouped["rater"].nunique().rename("n_raters").reset_index()
    for dim in data.dimensions:
        raw = grouped[dim].agg(["mean", "std", "count"]).reset_index(drop=True)
        table[f"{dim}_mean"] = raw["mean"].to_numpy()
        table[f"{dim}_ci_low"], table[f"{dim}_ci_high"] = _t_ci(raw["mean"], raw["std"], raw["count"])
        scaled = usable.assign(_zs=100.0 * (usable[f"{dim}_z"] + 3.0) / 6.0).groupby(keys, sort=True)["_zs"]
        z = scaled.agg(["mean", "std", "count"]).reset_index(drop=True)
        table[f"{dim}_zmos"] = z["mean"].to_numpy()
        table[f"{dim}_zmos_ci_low"], table[f"{dim}_zmos_ci_high"] = _t_ci(z["mean"], z["std"], z["count"])
        table[f"{dim}_zmos_n"] = z["count"].to_numpy()
    return table


def raters_table(data: ExportInput, votes: pd.DataFrame, z_excluded: dict[str, dict[str, str]]) -> pd.DataFrame:
    """One row per rater: vote count, BT.500 flags per dimension, every exclusion reason."""
    raters = sorted(votes["rater"].unique(), key=str)
    table = pd.DataFrame({"rater": raters})
    table["n_votes"] = votes.groupby("rater").size().reindex(raters).to_numpy()
    reasons: dict[str, list[str]] = {r: [] for r in raters}
    for rater, reason in data.excluded.items():
        if rater in reasons:
            reasons[rater].append(f"excluded by the site: {reason}")
    usable = votes[~votes["excluded"]]
    for dim in data.dimensions:
        flags = pd.Series(False, index=raters)
        if usable[dim].notna().any():
            result = screen_observers(usable.rename(columns={dim: "score"})[["rater", "item", "score"]])
            rejected = set(result.rejected)
            flags = pd.Series([r in rejected for r in raters], index=raters)
            for rater in rejected:
                reasons[rater].append(f"{dim}: BT.500 outlier screening flags this rater")
        table[f"{dim}_bt500_flag"] = flags.to_numpy()
        for rater, reason in z_excluded.get(dim, {}).items():
            if rater in reasons:
                reasons[rater].append(f"{dim}: no z-score ({reason})")
    table["excluded"] = table["rater"].isin(list(data.excluded))
    table["reasons"] = ["; ".join(reasons[r]) for r in raters]
    return table


# ------------------------------------------------------------------ layouts


def _cell(value: float) -> str:
    return f"{value:g}"


def imagenhub_tsvs(votes: pd.DataFrame, *, folder: str) -> dict[str, bytes]:
    """ImagenHub layout: ``<folder>/<folder>_raterN.tsv``, ``uid`` + one ``[SC, PQ]`` column per model.

    Raters are numbered 1.. in sorted label order. A uid is written for a rater only when that
    rater rated every model on it (the layout has no empty cells).
    """
    models = sorted(votes["model"].unique(), key=str)
    files: dict[str, bytes] = {}
    for number, (rater, group) in enumerate(sorted(votes.groupby("rater"), key=lambda kv: str(kv[0])), start=1):
        cells = group.drop_duplicates(["instance", "model"]).set_index(["instance", "model"])
        lines = ["\t".join(["uid", *models])]
        for uid in sorted(group["instance"].unique(), key=str):
            if not all((uid, m) in cells.index for m in models):
                continue
            row = [str(uid)] + [
                f"[{_cell(cells.loc[(uid, m), 'SC'])}, {_cell(cells.loc[(uid, m), 'PQ'])}]" for m in models
            ]
            lines.append("\t".join(row))
        files[f"{folder}/{folder}_rater{number}.tsv"] = ("\n".join(lines) + "\n").encode()
    return files


def evalmi_sheets(items: pd.DataFrame, votes: pd.DataFrame, data: ExportInput) -> dict[str, bytes]:
    """EvalMi-50K layout: MOS sheet (ImageName, MOS1, MOS2, Y/N, YN_1..) and question sheet.

    ``ImageName`` is ``<model>/<instance key>.png``; MOS1 = perception z-MOS, MOS2 =
    correspondence z-MOS (0–100); Y/N and YN_k are majority answers (1 = yes; ties count as no)
    to the task question (q1) and the sub-questions (q2 → YN_1 …); as in the release, Y/N is 1 only
    when the task answer and every sub-answer are 1.
    """
    sheet = pd.DataFrame(
        {
            "ImageName": items["model"].astype(str) + "/" + items["instance"].astype(str) + ".png",
            "MOS1": items.get("perception_zmos"),
            "MOS2": items.get("correspondence_zmos"),
        }
    )
    usable = votes[~votes["excluded"]]
    sub_keys = [q for q in data.questions if q != "q1"]
    majority = {}
    for question in data.questions:
        if question in usable.columns:
            answered = usable[usable[question].isin(["yes", "no"])]
            share = answered.assign(_yes=answered[question].eq("yes")).groupby("item")["_yes"].mean()
            majority[question] = (share.reindex(items["item"]).to_numpy() > 0.5).astype(float)
            majority[question][np.isnan(share.reindex(items["item"]).to_numpy())] = np.nan
    if "q1" in majority:
        overall = majority["q1"].copy()
        for key in sub_keys:
            if key in majority:
                has = ~np.isnan(majority[key])
                overall[has] = np.minimum(overall[has], majority[key][has])
        sheet["Y/N"] = overall
    for index, key in enumerate(sub_keys, start=1):
        if key in majority:
            sheet[f"YN_{index}"] = majority[key]
    files = {}
    buffer = io.BytesIO()
    sheet.to_excel(buffer, index=False, engine="openpyxl")
    files["evalmi/AIGI_MOS_yn.xlsx"] = buffer.getvalue()
    if data.instances is not None and len(data.instances):
        questions = pd.DataFrame({"key": data.instances["key"], "prompt": data.instances["prompt"], "question_1": data.instances["question"]})
        for k in range(4):
            questions[f"question_{k + 2}"] = [
                (subs[k] if isinstance(subs, list) and len(subs) > k else "") for subs in data.instances["sub_questions"]
            ]
        buffer = io.BytesIO()
        questions.to_excel(buffer, index=False, engine="openpyxl")
        files["evalmi/question.xlsx"] = buffer.getvalue()
    return files


# ------------------------------------------------------------------ datasheet


def datasheet(data: ExportInput, items: pd.DataFrame, raters: pd.DataFrame, files: list[str]) -> str:
    meta = data.meta
    dims = ", ".join(data.dimensions) or "preference (pairwise)"
    excluded = "\n".join(f"- `{r}`: {why}" for r, why in sorted(data.excluded.items())) or "- none"
    listing = "\n".join(f"- `{name}`" for name in files)
    return f"""# {meta.get('title', meta.get('slug'))}: rating data

Study `{meta.get('slug')}` · protocol `{meta.get('protocol')}` (version {meta.get('protocol_version')}) ·
task `{meta.get('task_type')}` · exported {meta.get('exported_at')}.
Study settings (with protocol defaults filled in) are in `study.json`.

## Counts
- votes: {len(data.votes)}; raters: {data.votes['rater'].nunique() if len(data.votes) else 0}; items with votes: {len(items)}
- dimensions: {dims}

## How every number was made
- **Votes** (`votes.*`): one row per rater and item as stored, the latest version of each rating
  (earlier edits are not exported). Raters are pseudonymous (`rater<id>`): no names or e-mails. Dimension columns hold the raw scale of the protocol
  (ImagenHub SC/PQ in {{0, 0.5, 1}}; EvalMi Likert points).
- **O** (ImagenHub only): per vote, O = sqrt(SC · PQ) (ImagenHub, Ku et al., 2023), so an image
  that ignores its conditions (SC = 0) scores 0.
- **`<dim>_z`**: per rater and dimension, z = (r − μ_rater) / σ_rater over all of that rater's
  non-excluded votes, σ with ddof = 1 (EvalMi-50K §3.3). Empty when σ = 0 (all votes equal) or
  the rater has one vote (see `raters.*` reasons), and for excluded raters.
- **Items** (`items.*`), excluded raters left out:
  - `n_raters`: distinct raters who voted on the item;
  - `<dim>_mean`: mean of the raw votes; `<dim>_ci_low/high`: 95 % Student-t interval across the
    item's raters (mean ± t(0.975, n−1) · s / √n); empty with fewer than 2 raters;
  - `<dim>_zmos`: mean of 100 · (z + 3) / 6 over the item's raters (0–100, z = ±3 ↦ 100/0);
    `<dim>_zmos_ci_low/high`: 95 % t interval of those values; `<dim>_zmos_n`: raters with a z.
- **Raters** (`raters.*`): `<dim>_bt500_flag` is ITU-R BT.500 Annex 1 §2.3.1 observer screening
  (kurtosis test per item; P + Q over N > 0.05 and |P − Q| / (P + Q) < 0.3; strict inequalities).
  Flags are reported, **not** applied; `excluded` marks raters the site left out of every
  number above, with the reason in `reasons`.
- **ImagenHub layout** (`imagenhub/<Task>/<Task>_raterN.tsv`, the task folder name of the
  released data): one TSV per non-excluded rater (numbered in sorted label order),
  `uid` = instance key, one column per model, cells `[SC, PQ]`; a uid appears for a rater only
  if they rated every model on it.
- **EvalMi layout** (`evalmi/`): `ImageName` = `<model>/<instance>.png`, `MOS1` perception z-MOS,
  `MOS2` correspondence z-MOS, `Y/N` and `YN_k` majority answers (1 = yes, ties = no); `Y/N` is 1
  only when the task answer and all sub-answers are 1.
- CSV: UTF-8, comma separated; text cells starting with = + - @ are prefixed with `'` so that
  spreadsheets do not evaluate them. JSONL and Parquet hold the same tables unescaped.

## Excluded raters
{excluded}

## Files
{listing}
"""


# ------------------------------------------------------------------ zip


class _Sink:
    """A write-only file object that hands out what was written since the last call."""

    def __init__(self):
        self._chunks: list[bytes] = []
        self._position = 0

    def write(self, data) -> int:
        self._chunks.append(bytes(data))
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data, self._chunks = b"".join(self._chunks), []
        return data


def export_tables(data: ExportInput) -> dict[str, pd.DataFrame]:
    """The three tables of the dataset (pairwise: votes and raters only)."""
    data = with_overall(data)
    votes, z_excluded = votes_table(data)
    tables = {"votes": votes}
    if data.dimensions:
        tables["items"] = items_table(data, votes)
    tables["raters"] = raters_table(data, votes, z_excluded)
    return tables


def iter_export_zip(data: ExportInput) -> Iterator[bytes]:
    """The whole dataset as a zip, yielded in chunks (for StreamingHttpResponse)."""
    data = with_overall(data)
    votes, z_excluded = votes_table(data)
    items = items_table(data, votes) if data.dimensions else pd.DataFrame()
    raters = raters_table(data, votes, z_excluded)
    tables = {"votes": votes, "raters": raters}
    if data.dimensions:
        tables["items"] = items

    sink = _Sink()
    names: list[str] = []
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED) as archive:

        def member(name: str, chunks: Iterable[bytes]) -> Iterator[bytes]:
            names.append(name)
            with archive.open(name, "w", force_zip64=True) as handle:
                for chunk in chunks:
                    handle.write(chunk)
                    yield sink.take()
            yield sink.take()

        yield from member("study.json", [json.dumps(data.meta, indent=2, default=str).encode()])
        for name, table in tables.items():
            yield from member(f"{name}.csv", iter_csv(table))
            yield from member(f"{name}.jsonl", iter_jsonl(table))
            yield from member(f"{name}.parquet", [parquet_bytes(table)])
        layouts: dict[str, bytes] = {}
        if data.meta.get("protocol") == "imagenhub" and len(votes):
            folder = data.meta.get("imagenhub_folder") or data.meta["slug"]
            layouts.update(imagenhub_tsvs(votes[~votes["excluded"]], folder=folder))
        if data.meta.get("protocol") == "evalmi" and len(items):
            layouts.update(evalmi_sheets(items, votes, data))
        for name, blob in layouts.items():
            yield from member(f"{'imagenhub/' if name.endswith('.tsv') else ''}{name}", [blob])
        yield from member("README.md", [datasheet(data, items, raters, [*names, "README.md"]).encode()])
    yield sink.take()
