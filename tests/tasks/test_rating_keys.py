"""The database keeps a rating on a unit of its own study: one composite key per unit kind
(``rating_item_of_study``, ``rating_comparison_of_study``), checked at commit like Django's keys.

``connection.check_constraints`` checks deferred keys now (PostgreSQL: SET CONSTRAINTS ALL
IMMEDIATE; SQLite: PRAGMA foreign_key_check), as a commit would.
"""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction

from analysis.sql import fast_insert
from raters.models import Rater
from tasks.models import Item, Rating, Study
from tests.factories import make_comparison, make_item, make_rater, make_study

pytestmark = pytest.mark.django_db

VALUES = {"SC": 1.0, "PQ": 0.5}


def assert_the_database_refuses(write):
    with pytest.raises(IntegrityError):
        with transaction.atomic():
            write()
            connection.check_constraints(table_names=["tasks_rating"])


def test_a_rating_on_an_item_of_another_study_is_refused_by_the_database():
    item, other_study = make_item(with_image=False), make_study()
    rater = make_rater()
    assert_the_database_refuses(lambda: Rating.objects.create(study=other_study, rater=rater, item=item, values=VALUES))
    # the importers' writer (COPY on PostgreSQL) goes through the same key
    assert_the_database_refuses(lambda: fast_insert(
        Rating, ["study", "rater", "item", "values"], [(other_study.id, rater.id, item.id, '{"SC": 1.0}')]))
    assert not Rating.objects.exists()


def test_a_rating_on_an_item_that_does_not_exist_is_refused():
    study, rater = make_study(), make_rater()
    assert_the_database_refuses(lambda: Rating.objects.create(study=study, rater=rater, item_id=10**9, values=VALUES))


def test_a_pairwise_rating_on_a_comparison_of_another_study_is_refused():
    comparison = make_comparison(make_study(protocol="pairwise", task_type="text_to_image"))
    other_study, rater = make_study(protocol="pairwise", task_type="text_to_image"), make_rater()
    assert_the_database_refuses(lambda: Rating.objects.create(
        study=other_study, rater=rater, comparison=comparison, values={"preference": "A"}))
    Rating.objects.create(study=comparison.study, rater=rater, comparison=comparison, values={"preference": "A"})
    connection.check_constraints(table_names=["tasks_rating"])


def test_moving_an_item_to_another_study_under_its_ratings_is_refused():
    item = make_item(with_image=False)
    Rating.objects.create(study=item.study, rater=make_rater(), item=item, values=VALUES)
    with pytest.raises(IntegrityError):
        with transaction.atomic():
            Item.objects.filter(pk=item.pk).update(study=make_study())
            connection.check_constraints(table_names=["tasks_rating", "tasks_item"])


def test_deleting_an_item_without_the_orm_is_refused_while_it_has_ratings():
    item = make_item(with_image=False)
    Rating.objects.create(study=item.study, rater=make_rater(), item=item, values=VALUES)
    with pytest.raises(IntegrityError):
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"DELETE FROM {Item._meta.db_table} WHERE id = %s", [item.pk])
            connection.check_constraints(table_names=["tasks_rating", "tasks_item"])


@pytest.mark.parametrize("owner", ["item", "study", "rater"])
def test_deleting_an_item_a_study_or_a_rater_deletes_their_ratings(owner):
    item = make_item(with_image=False)
    kept = make_item(with_image=False)
    rater = make_rater()
    Rating.objects.create(study=item.study, rater=rater, item=item, values=VALUES)
    other = Rating.objects.create(study=kept.study, rater=make_rater(), item=kept, values=VALUES)
    {"item": item, "study": item.study, "rater": rater}[owner].delete()
    connection.check_constraints(table_names=["tasks_rating"])
    assert list(Rating.objects.all()) == [other]
    assert Item.objects.filter(pk=kept.pk).exists() and Study.objects.filter(pk=kept.study_id).exists()
    assert Rater.objects.filter(pk=other.rater_id).exists()


def test_model_validation_names_the_study_mismatch():
    item, other_study = make_item(with_image=False), make_study()
    rating = Rating(study=other_study, rater=make_rater(), item=item, values=VALUES)
    with pytest.raises(ValidationError, match="The item does not belong to the rating's study"):
        rating.validate_constraints()
    rating.study = item.study
    rating.validate_constraints()


def test_the_bulk_writer_leaves_database_defaults_to_the_database():
    item = make_item(with_image=False)
    row = (item.study_id, make_rater().id, item.id, '{"SC": 1.0}')
    assert fast_insert(Rating, ["study", "rater", "item", "values"], [row]) == 1
    rating = Rating.objects.get()
    assert (rating.answers, rating.checklist, rating.presentation) == ({}, {}, {})
    assert rating.source == Rating.Source.UI
    assert rating.created_at is not None and rating.updated_at == rating.created_at
