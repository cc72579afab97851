"""Upgrading to declared rater sampling: ImagenHub whole-set studies (ImagenHub's expert panel, as the
importer creates them) become fixed, so their published intervals stay item-only; the rest sample."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BEFORE = [("tasks", "0012_protocol_version")]
AFTER = [("tasks", "0013_study_rater_sampling")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def test_imagenhub_whole_set_studies_become_fixed_and_every_other_study_stays_sampled():
    apps = _migrate(BEFORE)
    Study = apps.get_model("tasks", "Study")
    rows = [("imported", "imagenhub", "whole_set"), ("crowd", "imagenhub", "balanced"),
            ("evalmi", "evalmi", "whole_set"), ("pairs", "pairwise", "balanced")]
    for slug, protocol, mode in rows:
        Study.objects.create(slug=slug, title=slug, protocol=protocol, task_type="text_guided_editing",
                             assignment_mode=mode)
    try:
        Study = _migrate(AFTER).get_model("tasks", "Study")
        assert dict(Study.objects.values_list("slug", "rater_sampling")) == {
            "imported": "fixed", "crowd": "sampled", "evalmi": "sampled", "pairs": "sampled"}
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
