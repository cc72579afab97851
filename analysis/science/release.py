"""A study released as a dataset package: Parquet configs with images, a dataset card, the
protocol versions, a reporting card and the report, checkable from the package alone. No Django.

Layout of a package folder (``write_release``; ``zip_folder`` packs it):

* ``README.md``: the dataset card, YAML front matter first (``configs`` with ``data_files``,
  licence, task categories, size category, pretty name), then how everything was made;
* ``data/items.parquet``: one row per item with the output ``image`` and its ``condition_images``
  in the Hugging Face ``datasets`` Image layout (``struct<bytes: binary, path: string>``, declared
  in the file's ``huggingface`` schema metadata), and the per-item MOS columns of
  analysis.science.exports.items_table;
* ``data/votes.parquet``: every vote (analysis.science.exports.vote_columns: z-scores, exclusion) with the
  protocol version it was cast under;
* ``data/raters.parquet``: pseudonymous raters, their source, screening flags and exclusions;
* ``data/judge_scores.parquet`` (when a judge scored the study), ``data/screen_reports.parquet``
  (raters' notes, scrubbed by :func:`scrub_text`);
* ``protocol_versions.json``: every version's full text and hash; ``report.json``; ``study.json``;
  ``reporting_card.{json,md,tex}``; ``private/payment_list.csv`` only when the researcher asked
  for it (crowd ids in clear: never publish that file).

Parquet is written row group by row group from iterators (items: at most ``ITEM_GROUP_BYTES`` of
images per group; votes: one group per chunk read), so neither the images nor the per-vote rows of
a study are held in memory at once: what is held is the numbers behind the item and rater tables
(rater, item and score columns), as in the zip export.

``read_release`` opens a package as a :class:`PackagedStudy` that analysis.data answers from, so
``analysis.report.build_report`` rebuilds the report from the package alone (``manage.py
reproduce``); :func:`compare_reports` says where two reports differ.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.science.exports import (
    ExportInput, _report_section, items_table, raters_table, vote_columns, with_overall, z_parameters,
)

ITEM_GROUP_BYTES = 32 << 20  # images per items row group: bounded by bytes…
ITEM_GROUP_ROWS = 2_000  # …and by rows (small images)
LICENSES = ("cc-by-4.0", "cc-by-sa-4.0", "cc-by-nc-4.0", "cc0-1.0", "other")
_IMAGE = {"_type": "Image"}
_TASK_CATEGORIES = {"imagenhub": ["text-to-image", "image-to-image"], "evalmi": ["text-to-image"],
                    "pairwise": ["text-to-image"]}


# ------------------------------------------------------------------ pseudonyms and scrubbing


def study_key(secret: str, study_id: int) -> bytes:
    """The study's own pseudonym key, derived (never stored): HMAC-SHA256(secret, study id)."""
    return hmac.new(secret.encode(), f"release-study:{study_id}".encode(), hashlib.sha256).digest()


def pseudonym(key: bytes, rater_id: int) -> str:
    """``r-`` + 16 hex digits of HMAC-SHA256(study key, rater id): the same rater gets the same
    pseudonym in every release of one study, another in another study; the ids cannot be walked
    back without the site's secret (a plain hash of small integers could be, by trying them)."""
    return "r-" + hmac.new(key, str(int(rater_id)).encode(), hashlib.sha256).hexdigest()[:16]


def _phone(match: re.Match) -> str:
    """A phone number: 7+ digits written with separators (space . - brackets) or a leading +;
    a bare run of digits is left to the digit rule."""
    text = match.group(0)
    if re.fullmatch(r"\(?\d{4}-\d{2}-\d{2}\)?", text.strip()):  # an ISO date is not a phone number
        return text
    digits = sum(c.isdigit() for c in text)
    separated = text.startswith("+") or any(c in " .-()" for c in text.strip())
    return "[phone]" if digits >= 7 and separated else text


