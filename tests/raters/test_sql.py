"""raters.sql against the ORM path it replaces (CI runs it on PostgreSQL)."""

import pytest
from django.db.models import F

from raters import sql
from raters.models import QualityRulesSchedule
from tests.factories import make_study

pytestmark = pytest.mark.django_db


def test_the_schedule_count_is_the_orm_s_update_and_read():
    fast, orm = make_study(), make_study()
    for study in (fast, orm):
        QualityRulesSchedule.objects.create(study=study, ratings_since_run=5)
    QualityRulesSchedule.objects.filter(study=orm).update(ratings_since_run=F("ratings_since_run") + 3)
    assert sql.schedule_count(fast.pk, 3) == QualityRulesSchedule.objects.get(study=orm).ratings_since_run == 8
    assert QualityRulesSchedule.objects.get(study=fast).ratings_since_run == 8
    assert sql.schedule_count(make_study().pk) is None  # no row: nothing counted
