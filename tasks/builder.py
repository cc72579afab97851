"""Study builder: a zip bundle (images + manifest) becomes a draft study, or a list of problems.

Bundle layout
-------------
A zip holding image files in any folders and exactly one manifest at its top level:
``manifest.csv`` (header row, comma separated, UTF-8) or ``manifest.jsonl`` (one JSON object a
line). One row = one output image of one model for one instance. Columns:

=================  ========  ===============================================================
column             required  meaning
=================  ========  ===============================================================
instance           yes       sample id shared by all models' outputs for one input
model              yes       generator name, e.g. ``MagicBrush``
output             yes       path in the zip of the output image
prompt                       prompt / instruction the model received
alt_prompt                   the other prompt form (instruction vs description)
task_tag                     EvalMi task dimension, e.g. ``counting``
question                     yes/no task question (EvalMi, required when ``qa`` is on)
sub_questions                yes/no sub-questions: a list in JSONL, ``|``-separated in CSV
source, mask,                condition image paths
control
subject_1,                   subject sets: a list of paths in JSONL, ``|``-separated in CSV
subject_2
subject_1_token,             token of the subject in the prompt, e.g. ``[V]``
subject_2_token
=================  ========  ===============================================================

Instance columns (everything except model and output) must agree on every row of an instance;
they may be left empty on all but one row.

Validation happens in full before anything is stored: every problem is collected with the
manifest line it comes from (1-based; line 1 of a CSV is its header) and returned together.
Only a bundle without problems is built, inside one transaction.

Hostile values: every text value is checked against the column it goes to (its length),
for NUL characters and for lone surrogates, which PostgreSQL refuses with a server error while
SQLite stores them; JSON values (the settings, JSONL cells) also for depth, non-finite numbers
and integers beyond 64 bits. Each is reported with its line and column.

Zip safety: member names that are absolute, contain ``..`` or backslashes (zip-slip) are
refused; so are bundles whose members would inflate beyond :data:`MAX_TOTAL_BYTES`, a single
member beyond :data:`MAX_MEMBER_BYTES`, or with a compression ratio above
:data:`MAX_RATIO` (decompression bombs). Reads are capped, so a lying header cannot inflate
more than announced. Images are decoded with Pillow (tasks.images.inspect_image).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import posixpath
import uuid
import zipfile
from dataclasses import dataclass, field
from itertools import combinations
from collections.abc import Callable
from typing import IO, Any

from django.db import IntegrityError, transaction
from django.utils.text import slugify

from analysis.science import protocols
from tasks.images import ImageRejected, images_discard, images_store_many, inspect_image
from analysis.science.protocols.task_types import applicable_settings, task_type_problem
from tasks.models import Comparison, ConditionImage, GenModel, Instance, Item, StoredImage, Study

MANIFEST_NAMES = ("manifest.csv", "manifest.jsonl")
MAX_MEMBERS = 50_000
MAX_MEMBER_BYTES = 64 * 1024 * 1024  # one image
MAX_TOTAL_BYTES = 4 * 1024 * 1024 * 1024  # the whole bundle, inflated
MAX_RATIO = 200  # inflated / compressed, for members above RATIO_FLOOR bytes
RATIO_FLOOR = 1024 * 1024
MIN_SIDE = 16  # pixels: smaller "images" are icons or mistakes, not study material

REQUIRED_COLUMNS = ("instance", "model", "output")
INSTANCE_TEXT_COLUMNS = ("prompt", "alt_prompt", "task_tag", "question")
SINGLE_IMAGE_ROLES = ("source", "mask", "control")
SUBJECT_ROLES = ("subject_1", "subject_2")
TOKEN_COLUMNS = ("subject_1_token", "subject_2_token")
KNOWN_COLUMNS = frozenset(
    REQUIRED_COLUMNS
    + INSTANCE_TEXT_COLUMNS
    + ("sub_questions",)
    + SINGLE_IMAGE_ROLES
    + SUBJECT_ROLES
    + TOKEN_COLUMNS
)

# Condition images each ImagenHub task needs (seed 003, section 3).
TASK_NEEDS = {
    "text_to_image": (),
    "mask_guided_editing": ("source", "mask"),
    "text_guided_editing": ("source",),
    "subject_driven_generation": ("subject_1",),
    "multi_concept_composition": ("subject_1", "subject_2"),
    "subject_driven_editing": ("source", "subject_1"),
    "control_guided_generation": ("control",),
}


# Longest text each manifest column may hold: the database column it is stored in.
COLUMN_MAX_LENGTH = {
    "instance": Instance._meta.get_field("key").max_length,
    "model": GenModel._meta.get_field("name").max_length,
    "task_tag": Instance._meta.get_field("task_tag").max_length,
    "subject_1_token": ConditionImage._meta.get_field("token").max_length,
    "subject_2_token": ConditionImage._meta.get_field("token").max_length,
}
MAX_PATH_LENGTH = 1024  # image paths are only looked up in the zip, never stored; longer ones are noise
MAX_JSON_DEPTH = 32  # settings and JSONL cells are flat; deeper nesting is an attack, not data
BIGINT = 2**63 - 1


def text_problem(value: str, *, max_length: int | None = None) -> str | None:
    """Why ``value`` cannot be stored as text (PostgreSQL refuses NUL and lone surrogates), or None."""
    if "\x00" in value:
        return f"contains a NUL character (at position {value.index(chr(0)) + 1})"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"contains a lone surrogate (U+{ord(value[exc.start]):04X} at position {exc.start + 1}), not UTF-8 text"
    if max_length is not None and len(value) > max_length:
        return f"is {len(value):,} characters long; at most {max_length:,} fit"
    return None


def json_problem(value: Any, *, depth: int = 0) -> str | None:
    """Why ``value`` (parsed JSON) cannot be stored in a JSON column, or None.

    Refuses nesting deeper than :data:`MAX_JSON_DEPTH`, NaN and infinities (not JSON), integers
    beyond 64 bits, and strings (keys too) that :func:`text_problem` refuses.
    """
    if depth > MAX_JSON_DEPTH:
        return f"is nested more than {MAX_JSON_DEPTH} levels deep"
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return None if -BIGINT - 1 <= value <= BIGINT else "holds an integer beyond the 64-bit range"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"holds {value!r}, not a finite number"
    if isinstance(value, str):
        problem = text_problem(value)
        return f"holds text that {problem}" if problem else None
    if isinstance(value, list):
        return next((p for v in value if (p := json_problem(v, depth=depth + 1))), None)
    if isinstance(value, dict):
        for key, item in value.items():
            problem = json_problem(key, depth=depth + 1) or json_problem(item, depth=depth + 1)
            if problem:
                return problem
        return None
    return f"holds a {type(value).__name__}, not JSON"


def json_loads_checked(text: str) -> Any:
    """``json.loads`` that raises ValueError with a readable message for every hostile input:
    syntax, nesting beyond the recursion limit, integers with more digits than Python converts,
    and values :func:`json_problem` refuses."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise ValueError("not accepted: JSON nested too deeply") from None
    except ValueError as exc:  # int(...) beyond sys.get_int_max_str_digits()
        raise ValueError(f"not accepted: a number with too many digits ({str(exc).split(':')[0]})") from None
    problem = json_problem(value)
    if problem:
        raise ValueError(f"not accepted: the JSON {problem}")
    return value


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a bundle. ``line`` is the manifest line (None: the bundle itself)."""

    message: str
    line: int | None = None
    file: str = ""

    def __str__(self) -> str:
        where = f"{self.file or 'bundle'}" + (f", line {self.line}" if self.line else "")
        return f"{where}: {self.message}"

    def as_dict(self) -> dict:
        """JSON-ready, with any NUL or lone surrogate echoed from the input escaped (the dict is stored)."""
        return {"file": _storable(self.file), "line": self.line, "message": _storable(self.message)}

    @classmethod
    def from_dict(cls, data: dict) -> "Problem":
        return cls(message=data.get("message", ""), line=data.get("line"), file=data.get("file", ""))


MAX_MESSAGE_LENGTH = 1000  # a message quoting two 100 KB prompts, 200 times, would be 40 MB of JSON


def _storable(text: str) -> str:
    text = text if len(text) <= MAX_MESSAGE_LENGTH else text[:MAX_MESSAGE_LENGTH - 1] + "…"
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")


class BundleInvalid(ValueError):
    """The bundle was not built; ``problems`` lists everything that is wrong with it."""

    MAX_REPORTED = 200  # a 100,000-row manifest with one mistake per row must not answer with megabytes

    def __init__(self, problems: list[Problem]):
        # Sorted once, here: problems of the study and the bundle first, then by manifest line
        # (stable: a line's problems keep the order they were found in).
        problems = sorted(problems, key=lambda p: (p.line is not None, p.line or 0))
        if len(problems) > self.MAX_REPORTED:
            more = len(problems) - self.MAX_REPORTED
            problems = problems[:self.MAX_REPORTED] + [
                Problem(f"… and {more:,} more problems; fix the ones above and upload again")
            ]
        self.problems = problems
        super().__init__(f"{len(problems)} problem(s) in the bundle: " + "; ".join(map(str, problems[:5])))


@dataclass
class StudySpec:
    """The study-level fields a researcher fills in next to the bundle."""

    slug: str
    title: str
    protocol: str
    task_type: str
    instructions: str = ""
    raters_per_item: int = 3
    assignment_mode: str = Study.AssignmentMode.BALANCED
    rater_sampling: str = Study.RaterSampling.SAMPLED
    settings: dict = field(default_factory=dict)
    completion_code: str = ""
    completion_url: str = ""


@dataclass
class ManifestRow:
    line: int
    instance: str
    model: str
    output: str
    text: dict[str, str]
    sub_questions: list[str]
    images: dict[str, list[str]]  # role -> paths (subject sets may hold several)
    tokens: dict[str, str]


@dataclass
class PlannedInstance:
    key: str
    line: int
    text: dict[str, str] = field(default_factory=dict)
    sub_questions: list[str] = field(default_factory=list)
    images: dict[str, list[str]] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    outputs: list[tuple[str, str]] = field(default_factory=list)  # (model, path)


@dataclass
class BundlePlan:
    """What a valid bundle will create; returned by :func:`validate_bundle`."""

    spec: StudySpec
    instances: list[PlannedInstance]
    models: list[str]
    image_sizes: dict[str, tuple[int, int]]
    archive: zipfile.ZipFile | None = field(default=None, repr=False)
    members: dict[str, zipfile.ZipInfo] = field(default_factory=dict, repr=False)
    image_formats: dict[str, str] = field(default_factory=dict)

    @property
    def item_count(self) -> int:
        return sum(len(i.outputs) for i in self.instances)


# ------------------------------------------------------------------ zip


def _unsafe_name(name: str) -> str | None:
    if "\\" in name:
        return "backslash in path"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "absolute path"
    if ".." in name.split("/"):
        return "'..' in path (zip-slip)"
    return None


def _normalise_path(value: str) -> str:
    """``./a//b.png`` → ``a/b.png``; ``../x`` stays outside the zip and is then reported missing."""
    return posixpath.normpath(value.strip()) if value.strip() else ""


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """Read at most the announced size (+1 byte to notice a lying header)."""
    with archive.open(info) as handle:
        data = handle.read(info.file_size + 1)
    if len(data) > info.file_size:
        raise ValueError("inflates beyond the size its header announces")
    return data