SCRUB_RULES: list[tuple[str, re.Pattern, object]] = [
    ("e-mail addresses", re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"), "[email]"),
    ("URLs and web addresses (http, https, ftp, www.)",
     re.compile(r"(?:https?://|ftp://|www\.)[^\s<>\"']+?(?=[.,;:!?)]*(?:\s|$))", re.IGNORECASE), "[url]"),
    ("phone numbers (7 or more digits written with spaces, dots, dashes, brackets or a leading +)",
     re.compile(r"(?<![\w+])\+?\(?\d[\d\s().-]{5,}\d(?![\w])"), _phone),
    ("any other run of 6 or more digits (ids, account numbers)", re.compile(r"\d{6,}"), "[number]"),
]


def scrub_text(text: str | None, known: Iterable[str] = ()) -> str:
    """Free text with personal data replaced: first every ``known`` id (the crowd ids of the
    study's raters) by ``[crowd id]``, then rule by rule in the order of :data:`SCRUB_RULES`;
    NUL and other control characters (except line breaks) dropped."""
    if not text:
        return ""
    text = "".join(c for c in str(text) if c in "\n\t" or ord(c) >= 32)
    for crowd_id in sorted(known, key=len, reverse=True):  # longest first: one id may contain another
        if crowd_id:
            text = text.replace(crowd_id, "[crowd id]")
    for _, pattern, replacement in SCRUB_RULES:
        text = pattern.sub(replacement, text)
    return text


def scrub_rule_text() -> str:
    return "the crowd id of any of the study's raters → `[crowd id]`; " + "; ".join(f"{what} → `{'[phone]' if callable(replacement) else replacement}`"
                     for what, _, replacement in SCRUB_RULES)


# ------------------------------------------------------------------ input


@dataclass
class ReleaseInput:
    """Everything a release needs; rater labels in ``export`` are pseudonyms already.

    ``item_rows``: returns chunks of item dicts (``item, instance, model, prompt, task_tag,
    question, sub_questions, image`` (``{"bytes", "path"}`` or None), ``condition_images`` (list of
    those), ``condition_roles``, ``is_gold``); read once, while ``items.parquet`` is written.
    ``raters``: one row per rater (``rater`` pseudonym, ``platform``, ``qualified``…) merged into
    the rater table. ``versions``: dicts with ``number, content_hash, content, created_at``.
    ``card``: the reporting card (:func:`reporting_card` fills it from the other parts).
    """

    export: ExportInput
    item_rows: Callable[[], Iterable[list[dict]]]
    raters: pd.DataFrame
    versions: list[dict]
    card_facts: dict
    license: str = "cc-by-4.0"
    judge_scores: pd.DataFrame | None = None
    screen_reports: pd.DataFrame | None = None
    payment_list: pd.DataFrame | None = None
    report: dict | None = None
    extra: dict = field(default_factory=dict)


# ------------------------------------------------------------------ parquet


def _hf_metadata(features: dict) -> dict[bytes, bytes]:
    return {b"huggingface": json.dumps({"info": {"features": features}}).encode()}


_IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def items_schema(mos_columns: list[str]) -> pa.Schema:
    fields = [
        pa.field("item", pa.int64()), pa.field("instance", pa.string()), pa.field("model", pa.string()),
        pa.field("prompt", pa.string()), pa.field("task_tag", pa.string()), pa.field("question", pa.string()),
        pa.field("sub_questions", pa.list_(pa.string())), pa.field("is_gold", pa.bool_()),
        pa.field("image", _IMAGE_TYPE), pa.field("condition_images", pa.list_(_IMAGE_TYPE)),
        pa.field("condition_roles", pa.list_(pa.string())),
        *(pa.field(name, pa.int64() if name == "n_raters" or name.endswith("_n") else pa.float64())
          for name in mos_columns),
    ]
    # the list form ([feature]) is read as a list of images by every datasets version
    return pa.schema(fields, metadata=_hf_metadata({"image": _IMAGE, "condition_images": [_IMAGE]}))


def write_items(path: Path, chunks: Iterable[list[dict]], mos: pd.DataFrame) -> int:
    """items.parquet from chunks of item dicts, a row group whenever the images held pass
    ``ITEM_GROUP_BYTES`` or the rows ``ITEM_GROUP_ROWS``; the MOS columns are looked up per item.
    Returns the rows written."""
    mos_columns = [c for c in mos.columns if c not in ("item", "instance", "model")]
    schema = items_schema(mos_columns)
    by_item = mos.set_index("item")[mos_columns] if len(mos) else pd.DataFrame(columns=mos_columns)
    rows, held, written = [], 0, 0
    with pq.ParquetWriter(path, schema) as writer:

        def flush() -> None:
            nonlocal rows, held
            if rows:
                frame = pd.DataFrame(rows)
                values = by_item.reindex(frame["item"].to_numpy())
                for column in mos_columns:
                    frame[column] = values[column].to_numpy()
                    if column == "n_raters" or column.endswith("_n"):
                        frame[column] = frame[column].astype("Int64")
                writer.write_table(pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False))
            rows, held = [], 0

        for chunk in chunks:
            for row in chunk:
                rows.append(row)
                written += 1
                held += len((row.get("image") or {}).get("bytes") or b"")
                held += sum(len(c.get("bytes") or b"") for c in row.get("condition_images") or [])
                if held >= ITEM_GROUP_BYTES or len(rows) >= ITEM_GROUP_ROWS:
                    flush()
        flush()
    return written


