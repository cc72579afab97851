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
the EvalMi sheet layout (xlsx), the study report (``report.json``) and a README datasheet that
carries the report's model-level numbers, into one zip produced chunk by chunk
(:func:`iter_export_zip`): the per-vote table is written from the database in chunks, only the
numbers (rater, item, scores) of the whole study are held as a vectorised frame.

Every file a spreadsheet may open is made inert (OWASP "CSV injection"): CSV and TSV text cells
that start with ``= + - @`` (or tab / carriage return) are prefixed with a single quote, numbers
are written as numbers (a negative score stays a number); NUL is dropped from CSV and TSV text,
a carriage return in CSV text becomes a (quoted) line feed, and TSV text has its tabs and line
breaks turned into spaces (the layout has no quoting, so they would split cells and rows). The xlsx sheets store every text cell as a string, never a formula,
with Excel's quote prefix on the ones that would look like one. JSONL and Parquet are typed
formats that no spreadsheet evaluates: they hold the text exactly.
"""

from __future__ import annotations

import csv
import io
import json
import math
import zipfile
import tempfile
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from openpyxl import Workbook
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE
from scipy import stats

from analysis.science import protocols
from analysis.science.screening import screen_observers
from analysis.science.subject_model import subject_model
from analysis.science.zmos import zscore_by_rater

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

    Large studies: ``votes`` only needs the columns the numbers use (the ones above, no
    timestamps), and ``vote_rows`` is a function returning the full rows in chunks (frames with
    the same rater/item/dimension values plus the pass-through columns), read again from the
    database while ``votes.*`` is written. Without it, ``votes`` is written as it is.
    ``report``: the study report (analysis.report.build_report output) or a function returning
    it; it is called after the vote tables are written, so a client gets bytes first.
    """

    votes: pd.DataFrame
    dimensions: list[str]
    meta: dict
    questions: list[str] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)
    instances: pd.DataFrame | None = None  # key, prompt, question, sub_questions (EvalMi sheet)
    vote_rows: Callable[[], Iterable[pd.DataFrame]] | None = None
    report: dict | Callable[[], dict] | None = None
    # Per item (``item``): prompt, output_path (in the bundle), image_sha256; per rater (``rater``
    # label): platform, crowd_id, standing, quality_flags. Joined onto items.* and raters.*.
    item_info: pd.DataFrame | None = None
    rater_info: pd.DataFrame | None = None


def _with_info(table: pd.DataFrame, info: pd.DataFrame | None, key: str) -> pd.DataFrame:
    """``table`` with ``info``'s columns right after ``key`` (left join: every row stays)."""
    if info is None or table.empty:
        return table
    joined = table.merge(info, on=key, how="left")
    extra = [c for c in info.columns if c != key]
    rest = [c for c in table.columns if c != key]
    return joined[[key, *extra, *rest]]


# ------------------------------------------------------------------ CSV safety


def escape_cell(value):
    """Make a text cell inert in spreadsheets; leave numbers and empty cells alone."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def _csv_text(value: str) -> str:
    # The csv module quotes commas, quotes and "\n" itself, but (Python 3.11) not a lone "\r",
    # which readers take as the end of the row: line breaks become "\n". NUL is dropped: several
    # readers refuse it or cut the cell there.
    return escape_cell(value.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n"))


def _tsv_text(value) -> str:
    """A text cell of the ImagenHub layout: one line, no tab, inert in spreadsheets.

    The layout has no quoting, so tab / CR / LF become spaces and NUL goes; a leading double quote
    gets the ``'`` prefix too, as pandas (our importer's reader) would take it as a quoted cell.
    """
    text = str(value).replace("\x00", "")
    for character in "\t\r\n":
        text = text.replace(character, " ")
    text = escape_cell(text)
    return "'" + text if text.startswith('"') else text


def _csv_value(value):
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (np.floating, float)):
        return repr(float(value))
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_, bool)):
        return "true" if value else "false"
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return _csv_text(str(value))


def iter_csv(frame: pd.DataFrame, *, chunk_rows: int = CSV_CHUNK_ROWS) -> Iterator[bytes]:
    """CSV bytes in chunks, header first, every text cell escaped."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([_csv_text(str(c)) for c in frame.columns])
    for start in range(0, len(frame), chunk_rows):
        for row in frame.iloc[start : start + chunk_rows].itertuples(index=False, name=None):
            writer.writerow([_csv_value(v) for v in row])
        yield buffer.getvalue().encode()
        buffer.seek(0)
        buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue().encode()