def _open_archive(upload: IO[bytes], problems: list[Problem]) -> tuple[zipfile.ZipFile | None, dict[str, zipfile.ZipInfo]]:
    try:
        archive = zipfile.ZipFile(upload)
    except (zipfile.BadZipFile, OSError, ValueError):
        problems.append(Problem("not a zip file"))
        return None, {}
    members: dict[str, zipfile.ZipInfo] = {}
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        problems.append(Problem(f"{len(infos):,} files in the zip; at most {MAX_MEMBERS:,} are accepted"))
        return None, {}
    total = 0
    for info in infos:
        if info.is_dir():
            continue
        unsafe = _unsafe_name(info.filename)
        if unsafe:
            problems.append(Problem(f"refused member {info.filename!r}: {unsafe}", file=info.filename))
            continue
        if info.flag_bits & 0x1:
            problems.append(Problem("encrypted members are not accepted", file=info.filename))
            continue
        total += info.file_size
        if info.file_size > MAX_MEMBER_BYTES:
            problems.append(
                Problem(f"inflates to {info.file_size:,} bytes; the limit is {MAX_MEMBER_BYTES:,}", file=info.filename)
            )
            continue
        if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            problems.append(
                Problem(
                    f"compression ratio {info.file_size / max(info.compress_size, 1):,.0f}:1 looks like a "
                    f"decompression bomb (limit {MAX_RATIO}:1)",
                    file=info.filename,
                )
            )
            continue
        name = posixpath.normpath(info.filename)
        if name in members:
            # Which of the two the manifest means is anyone's guess (zipfile would take the last).
            problems.append(Problem(f"the zip holds {name!r} twice ({members[name].filename!r} and "
                                    f"{info.filename!r}); keep one", file=name))
            continue
        members[name] = info
    if total > MAX_TOTAL_BYTES:
        problems.append(Problem(f"the bundle inflates to {total:,} bytes; the limit is {MAX_TOTAL_BYTES:,}"))
        return None, {}
    return archive, members