_VOTE_TYPES = {
    "rater": pa.string(), "item": pa.int64(), "comparison": pa.int64(), "instance": pa.string(),
    "model": pa.string(), "model_a": pa.string(), "model_b": pa.string(), "preference": pa.string(),
    "excluded": pa.bool_(), "exclusion_reason": pa.string(), "source": pa.string(),
    "time_on_item_ms": pa.int64(), "protocol_version": pa.int64(),
    "created_at": pa.timestamp("us", tz="UTC"), "updated_at": pa.timestamp("us", tz="UTC"),
}


def votes_schema(columns: list[str], dimensions: list[str], questions: list[str]) -> pa.Schema:
    fields = []
    for name in columns:
        if name in _VOTE_TYPES:
            kind = _VOTE_TYPES[name]
        elif name in dimensions or name.endswith("_z") or name == "O":
            kind = pa.float64()
        else:  # yes/no answers and anything passed through
            kind = pa.string()
        fields.append(pa.field(name, kind))
    return pa.schema(fields)


def write_votes(path: Path, data: ExportInput, params, chunks: Iterable[pd.DataFrame]) -> int:
    """votes.parquet, one row group per chunk read from the database (never the whole table)."""
    writer, schema, written = None, None, 0
    try:
        for chunk in chunks:
            table = vote_columns(chunk, data, params)
            for question in data.questions:
                if question in table.columns:
                    table[question] = table[question].astype(object).where(table[question].notna(), None)
            if writer is None:
                schema = votes_schema(list(table.columns), data.dimensions, data.questions)
                writer = pq.ParquetWriter(path, schema)
            writer.write_table(pa.Table.from_pandas(table[schema.names], schema=schema, preserve_index=False))
            written += len(table)
    finally:
        if writer is not None:
            writer.close()
    return written


def write_table(path: Path, frame: pd.DataFrame) -> None:
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object:
            frame[column] = frame[column].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v))
                                              else v)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)


# ------------------------------------------------------------------ the package


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                        (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")):
        if n < limit:
            return name
    return "10M<n<100M"


def write_release(data: ReleaseInput, folder: Path | str) -> dict:
    """Write the package into ``folder`` (created; must be empty). Returns the manifest
    (configs, row counts, files)."""
    folder = Path(folder)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    export = with_overall(data.export)
    params = z_parameters(export)
    numbers = vote_columns(export.votes, export, params)
    items_mos = items_table(export, numbers) if export.dimensions else pd.DataFrame({"item": []})
    raters = raters_table(export, numbers, params.excluded)
    reasons = raters["rater"].map(export.excluded).astype(object)
    raters["exclusion_reason"] = reasons.where(reasons.notna(), "")
    if len(data.raters):
        raters = raters.merge(data.raters, on="rater", how="left")
    files = {}
    counts = {"items": write_items(folder / "data/items.parquet", data.item_rows(), items_mos)}
    chunks = export.vote_rows() if export.vote_rows is not None else [export.votes]
    counts["votes"] = write_votes(folder / "data/votes.parquet", export, params, chunks)
    write_table(folder / "data/raters.parquet", raters)
    counts["raters"] = len(raters)
    configs = ["items", "votes", "raters"]
    if data.judge_scores is not None and len(data.judge_scores):
        write_table(folder / "data/judge_scores.parquet", data.judge_scores)
        configs.append("judge_scores")
        counts["judge_scores"] = len(data.judge_scores)
    if data.screen_reports is not None and len(data.screen_reports):
        write_table(folder / "data/screen_reports.parquet", data.screen_reports)
        configs.append("screen_reports")
        counts["screen_reports"] = len(data.screen_reports)
    for name in configs:
        files[name] = f"data/{name}.parquet"
    (folder / "protocol_versions.json").write_text(json.dumps(data.versions, indent=1, ensure_ascii=False,
                                                              default=str))
    (folder / "study.json").write_text(json.dumps(export.meta, indent=1, ensure_ascii=False, default=str))
    report = data.report
    if report is not None:
        (folder / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    card = reporting_card(data, raters, report)
    (folder / "reporting_card.json").write_text(json.dumps(card, indent=1, ensure_ascii=False))
    (folder / "reporting_card.md").write_text(card_markdown(card))
    (folder / "reporting_card.tex").write_text(card_latex(card))
    if data.payment_list is not None:
        (folder / "private").mkdir(exist_ok=True)
        data.payment_list.to_csv(folder / "private/payment_list.csv", index=False)
    manifest = {"configs": files, "counts": counts, "format": "annotation-site release 1"}
    (folder / "README.md").write_text(dataset_card(data, export, items_mos, raters, report, card, manifest))
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def zip_folder(folder: Path | str, target) -> None:
    """Pack a package folder into a zip (``target``: path or binary file), members stored under
    the folder's name; Parquet is compressed already, so members are stored, not deflated."""
    folder = Path(folder)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, f"{folder.name}/{path.relative_to(folder).as_posix()}")


# ------------------------------------------------------------------ reporting card


def _median(values: Iterable[float]) -> float | None:
    array = np.asarray([v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))],
                       dtype=float)
    return float(np.median(array)) if len(array) else None


