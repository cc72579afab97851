import pytest

from tasks.models import Assignment, Rating, RatingRevision, Study
from tasks.services import RatingRejected, rating_submit
from tests.factories import make_comparison, make_item, make_rater, make_study

pytestmark = pytest.mark.django_db


def _assigned(rater, item):
    Assignment.objects.create(study=item.study, rater=rater, item=item)
    return item


def test_a_rating_for_an_assigned_item_is_stored_and_marks_the_assignment_done():
    rater = make_rater()
    item = _assigned(rater, make_item())
    rating = rating_submit(rater=rater, item=item, values={"SC": 1, "PQ": 0.5}, time_on_item_ms=4200)
    assert rating.values == {"SC": 1.0, "PQ": 0.5}
    assert Assignment.objects.get(rater=rater, item=item).state == Assignment.State.DONE


def test_an_item_not_assigned_to_the_rater_is_refused_and_nothing_is_stored():
    with pytest.raises(RatingRejected, match="not assigned to you"):
        rating_submit(rater=make_rater(), item=make_item(), values={"SC": 1, "PQ": 1})
    assert Rating.objects.count() == 0


def test_a_value_outside_the_scale_is_refused_and_nothing_is_stored():
    rater = make_rater()
    item = _assigned(rater, make_item())
    with pytest.raises(RatingRejected, match="must be one of 0 / 0.5 / 1"):
        rating_submit(rater=rater, item=item, values={"SC": 2, "PQ": 1})
    assert Rating.objects.count() == 0
    assert Assignment.objects.get().state == Assignment.State.LEASED


def test_a_closed_study_takes_no_ratings():
    rater = make_rater()
    item = _assigned(rater, make_item(make_study(state=Study.State.CLOSED)))
    with pytest.raises(RatingRejected, match="is closed; it takes no ratings"):
        rating_submit(rater=rater, item=item, values={"SC": 1, "PQ": 1})


def test_a_blocked_rater_cannot_rate():
    rater = make_rater(state="blocked")
    item = _assigned(rater, make_item())
    with pytest.raises(RatingRejected, match="not active"):
        rating_submit(rater=rater, item=item, values={"SC": 1, "PQ": 1})


def test_double_submit_is_idempotent():
    rater = make_rater()
    item = _assigned(rater, make_item())
    first = rating_submit(rater=rater, item=item, values={"SC": 1, "PQ": 1})
    second = rating_submit(rater=rater, item=item, values={"SC": 1, "PQ": 1})
    assert first.pk == second.pk
    assert Rating.objects.count() == 1
    assert RatingRevision.objects.count() == 0


def test_a_changed_rating_keeps_the_previous_version():
    rater = make_rater()
    item = _assigned(rater, make_item())
    rating_submit(rater=rater, item=item, values={"SC": 1, "PQ": 1})
    rating = rating_submit(rater=rater, item=item, values={"SC": 0, "PQ": 1})
    assert rating.values == {"SC": 0.0, "PQ": 1.0}
    assert list(RatingRevision.objects.values_list("values", flat=True)) == [{"SC": 1.0, "PQ": 1.0}]


def test_pairwise_ratings_go_to_comparisons():
    study = make_study(protocol="pairwise")
    comparison = make_comparison(study)
    rater = make_rater()
    Assignment.objects.create(study=study, rater=rater, comparison=comparison)
    rating = rating_submit(rater=rater, comparison=comparison, values={"preference": "B"}, presentation={"left": "B"})
    assert rating.comparison == comparison and rating.item is None


def test_imported_ratings_skip_assignment_and_state_checks_but_not_validation():
    rater = make_rater(platform="import", external_id="imagenhub:rater1")
    item = make_item(make_study(state=Study.State.CLOSED))
    rating = rating_submit(rater=rater, item=item, values={"SC": 0.5, "PQ": 0.5}, source="import", require_assignment=False, source_detail="rater1.tsv")
    assert rating.source == "import"
    with pytest.raises(RatingRejected):
        rating_submit(rater=rater, item=item, values={"SC": 0.25, "PQ": 0.5}, source="import", require_assignment=False)