def _json_value(value):
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
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
        dimensions = [*data.dimensions, "O"]
        return replace(data, votes=add_overall(data.votes, dimensions), dimensions=dimensions)
    return data


@dataclass
class ZParameters:
    """Per dimension: each usable rater's mean and std (ddof 1) of their votes, and who has no z."""

    mean: dict[str, pd.Series]
    std: dict[str, pd.Series]
    excluded: dict[str, dict[str, str]]


def z_parameters(data: ExportInput) -> ZParameters:
    """μ and σ per rater and dimension over the rater's non-excluded votes (EvalMi-50K §3.3).

    The rule of who gets a z (at least 2 votes, σ > 0) is analysis.science.zmos.zscore_by_rater's; the
    μ and σ are those it used, so a vote's z can be computed later, one chunk at a time.
    """
    usable = _usable_votes(data)
    params = ZParameters({}, {}, {})
    for dim in data.dimensions:
        scored, excluded = zscore_by_rater(usable[["rater", dim]].rename(columns={dim: "score"}))
        grouped = scored.groupby("rater", sort=False)["score"]
        params.mean[dim], params.std[dim], params.excluded[dim] = grouped.mean(), grouped.std(), excluded
    return params


def add_overall(frame: pd.DataFrame, dimensions: list[str]) -> pd.DataFrame:
    """O = sqrt(SC · PQ) per vote when the dimensions ask for it and the frame lacks it."""
    if "O" in dimensions and "O" not in frame.columns and {"SC", "PQ"} <= set(frame.columns):
        return frame.assign(O=protocols.overall(frame["SC"].to_numpy(float), frame["PQ"].to_numpy(float)))
    return frame


def vote_columns(frame: pd.DataFrame, data: ExportInput, params: ZParameters) -> pd.DataFrame:
    """Votes with ``excluded``, ``exclusion_reason`` and ``<dim>_z`` per dimension added.

    z is empty for a rater whose votes in that dimension are all equal (σ = 0) or who has a
    single vote, and for excluded raters (they have no μ, σ).
    """
    frame = add_overall(frame, data.dimensions)
    raters = frame["rater"]
    reasons = raters.map(data.excluded).astype(object)
    columns = {
        "excluded": raters.isin(list(data.excluded)).to_numpy(),
        "exclusion_reason": reasons.where(reasons.notna(), "").to_numpy(object),
    }
    for dim in data.dimensions:
        mean, std = raters.map(params.mean[dim]), raters.map(params.std[dim])
        columns[f"{dim}_z"] = ((frame[dim].astype(float) - mean) / std).to_numpy(float)
    return frame.assign(**columns)


def items_table(data: ExportInput, votes: pd.DataFrame, subject: dict | None = None) -> pd.DataFrame:
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
        # the P.913 subject model on the raw scale (analysis.science.subject_model), beside z-MOS
        fitted = subject[dim] if subject is not None else _subject_fit(usable, dim)
        if fitted is not None:
            quality = fitted.items.reset_index().set_index("item").reindex(table["item"])
            table[f"{dim}_subject_quality"] = quality["quality"].to_numpy(float)
            table[f"{dim}_subject_ci_low"] = quality["ci_low"].to_numpy(float)
            table[f"{dim}_subject_ci_high"] = quality["ci_high"].to_numpy(float)
    return table


def _subject_fit(usable: pd.DataFrame, dim: str):
    """The subject model of one dimension's usable votes (items keyed by item id), or None."""
    frame = usable[["rater", "item", dim]].dropna(subset=[dim])
    return subject_model(frame, score=dim) if len(frame) else None


def subject_fits(data: ExportInput, votes: pd.DataFrame) -> dict:
    """The subject model of every dimension on the usable votes, for both tables."""
    usable = votes[~votes["excluded"]]
    return {dim: _subject_fit(usable, dim) for dim in data.dimensions}