# ------------------------------------------------------------------ manifest


def _split_list(value: Any, *, line: int, column: str, problems: list[Problem], file: str) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            problems.append(Problem(f"column {column!r}: every entry must be text", line, file))
            return []
        entries = [v.strip() for v in value if v.strip()]
    elif isinstance(value, str):
        entries = [part.strip() for part in value.split("|") if part.strip()]
    else:
        problems.append(Problem(f"column {column!r}: expected text or a list, got {type(value).__name__}", line, file))
        return []
    for number, entry in enumerate(entries, start=1):
        problem = text_problem(entry, max_length=MAX_PATH_LENGTH if column in SUBJECT_ROLES else None)
        if problem:
            problems.append(Problem(f"column {column!r}, entry {number}: {problem}", line, file))
            return []
    return entries


def _cell_text(column: str, value: Any) -> tuple[str | None, str | None]:
    """(text, None) for a cell that can be stored in its column, else (None, why not)."""
    if value is None:
        return "", None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None, f"expected text, got {type(value).__name__}"
    if isinstance(value, float) and not math.isfinite(value):
        return None, f"expected text, got the number {value!r}"
    text = str(value).strip()
    limit = COLUMN_MAX_LENGTH.get(column, MAX_PATH_LENGTH if column in ("output", *SINGLE_IMAGE_ROLES) else None)
    problem = text_problem(text, max_length=limit)
    return (None, problem) if problem else (text, None)