def reporting_card(data: ReleaseInput, raters: pd.DataFrame, report: dict | None) -> dict:
    """The human-evaluation reporting card (Otani et al., CVPR 2023) of a release.

    ``card_facts`` (from the site) gives what the tables cannot: rater source and qualification,
    instructions and interface, attention and gold results, the median time per item and the
    researcher's stated pay; the counts, items per rater, exclusions and agreement come from the
    package's own tables and report.
    """
    facts = dict(data.card_facts)
    votes = data.export.votes
    per_rater = votes.groupby("rater").size() if len(votes) else pd.Series(dtype=int)
    median_s = facts.get("median_seconds_per_item")
    pay = facts.get("pay_per_item")
    hourly = None
    if pay is not None and median_s:
        hourly = round(float(pay) * 3600.0 / float(median_s), 2)
    agreement = {}
    if report is not None:
        for dim, block in (report.get("study_level", {}).get("dimensions") or {}).items():
            agreement[dim] = {
                "alpha": block.get("alpha"), "alpha_ci95": block.get("alpha_ci95"),
                "fleiss_kappa": block.get("fleiss_kappa"), "fleiss_kappa_ci95": block.get("fleiss_kappa_ci95"),
            }
    excluded = raters[raters["excluded"].astype(bool)] if len(raters) else raters
    return {
        "study": data.export.meta.get("slug"),
        "protocol": data.export.meta.get("protocol"),
        "task": data.export.meta.get("task_type"),
        "raters": int(votes["rater"].nunique()) if len(votes) else 0,
        "ratings": int(len(votes)),
        "items_rated": int(votes["item"].nunique()) if len(votes) and "item" in votes else
        int(votes["comparison"].nunique()) if len(votes) and "comparison" in votes else 0,
        "items_per_rater": {
            "median": _median(per_rater.tolist()), "min": int(per_rater.min()) if len(per_rater) else None,
            "max": int(per_rater.max()) if len(per_rater) else None,
        },
        "raters_per_item_target": data.export.meta.get("raters_per_item"),
        "rater_source": facts.get("rater_source", {}),
        "qualification": facts.get("qualification", {}),
        "compensation": {
            "median_seconds_per_item": median_s,
            "pay_per_item": pay,
            "currency": facts.get("currency") or None,
            "per_hour": hourly,
            "how": "pay per item × 3600 / median seconds per item (median over all timed votes)"
            if hourly is not None else "the researcher stated no pay per item: per hour not computed",
        },
        "instructions": facts.get("instructions", ""),
        "examples": facts.get("examples", ""),
        "interface": facts.get("interface", ""),
        "protocol_versions": facts.get("protocol_versions", len(data.versions)),
        "agreement": agreement,
        "exclusions": [{"rater": r, "reason": why} for r, why in
                       zip(excluded["rater"], excluded["exclusion_reason"])] if len(excluded) else [],
        "attention_checks": facts.get("attention_checks", {}),
        "gold": facts.get("gold", {}),
    }


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value == value else "—"
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return f"[{_cell(value[0])}, {_cell(value[1])}]"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_cell(v)}" for k, v in value.items()) or "—"
    return str(value)