def raters_table(data: ExportInput, votes: pd.DataFrame, z_excluded: dict[str, dict[str, str]],
                 subject: dict | None = None) -> pd.DataFrame:
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
        fitted = subject[dim] if subject is not None else _subject_fit(usable, dim)
        fit_raters = fitted.raters.reindex(raters) if fitted is not None else pd.DataFrame(index=raters)
        for column in ("bias", "inconsistency"):
            table[f"{dim}_subject_{column}"] = fit_raters[column].to_numpy(float) if column in fit_raters else np.nan
        inconsistent = (fit_raters["inconsistent"].fillna(False).astype(bool) if "inconsistent" in fit_raters
                        else pd.Series(False, index=raters))
        table[f"{dim}_subject_inconsistent"] = inconsistent.to_numpy()
        for rater in inconsistent.index[inconsistent.to_numpy()]:
            reasons[rater].append(f"{dim}: subject model finds this rater inconsistent (no gold needed)")
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
        lines = ["\t".join(["uid", *(_tsv_text(m) for m in models)])]
        for uid in sorted(group["instance"].unique(), key=str):
            if not all((uid, m) in cells.index for m in models):
                continue
            row = [_tsv_text(uid)] + [
                f"[{_cell(cells.loc[(uid, m), 'SC'])}, {_cell(cells.loc[(uid, m), 'PQ'])}]" for m in models
            ]
            lines.append("\t".join(row))
        files[f"{folder}/{folder}_rater{number}.tsv"] = ("\n".join(lines) + "\n").encode()
    return files


def xlsx_bytes(frame: pd.DataFrame) -> bytes:
    """One sheet: header row, then the frame's rows; text always a string cell, never a formula.

    openpyxl (and so ``DataFrame.to_excel``) turns any text starting with ``=`` into a formula;
    here the type is set back to string, Excel's quote prefix keeps it text when the cell is
    edited, and the control characters the file format cannot hold are dropped. Empty / NaN
    cells stay empty; numbers stay numbers.
    """
    book = Workbook()
    sheet = book.active
    for row_number, row in enumerate([list(frame.columns), *frame.itertuples(index=False, name=None)], start=1):
        for column_number, value in enumerate(row, start=1):
            value = _json_value(value)
            if value is None:
                continue
            cell = sheet.cell(row=row_number, column=column_number)
            if isinstance(value, (bool, int, float)):
                cell.value = value
                continue
            text = ILLEGAL_CHARACTERS_RE.sub("", str(value))
            cell.value = text
            cell.data_type = "s"
            if text.startswith(FORMULA_PREFIXES):
                cell.quotePrefix = True
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


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
    files = {"evalmi/AIGI_MOS_yn.xlsx": xlsx_bytes(sheet)}
    if data.instances is not None and len(data.instances):
        questions = pd.DataFrame({"key": data.instances["key"], "prompt": data.instances["prompt"], "question_1": data.instances["question"]})
        for k in range(4):
            questions[f"question_{k + 2}"] = [
                (subs[k] if isinstance(subs, list) and len(subs) > k else "") for subs in data.instances["sub_questions"]
            ]
        files["evalmi/question.xlsx"] = xlsx_bytes(questions)
    return files


# ------------------------------------------------------------------ datasheet

REPORT_RATER_LABEL = "rater{}"  # report.json names raters by id; the tables by this label


def _fmt(value) -> str:
    return "—" if value is None else f"{value:.4f}"


def _fmt_ci(ci) -> str:
    return "—" if not ci else f"[{ci[0]:.4f}, {ci[1]:.4f}]"


_MODEL_NUMBERS_HOW = {
    "imagenhub": """\
- `mean`: each rater's mean over the items of that model they rated, then the mean over raters
  (ImagenHub Table 4); `std between raters`: population standard deviation (ddof 0) of those
  per-rater means; its item-only 95 % interval is the Student-t interval over the model's items of
  the rater-averaged item score (mean ± t(0.975, n−1) · s / √n, n = items; which interval the
  `95 % CI` column shows: below). O = sqrt(SC · PQ) per vote first.""",
    "evalmi": """\
- `mean`: model z-MOS (0–100): per rater z-scores rescaled by 100 (z + 3) / 6, averaged per item
  over its raters, then over the model's items (EvalMi-50K §3.3); `std between raters`:
  population standard deviation (ddof 0) of each rater's mean rescaled z over the model's items;
  its item-only 95 % interval is the Student-t interval over the model's item z-MOS (which
  interval the `95 % CI` column shows: below).""",
}


