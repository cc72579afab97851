"""The tasks app's hand-written SQL: every statement the ORM could write but too slowly, in one place.

Each statement has an ORM path it replaces or stands beside, a measurement that justifies it
(README/bench/README.md, "SQL statements per request" and "session claim" rows) and a test that
compares the two (tests/tasks/test_sql.py, test_submit_at_once.py, test_assignment.py; CI runs
them on PostgreSQL). The callers (tasks.assignment, tasks.services) execute them; nothing else
here touches the database.

Hand-written joins for the rating pages' hottest statements, read into ordinary model objects:
every screen a rater sees runs the same two statements (who is this rater in this study; which
units are on this screen and where it sits in the queue). Built with the ORM, composing them
costs more Python time than PostgreSQL needs to run them, and the place in the queue takes a
statement of its own. Here their SQL is written once per process from the models' own fields
(so a new field needs no change here) and the rows become model instances exactly as
``select_related`` makes them: the same converters (JSON, dates on SQLite), the same
related-object caches, ``None`` cached for a missing one-to-one (so ``item.gold`` raises
``DoesNotExist`` as usual and reading it never queries). :class:`JoinedRow` is the only code
that sets Django's related-object caches by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import Model

from raters.models import AttentionCheck, QualityPolicy, QualityRulesSchedule, Rater, RaterStanding
from tasks.models import Assignment, GenModel, GoldAnswer, Instance, Item, Participation, Rating, StoredImage, Study


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


# The rater's participation with what every rating request reads: the rater, the study, its
# quality policy, and the rater's standing in the study.
PARTICIPATION = JoinedRow(
    Part(Participation, "p"),
    Part(Rater, "r", parent="p", field="rater"),
    Part(Study, "s", parent="p", field="study"),
    Part(QualityPolicy, "q", parent="s", reverse="study"),
)
_PARTICIPATION_SQL: dict[tuple[str, str], str] = {}

def participation(who: str) -> str:
    """The participation of a rater (``who`` "rater": by rater id) or of a login (``who`` "user":
    by user id, its lowest rater) in the study ``%(slug)s``, with its rater, study, the study's
    quality policy (:data:`PARTICIPATION`) and the rater's standing state, in one statement.
    Measured: the screen's statements went 5 → 3 → 2 per request with it (bench/README.md)."""
    key = (connection.vendor, who)
    if key not in _PARTICIPATION_SQL:
        quote = connection.ops.quote_name
        table = lambda model: quote(model._meta.db_table)  # noqa: E731
        where = "p.rater_id = %(who)s" if who == "rater" else "r.user_id = %(who)s"
        _PARTICIPATION_SQL[key] = (
            f"SELECT {PARTICIPATION.columns()}, (SELECT st.{quote('state')} FROM {table(RaterStanding)} st "
            f"WHERE st.study_id = p.study_id AND st.rater_id = p.rater_id) "
            f"FROM {table(Participation)} p JOIN {table(Rater)} r ON r.id = p.rater_id "
            f"JOIN {table(Study)} s ON s.id = p.study_id LEFT JOIN {table(QualityPolicy)} q ON q.study_id = s.id "
            f"WHERE s.slug = %(slug)s AND {where} ORDER BY p.rater_id LIMIT 1"
        )
    return _PARTICIPATION_SQL[key]


# A screen of items with everything its page and its submit read: the item, its instance, model,
# image, gold answer and attention check (server side; pages never show gold).
ITEM_SCREEN = JoinedRow(
    Part(Assignment, "a"),
    Part(Item, "i", parent="a", field="item"),
    Part(Instance, "n", parent="i", field="instance"),
    Part(GenModel, "g", parent="i", field="gen_model"),
    Part(StoredImage, "m", parent="i", field="image"),
    Part(GoldAnswer, "o", parent="i", reverse="item"),
    Part(AttentionCheck, "c", parent="i", reverse="item"),
)
_ITEM_SCREEN_SQL: dict[tuple[str, bool], str] = {}


