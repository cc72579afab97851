"""Deleting a study (``analysis.study_deletion.study_delete``): everything that belongs to it goes,
nothing else does, and the work does not grow with the study's size.

Django's ``study.delete()`` collects related rows in Python and deletes the ratings' revisions with
one ``IN (…)`` list of every rating id, which PostgreSQL refuses beyond 65,535 parameters.
"""

import json
import re
import time

import pytest
from django.apps import apps
from django.contrib.admin.utils import NestedObjects
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from analysis.sql import fast_insert
from analysis.models import Judge, JudgeRun, JudgeScore, JudgeVerdict
from raters.models import (
    AttentionResult,
    QualificationAnswer,
    QualificationAttempt,
    QualityPolicy,
    QualityRulesSchedule,
    Rater,
    RaterAction,
    RaterStanding,
)
from analysis import study_deletion
from tasks import study_services
from tasks.models import (
    Assignment,
    Comparison,
    ComparisonGold,
    ConditionImage,
    GenModel,
    Instance,
    Item,
    Participation,
    Rating,
    RatingRevision,
    StoredImage,
    Study,
)
from analysis.study_deletion import study_delete, study_delete_counts
from tests.factories import (
    make_attention_check,
    make_comparison,
    make_gold,
    make_instance,
    make_item,
    make_rater,
    make_study,
    make_user,
)

pytestmark = pytest.mark.django_db


def _populate(study: Study, raters: list[Rater], judge: Judge, *, shared_image: StoredImage) -> None:
    """One or two rows of every kind a study can own: its design, gold, checks, raters' work, judges."""
    study.owners.add(make_user())
    items = [make_item(study, model=f"M{i % 2}") for i in range(3)]
    ConditionImage.objects.create(instance=items[0].instance, role="source", image=shared_image)
    Item.objects.filter(pk=items[1].pk).update(image=shared_image)
    comparison = make_comparison(study)
    ComparisonGold.objects.create(comparison=comparison, preference="A")
    make_gold(items[0])
    check = make_attention_check(items[2])
    policy = QualityPolicy.objects.create(study=study, qualification_required=True)
    policy.qualification_items.add(items[0])
    QualityRulesSchedule.objects.create(study=study, ratings_since_run=3)
    run = JudgeRun.objects.create(judge=judge, study=study, state="done")
    JudgeScore.objects.create(run=run, item=items[0], dimension="SC", value=0.5)
    JudgeVerdict.objects.create(run=run, comparison=comparison, first="A", second="A", final="A")
    for rater in raters:
        Participation.objects.create(study=study, rater=rater, seed=1)
        RaterStanding.objects.create(study=study, rater=rater, state="approved")
        RaterAction.objects.create(study=study, rater=rater, decision="approve", reason="fine")
        attempt = QualificationAttempt.objects.create(study=study, rater=rater, items=[items[0].pk], passed=True)
        QualificationAnswer.objects.create(attempt=attempt, item=items[0], values={"SC": 1.0}, correct=True)
        AttentionResult.objects.create(attention_check=check, rater=rater, passed=True, values={"SC": 0.5})
        for item in items:
            Assignment.objects.create(study=study, rater=rater, item=item, state="done")
            rating = Rating.objects.create(study=study, rater=rater, item=item, values={"SC": 1.0, "PQ": 0.5})
            RatingRevision.objects.create(rating=rating, values={"SC": 0.0, "PQ": 0.5})
        Assignment.objects.create(study=study, rater=rater, comparison=comparison, state="done")
        rating = Rating.objects.create(study=study, rater=rater, comparison=comparison, values={"preference": "B"})
        RatingRevision.objects.create(rating=rating, values={"preference": "A"})


def _every_row() -> set[tuple[str, object]]:
    """(model, pk) of every row of every table the project and Django keep, M2M tables included."""
    return {
        (model._meta.label, pk)
        for model in apps.get_models(include_auto_created=True)
        for pk in model._default_manager.values_list("pk", flat=True)
    }


def _django_would_delete(study: Study) -> set[tuple[str, object]]:
    """What Django's own cascade (the admin's collector) finds for the study: the reference."""
    collector = NestedObjects(using="default")
    collector.collect([study])
    return {(model._meta.label, obj.pk) for model, objs in collector.model_objs.items() for obj in objs}


