"""Pure parsers for the public data formats the project imports.

No Django here: management-command importers call these and turn the
resulting DataFrames into model rows. Every parser raises ``ValueError``
naming the file (and line, where there is one) when the input is malformed,
so an importer can show the researcher exactly what to fix.

Formats
-------
* ImagenHub human ratings: ``<Task>/<Task>_raterN.tsv``; column ``uid`` then
  one column per generation model; each cell ``[SC, PQ]`` with values in
  {0, 0.5, 1}, spacing varies (``[0,0]``, ``[0, 0.5]``, ``[1 , 1]``).
* VIEScore judge outputs: ``<slug>/<Model>/{SC,PQ}.json`` mapping uid to
  ``{"score": [ints 0-10], "reasoning": str, ...}`` (some judges: a bare number or numeric text).
* Autometrics: ``<slug>/<Model>.json`` mapping uid to ``{metric: value}``.
* EvalMi-50K: ``AIGI2025_MOS_yn.xlsx`` (MOS per image), ``question.xlsx``
  and ``prompt_tasks.jsonl`` (one row/line per prompt number 1-2100).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

IMAGENHUB_ALLOWED_SCORES = (0.0, 0.5, 1.0)

# "[0.5, 1]" with any spacing; both numbers captured.
_CELL_RE = re.compile(r"^\s*\[\s*([0-9.]+)\s*,\s*([0-9.]+)\s*\]\s*$")
_RATER_FILE_RE = re.compile(r"_rater(\d+)\.tsv$")


# ---------------------------------------------------------------- ImagenHub


def parse_imagenhub_tsv(path: Path | str, rater: str | None = None) -> pd.DataFrame:
    """Parse one ImagenHub rater file into long form.

    Returns columns ``rater, uid, model, SC, PQ`` (floats in {0, 0.5, 1}),
    one row per (uid, model) cell. ``rater`` defaults to ``raterN`` taken
    from the file name. Raises ``ValueError`` naming file and 1-based line
    for a malformed cell, an out-of-range score, an empty cell or a
    duplicated uid.
    """
    path = Path(path)
    if rater is None:
        match = _RATER_FILE_RE.search(path.name)
        rater = f"rater{match.group(1)}" if match else path.stem
    try:
        wide = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read as TSV: {exc}") from exc
    wide.columns = [c.strip() for c in wide.columns]
    if not len(wide.columns) or wide.columns[0] != "uid":
        raise ValueError(f"{path}: line 1: first column must be 'uid', got {list(wide.columns)[:1]}")
    if len(wide.columns) < 2:
        raise ValueError(f"{path}: line 1: no model columns")
    wide["uid"] = wide["uid"].str.strip()
    duplicated = wide["uid"].duplicated()
    if duplicated.any():
        row = int(np.flatnonzero(duplicated.to_numpy())[0])
        raise ValueError(f"{path}: line {row + 2}: duplicate uid {wide['uid'].iloc[row]!r}")

    wide["_line"] = np.arange(len(wide)) + 2  # header is line 1
    long = wide.melt(id_vars=["uid", "_line"], var_name="model", value_name="cell")
    parts = long["cell"].str.extract(_CELL_RE)
    bad = parts[0].isna()
    if bad.any():
        first = long[bad].iloc[0]
        raise ValueError(
            f"{path}: line {first['_line']}: model {first['model']!r}: "
            f"cannot parse cell {first['cell']!r} (expected '[SC, PQ]')"
        )
    scores = parts.astype(float)
    out_of_range = ~scores.isin(IMAGENHUB_ALLOWED_SCORES).all(axis=1)
    if out_of_range.any():
        first = long[out_of_range].iloc[0]
        raise ValueError(
            f"{path}: line {first['_line']}: model {first['model']!r}: "
            f"score {first['cell']!r} not in {{0, 0.5, 1}}"
        )
    return pd.DataFrame(
        {
            "rater": rater,
            "uid": long["uid"].to_numpy(),
            "model": long["model"].to_numpy(),
            "SC": scores[0].to_numpy(),
            "PQ": scores[1].to_numpy(),
        }
    )


def read_imagenhub_task(folder: Path | str) -> pd.DataFrame:
    """Read every ``*_raterN.tsv`` in a task folder (long form, see above)."""
    folder = Path(folder)
    files = sorted(folder.glob("*_rater*.tsv"), key=lambda p: p.name)
    if not files:
        raise ValueError(f"{folder}: no '*_raterN.tsv' files")
    return pd.concat([parse_imagenhub_tsv(f) for f in files], ignore_index=True)


# ---------------------------------------------------------------- VIEScore


def parse_viescore_json(path: Path | str) -> pd.DataFrame:
    """Parse one judge file ``<Model>/{SC,PQ}.json``.

    Returns columns ``uid, scores`` (list of floats), ``reasoning`` and ``reshaped`` (True where
    the score was not already a list of numbers). Every shape the VIEScore release uses is read
    as its own analysis notebook reads it: a list of numbers (GPT-4o, Gemini...), a bare number
    (LLaVA, Qwen-VL, CogVLM: ``"score": 9``, taken as ``[9]``) and numbers written as text inside
    the list or alone (CogVLM: ``["10", "10"]``). A uid whose ``score`` is missing, empty, not
    numeric or not finite raises ``ValueError``: VIEScore fills such failures with random values,
    we would rather know.
    """
    path = Path(path)
    data = _load_json_object(path)
    uids, scores, reasons, reshaped = [], [], [], []
    for uid, entry in data.items():
        score = entry.get("score") if isinstance(entry, dict) else None
        values, changed = _viescore_score(score)
        if values is None:
            raise ValueError(f"{path}: uid {uid!r}: 'score' must be a number or a non-empty list of numbers, "
                             f"got {_shown(score)}")
        uids.append(uid)
        scores.append(values)
        reasons.append(entry.get("reasoning", ""))
        reshaped.append(changed)
    return pd.DataFrame({"uid": uids, "scores": scores, "reasoning": reasons, "reshaped": reshaped})


def _viescore_score(score) -> tuple[list[float] | None, bool]:
    """(the sub-scores as floats, whether the shape needed reading) or (None, False) if unusable."""
    if isinstance(score, list):
        if not score:
            return None, False
        values = [_score_number(s) for s in score]
        if any(v is None for v in values):
            return None, False
        return values, any(isinstance(s, str) for s in score)
    value = _score_number(score)
    return ([value], True) if value is not None else (None, False)


def _score_number(value) -> float | None:
    """A finite number, or numeric text (``"7"``, `` 8.5 ``); None for anything else (booleans too)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if len(value) > 32:  # numeric text is short; a long string is a reasoning pasted in the wrong field
            return None
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if np.isfinite(value) else None


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def read_viescore_judge(root: Path | str) -> pd.DataFrame:
    """Read ``<root>/<slug>/<Model>/{SC,PQ}.json`` into long records.

    Columns: ``task, model, uid, aspect`` ('SC'/'PQ'), ``scores`` (list),
    ``reasoning``, ``reshaped`` (see :func:`parse_viescore_json`). Missing aspect files are
    simply absent rows.
    """
    root = Path(root)
    frames = []
    for aspect_file in sorted(root.glob("*/*/*.json")):
        aspect = aspect_file.stem
        if aspect not in ("SC", "PQ"):
            continue
        frame = parse_viescore_json(aspect_file)
        frame.insert(0, "aspect", aspect)
        frame.insert(0, "model", aspect_file.parent.name)
        frame.insert(0, "task", aspect_file.parent.parent.name)
        frames.append(frame)
    if not frames:
        raise ValueError(f"{root}: no '<slug>/<Model>/SC.json' or PQ.json files")
    return pd.concat(frames, ignore_index=True)[["task", "model", "uid", "aspect", "scores", "reasoning", "reshaped"]]


