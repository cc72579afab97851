"""Deleting an EvalMi-scale study: 806,400 ratings, each with a revision and an assignment.

    .venv/bin/python -m bench.study_delete

Loads the synthetic EvalMi study (bench.evalmi_scale, as bench.import_speed), gives every rating a
revision and a done assignment (INSERT … SELECT, not timed), adds a small second study, then
times what the admin does: the confirmation page's counts (``study_delete_counts``) and the
delete (``study_delete``), committed. Checks that nothing of the study is left and the small
study is untouched. Django's own ``study.delete()`` fails here (more than 65,535 parameters in
one statement; tests/tasks/test_study_delete.py shows it at 67,200 ratings).
"""

from __future__ import annotations

import os

from bench.common import NOISE_NOTE, Timer, django_setup, scratch_database
from bench.import_speed import load


def _fill(study) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO tasks_ratingrevision (rating_id, values, answers, checklist, replaced_at) "
                       "SELECT id, values, '{}', '{}', now() FROM tasks_rating WHERE study_id = %s", [study.pk])
        cursor.execute("INSERT INTO tasks_assignment (study_id, rater_id, item_id, state, position, slot, presentation,"
                       " created_at) SELECT study_id, rater_id, item_id, 'done', 0, 0, '{}', now() FROM tasks_rating"
                       " WHERE study_id = %s", [study.pk])
        cursor.execute("VACUUM ANALYZE") if connection.in_atomic_block is False else None


def _small_study():
    from raters.models import Rater
    from tasks.models import GenModel, Instance, Item, Rating, RatingRevision, Study

    study = Study.objects.create(slug="small", title="small", protocol="evalmi", task_type="overall")
    item = Item.objects.create(study=study, instance=Instance.objects.create(study=study, key="k"),
                               gen_model=GenModel.objects.create(study=study, name="M"))
    rating = Rating.objects.create(study=study, rater=Rater.objects.first(), item=item, values={"perception": 3})
    RatingRevision.objects.create(rating=rating, values={"perception": 2})
    return study


def main() -> int:
    with scratch_database() as url:
        django_setup(url)
        from tasks.models import Assignment, Item, Rating, RatingRevision, Study
        from analysis.study_deletion import study_delete, study_delete_counts

        study, rows, _, _ = load()
        _fill(study)
        small = _small_study()
        kept = (Rating.objects.filter(study=small).count(), RatingRevision.objects.filter(rating__study=small).count())
        with Timer() as counting:
            counts = study_delete_counts(studies=[study])
        print("confirmation page: " + ", ".join(f"{n:,} {m._meta.verbose_name_plural}" for m, n in counts.items()))
        with Timer() as deleting:
            deleted = study_delete(study=study)
        assert {m: n for m, n in deleted.items()} == counts, (deleted, counts)
        assert not Study.objects.filter(pk=study.pk).exists()
        assert not Item.objects.filter(study_id=study.pk).exists()
        assert not Assignment.objects.filter(study_id=study.pk).exists()
        assert Rating.objects.count() == kept[0] and RatingRevision.objects.count() == kept[1]
        print(f"{len(rows):,} ratings, {deleted[RatingRevision]:,} revisions, {deleted[Assignment]:,} assignments, "
              f"{deleted[Item]:,} items")
        print(f"counts for the confirmation page: {counting.seconds:.2f} s")
        print(f"study_delete (committed): {deleting.seconds:.2f} s")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(NOISE_NOTE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