def _row_from_record(record: dict, line: int, file: str, problems: list[Problem]) -> ManifestRow | None:
    unknown = sorted(set(record) - KNOWN_COLUMNS)
    if unknown:
        problems.append(
            Problem(f"unknown column(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(KNOWN_COLUMNS))}", line, file)
        )
    ok = True
    values: dict[str, str] = {}
    for column in sorted(KNOWN_COLUMNS - {"sub_questions", *SUBJECT_ROLES}):
        text, problem = _cell_text(column, record.get(column, ""))
        if problem:
            problems.append(Problem(f"column {column!r}: {problem}", line, file))
            ok = False
            continue
        values[column] = text
    for column in REQUIRED_COLUMNS:
        if column in values and not values[column]:
            problems.append(Problem(f"column {column!r} is empty", line, file))
            ok = False
    sub_questions = _split_list(record.get("sub_questions"), line=line, column="sub_questions", problems=problems, file=file)
    images: dict[str, list[str]] = {}
    for role in SINGLE_IMAGE_ROLES:
        if values.get(role):
            images[role] = [_normalise_path(values[role])]
    for role in SUBJECT_ROLES:
        paths = _split_list(record.get(role), line=line, column=role, problems=problems, file=file)
        if paths:
            images[role] = [_normalise_path(p) for p in paths]
    if not ok:
        return None
    return ManifestRow(
        line=line,
        instance=values["instance"],
        model=values["model"],
        output=_normalise_path(values["output"]),
        text={c: values[c] for c in INSTANCE_TEXT_COLUMNS},
        sub_questions=sub_questions,
        images=images,
        tokens={role: values[f"{role}_token"] for role in SUBJECT_ROLES if values.get(f"{role}_token")},
    )