def read_autometrics(root: Path | str) -> pd.DataFrame:
    """Read ``<root>/<slug>/<Model>.json`` (uid -> {metric: value}).

    Returns long columns ``task, model, uid, metric, value``. Non-numeric
    values raise ``ValueError`` naming the file and uid.
    """
    root = Path(root)
    rows = []
    for model_file in sorted(root.glob("*/*.json")):
        data = _load_json_object(model_file)
        for uid, metrics in data.items():
            if not isinstance(metrics, dict):
                raise ValueError(f"{model_file}: uid {uid!r}: expected an object of metrics")
            for metric, value in metrics.items():
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    raise ValueError(f"{model_file}: uid {uid!r}: metric {metric!r} is not a number: {value!r}")
                rows.append((model_file.parent.name, model_file.stem, uid, metric, float(value)))
    if not rows:
        raise ValueError(f"{root}: no '<slug>/<Model>.json' files")
    return pd.DataFrame(rows, columns=["task", "model", "uid", "metric", "value"])


def _load_json_object(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: top level must be an object mapping uid to entry")
    return data


# ---------------------------------------------------------------- EvalMi-50K

EVALMI_MOS_COLUMNS = ("ImageName", "MOS1", "MOS2", "Y/N")
EVALMI_SUB_ANSWER_COLUMNS = ("YN_1", "YN_2", "YN_3", "YN_4")


def read_evalmi_mos(path: Path | str) -> pd.DataFrame:
    """Read ``AIGI2025_MOS_yn.xlsx``.

    Returns columns ``image, model, prompt_number`` (1-2100), ``perception``
    (MOS1, 0-100), ``correspondence`` (MOS2, 0-100), ``answer`` (Y/N as 0/1)
    and ``YN_1..YN_4`` (float, NaN where the prompt has no sub-question).
    """
    path = Path(path)
    frame = _read_excel(path)
    missing = [c for c in EVALMI_MOS_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}")
    names = frame["ImageName"].astype(str)
    parts = names.str.extract(r"^(?P<model>[^/]+)/(?P<number>\d+)\.\w+$")
    bad = parts["model"].isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"{path}: line {row + 2}: ImageName {names.iloc[row]!r} is not '<model>/<NNN>.png'")
    answer = pd.to_numeric(frame["Y/N"], errors="coerce")
    bad = ~answer.isin((0, 1))
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"{path}: line {row + 2}: Y/N must be 0 or 1, got {frame['Y/N'].iloc[row]!r}")
    out = pd.DataFrame(
        {
            "image": names,
            "model": parts["model"],
            "prompt_number": parts["number"].astype(int),
            "perception": pd.to_numeric(frame["MOS1"], errors="raise"),
            "correspondence": pd.to_numeric(frame["MOS2"], errors="raise"),
            "answer": answer.astype(int),
        }
    )
    for column in EVALMI_SUB_ANSWER_COLUMNS:
        out[column] = pd.to_numeric(frame[column], errors="raise") if column in frame.columns else np.nan
    return out


