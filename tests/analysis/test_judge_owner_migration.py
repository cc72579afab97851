"""Upgrading to owned judges: a researcher's existing judge stays theirs, not everyone's."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BEFORE = [("analysis", "0004_judge_owner")]
AFTER = [("analysis", "0005_judge_owner_from_runs")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    # The study model as the database has it (tasks at its newest: no tasks migration needs these),
    # else rows made through the historical model miss columns added since (NOT NULL ones fail).
    targets = targets + [node for node in executor.loader.graph.leaf_nodes() if node[0] == "tasks"]
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def test_a_judge_run_only_on_one_researchers_studies_becomes_theirs_and_a_judge_used_by_two_stays_shared():
    apps = _migrate(BEFORE)
    User, Study = apps.get_model("auth", "User"), apps.get_model("tasks", "Study")
    Judge, JudgeRun = apps.get_model("analysis", "Judge"), apps.get_model("analysis", "JudgeRun")
    alice, bob = User.objects.create(username="alice"), User.objects.create(username="bob")
    studies = {}
    for slug, owner in (("a1", alice), ("a2", alice), ("b1", bob)):
        studies[slug] = Study.objects.create(slug=slug, title=slug, protocol="imagenhub", task_type="text_to_image")
        studies[slug].owners.add(owner)
    alices = Judge.objects.create(name="Alice's judge", kind="viescore")
    both = Judge.objects.create(name="Used by both", kind="viescore")
    unused = Judge.objects.create(name="Never run", kind="viescore")
    for judge, slug in ((alices, "a1"), (alices, "a2"), (both, "a1"), (both, "b1")):
        JudgeRun.objects.create(judge=judge, study=studies[slug], config_hash="x")
    try:
        apps = _migrate(AFTER)
        Judge = apps.get_model("analysis", "Judge")
        assert Judge.objects.get(pk=alices.pk).owner_id == alice.pk
        assert Judge.objects.get(pk=both.pk).owner_id is None
        assert Judge.objects.get(pk=unused.pk).owner_id is None
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