def _parse_csv(data: bytes, file: str, problems: list[Problem]) -> list[ManifestRow]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problems.append(Problem(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=file))
        return []
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        problems.append(Problem("the manifest is empty", 1, file))
        return []
    header = [h.strip() for h in header]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        problems.append(Problem(f"missing required column(s) {', '.join(map(repr, missing))}", 1, file))
    unknown = [h for h in header if h not in KNOWN_COLUMNS]
    if unknown:
        problems.append(
            Problem(f"unknown column(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(KNOWN_COLUMNS))}", 1, file)
        )
    duplicated = sorted({h for h in header if header.count(h) > 1})
    if duplicated:
        problems.append(Problem(f"column(s) named twice: {', '.join(map(repr, duplicated))}", 1, file))
    if missing or duplicated:
        return []
    # An unknown column (reported above, so the bundle is not built) does not hide the rows'
    # other problems: the rows are checked on their known columns.
    known = [h in KNOWN_COLUMNS for h in header]
    rows = []
    line = reader.line_num
    try:
        for cells in reader:
            start, line = line + 1, reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                problems.append(Problem(f"{len(cells)} cells but the header has {len(header)} columns", start, file))
                continue
            row = _row_from_record({h: c for h, c, k in zip(header, cells, known) if k}, start, file, problems)
            if row:
                rows.append(row)
    except csv.Error as exc:
        problems.append(Problem(f"cannot read CSV: {exc}", line + 1, file))
    return rows


def _parse_jsonl(data: bytes, file: str, problems: list[Problem]) -> list[ManifestRow]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problems.append(Problem(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=file))
        return []
    rows = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(Problem(f"not valid JSON: {exc.msg} (column {exc.colno})", number, file))
            continue
        except RecursionError:
            problems.append(Problem("not accepted: JSON nested too deeply", number, file))
            continue
        except ValueError as exc:  # int(...) beyond sys.get_int_max_str_digits()
            problems.append(Problem(f"not accepted: a number with too many digits ({str(exc).split(':')[0]})", number, file))
            continue
        if not isinstance(record, dict):
            problems.append(Problem("each line must be a JSON object", number, file))
            continue
        missing = [c for c in REQUIRED_COLUMNS if c not in record]
        if missing:
            problems.append(Problem(f"missing required column(s) {', '.join(map(repr, missing))}", number, file))
            continue
        row = _row_from_record(record, number, file, problems)
        if row:
            rows.append(row)
    if not rows and not problems:
        problems.append(Problem("the manifest has no rows", file=file))
    return rows


# ------------------------------------------------------------------ plan


def check_spec(spec: StudySpec, problems: list[Problem]) -> None:
    # The form and the API check these too; the service is also called from code and commands.
    for name in ("slug", "title", "task_type", "instructions", "completion_code", "completion_url"):
        value = getattr(spec, name)
        limit = Study._meta.get_field(name).max_length if name != "instructions" else None
        problem = text_problem(value, max_length=limit) if isinstance(value, str) else "must be text"
        if problem:
            problems.append(Problem(f"{name} {problem}", file="study"))
            return
    problem = json_problem(spec.settings) if isinstance(spec.settings, dict) else "must be a JSON object"
    if problem:
        problems.append(Problem(f"settings: the JSON {problem}", file="study"))
        return
    if not spec.slug or slugify(spec.slug) != spec.slug:
        problems.append(Problem(f"study slug {spec.slug!r} must be lowercase letters, digits and hyphens", file="study"))
    elif Study.objects.filter(slug=spec.slug).exists():
        problems.append(Problem(f"a study with slug {spec.slug!r} already exists", file="study"))
    if not spec.title.strip():
        problems.append(Problem("the study needs a title", file="study"))
    try:
        protocol = protocols.get_protocol(spec.protocol)
        spec.settings = protocol.clean_settings(spec.settings)
    except protocols.ProtocolError as exc:
        problems.append(Problem(str(exc), file="study"))
        return
    if protocol.required_task_types is not None and spec.task_type not in protocol.required_task_types:
        problems.append(
            Problem(f"{protocol.title} studies need a task type from: {', '.join(protocol.required_task_types)}",
                    file="study")
        )
    elif task_type_problem(spec.protocol, spec.task_type):
        problems.append(Problem(task_type_problem(spec.protocol, spec.task_type), file="study"))
    else:  # a setting of another task (ImagenHub's editing models on text-to-image) is not stored
        spec.settings = applicable_settings(spec.protocol, spec.task_type, spec.settings)
    if not spec.task_type.strip():
        problems.append(Problem("the study needs a task type", file="study"))
    if not 1 <= int(spec.raters_per_item) <= 100:
        problems.append(Problem("raters per item must be between 1 and 100", file="study"))
    if spec.rater_sampling not in Study.RaterSampling.values:
        problems.append(Problem(f"raters must be one of: {', '.join(Study.RaterSampling.values)}", file="study"))


