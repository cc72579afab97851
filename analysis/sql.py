"""The analysis app's hand-written SQL: the bulk writer of the importers, beside the ORM path it replaces.

:func:`fast_insert` writes many rows of a model with PostgreSQL's ``COPY … FROM STDIN`` (a
multi-row ``INSERT … VALUES`` elsewhere) instead of ``bulk_create``, which spends ~100 µs per
object. Measured (README/bench/README.md, "import, 806,400 rows"; ``python -m bench.import_speed``):
806,400 EvalMi rating rows in 8.25 s = 97.7K rows/s on a quiet machine, against 12.3 s for the
writer before the COPY text was built here. Tests compare what it stores with what the ORM stores
(tests/analysis/test_sql.py; CI runs it on PostgreSQL). The
export's epoch timestamps (:func:`epoch_microseconds`) are the app's other hand-written SQL.
"""

from __future__ import annotations

import contextlib
import gc
import json

from django.db import connection
from psycopg.types.json import Json, Jsonb
from django.db.models import BigIntegerField
from django.db.models.expressions import RawSQL
from django.utils import timezone


def fast_insert(model, columns: list[str], rows: list[tuple], *, batch_rows: int = 500) -> int:
    """Insert many rows of ``model``: COPY on PostgreSQL, multi-row ``INSERT … VALUES`` elsewhere.

    ``bulk_create`` spends ~100 µs per object building model instances and preparing every field
    of every row; imports of EvalMi-scale data need > 100K rows/s. Here only the per-row
    ``columns`` (field names, already in database form: ids, numbers, strings, JSON text) vary;
    a field with a database default (``db_default``) is left out and filled by the database;
    every other concrete field gets its default prepared once (``auto_now``/``auto_now_add``
    fields get "now"). No signals are sent, as with bulk_create. Returns the number of rows.
    """
    if not rows:
        return 0
    with cyclic_gc_paused():
        return _fast_insert(model, columns, rows, batch_rows=batch_rows)


@contextlib.contextmanager
def cyclic_gc_paused():
    """Pause Python's cycle collector while hundreds of thousands of row tuples and strings are built.

    Each collection walks every tracked object of the process, and new tuples trigger them ever
    more often as the row list grows: building 806K Rating rows and their COPY text took 1.7 s and
    1.3 s with it running, 0.3 s and 0.7 s without (bench.import_speed). Rows hold no reference
    cycles; the collector runs again as usual afterwards.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _fast_insert(model, columns: list[str], rows: list[tuple], *, batch_rows: int) -> int:
    now = timezone.now()
    fields = {f.name: f for f in model._meta.concrete_fields}
    per_row = [fields[name] for name in columns]
    constant_fields, constant_values = [], []
    for field in model._meta.concrete_fields:
        if field.primary_key or field.name in columns or field.has_db_default():
            continue
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            value = now
        else:
            value = field.get_default()
        constant_fields.append(field)
        constant_values.append(field.get_db_prep_save(value, connection))
    quote = connection.ops.quote_name
    names = ", ".join(quote(f.column) for f in per_row + constant_fields)
    width = len(per_row) + len(constant_fields)
    max_params = 30_000  # below SQLite's 32,766 bound-parameter limit
    step = max(1, min(batch_rows, max_params // width))
    connection.ensure_connection()
    constant = tuple(constant_values)
    if connection.vendor == "postgresql":
        return _copy(model._meta.db_table, names, rows, constant)
    # The backend's own cursor: with DEBUG on, Django's debug cursor would render every
    # 500-row statement into connection.queries, which costs more than the insert itself.
    with connection.wrap_database_errors:
        cursor = connection.create_cursor()
        try:
            for start in range(0, len(rows), step):
                chunk = rows[start:start + step]
                placeholders = ", ".join(["(" + ", ".join(["%s"] * width) + ")"] * len(chunk))
                params = [value for row in chunk for value in (*row, *constant)]
                cursor.execute(f"INSERT INTO {quote(model._meta.db_table)} ({names}) VALUES {placeholders}", params)
        finally:
            cursor.close()
    return len(rows)


# COPY text format: these characters in a value must be backslash-escaped (PostgreSQL docs, COPY).
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})
_COPY_CHUNK = 20_000  # rows per write: the server parses one chunk while the next is formatted


def _copy(table: str, names: str, rows: list[tuple], constant: tuple) -> int:
    """``COPY table (names) FROM STDIN`` of ``rows``, each followed by the ``constant`` values.

    The text stream is built here rather than by psycopg's ``write_row``, which formats every
    value of every row (4 µs per Rating row, a json.dumps for each of its 4 JSON columns): a
    column's distinct values are formatted once, rows are joined from those strings, and chunks
    are sent while the next one is built (the server parses in parallel).
    """
    suffix = "".join("\t" + _copy_field(value) for value in constant) + "\n"
    caches: list[dict] = [{} for _ in rows[0]] if rows else []
    statement = f"COPY {connection.ops.quote_name(table)} ({names}) FROM STDIN"
    with connection.wrap_database_errors, connection.connection.cursor() as cursor:
        with cursor.copy(statement) as copy:
            for start in range(0, len(rows), _COPY_CHUNK):
                chunk = rows[start:start + _COPY_CHUNK]
                columns = [_copy_column(column, cache) for column, cache in zip(zip(*chunk), caches)]
                copy.write("".join(["\t".join(line) + suffix for line in zip(*columns)]))
    return len(rows)


def _copy_column(values: tuple, cache: dict) -> list[str]:
    """COPY text of each value; ``cache`` (kept across chunks) formats each distinct value once."""
    kinds = set(map(type, values))
    if kinds == {int}:  # ids (type(True) is bool, not int)
        return list(map(str, values))
    if len(kinds - {type(None)}) == 1:  # one type: equal values have equal text (1 == 1.0 == True)
        try:
            for value in dict.fromkeys(values):
                if value not in cache:
                    cache[value] = _copy_field(value)
            return [cache[value] for value in values]
        except TypeError:  # unhashable values (a plain dict or list)
            pass
    return [_copy_field(value) for value in values]


def _copy_field(value) -> str:
    """One value in COPY text format: ``\\N`` for NULL, escaped text otherwise."""

    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return float.__repr__(value)  # shortest round-trip text (numpy floats too); float8 reads nan, inf
    if isinstance(value, (Json, Jsonb)):  # a JSONField value as Django prepares it for psycopg
        value = (value.dumps or json.dumps)(value.obj)
    return str(value).translate(_COPY_ESCAPES)


def epoch_microseconds(model, name: str) -> RawSQL:
    """PostgreSQL: the datetime column ``name`` of ``model`` as integer microseconds since the epoch.

    Reading 1.6M datetimes through psycopg's converter was half the time of writing 806K votes
    in a release (``bench.release_scale --profile``: write 161–187 s before, 69 s after, README/
    bench/README.md); tests/analysis/test_sql.py compares it with the ORM's datetimes."""
    quote = connection.ops.quote_name
    return RawSQL(f"(EXTRACT(EPOCH FROM {quote(model._meta.db_table)}.{quote(name)}) * 1000000)::bigint", [],
                  output_field=BigIntegerField())