def _report_section(data: ExportInput, report: dict, raters: pd.DataFrame) -> str:
    """The model-level numbers of the study report, as tables, and how each was made."""
    protocol = data.meta.get("protocol")
    lines = ["## Model-level results (from the study report, `report.json`)", "",
             "Copied from `analysis.report.build_report`, the one report builder the site's pages, API and CLI "
             "use; `report.json` holds all of it (every α level, human ceiling, judges, and `reasons` for every "
             "empty number). Excluded raters are left out "
             f"({'included' if report.get('include_excluded') else 'not included'} here).", ""]
    models = report.get("models", {})
    definition = protocols.PROTOCOLS.get(protocol)
    if definition is not None and not definition.has_scales:
        lines += [
            "| model | comparisons | wins | losses | ties | both bad | win rate [95 % CI] | BT score [95 % CI] |",
            "|---|---|---|---|---|---|---|---|",
        ]
        ranked = sorted(models.items(), key=lambda kv: -(kv[1].get("bt_score") or float("-inf")))
        for name, entry in ranked:
            lines.append(
                f"| {name} | {entry['comparisons']} | {entry['wins']} | {entry['losses']} | {entry['ties']} | "
                f"{entry['both_bad']} | {_fmt(entry['win_rate'])} {_fmt_ci(entry['win_rate_ci95'])} | "
                f"{_fmt(entry['bt_score'])} {_fmt_ci(entry['bt_ci95'])} |"
            )
        preference = report.get("study_level", {}).get("preference", {})
        lines += ["", f"Agreement on the preference (A / B / tie / both bad as nominal categories): "
                      f"Krippendorff's α {_fmt(preference.get('alpha_nominal'))}, "
                      f"Fleiss' κ {_fmt(preference.get('fleiss_kappa'))}.", "",
                  "How: ties count as half a win for each side; 'both bad' is left out of win rates and "
                  "Bradley–Terry and reported as its own count. Bradley–Terry strengths are fitted by the MM "
                  "algorithm with a weak prior (0.5 virtual wins and losses against a reference) and reported "
                  "as natural-log strengths centred on the mean over models (0 = average model; "
                  "P(i beats j) = 1 / (1 + exp(s_j − s_i))). CIs: percentile 95 % of a seeded bootstrap over "
                  "judgements (1,000 replicates, seed 0)."]
        for note in report.get("study_level", {}).get("pairwise_notes", []):
            lines.append(f"- {note}")
    else:
        level = definition.agreement_level if definition is not None else "interval"
        for dim in data.dimensions:
            lines += [f"### {dim}", "",
                      f"| model | items | raters | mean | std between raters | 95 % CI | α ({level}) [95 % CI] | Fleiss κ [95 % CI] |",
                      "|---|---|---|---|---|---|---|---|"]
            for name, entry in models.items():
                block = entry.get("dimensions", {}).get(dim)
                if block is None:
                    continue
                lines.append(
                    f"| {name} | {entry['items']} | {entry['raters'] if entry['raters'] is not None else '—'} | "
                    f"{_fmt(block['mean'])} | {_fmt(block['std_between_raters'])} | {_fmt_ci(block['ci95'])} | "
                    f"{_fmt(block['alpha'].get(level))} {_fmt_ci((block.get('alpha_ci95') or {}).get(level))} | "
                    f"{_fmt(block['fleiss_kappa'])} {_fmt_ci(block.get('fleiss_kappa_ci95'))} |"
                )
            study_dim = report.get("study_level", {}).get("dimensions", {}).get(dim, {})
            if study_dim:
                lines += ["", f"All models together: α ({level}) {_fmt(study_dim.get('alpha', {}).get(level))}, "
                              f"Fleiss κ {_fmt(study_dim.get('fleiss_kappa'))}."]
            lines.append("")
        lines += ["How:", _MODEL_NUMBERS_HOW.get(protocol, ""),
                  f"- `α`: Krippendorff's alpha over the model's items (units = items, values = the raters' votes on "
                  f"the raw scale) at the {level} level (`report.json` has the nominal, ordinal and interval levels), "
                  "computed with the `krippendorff` package; undefined (—) with fewer than two pairable votes or a "
                  "single value present.",
                  "- `Fleiss κ`: every distinct scale point a nominal category; items with fewer than 2 votes are "
                  "dropped and each item's agreement uses its own number of raters.",
                  _agreement_interval_how(report)]
    lines += ["", _screening_section(data, report, raters)]
    reasons = report.get("reasons", [])
    if reasons:
        shown = reasons[:25]
        lines += ["", "### Why some numbers are empty", "", *[f"- {why}" for why in shown]]
        if len(reasons) > len(shown):
            lines.append(f"- … {len(reasons) - len(shown)} more in `report.json` (`reasons`)")
    return "\n".join(lines)