def read_mos_table(path: Path | str) -> pd.DataFrame:
    """A MOS sheet in :func:`read_evalmi_mos`'s columns: a .parquet or .csv written from it, or
    EvalMi-50K's own workbook."""
    path = Path(path)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".csv":
        return pd.read_csv(path)
    return read_evalmi_mos(path)

def read_evalmi_questions(path: Path | str) -> pd.DataFrame:
    """Read ``question.xlsx``: row i is prompt number i (1-based).

    Returns ``prompt_number, prompt, question_1..question_5`` (None where
    the prompt has fewer sub-questions).
    """
    path = Path(path)
    frame = _read_excel(path)
    if "prompt" not in frame.columns or "question_1" not in frame.columns:
        raise ValueError(f"{path}: expected columns 'prompt' and 'question_1'")
    frame = frame.astype(object).where(frame.notna(), None)
    frame.insert(0, "prompt_number", np.arange(1, len(frame) + 1))
    return frame


def read_evalmi_prompt_tasks(path: Path | str) -> pd.DataFrame:
    """Read ``prompt_tasks.jsonl``: line i is prompt number i.

    Returns ``prompt_number, tag, include, prompt``.
    """
    path = Path(path)
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: line {line_number}: invalid JSON: {exc.msg}") from exc
            if "tag" not in record or "prompt" not in record:
                raise ValueError(f"{path}: line {line_number}: needs 'tag' and 'prompt'")
            rows.append((len(rows) + 1, record["tag"], record.get("include"), record["prompt"]))
    return pd.DataFrame(rows, columns=["prompt_number", "tag", "include", "prompt"])


def _read_excel(path: Path) -> pd.DataFrame:
    try:
        return pd.read_excel(path, engine="openpyxl")
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"{path}: cannot read as xlsx: {exc}") from exc