def _qualification(q: dict) -> str:
    if not q or not q.get("required"):
        return "none required"
    share = q.get("pass_share")
    return (f"gold test required (pass at {share:.0%} correct): {q.get('attempts', 0)} attempts, "
            f"{q.get('passed', 0)} passed" if share is not None else
            f"gold test required: {q.get('attempts', 0)} attempts, {q.get('passed', 0)} passed")


def _attention(a: dict) -> str:
    if not a or not a.get("checks"):
        return "none used"
    return f"{a['checks']} checks, {a.get('answers', 0)} answers, {a.get('failed', 0)} failed"


def _gold(g: dict) -> str:
    if not g or not g.get("items"):
        return "none used"
    accuracy = g.get("accuracy")
    return (f"{g['items']} gold units, {g.get('ratings', 0)} gold ratings"
            + (f", {accuracy:.1%} matched the gold answer" if accuracy is not None else ""))


def card_rows(card: dict) -> list[tuple[str, str]]:
    """(item, value) rows of the card, in Otani et al.'s order: one source for Markdown, LaTeX
    and the dashboard."""
    comp = card["compensation"]
    ipr = card["items_per_rater"]
    rows = [
        ("Task and protocol", f"{card['task']} · {card['protocol']}"),
        ("Raters", _cell(card["raters"])),
        ("Ratings", _cell(card["ratings"])),
        ("Units rated", _cell(card["items_rated"])),
        ("Raters per item (target)", _cell(card["raters_per_item_target"])),
        ("Items per rater (median [min, max])", f"{_cell(ipr['median'])} [{_cell(ipr['min'])}, {_cell(ipr['max'])}]"),
        ("Rater source", _cell(card["rater_source"])),
        ("Qualification", _qualification(card["qualification"])),
        ("Median time per item (s)", _cell(comp["median_seconds_per_item"])),
        ("Compensation per hour", f"{_cell(comp['per_hour'])} {comp['currency'] or ''}".strip()
         if comp["per_hour"] is not None else comp["how"]),
        ("Instructions and examples", "in the package (protocol_versions.json, full text)"),
        ("Interface", _cell(card["interface"])),
        ("Protocol versions", _cell(card["protocol_versions"])),
    ]
    for dim, block in card["agreement"].items():
        rows.append((f"Agreement {dim}: Krippendorff α [95 % CI]",
                     "; ".join(f"{level} {_cell(value)} {_cell((block.get('alpha_ci95') or {}).get(level))}"
                               for level, value in (block.get("alpha") or {}).items()) or "—"))
        rows.append((f"Agreement {dim}: Fleiss κ [95 % CI]",
                     f"{_cell(block.get('fleiss_kappa'))} {_cell(block.get('fleiss_kappa_ci95'))}"))
    rows.append(("Exclusions", "; ".join(f"{e['rater']}: {e['reason']}" for e in card["exclusions"]) or "none"))
    rows.append(("Attention checks", _attention(card["attention_checks"])))
    rows.append(("Gold items", _gold(card["gold"])))
    return rows


def card_markdown(card: dict) -> str:
    lines = ["| Item | Value |", "|---|---|"]
    for name, value in card_rows(card):
        cell = value.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {name} | {cell} |")
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "α": r"$\alpha$", "κ": r"$\kappa$", "—": "--", "×": r"$\times$", "·": r"$\cdot$"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in str(text))