@pytest.fixture
def two_studies():
    raters = [make_rater(), make_rater(platform="prolific", external_id="P1")]
    judge = Judge.objects.create(name="VIEScore test", kind="viescore")
    shared_image = make_item(with_image=True).image  # an image of a third study, reused by both
    study, other = make_study(state=Study.State.CLOSED), make_study(state=Study.State.CLOSED)
    _populate(study, raters, judge, shared_image=shared_image)
    _populate(other, raters, judge, shared_image=shared_image)
    # the other study's policy tests with one of this study's items, and the other way round
    QualityPolicy.objects.get(study=other).qualification_items.add(study.items.first())
    QualityPolicy.objects.get(study=study).qualification_items.add(other.items.first())
    return study, other


def test_deleting_a_study_deletes_exactly_what_djangos_cascade_would(two_studies):
    study, other = two_studies
    expected = _django_would_delete(study)
    counts_before = study_delete_counts(studies=[study])
    before = _every_row()

    deleted = study_delete(study=study)

    assert before - _every_row() == expected
    assert _every_row() == before - expected
    by_model = {}
    for label, _ in expected:
        by_model[label] = by_model.get(label, 0) + 1
    assert {model._meta.label: n for model, n in deleted.items()} == by_model
    assert {model._meta.label: n for model, n in counts_before.items()} == by_model
    # every kind of row was there to delete
    assert {"tasks.RatingRevision", "tasks.ComparisonGold", "raters.AttentionResult", "raters.QualificationAnswer",
            "analysis.JudgeVerdict", "raters.QualityPolicy_qualification_items", "tasks.Study_owners"} <= set(by_model)
    connection.check_constraints()  # nothing left pointing at a deleted row (as a commit would check)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite cannot make deferred keys immediate")
def test_the_delete_goes_children_first_so_it_needs_no_deferred_keys(two_studies):
    """Every key is checked at once, statement by statement: a parent deleted before its children fails."""
    study, _ = two_studies
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    study_delete(study=study)
    assert not Study.objects.filter(pk=study.pk).exists()


def test_no_row_refers_to_a_deleted_study_and_the_other_studys_rows_raters_and_images_stay(two_studies):
    study, other = two_studies

    def other_rows():
        return {
            "items": set(other.items.values_list("pk", flat=True)),
            "ratings": set(other.ratings.values_list("pk", flat=True)),
            "revisions": set(RatingRevision.objects.filter(rating__study=other).values_list("pk", flat=True)),
            "assignments": set(other.assignments.values_list("pk", flat=True)),
            "policy items": set(QualityPolicy.objects.get(study=other).qualification_items.values_list("pk",
                                                                                                        flat=True)),
        }

    before, deleted_items = other_rows(), set(study.items.values_list("pk", flat=True))
    assert before["policy items"] & deleted_items
    raters, images, judges = Rater.objects.count(), StoredImage.objects.count(), Judge.objects.count()

    study_delete(study=study)

    assert not Study.objects.filter(pk=study.pk).exists()
    for model in (GenModel, Instance, Item, Comparison, Assignment, Participation, Rating, JudgeRun, QualityPolicy,
                  QualityRulesSchedule, RaterStanding, RaterAction, QualificationAttempt):
        assert not model.objects.filter(study_id=study.pk).exists(), model
    assert not RatingRevision.objects.exclude(rating__in=Rating.objects.all()).exists()
    # the deleted study's item left the other study's qualification test; nothing else of it changed
    assert other_rows() == {**before, "policy items": before["policy items"] - deleted_items}
    assert (Rater.objects.count(), StoredImage.objects.count(), Judge.objects.count()) == (raters, images, judges)


def test_rows_of_another_study_hung_on_the_deleted_ones_go_as_djangos_cascade_takes_them(two_studies):
    """Mismatches nothing in the project creates (the admin could): an item of another study built
    on this study's instance, a comparison of another study between this study's items, an
    assignment and a judge score of another study on this study's item. Django's cascade follows
    foreign keys, not ``study``; so does study_delete, or the database would refuse the commit."""
    study, other = two_studies
    instance = study.instances.first()
    stray_item = Item.objects.create(study=other, instance=instance, gen_model=other.gen_models.first())
    Rating.objects.create(study=other, rater=make_rater(), item=stray_item, values={"SC": 1.0})
    a, b = study.items.all()[:2]
    stray_comparison = Comparison.objects.create(study=other, item_a=a, item_b=b)
    Rating.objects.create(study=other, rater=make_rater(), comparison=stray_comparison, values={"preference": "A"})
    Assignment.objects.create(study=other, rater=make_rater(), item=a)
    JudgeScore.objects.create(run=JudgeRun.objects.get(study=other), item=a, dimension="PQ", value=1.0)
    expected = _django_would_delete(study)
    before = _every_row()

    study_delete(study=study)

    assert before - _every_row() == expected
    assert ("tasks.Item", stray_item.pk) in expected and ("tasks.Comparison", stray_comparison.pk) in expected
    connection.check_constraints()