def item_screen(place: bool) -> str:
    """One statement: the screen's units (and, with ``place``, where the screen sits among the
    rater's live positions and the following screen's units, for preloading). The ORM needs two
    (an aggregate for the place, a 7-table ``select_related``), and composing them cost more Python
    time than PostgreSQL needs to run them: screen 1.56 ms wall in-process with 2 statements
    (bench/README.md); tests/tasks/test_sql.py compares it with the ORM."""
    key = (connection.vendor, place)
    if key not in _ITEM_SCREEN_SQL:
        quote = connection.ops.quote_name
        table = lambda model: quote(model._meta.db_table)  # noqa: E731
        position, state = quote("position"), quote("state")
        live = f"rater_id = %(rater)s AND study_id = %(study)s AND {state} IN ('leased', 'done')"
        joins = (f"LEFT JOIN {table(Item)} i ON i.id = a.item_id "
                 f"LEFT JOIN {table(Instance)} n ON n.id = i.instance_id "
                 f"LEFT JOIN {table(GenModel)} g ON g.id = i.gen_model_id "
                 f"LEFT JOIN {table(StoredImage)} m ON m.id = i.image_id "
                 f"LEFT JOIN {table(GoldAnswer)} o ON o.item_id = i.id "
                 f"LEFT JOIN {table(AttentionCheck)} c ON c.item_id = i.id ")
        order = f"ORDER BY a.{position}, a.slot"
        if place:
            statement = (f"WITH place AS (SELECT COUNT(DISTINCT {position}) AS total, "
                   f"COUNT(DISTINCT {position}) FILTER (WHERE {position} < %(position)s) AS n_before, "
                   f"MAX({position}) FILTER (WHERE {position} < %(position)s) AS back, "
                   f"MIN({position}) FILTER (WHERE {position} > %(position)s) AS following "
                   f"FROM {table(Assignment)} WHERE {live}) "
                   f"SELECT place.total, place.n_before, place.back, place.following, {ITEM_SCREEN.columns()} "
                   f"FROM place LEFT JOIN {table(Assignment)} a ON a.{live.replace(' AND ', ' AND a.')} "
                   f"AND (a.{position} = %(position)s OR a.{position} = place.following) {joins} {order}")
        else:  # a submit's screen: also the rater's previous submit in the study (bounds time on item)
            previous = (f"(SELECT MAX(r.updated_at) FROM {table(Rating)} r "
                        f"WHERE r.rater_id = %(rater)s AND r.study_id = %(study)s)")
            statement = (f"SELECT {ITEM_SCREEN.columns()}, {previous} FROM {table(Assignment)} a {joins}"
                   f"WHERE a.{live.replace(' AND ', ' AND a.')} AND a.{position} = %(position)s {order}")
        _ITEM_SCREEN_SQL[key] = statement
    return _ITEM_SCREEN_SQL[key]


def take_many(model) -> str:
    """One more claim on each of several units still under the quota (params: pks, quota, quota),
    locking the candidate rows in ascending pk order so concurrent claimers never deadlock, the
    quota rechecked on the locked row. The ORM path is one conditional UPDATE per unit
    (``tasks.assignment._take``, also what SQLite runs). Measured: the first claim of a session
    went 24 → 15 statements (bench/README.md); tests/tasks/test_assignment.py races it on PostgreSQL."""
    table = connection.ops.quote_name(model._meta.db_table)
    return (f"UPDATE {table} SET claims = claims + 1 WHERE id IN ("
            f"SELECT id FROM {table} WHERE id = ANY(%s) AND claims < %s ORDER BY id FOR UPDATE"
            f") AND claims < %s RETURNING id")


_AT_ONCE_SQL: list[str] = []


def submit_at_once() -> str:
    """One statement for a screen's first answers: mark the assignments done (only if all are
    still leased), insert the ratings, count them on the study's rule schedule, and find the
    rater's next leased screen (the statement's snapshot still sees these units as leased, so
    they are left out by id). PostgreSQL only; the ORM path is tasks.services._screen_store.
    Measured: a submit went 9 → 3 statements on PostgreSQL (bench/README.md, "SQL statements per
    request"); tests/tasks/test_submit_at_once.py compares what it stores with the ORM path."""
    if not _AT_ONCE_SQL:
        quote = connection.ops.quote_name
        a, r = quote(Assignment._meta.db_table), quote(Rating._meta.db_table)
        schedule = quote(QualityRulesSchedule._meta.db_table)
        column = lambda name: quote(Rating._meta.get_field(name).column)  # noqa: E731
        state, position = quote("state"), quote("position")
        _AT_ONCE_SQL.append(
            f"WITH done AS (UPDATE {a} SET {state} = 'done', completed_at = %(now)s "
            f"WHERE id = ANY(%(assignments)s) AND rater_id = %(rater)s AND {state} = 'leased' RETURNING id), "
            f"stored AS (INSERT INTO {r} ({column('study')}, {column('rater')}, {column('item')}, {column('values')}, "
            f"{column('answers')}, {column('checklist')}, {column('presentation')}, {column('source')}, "
            f"{column('source_detail')}, {column('time_on_item_ms')}, {column('protocol_version')}, "
            f"{column('created_at')}, {column('updated_at')}) "
            f"SELECT %(study)s, %(rater)s, u.item_id, u.v::jsonb, u.a::jsonb, u.c::jsonb, u.p::jsonb, %(source)s, '', "
            f"u.t, %(version)s, %(now)s, %(now)s "
            f"FROM unnest(%(assignments)s::bigint[], %(items)s::bigint[], %(values)s::text[], "
            f"%(answers)s::text[], %(checklists)s::text[], %(presentations)s::text[], %(times)s::integer[]) "
            f"AS u(assignment_id, item_id, v, a, c, p, t) "
            f"WHERE (SELECT count(*) FROM done) = %(n)s ORDER BY u.assignment_id RETURNING id, {column('item')}), "
            f"counted AS (UPDATE {schedule} SET ratings_since_run = ratings_since_run + %(n)s "
            f"WHERE study_id = %(study)s AND %(count)s AND (SELECT count(*) FROM done) = %(n)s "
            f"RETURNING ratings_since_run) "
            f"SELECT (SELECT count(*) FROM done), (SELECT MIN({position}) FROM {a} WHERE rater_id = %(rater)s "
            f"AND study_id = %(study)s AND {state} = 'leased' AND NOT (id = ANY(%(assignments)s))), "
            f"(SELECT ratings_since_run FROM counted), "
            f"(SELECT array_agg(id ORDER BY id) FROM stored), (SELECT array_agg({column('item')} ORDER BY id) FROM stored)"
        )
    return _AT_ONCE_SQL[0]