def _agreement_interval_how(report: dict) -> str:
    """How the model tables' 95 % CIs were made: the report's kind and method of interval."""
    if report.get("rater_sampling") != "sampled":
        how = ("- CIs, raters fixed (an expert panel): the mean's is the Student-t interval over items above; α's "
               "and κ's the percentile 95 % of a seeded bootstrap over items (the report's replicates and seed, "
               "see `report.json`)")
        if "jackknife" in report.get("item_interval_methods", []):
            how += (", or, where a model's ratings are too many for it, the delete-one jackknife over items "
                    "(T ± 1.96·se); `interval_methods` in `report.json` says which")
        return how + "; — when undefined."
    how = ("- CIs of the mean, α and κ: items and raters both resampled (the raters are a sample of a crowd): "
           "percentile 95 % of a seeded two-way bootstrap")
    if "jackknife" in report.get("two_way_interval_methods", []):
        how += (", or, where a model's ratings are too many for it, the delete-one jackknife over items plus over "
                "raters (T ± t·se); `interval_methods` in `report.json` says which")
    how += "; the item-only intervals (the mean's: the Student-t interval above) are in `report.json` as `*_items`"
    if "jackknife" in report.get("item_interval_methods", []):
        how += " (for α and κ at this size: the delete-one jackknife over items)"
    return how + "; — when undefined."


def _screening_section(data: ExportInput, report: dict, raters: pd.DataFrame) -> str:
    """Which raters the ITU-R BT.500 rule would reject, per dimension; never applied."""
    lines = ["### ITU-R BT.500 observer screening: **not applied**", "",
             "The rule (Annex 1 §2.3.1): per item, outliers lie beyond 2 σ (kurtosis β2 in [2, 4]) or √20 σ; a "
             "rater is rejected when more than 5 % of their votes are outliers, (P + Q) / N > 0.05, and not "
             "mostly on one side, |P − Q| / (P + Q) < 0.3. The raters below are the ones the rule **would** "
             "reject; they are **kept** in every number of this dataset and of the report (only raters listed "
             "under 'Excluded raters' are left out).", ""]
    if not data.dimensions:
        lines.append("Not applicable: pairwise preferences have no score scale to screen.")
        return "\n".join(lines)
    screening = report.get("study_level", {}).get("screening")
    for dim in data.dimensions:
        if screening and dim in screening:
            # a report names raters by id; a released one (analysis.science.release) by their pseudonym already
            rejected = [REPORT_RATER_LABEL.format(r) if str(r).isdigit() else str(r)
                        for r in screening[dim]["rejected"]]
            source = f"report.json `study_level.screening.{dim}` ({screening[dim]['raters']} raters screened)"
        elif f"{dim}_bt500_flag" in raters.columns:
            rejected = list(raters.loc[raters[f"{dim}_bt500_flag"].astype(bool), "rater"])
            source = f"`raters.*` column `{dim}_bt500_flag`"
        else:
            continue
        who = ", ".join(f"`{r}`" for r in sorted(rejected, key=str)) or "none"
        lines.append(f"- {dim}: {len(rejected)} rater(s) would be rejected: {who} (from {source})")
    if screening:
        lines.append("- MOS with and without the screened raters, per model: `report.json` "
                     "`study_level.screening.<dim>.mos_all` / `mos_screened`.")
    return "\n".join(lines)