def test_every_foreign_key_into_a_study_is_followed_by_the_delete():
    """A model added later with a key to a study, an item, a rating… must be added to the delete,
    or its rows would be left behind (or, with a database key, make the delete fail)."""
    planned = {(step.model, fk) for step in study_deletion._delete_steps([0]) for fk in step.follows}
    planned_models = {model for model, _ in planned} | {Study}
    seen, todo, unplanned = set(), [Study], []
    while todo:
        model = todo.pop()
        for relation in model._meta.get_fields(include_hidden=True):
            if not (relation.auto_created and not relation.concrete and (relation.one_to_many or relation.one_to_one)):
                continue
            child, fk = relation.related_model, relation.field.name
            if (child, fk) not in planned:
                unplanned.append(f"{child._meta.label}.{fk} → {model._meta.label} ({relation.on_delete.__name__})")
            if child not in seen:
                seen.add(child)
                todo.append(child)
    assert unplanned == []
    assert seen | {Study} == planned_models


def _study_with_ratings(n_raters: int, n_items: int = 10) -> Study:
    study = make_study(state=Study.State.CLOSED)
    instance = make_instance(study)
    models = [GenModel.objects.create(study=study, name=f"M{i}") for i in range(n_items)]
    items = [Item.objects.create(study=study, instance=instance, gen_model=m) for m in models]
    raters = [make_rater(platform="import", external_id=f"r{study.pk}-{i}") for i in range(n_raters)]
    fast_insert(Rating, ["study", "rater", "item", "values"],
                [(study.pk, r.pk, i.pk, '{"SC": 1.0}') for r in raters for i in items])
    fast_insert(RatingRevision, ["rating", "values"],
                [(pk, '{"SC": 0.0}') for pk in study.ratings.values_list("pk", flat=True)])
    fast_insert(Assignment, ["study", "rater", "item", "state"],
                [(study.pk, r.pk, i.pk, "done") for r in raters for i in items])
    return study


def _statements(ctx) -> list[str]:
    return [q["sql"] for q in ctx.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]


def test_the_statements_of_a_delete_do_not_depend_on_the_studys_size():
    small, large = _study_with_ratings(1), _study_with_ratings(20)
    assert (small.ratings.count(), large.ratings.count()) == (10, 200)
    with CaptureQueriesContext(connection) as small_counts:
        study_delete_counts(studies=[small])
    with CaptureQueriesContext(connection) as large_counts:
        study_delete_counts(studies=[large])
    with CaptureQueriesContext(connection) as small_delete:
        study_delete(study=small)
    with CaptureQueriesContext(connection) as large_delete:
        study_delete(study=large)
    assert len(_statements(small_counts)) == len(_statements(large_counts))
    assert len(_statements(small_delete)) == len(_statements(large_delete))
    # no statement carries the rows' ids: the same SQL and parameters up to the study's id
    strip = lambda ctx, study: [re.sub(rf"\b{study.pk}\b", "ID", sql) for sql in _statements(ctx)]  # noqa: E731
    assert strip(small_delete, small) == strip(large_delete, large)
    assert not Rating.objects.exists() and not RatingRevision.objects.exists() and not Assignment.objects.exists()


@pytest.mark.skipif(connection.vendor != "postgresql",
                    reason="PostgreSQL's limit of 65,535 parameters per statement; SQLite has other limits")
def test_a_study_with_more_ratings_than_postgresql_takes_parameters_is_deleted():
    study = make_study(protocol="evalmi", task_type="overall", state=Study.State.CLOSED)
    instance = make_instance(study)
    n_items, n_raters = 1_400, 48  # 67,200 ratings, each with a revision
    fast_insert(GenModel, ["study", "name"], [(study.pk, f"M{i}") for i in range(n_items)])
    fast_insert(Item, ["study", "instance", "gen_model"],
                [(study.pk, instance.pk, m) for m in study.gen_models.values_list("pk", flat=True)])
    fast_insert(Rater, ["platform", "external_id", "state"],
                [("import", f"big-{i}", "active") for i in range(n_raters)])
    raters = list(Rater.objects.filter(external_id__startswith="big-").values_list("pk", flat=True))
    items = list(study.items.values_list("pk", flat=True))
    value = json.dumps({"perception": 3, "correspondence": 4})
    fast_insert(Rating, ["study", "rater", "item", "values"], [(study.pk, r, i, value) for r in raters for i in items])
    fast_insert(RatingRevision, ["rating", "values"],
                [(pk, value) for pk in study.ratings.values_list("pk", flat=True)])
    assert RatingRevision.objects.count() == n_items * n_raters > 65_535

    started = time.perf_counter()
    deleted = study_delete(study=study)
    elapsed = time.perf_counter() - started

    assert deleted[Rating] == deleted[RatingRevision] == n_items * n_raters
    assert not Rating.objects.exists() and not RatingRevision.objects.exists() and not Item.objects.exists()
    assert Rater.objects.filter(pk__in=raters).count() == n_raters
    connection.check_constraints()
    assert elapsed < 10, f"{elapsed:.1f} s for {n_items * n_raters:,} ratings"


