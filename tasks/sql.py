"""Hand-written joins for the rating pages' hottest statements, read into ordinary model objects.

Every screen a rater sees runs the same two statements (who is this rater in this study; which
units are on this screen and where it sits in the queue). Built with the ORM, composing them
costs more Python time than PostgreSQL needs to run them, and the place in the queue takes a
statement of its own. Here their SQL is written once per process from the models' own fields
(so a new field needs no change here) and the rows become model instances exactly as
``select_related`` makes them: the same converters (JSON, dates on SQLite), the same
related-object caches, ``None`` cached for a missing one-to-one (so ``item.gold`` raises
``DoesNotExist`` as usual and reading it never queries).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import Model


@dataclass(frozen=True)
class Part:
    """One model of a joined row, under SQL alias ``alias``.

    It hangs on the part ``parent`` either through the parent's forward foreign key ``field``
    (``parent.field`` is this object) or through this model's one-to-one ``reverse`` pointing at
    the parent (``parent.<related_name>`` is this object, or None when the join found nothing).
    """

    model: type[Model]
    alias: str
    parent: str | None = None
    field: str | None = None
    reverse: str | None = None


class JoinedRow:
    """The select list and the row reader for a chain of ``Part``s (the first one is the root)."""

    def __init__(self, *parts: Part):
        self.parts = parts
        self._readers: dict[str, list] = {}

    def columns(self) -> str:
        quote = connection.ops.quote_name
        return ", ".join(f"{part.alias}.{quote(field.column)}" for part in self.parts
                         for field in part.model._meta.concrete_fields)

    @property
    def width(self) -> int:
        return sum(len(part.model._meta.concrete_fields) for part in self.parts)

    def _reader(self) -> list:
        """Per part: (attnames, [(index, converters, expression)] for the columns that convert)."""
        vendor = connection.vendor
        if vendor not in self._readers:
            readers = []
            for part in self.parts:
                fields = part.model._meta.concrete_fields
                converting = []
                for index, field in enumerate(fields):
                    expression = field.get_col(part.alias)
                    converters = connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)
                    if converters:
                        converting.append((index, converters, expression))
                readers.append(([field.attname for field in fields], converting))
            self._readers[vendor] = readers
        return self._readers[vendor]

    def read(self, row, start: int = 0) -> dict[str, Model | None]:
        """The objects of one row (from column ``start`` on), linked as select_related links them."""
        objects: dict[str, Model | None] = {}
        at = start
        for part, (attnames, converting) in zip(self.parts, self._reader()):
            values = list(row[at:at + len(attnames)])
            at += len(attnames)
            pk_index = attnames.index(part.model._meta.pk.attname)
            if values[pk_index] is None:  # an outer join that found nothing
                obj = None
            else:
                for index, converters, expression in converting:
                    for converter in converters:
                        values[index] = converter(values[index], expression, connection)
                obj = part.model.from_db(connection.alias, attnames, values)
            objects[part.alias] = obj
            parent = objects.get(part.parent) if part.parent else None
            if parent is None:
                continue
            if part.field:
                field = type(parent)._meta.get_field(part.field)
                field.set_cached_value(parent, obj)
                if obj is not None and field.remote_field.multiple is False:
                    field.remote_field.set_cached_value(obj, parent)
            else:
                field = part.model._meta.get_field(part.reverse)
                field.remote_field.set_cached_value(parent, obj)
                if obj is not None:
                    field.set_cached_value(obj, parent)
        return objects
