"""The raters app's hand-written SQL: one statement, beside the ORM path it replaces.

Every rating of a study passes through its ``QualityRulesSchedule`` row, so the count is written
once per rating in its own short statement. ``UPDATE … RETURNING`` (PostgreSQL, SQLite ≥ 3.35)
gives the new count with the write; the ORM needs an ``update()`` and a read, one statement more
per rating (the rating flow's statement counts are pinned in tests/tasks/test_rating_query_counts.py).
tests/raters/test_sql.py compares it with the ORM path; CI runs it on PostgreSQL.
"""

from __future__ import annotations

from django.db import connection

from raters.models import QualityRulesSchedule


def schedule_count(study_id: int, ratings: int = 1) -> int | None:
    """Count ``ratings`` on the study's schedule row; the new count, or None when there is no row."""
    table = connection.ops.quote_name(QualityRulesSchedule._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET ratings_since_run = ratings_since_run + %s WHERE study_id = %s RETURNING ratings_since_run",
            [ratings, study_id],
        )
        row = cursor.fetchone()
    return row[0] if row else None