def _merge_instance(planned: PlannedInstance, row: ManifestRow, file: str, problems: list[Problem]) -> None:
    """Fill instance fields from a row; a value that contradicts an earlier row is a problem."""
    for column, value in row.text.items():
        if not value:
            continue
        earlier = planned.text.get(column, "")
        if earlier and earlier != value:
            problems.append(
                Problem(
                    f"instance {row.instance!r}: {column} differs from line {planned.line} ({earlier!r} vs {value!r})",
                    row.line,
                    file,
                )
            )
        else:
            planned.text[column] = value
    if row.sub_questions:
        if planned.sub_questions and planned.sub_questions != row.sub_questions:
            problems.append(
                Problem(f"instance {row.instance!r}: sub_questions differ from line {planned.line}", row.line, file)
            )
        planned.sub_questions = planned.sub_questions or row.sub_questions
    for role, paths in row.images.items():
        if planned.images.get(role) and planned.images[role] != paths:
            problems.append(
                Problem(f"instance {row.instance!r}: {role} image differs from line {planned.line}", row.line, file)
            )
        planned.images.setdefault(role, paths)
    for role, token in row.tokens.items():
        if planned.tokens.get(role) and planned.tokens[role] != token:
            problems.append(
                Problem(f"instance {row.instance!r}: {role}_token differs from line {planned.line}", row.line, file)
            )
        planned.tokens.setdefault(role, token)


# progress(stage, done, total): stage is "checking" or "storing" (done of total images), then
# "creating" (total items, in one transaction).
Progress = Callable[[str, int, int], None]


def _no_progress(stage: str, done: int, total: int) -> None:
    pass