def card_latex(card: dict) -> str:
    """A ``tabular`` a paper can ``\\input``: every cell escaped (text comes from the study)."""
    lines = [r"\begin{tabular}{p{0.38\linewidth}p{0.56\linewidth}}", r"\hline", r"Item & Value \\", r"\hline"]
    for name, value in card_rows(card):
        lines.append(f"{latex_escape(name)} & {latex_escape(value)} \\\\")
    lines += [r"\hline", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ dataset card


def _yaml_string(text: str) -> str:
    return json.dumps(str(text), ensure_ascii=False)  # a JSON string is a valid YAML scalar


def dataset_card(data: ReleaseInput, export: ExportInput, items: pd.DataFrame, raters: pd.DataFrame,
                 report: dict | None, card: dict, manifest: dict) -> str:
    meta = export.meta
    protocol = meta.get("protocol", "")
    front = ["---", f"pretty_name: {_yaml_string(meta.get('title') or meta.get('slug'))}",
             f"license: {data.license}", "task_categories:",
             *(f"- {c}" for c in _TASK_CATEGORIES.get(protocol, ["text-to-image"])),
             "size_categories:", f"- {_size_category(manifest['counts']['votes'])}",
             "tags:", "- human-evaluation", "- image-generation", f"- {protocol}", "configs:"]
    for name, path in manifest["configs"].items():
        front += [f"- config_name: {name}", "  data_files:", "  - split: train", f"    path: {path}"]
        if name == "items":
            front.append("  default: true")
    front.append("---")
    versions = data.versions
    models = sorted(export.votes["model"].dropna().unique()) if "model" in export.votes else sorted(
        set(export.votes.get("model_a", pd.Series(dtype=object)).dropna())
        | set(export.votes.get("model_b", pd.Series(dtype=object)).dropna()))
    model_numbers = _report_section(export, report, raters) if report is not None else ""
    mixed = len({v for v in (data.extra.get("versions_used") or [])}) > 1
    version_lines = "\n".join(
        f"- version {v['number']} (`{v['content_hash'][:12]}`, from {v.get('created_at', '')}): "
        f"{(data.extra.get('votes_per_version') or {}).get(v['number'], 0)} votes"
        for v in versions) or "- none recorded"
    counts = manifest["counts"]
    return "\n".join(front) + f"""

# {meta.get('title') or meta.get('slug')}

Human ratings of generated images collected with the `{protocol}` protocol (task `{meta.get('task_type')}`)
on this site, released as a dataset. Study `{meta.get('slug')}`, exported {meta.get('exported_at')}.

## Load it

```python
from datasets import load_dataset
items = load_dataset("path/to/this/folder", "items", split="train")   # images decoded as PIL
votes = load_dataset("path/to/this/folder", "votes", split="train")
import pandas as pd
raters = pd.read_parquet("data/raters.parquet")
```

Configs: {", ".join(f"`{name}` ({counts.get(name, 0)} rows)" for name in manifest["configs"])}.

## Study

- Protocol: `{protocol}`; dimensions: {", ".join(export.dimensions) or "preference (A / B / tie / both bad)"};
  yes/no questions: {", ".join(export.questions) or "none"}.
- Models: {", ".join(f"`{m}`" for m in models) or "none"}.
- Prompts: the study's instances (`items.prompt`, `items.instance`); their source is the bundle the
  study was built from{f" ({meta.get('prompt_source')})" if meta.get('prompt_source') else ""}.
- Raters: {card['raters']} ({_cell(card['rater_source'])}); qualification: {_qualification(card['qualification'])};
  attention checks: {_attention(card['attention_checks'])}; gold items: {_gold(card['gold'])}.
- Items per rater: median {_cell(card['items_per_rater']['median'])}; target raters per item:
  {_cell(meta.get('raters_per_item'))}.

## Protocol versions

Every vote records the protocol version it was cast under (`votes.protocol_version`, empty for
imported votes): the full text of the scale, the instructions, the worked examples (rubric), the
screen layout version, the gold set and the quality policy at that moment, hashed with SHA-256.
The full text of every version is in `protocol_versions.json`.
{"**This study mixes protocol versions**: split by `protocol_version` before comparing." if mixed else ""}

{version_lines}

## Reporting card

The human-evaluation reporting card (Otani et al., CVPR 2023); also `reporting_card.md`,
`reporting_card.tex` (a LaTeX table) and `reporting_card.json`.

{card_markdown(card)}
{model_numbers}

## How every column was made

- `items`: `image` is the generated output, `condition_images` what its model was given (source
  image, mask, subject photos, control image) with their `condition_roles`; both in the `datasets`
  Image layout (PNG/JPEG bytes as stored on the site). `is_gold`: a gold item (its answer is the
  researcher's). MOS columns: `<dim>_mean` (mean of raw votes) with a 95 % Student-t interval
  across the item's raters, `<dim>_zmos` (EvalMi-50K §3.3: per-rater z-scores rescaled by
  100 (z + 3) / 6, then averaged) with its t interval; `n_raters`. Excluded raters' votes never
  count.
- `votes`: one row per rater and unit, the latest version of each rating; attention-check
  answers are not votes and are left out. `<dim>_z`: z = (r − μ_rater) / σ_rater (ddof 1) over
  the rater's non-excluded votes; empty when σ = 0 or for a single vote. `excluded` and
  `exclusion_reason`: the site left this rater out of every number. `time_on_item_ms`: server
  time from the screen's render to the submit. `protocol_version`: see above.
- `raters`: `rater` is a pseudonym, HMAC-SHA256 of the site's rater id under a key derived from
  the site's secret and the study id: the same in every release of this study, unlinkable to
  other studies, and crowd ids are never in it. `platform`: where the rater came from;
  `<dim>_bt500_flag`: ITU-R BT.500 observer screening, reported, **not** applied.
- `screen_reports` (when any): raters' notes about a screen, free text scrubbed by the rule below.
- `judge_scores` (when any): automatic judges' scores of the items (`value` per `dimension`).
- Free text (screen-report comments, exclusion reasons) is scrubbed before release: {scrub_rule_text()}.
- `report.json` is the site's analysis report of this study with raters named by pseudonym;
  `python manage.py reproduce <this folder>` rebuilds it from the package alone and compares.
"""


# ------------------------------------------------------------------ reading a package back


class PackagedStudy:
    """A released study read back from its package: what ``analysis.report.build_report`` reads
    of a study (slug, title, protocol, task type) and the frames analysis.data would give, from
    the package's tables (analysis.data dispatches to these methods for a packaged study)."""

    is_packaged = True

    def __init__(self, folder: Path | str):
        folder = Path(folder)
        self.folder = folder
        meta = json.loads((folder / "study.json").read_text())
        self.meta = meta
        self.slug, self.title = meta.get("slug"), meta.get("title")
        self.protocol, self.task_type = meta.get("protocol"), meta.get("task_type")
        self.rater_sampling = meta.get("rater_sampling", "sampled")
        self.dimensions = meta.get("dimensions") or []
        self.questions = meta.get("questions") or []
        self.votes = pd.read_parquet(folder / "data/votes.parquet")
        self.rater_table = pd.read_parquet(folder / "data/raters.parquet")
        judge = folder / "data/judge_scores.parquet"
        self.judges = pd.read_parquet(judge) if judge.exists() else None

    def excluded_raters(self) -> dict[str, str]:
        table = self.rater_table
        flagged = table[table["excluded"].astype(bool)]
        return dict(zip(flagged["rater"], flagged["exclusion_reason"]))

    def _usable(self, include_excluded: bool) -> pd.DataFrame:
        votes = self.votes
        return votes if include_excluded else votes[~votes["excluded"].astype(bool)]

    def ratings_frame(self, *, include_excluded: bool = False) -> pd.DataFrame:
        votes = self._usable(include_excluded)
        frame = votes[["rater", "item", "model", "instance", *self.dimensions]].copy()
        for dim in self.dimensions:
            frame[dim] = frame[dim].astype(float)
        return frame.reset_index(drop=True)

    def answers_frame(self, *, include_excluded: bool = False) -> pd.DataFrame:
        votes = self._usable(include_excluded)
        questions = [q for q in self.questions if q in votes.columns]
        long = votes[["rater", "item", "model", *questions]].melt(
            id_vars=["rater", "item", "model"], value_vars=questions, var_name="question", value_name="answer")
        long = long[long["answer"].notna()]
        return long[["rater", "item", "model", "question", "answer"]].reset_index(drop=True)

    def comparisons_frame(self, *, include_excluded: bool = False) -> pd.DataFrame:
        votes = self._usable(include_excluded)
        return votes[["rater", "comparison", "instance", "model_a", "model_b", "preference"]].reset_index(drop=True)

    def item_table(self) -> pd.DataFrame:
        """analysis.data.item_table's columns from the items config (images not read); the package
        has no instance position, so instances keep their order of first appearance."""
        items = pd.read_parquet(self.folder / "data/items.parquet", columns=["item", "model", "instance"])
        items["position"] = pd.factorize(items["instance"])[0]
        return items[["item", "model", "instance", "position"]].reset_index(drop=True)

    def judge_scores_frame(self) -> pd.DataFrame:
        columns = ["judge", "lower_is_better", "role", "item", "model", "dimension", "value"]
        if self.judges is None or not len(self.judges):
            return pd.DataFrame({c: pd.Series(dtype=bool if c == "lower_is_better" else float if c == "value"
                                              else object) for c in columns})
        frame = self.judges[columns].copy()
        frame["lower_is_better"] = frame["lower_is_better"].astype(bool)
        frame["value"] = frame["value"].astype(float)
        return frame


def read_release(folder: Path | str) -> PackagedStudy:
    return PackagedStudy(folder)


def compare_reports(shipped: Any, rebuilt: Any, *, where: str = "report", rel: float = 1e-9,
                    abs_tol: float = 1e-9) -> list[str]:
    """Where two reports differ (empty: the same): numbers within ``rel``/``abs_tol`` (summing the
    same votes in another order moves the last bits), lists of strings as sets (rater order)."""
    if isinstance(shipped, dict) and isinstance(rebuilt, dict):
        out = []
        for key in sorted(set(shipped) | set(rebuilt), key=str):
            if key not in shipped or key not in rebuilt:
                out.append(f"{where}.{key}: only in the {'shipped' if key in shipped else 'rebuilt'} report")
            else:
                out += compare_reports(shipped[key], rebuilt[key], where=f"{where}.{key}", rel=rel, abs_tol=abs_tol)
        return out
    if isinstance(shipped, list) and isinstance(rebuilt, list):
        if len(shipped) != len(rebuilt):
            return [f"{where}: {len(shipped)} entries shipped, {len(rebuilt)} rebuilt"]
        if all(isinstance(v, str) for v in shipped + rebuilt):
            return [] if sorted(shipped) == sorted(rebuilt) else [f"{where}: {shipped!r} != {rebuilt!r}"]
        if all(isinstance(v, dict) for v in shipped + rebuilt):
            key = lambda d: json.dumps(d, sort_keys=True, default=str)  # noqa: E731
            shipped, rebuilt = sorted(shipped, key=key), sorted(rebuilt, key=key)
        out = []
        for index, (a, b) in enumerate(zip(shipped, rebuilt)):
            out += compare_reports(a, b, where=f"{where}[{index}]", rel=rel, abs_tol=abs_tol)
        return out
    if isinstance(shipped, bool) or isinstance(rebuilt, bool):
        return [] if shipped == rebuilt else [f"{where}: {shipped!r} != {rebuilt!r}"]
    if isinstance(shipped, (int, float)) and isinstance(rebuilt, (int, float)):
        return [] if math.isclose(shipped, rebuilt, rel_tol=rel, abs_tol=abs_tol) else [
            f"{where}: shipped {shipped!r}, rebuilt {rebuilt!r}"]
    return [] if shipped == rebuilt else [f"{where}: shipped {shipped!r}, rebuilt {rebuilt!r}"]


_MAX_MEMBERS = 10_000


def open_package(path: Path, scratch: Path | str, *, version: int | None = None) -> PackagedStudy:
    """A package folder, or its zip unpacked into ``scratch``, read as a :class:`PackagedStudy`.

    A zip is checked before anything is written: member names must be relative and stay inside
    the package (no ``..``, no absolute path, no drive, no NUL), at most ``_MAX_MEMBERS`` of them.
    ``version``: keep only the votes cast under that protocol version.
    """
    path = Path(path)
    if path.is_dir():
        folder = path
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if len(names) > _MAX_MEMBERS:
                raise ValueError(f"{path}: {len(names)} members, more than a package has")
            for name in names:
                parts = Path(name).parts
                if "\x00" in name or name.startswith(("/", "\\")) or ".." in parts or ":" in name:
                    raise ValueError(f"{path}: unsafe member name {name!r}")
            archive.extractall(scratch)
        readmes = sorted(Path(scratch).glob("*/study.json")) or sorted(Path(scratch).glob("study.json"))
        if not readmes:
            raise ValueError(f"{path}: no study.json: not a release package")
        folder = readmes[0].parent
    else:
        raise ValueError(f"{path}: neither a package folder nor a zip")
    for needed in ("study.json", "data/votes.parquet", "data/raters.parquet"):
        if not (folder / needed).exists():
            raise ValueError(f"{folder}: {needed} is missing: not a release package")
    study = PackagedStudy(folder)
    if version is not None:
        study.votes = study.votes[study.votes["protocol_version"] == version].reset_index(drop=True)
    return study
