"""Judges created before judges had owners: give each the researcher whose studies it ran on.

0004 made every existing judge shared (no owner), so a researcher's own judge would become
runnable by everyone after the upgrade. A judge whose runs all sit on studies with one and the
same single owner becomes that researcher's; the rest (staff's, imports', judges already used on
several researchers' studies) stay shared, which is what they were in practice.
"""

from django.db import migrations


def owners_from_runs(apps, schema_editor):
    Judge = apps.get_model("analysis", "Judge")
    Study = apps.get_model("tasks", "Study")
    for judge in Judge.objects.filter(owner__isnull=True).iterator():
        study_ids = set(judge.runs.values_list("study_id", flat=True))
        if not study_ids:
            continue
        owners = set(Study.owners.through.objects.filter(study_id__in=study_ids).values_list("user_id", flat=True))
        per_study = Study.owners.through.objects.filter(study_id__in=study_ids).values_list("study_id", flat=True)
        if len(owners) == 1 and len(set(per_study)) == len(study_ids):
            judge.owner_id = owners.pop()
            judge.save(update_fields=["owner"])


class Migration(migrations.Migration):
    dependencies = [
        ("analysis", "0004_judge_owner"),
        ("tasks", "0001_initial"),
    ]

    operations = [migrations.RunPython(owners_from_runs, migrations.RunPython.noop)]