def validate_bundle(upload: IO[bytes], spec: StudySpec, *, progress: Progress = _no_progress) -> BundlePlan:
    """Check a bundle completely; return the plan or raise :class:`BundleInvalid` with every problem."""
    problems: list[Problem] = []
    check_spec(spec, problems)
    archive, members = _open_archive(upload, problems)
    if archive is None:
        raise BundleInvalid(problems)

    manifests = [name for name in MANIFEST_NAMES if name in members]
    if len(manifests) != 1:
        problems.append(
            Problem("the zip needs exactly one manifest.csv or manifest.jsonl at its top level" if not manifests
                    else "the zip holds both manifest.csv and manifest.jsonl; keep one")
        )
        raise BundleInvalid(problems)
    manifest = manifests[0]
    try:
        manifest_bytes = _read_member(archive, members[manifest])
    except (ValueError, zipfile.BadZipFile, OSError) as exc:
        problems.append(Problem(f"cannot read: {exc}", file=manifest))
        raise BundleInvalid(problems) from None
    parse = _parse_csv if manifest.endswith(".csv") else _parse_jsonl
    rows = parse(manifest_bytes, manifest, problems)

    # Rows → instances; duplicates and contradictions.
    instances: dict[str, PlannedInstance] = {}
    seen: dict[tuple[str, str], int] = {}
    wanted_images: dict[str, int] = {}  # path -> first line naming it
    roles_of_path: dict[str, set[str]] = {}
    for row in rows:
        key = (row.instance, row.model)
        if key in seen:
            problems.append(
                Problem(f"duplicate row: instance {row.instance!r}, model {row.model!r} already on line {seen[key]}", row.line, manifest)
            )
            continue
        seen[key] = row.line
        planned = instances.setdefault(row.instance, PlannedInstance(key=row.instance, line=row.line))
        _merge_instance(planned, row, manifest, problems)
        planned.outputs.append((row.model, row.output))
        for role, paths in [("output", [row.output]), *row.images.items()]:
            for path in paths:
                wanted_images.setdefault(path, row.line)
                roles_of_path.setdefault(path, set()).add(role)

    # Every named file exists and is an image we accept.
    sizes: dict[str, tuple[int, int]] = {}
    formats: dict[str, str] = {}
    for checked, (path, line) in enumerate(wanted_images.items()):
        progress("checking", checked, len(wanted_images))
        if path == manifest or path not in members:
            problems.append(Problem(f"file {path!r} is not in the zip", line, manifest))
            continue
        try:
            data = _read_member(archive, members[path])
            formats[path], width, height = inspect_image(data, name=path)
        except ImageRejected as exc:
            problems.append(Problem(str(exc), line, manifest))
            continue
        except (ValueError, zipfile.BadZipFile, OSError) as exc:
            problems.append(Problem(f"{path}: cannot read from the zip ({exc})", line, manifest))
            continue
        if min(width, height) < MIN_SIDE:
            problems.append(Problem(f"{path}: {width}×{height} is too small (each side needs ≥ {MIN_SIDE} px)", line, manifest))
        sizes[path] = (width, height)

    # Per-instance rules: what the task needs, mask fits source, questions, pairs.
    settings = spec.settings if isinstance(spec.settings, dict) else {}
    definition = protocols.PROTOCOLS.get(spec.protocol)  # None: check_spec has said why
    needs_conditions = definition is not None and definition.needs_condition_images
    needs_question = definition is not None and definition.needs_task_question(settings)
    min_outputs = definition.min_outputs_per_instance if definition is not None else 1
    for planned in instances.values():
        if needs_conditions:
            for role in TASK_NEEDS.get(spec.task_type, ()):
                if not planned.images.get(role):
                    problems.append(
                        Problem(f"instance {planned.key!r}: task {spec.task_type} needs a {role} image", planned.line, manifest)
                    )
        mask, source = planned.images.get("mask"), planned.images.get("source")
        if mask and source and mask[0] in sizes and source[0] in sizes and sizes[mask[0]] != sizes[source[0]]:
            problems.append(
                Problem(
                    f"instance {planned.key!r}: wrong size: mask {mask[0]} is {'×'.join(map(str, sizes[mask[0]]))} "
                    f"but source {source[0]} is {'×'.join(map(str, sizes[source[0]]))}",
                    planned.line,
                    manifest,
                )
            )
        if mask and not source:
            problems.append(Problem(f"instance {planned.key!r}: a mask needs a source image", planned.line, manifest))
        for role in SUBJECT_ROLES:
            if planned.tokens.get(role) and not planned.images.get(role):
                problems.append(Problem(f"instance {planned.key!r}: {role}_token without {role} images", planned.line, manifest))
        if needs_question and not planned.text.get("question"):
            problems.append(
                Problem(f"instance {planned.key!r}: EvalMi studies with qa on need a task question", planned.line, manifest)
            )
        if min_outputs > 1 and len(planned.outputs) < min_outputs:
            problems.append(
                Problem(f"instance {planned.key!r}: a pairwise study needs at least two models' outputs", planned.line, manifest)
            )
    if not rows and not any(p.file == manifest for p in problems):
        problems.append(Problem("the manifest has no rows", file=manifest))
    if problems:
        raise BundleInvalid(problems)
    models = sorted({model for planned in instances.values() for model, _ in planned.outputs})
    return BundlePlan(
        spec=spec, instances=list(instances.values()), models=models, image_sizes=sizes, archive=archive, members=members,
        image_formats=formats,
    )


def study_build_from_bundle(
    *, upload: IO[bytes], spec: StudySpec, owner=None, progress: Progress = _no_progress, image_folder: str = "",
    on_created: Callable[[Study], None] | None = None,
) -> Study:
    """Validate the bundle, store its images, then create the draft study with all its content in
    one transaction. Large bundles go through a StudyBuild and its job (tasks.build_services), which
    call this with a progress callback.

    Raises :class:`BundleInvalid` when anything is wrong: then no row is left, and no file either
    (new images are written under ``image_folder`` of the images' upload path, a fresh one when
    not given, and removed if the study cannot be created). Images are deduplicated by content
    hash across the bundle and the site. ``on_created(study)`` runs inside the study's transaction.
    """
    plan = validate_bundle(upload, spec, progress=progress)
    image_folder = image_folder or f"upload-{uuid.uuid4().hex[:16]}"
    try:
        stored = _store_images(plan, folder=image_folder, progress=progress)
        progress("creating", 0, plan.item_count)
        with transaction.atomic():
            study = _create_study(plan, stored, owner=owner)
            if on_created is not None:
                on_created(study)
    except IntegrityError as exc:
        # The checks ran before any write, so this is a race: another upload took the slug meanwhile.
        images_discard(folder=image_folder)
        taken = Study.objects.filter(slug=spec.slug).exists()
        raise BundleInvalid([Problem(f"a study with slug {spec.slug!r} already exists" if taken
                                     else f"the database refused the study ({str(exc).splitlines()[0]})",
                                     file="study")]) from None
    except BaseException:
        images_discard(folder=image_folder)
        raise
    finally:
        plan.archive.close()
    return study


