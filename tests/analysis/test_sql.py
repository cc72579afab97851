"""analysis.sql against the ORM path it replaces: the bulk writer stores what bulk_create stores,
and the epoch timestamps are the ORM's datetimes. CI runs these on PostgreSQL (COPY)."""

from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection

from analysis.sql import epoch_microseconds, fast_insert
from tasks.models import Rating
from tests.factories import make_item, make_rater, make_study

pytestmark = pytest.mark.django_db

FIELDS = ("values", "answers", "checklist", "presentation", "source", "source_detail", "time_on_item_ms",
          "protocol_version_id")


def test_the_bulk_writer_stores_what_bulk_create_stores():
    study = make_study(protocol="imagenhub")
    items = [make_item(study, model=f"Model{i}", with_image=False) for i in range(3)]
    fast, orm = make_rater(), make_rater()
    values = [{"SC": 1.0, "PQ": 0.5}, {"SC": 0.0, "PQ": 1.0}, {"SC": 0.5, "PQ": 0.5}]
    details = ["C:\\ratings\\file.tsv", "tab\there", "two\nlines\r\nand \\N"]
    prepare = Rating._meta.get_field("values").get_db_prep_save
    rows = [(study.pk, fast.pk, item.pk, prepare(v, connection), "import", d)
            for item, v, d in zip(items, values, details)]
    assert fast_insert(Rating, ["study", "rater", "item", "values", "source", "source_detail"], rows) == 3
    Rating.objects.bulk_create([Rating(study=study, rater=orm, item=item, values=v, source="import", source_detail=d)
                                for item, v, d in zip(items, values, details)])

    def stored(rater):
        return [tuple(getattr(r, f) for f in FIELDS) for r in Rating.objects.filter(rater=rater).order_by("item_id")]

    assert stored(fast) == stored(orm)
    assert all(r.created_at is not None and r.updated_at is not None for r in Rating.objects.filter(rater=fast))


@pytest.mark.skipif(connection.vendor != "postgresql", reason="EXTRACT(EPOCH …) is PostgreSQL's; CI runs it there")
def test_epoch_microseconds_are_the_orm_s_datetimes():
    study = make_study()
    rating = Rating.objects.create(study=study, rater=make_rater(), item=make_item(study, with_image=False),
                                   values={"SC": 1.0, "PQ": 1.0})
    Rating.objects.filter(pk=rating.pk).update(updated_at=datetime(2026, 11, 24, 3, 4, 5, 678901, tzinfo=timezone.utc))
    row = Rating.objects.filter(pk=rating.pk).annotate(
        c=epoch_microseconds(Rating, "created_at"), u=epoch_microseconds(Rating, "updated_at")
    ).values_list("created_at", "updated_at", "c", "u").get()
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    assert [(t - epoch) // timedelta(microseconds=1) for t in row[:2]] == list(row[2:])