def datasheet(data: ExportInput, items: pd.DataFrame, raters: pd.DataFrame, files: list[str],
              report: dict | None = None) -> str:
    meta = data.meta
    dims = ", ".join(data.dimensions) or "preference (pairwise)"
    excluded = "\n".join(f"- `{r}`: {why}" for r, why in sorted(data.excluded.items())) or "- none"
    listing = "\n".join(f"- `{name}`" for name in files)
    threshold = meta.get("agreement_threshold")
    model_numbers = _report_section(data, report, raters) if report is not None else ""
    return f"""# {meta.get('title', meta.get('slug'))}: rating data

Study `{meta.get('slug')}` · protocol `{meta.get('protocol')}` (version {meta.get('protocol_version')}) ·
task `{meta.get('task_type')}` · exported {meta.get('exported_at')}.
Study settings (with protocol defaults filled in) are in `study.json`.{
    f" The study's agreement threshold (α shown as acceptable on its dashboard) is {threshold:g}." if threshold else ""}

## Counts
- votes: {len(data.votes)}; raters: {data.votes['rater'].nunique() if len(data.votes) else 0}; items with votes: {len(items)}
- dimensions: {dims}

{model_numbers}

## How every number was made
- **Votes** (`votes.*`): one row per rater and item as stored, the latest version of each rating
  (earlier edits are not exported); attention-check answers are not votes and are left out.
  Raters are labelled `rater<id>`: no names or e-mails; `raters.*` adds each crowd rater's platform id
  (`crowd_id`, to match payments and screening): drop that column before you publish the data. Dimension columns hold the raw scale of the protocol
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
    `<dim>_zmos_ci_low/high`: 95 % t interval of those values; `<dim>_zmos_n`: raters with a z;
  - `<dim>_subject_quality`: item quality of the ITU-T P.913 §12 / SUREAL subject model (rating =
    quality + rater bias + rater inconsistency × noise, maximum likelihood, raw rating scale; each
    rater weighted by 1 / inconsistency²); `<dim>_subject_ci_low/high`: ± 1.96 / √Σ(1/v²) over
    the item's raters (Fisher information, as SUREAL).
- **Raters** (`raters.*`): `<dim>_bt500_flag` is ITU-R BT.500 Annex 1 §2.3.1 observer screening
  (kurtosis test per item; P + Q over N > 0.05 and |P − Q| / (P + Q) < 0.3; strict inequalities).
  `<dim>_subject_bias` and `<dim>_subject_inconsistency` are the rater's bias and inconsistency
  in the subject model; `<dim>_subject_inconsistent` flags a rater whose inconsistency's 95 % CI
  lies above 1.5 × the median rater's (no gold needed).
  Flags are reported, **not** applied; `excluded` marks raters the site left out of every
  number above, with the reason in `reasons`.
- **Model-level numbers** (`report.json`, tables above): see "How" under each table.
- **ImagenHub layout** (`imagenhub/<Task>/<Task>_raterN.tsv`, the task folder name of the
  released data): one TSV per non-excluded rater (numbered in sorted label order),
  `uid` = instance key, one column per model, cells `[SC, PQ]`; a uid appears for a rater only
  if they rated every model on it.
- **EvalMi layout** (`evalmi/`): `ImageName` = `<model>/<instance>.png`, `MOS1` perception z-MOS,
  `MOS2` correspondence z-MOS, `Y/N` and `YN_k` majority answers (1 = yes, ties = no); `Y/N` is 1
  only when the task answer and all sub-answers are 1.
- CSV: UTF-8, comma separated; text cells starting with = + - @ (or a tab / carriage return)
  are prefixed with `'` so that spreadsheets do not evaluate them, NUL characters are dropped
  and a carriage return inside a cell becomes a line feed.
  The ImagenHub TSVs do the same and also turn tabs and line breaks inside a cell into spaces.
  The xlsx sheets store text as text (never a formula). JSONL and Parquet hold the same tables
  unescaped.
- Consistency: the numbers are computed from one read of the votes and `votes.*` is written
  from a second read; export a closed study so that no vote changes in between.

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


_FLOAT_SUFFIXES = ("_z",)
_KNOWN_TYPES = {
    "excluded": pa.bool_(),
    "created_at": pa.timestamp("ns", tz="UTC"),
    "updated_at": pa.timestamp("ns", tz="UTC"),
    "item": pa.int64(),
    "comparison": pa.int64(),
    "time_on_item_ms": pa.int64(),
}


def _arrow_schema(frame: pd.DataFrame, dimensions: list[str]) -> pa.Schema:
    """One schema for every chunk of the votes table: numbers as numbers, text (even all-empty) as text."""
    inferred = pa.Schema.from_pandas(frame, preserve_index=False)
    fields = []
    for item in inferred:
        if item.name in dimensions or item.name.endswith(_FLOAT_SUFFIXES):
            kind = pa.float64()
        elif item.name in _KNOWN_TYPES:
            kind = _KNOWN_TYPES[item.name]
        elif pa.types.is_null(item.type) or frame[item.name].dtype == object:
            kind = pa.string()
        else:
            kind = item.type
        fields.append(pa.field(item.name, kind))
    return pa.schema(fields)


def _votes_files(data: ExportInput, params: ZParameters) -> Iterator[tuple[str, bytes | None, object]]:
    """Write the votes table chunk by chunk: yields ("csv", bytes, None) per chunk, then the
    JSONL and Parquet copies as ("jsonl"/"parquet", None, temporary file) at the end."""
    chunks = data.vote_rows() if data.vote_rows is not None else (
        data.votes.iloc[start : start + CSV_CHUNK_ROWS] for start in range(0, max(len(data.votes), 1), CSV_CHUNK_ROWS)
    )
    jsonl = tempfile.TemporaryFile()
    parquet = tempfile.TemporaryFile()
    writer, schema, header = None, None, True
    for chunk in chunks:
        table = vote_columns(chunk, data, params)
        for index, block in enumerate(iter_csv(table)):
            if index == 0 and not header:
                block = block.split(b"\n", 1)[1]  # the header line, written with the first chunk only
            yield "csv", block, None
        header = False
        for block in iter_jsonl(table):
            jsonl.write(block)
        if writer is None:
            schema = _arrow_schema(table, data.dimensions)
            writer = pq.ParquetWriter(parquet, schema)
        writer.write_table(pa.Table.from_pandas(table, schema=schema, preserve_index=False))
    if writer is not None:
        writer.close()
    yield "jsonl", None, jsonl
    yield "parquet", None, parquet


def _copy(handle, size: int = 1 << 20) -> Iterator[bytes]:
    handle.seek(0)
    while block := handle.read(size):
        yield block
    handle.close()


def iter_export_zip(data: ExportInput) -> Iterator[bytes]:
    """The whole dataset as a zip, yielded in chunks (for StreamingHttpResponse).

    Memory: the per-item and per-rater tables are computed from ``data.votes`` (the numbers only);
    the per-vote table is written chunk by chunk from ``data.vote_rows`` (CSV straight into the
    zip, JSONL and Parquet through temporary files on disk, then copied in). The study report
    (``data.report``) is built after the votes, for the datasheet and ``report.json``.
    """
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
        data = with_overall(data)
        params = z_parameters(data)
        copies = {}

        def votes_csv() -> Iterator[bytes]:
            for kind, block, handle in _votes_files(data, params):
                if kind == "csv":
                    yield block
                else:
                    copies[kind] = handle

        yield from member("votes.csv", votes_csv())
        yield from member("votes.jsonl", _copy(copies["jsonl"]))
        yield from member("votes.parquet", _copy(copies["parquet"]))

        numbers = vote_columns(data.votes, data, params)
        subject = subject_fits(data, numbers)
        items = (_with_info(items_table(data, numbers, subject), data.item_info, "item") if data.dimensions
                 else pd.DataFrame())
        raters = _with_info(raters_table(data, numbers, params.excluded, subject), data.rater_info, "rater")
        tables = {"raters": raters, **({"items": items} if data.dimensions else {})}
        for name, table in tables.items():
            yield from member(f"{name}.csv", iter_csv(table))
            yield from member(f"{name}.jsonl", iter_jsonl(table))
            yield from member(f"{name}.parquet", [parquet_bytes(table)])
        layouts: dict[str, bytes] = {}
        definition = protocols.PROTOCOLS.get(data.meta.get("protocol"))
        published = definition.export_layouts if definition is not None else ()
        if "imagenhub" in published and len(numbers):
            folder = data.meta.get("imagenhub_folder") or data.meta["slug"]
            layouts.update(imagenhub_tsvs(numbers[~numbers["excluded"]], folder=folder))
        if "evalmi" in published and len(items):
            layouts.update(evalmi_sheets(items, numbers, data))
        for name, blob in layouts.items():
            yield from member(f"{'imagenhub/' if name.endswith('.tsv') else ''}{name}", [blob])
        report = data.report() if callable(data.report) else data.report
        if report is not None:
            yield from member("report.json", [json.dumps(report, indent=1, ensure_ascii=False).encode()])
        yield from member("README.md", [datasheet(data, items, raters, [*names, "README.md"], report).encode()])
    yield sink.take()