# ---------------------------------------------------------------- the admin

@pytest.fixture
def admin_client(client):
    client.force_login(make_user("admin", is_staff=True, is_superuser=True))
    return client


def _spy_on_the_service(monkeypatch) -> list[Study]:
    calls = []

    def spy(*, study):
        calls.append(study.pk)
        return study_delete(study=study)

    monkeypatch.setattr("analysis.admin.study_delete", spy)
    return calls


def test_the_admins_delete_page_shows_counts_and_deletes_through_the_service(admin_client, monkeypatch):
    study = _study_with_ratings(3)
    calls = _spy_on_the_service(monkeypatch)
    url = reverse("admin:tasks_study_delete", args=[study.pk])

    page = admin_client.get(url).content.decode()

    assert "30 ratings" in page and "30 rating revisions" in page and "10 items" in page
    assert "Rating object" not in page  # not one line per rating
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert calls == [study.pk]
    assert not Study.objects.filter(pk=study.pk).exists() and not Rating.objects.exists()


def test_the_admins_delete_selected_action_shows_counts_and_deletes_through_the_service(admin_client, monkeypatch):
    first, second, kept = _study_with_ratings(1), _study_with_ratings(2), _study_with_ratings(1)
    calls = _spy_on_the_service(monkeypatch)
    changelist = reverse("admin:tasks_study_changelist")
    selected = {"action": "delete_selected", "_selected_action": [str(first.pk), str(second.pk)]}

    page = admin_client.post(changelist, selected).content.decode()

    assert "30 ratings" in page and first.slug in page and second.slug in page
    assert admin_client.post(changelist, {**selected, "post": "yes"}).status_code == 302
    assert sorted(calls) == sorted([first.pk, second.pk])
    assert list(Study.objects.values_list("pk", flat=True)) == [kept.pk]
    assert Rating.objects.filter(study=kept).count() == 10 and Rating.objects.count() == 10


def test_a_staff_member_who_may_delete_studies_but_not_ratings_is_refused(client):
    user = make_user(is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_study", "delete_study"]))
    client.force_login(user)
    study = _study_with_ratings(1)
    url = reverse("admin:tasks_study_delete", args=[study.pk])

    page = client.get(url).content.decode()

    assert "would require deleting the following protected related objects" not in page
    assert "rating" in page and "your account doesn't have permission to delete" in page
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert Study.objects.filter(pk=study.pk).exists() and study.ratings.count() == 10


@pytest.mark.parametrize("why", ["open", "judge run"])
def test_an_open_study_or_one_with_a_judge_run_under_way_is_not_deleted(admin_client, why):
    """Raters could be rating an open study, and a running judge would fail on missing rows: the
    service refuses with the reason, and the admin's page shows it and deletes nothing."""
    study = _study_with_ratings(2)
    if why == "open":
        Study.objects.filter(pk=study.pk).update(state=Study.State.OPEN)
        message = "is open for rating: close it before deleting it"
    else:
        JudgeRun.objects.create(judge=Judge.objects.create(name="slow", kind="viescore"), study=study,
                                state=JudgeRun.State.RUNNING)
        message = "has 1 judge run under way"
    study.refresh_from_db()
    with pytest.raises(study_services.StudyActionRefused, match=message):
        study_delete(study=study)
    url = reverse("admin:tasks_study_delete", args=[study.pk])
    page = admin_client.get(url).content.decode()
    assert message in page and "cannot be deleted now" in page and "protected related objects" not in page
    admin_client.post(url, {"post": "yes"})
    selected = {"action": "delete_selected", "_selected_action": [str(study.pk)]}
    page = admin_client.post(reverse("admin:tasks_study_changelist"), selected).content.decode()
    assert message in page and "nothing was deleted" in page
    admin_client.post(reverse("admin:tasks_study_changelist"), {**selected, "post": "yes"})
    assert Study.objects.filter(pk=study.pk).exists() and Rating.objects.filter(study=study).count() == 20
