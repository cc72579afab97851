"""Assignment engine at EvalMi scale: the per-request work once a study holds ~800K assignments.

    .venv/bin/python -m bench.assignment_scale

Builds the 50,400-item EvalMi study (bench.evalmi_scale), fills it with 806,400 done assignments
(16 raters per item, written with one INSERT … SELECT), then times what every rating request
ran on every rating request until the sweep moved to claim time: ``assignments_expire``
(stale-lease sweep over the study, now run when work is claimed) and ``assignment_next`` for a
rater with a live session, against the same calls on a fresh 2,000-item study: first without the
tasks app's partial index ``assignment_leased_expiry`` (dropped in the scratch database), then with
it (migration tasks 0003). The rating loop benchmark uses a small study; this shows how the cost
grows with the study.
"""

from __future__ import annotations

import sys
import time

from bench.common import NOISE_NOTE, django_setup, scratch_database


def timed(call, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    with scratch_database() as url:
        django_setup(url)
        from django.db import connection, connections

        from bench import evalmi_scale
        from raters.models import Rater
        from tasks.assignment import assignment_next, assignments_expire
        from tasks.models import Assignment, Study

        mos = evalmi_scale.read_mos()
        study, _ = evalmi_scale.build_study(mos)
        Study.objects.filter(pk=study.pk).update(state=Study.State.OPEN, raters_per_item=17, units_per_session=10,
                                                 settings={"images_per_trial": 1})
        study.refresh_from_db()
        raters = [Rater.objects.create(platform=Rater.Platform.IMPORT, external_id=f"scale{i}") for i in range(16)]
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX assignment_leased_expiry")  # measured without it first, restored below
            cursor.execute(
                """INSERT INTO tasks_assignment (study_id, rater_id, item_id, state, position, slot, presentation,
                                                 created_at, completed_at)
                   SELECT i.study_id, r.id, i.id, 'done', i.id, 0, '{}'::jsonb, now(), now()
                   FROM tasks_item i CROSS JOIN raters_rater r
                   WHERE i.study_id = %s AND r.external_id LIKE 'scale%%'""",
                [study.pk],
            )
            cursor.execute("UPDATE tasks_item SET claims = 16 WHERE study_id = %s", [study.pk])
            cursor.execute("ANALYZE tasks_assignment")
        total = Assignment.objects.filter(study=study).count()
        newcomer = Rater.objects.create(platform=Rater.Platform.IMPORT, external_id="newcomer")
        first = time.perf_counter()
        assignment_next(rater=newcomer, study=study)  # claims a session: reads the open pool
        claim = time.perf_counter() - first
        big_expire = timed(lambda: assignments_expire(study=study))
        big_next = timed(lambda: assignment_next(rater=newcomer, study=study))

        from bench.rating_loop import SLUG, build_study

        build_study(2000)
        small = Study.objects.get(slug=SLUG)
        small_rater = Rater.objects.create(platform=Rater.Platform.IMPORT, external_id="small")
        assignment_next(rater=small_rater, study=small)
        small_expire = timed(lambda: assignments_expire(study=small))
        small_next = timed(lambda: assignment_next(rater=small_rater, study=small))
        with connection.cursor() as cursor:
            cursor.execute(
                "EXPLAIN SELECT id FROM tasks_assignment WHERE study_id = %s AND state = 'leased' "
                "AND lease_expires_at < now()", [study.pk])
            plan = " / ".join(row[0].strip() for row in cursor.fetchall()[:2])
            # The tasks app's partial index for the sweep (migration tasks 0003), as the migration creates it.
            cursor.execute("CREATE INDEX assignment_leased_expiry ON tasks_assignment (study_id, lease_expires_at) "
                           "WHERE state = 'leased'")
            cursor.execute("ANALYZE tasks_assignment")
        indexed_expire = timed(lambda: assignments_expire(study=study))
        indexed_next = timed(lambda: assignment_next(rater=newcomer, study=study))
        connections.close_all()
    print(f"EvalMi-scale study: {total:,} assignments; first session claim for a new rater {claim * 1000:.0f} ms")
    print(f"assignments_expire (each claim):    {big_expire * 1000:.1f} ms vs {small_expire * 1000:.1f} ms "
          f"on a 2,000-item study ({big_expire / small_expire:.0f}×)")
    print(f"assignment_next (a session's end):  {big_next * 1000:.1f} ms vs {small_next * 1000:.1f} ms "
          f"({big_next / small_next:.0f}×)")
    print(f"plan of the expiry sweep: {plan}")
    print(f"with the partial index (study_id, lease_expires_at) WHERE state = 'leased' (tasks 0003): "
          f"assignments_expire {indexed_expire * 1000:.1f} ms, assignment_next {indexed_next * 1000:.1f} ms")
    print(NOISE_NOTE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