# Images stored per round of statements: at most this many, or this many bytes, held in memory.
STORE_CHUNK = 200
STORE_CHUNK_BYTES = 64 * 1024 * 1024


def _store_images(plan: BundlePlan, *, folder: str, progress: Progress) -> dict[str, StoredImage]:
    """Each image of the plan stored once, a chunk at a time (each chunk commits, so progress shows)."""
    paths = list(dict.fromkeys(
        path for planned in plan.instances
        for path in [*(p for paths in planned.images.values() for p in paths), *(p for _, p in planned.outputs)]
    ))
    stored: dict[str, StoredImage] = {}
    chunk: dict[str, bytes] = {}

    def flush() -> None:
        rows = images_store_many([(data, path, (plan.image_formats[path], *plan.image_sizes[path]))
                                  for path, data in chunk.items()], folder=folder)
        for path, data in chunk.items():
            stored[path] = rows[hashlib.sha256(data).hexdigest()]
        chunk.clear()
        progress("storing", len(stored), len(paths))

    progress("storing", 0, len(paths))
    for path in paths:
        chunk[path] = _read_member(plan.archive, plan.members[path])
        if len(chunk) >= STORE_CHUNK or sum(map(len, chunk.values())) >= STORE_CHUNK_BYTES:
            flush()
    if chunk:
        flush()
    return stored


def _create_study(plan: BundlePlan, stored: dict[str, StoredImage], *, owner) -> Study:
    spec = plan.spec
    study = Study(
        slug=spec.slug,
        title=spec.title.strip(),
        protocol=spec.protocol,
        task_type=spec.task_type,
        instructions=spec.instructions,
        raters_per_item=spec.raters_per_item,
        assignment_mode=spec.assignment_mode,
        rater_sampling=spec.rater_sampling,
        settings=spec.settings,
        completion_code=spec.completion_code,
        completion_url=spec.completion_url,
        state=Study.State.DRAFT,
    )
    study.full_clean()
    study.save()
    if owner is not None:
        study.owners.add(owner)
    gen_models = {name: GenModel.objects.create(study=study, name=name) for name in plan.models}
    # Bulk inserts: a 7,000-image bundle is a few statements, not 15,000 round trips.
    instances = Instance.objects.bulk_create([
        Instance(
            study=study,
            key=planned.key,
            prompt=planned.text.get("prompt", ""),
            alt_prompt=planned.text.get("alt_prompt", ""),
            task_tag=planned.text.get("task_tag", ""),
            question=planned.text.get("question", ""),
            sub_questions=planned.sub_questions,
            position=position,
        )
        for position, planned in enumerate(plan.instances)
    ], batch_size=1000)
    conditions, items = [], []
    for instance, planned in zip(instances, plan.instances):
        for role, paths in planned.images.items():
            conditions += [
                ConditionImage(instance=instance, role=role, position=index, image=stored[path],
                               token=planned.tokens.get(role, ""))
                for index, path in enumerate(paths)
            ]
        items += [Item(study=study, instance=instance, gen_model=gen_models[model], image=stored[path],
                       output_path=path)
                  for model, path in planned.outputs]
    ConditionImage.objects.bulk_create(conditions, batch_size=1000)
    items = Item.objects.bulk_create(items, batch_size=1000)
    if study.protocol_def.unit_kind == protocols.COMPARISON:
        by_instance: dict[int, list[Item]] = {}
        for item in items:
            by_instance.setdefault(item.instance_id, []).append(item)
        Comparison.objects.bulk_create([
            Comparison(study=study, item_a=item_a, item_b=item_b)
            for outputs in by_instance.values() for item_a, item_b in combinations(outputs, 2)
        ], batch_size=1000)
    return study
