"""A screen's first answers in one statement (PostgreSQL): the same rows as rating by rating,
all or nothing, and the general path still takes over when the statement cannot apply."""

import pytest
from django.db import connection

from raters.models import QualityPolicy, QualityRulesSchedule
from tasks.assignment import assignment_next, screen_at, screen_shown
from tasks.models import Assignment, Rating, RatingRevision
from tasks.services import RatingRejected, rating_submit, screen_submit
from tests.factories import make_instance, make_item, make_rater, make_study

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement submit is PostgreSQL's; CI runs it there"),
]


def _trial_study(**settings):
    study = make_study(protocol="evalmi", task_type="counting", units_per_session=2,
                       settings={"qa": False, "images_per_trial": 3, **settings})
    for _ in range(2):
        instance = make_instance(study)
        for m in range(3):
            make_item(study, instance=instance, model=f"M{m}")
    return study


def _entries(screen, perception=4):
    return [{"values": {"perception": perception, "correspondence": 2}, "presentation": {"slot": a.slot}}
            for a in screen.assignments]


def test_a_trial_is_stored_in_one_statement_with_every_field(django_assert_num_queries):
    study = _trial_study()
    QualityPolicy.objects.create(study=study, rules_after_session=True, rules_every_ratings=100)
    QualityRulesSchedule.objects.create(study=study, ratings_since_run=5)
    rater = make_rater()
    position = assignment_next(rater=rater, study=study).position
    # as the view gets a submit's screen: its units and the rater's previous submit, one query
    screen = screen_at(rater=rater, study=study, position=position, place=False)
    screen_shown(rater=rater, screen=screen)  # rendered: time on item counts from here
    with django_assert_num_queries(4):  # standing; SAVEPOINT, the statement, RELEASE (in a test's transaction)
        ratings = screen_submit(rater=rater, screen=screen, entries=_entries(screen))
    stored = {r.item_id: r for r in Rating.objects.filter(rater=rater)}
    assert [r.pk for r in ratings] == [stored[a.item_id].pk for a in screen.assignments]
    for assignment in screen.assignments:
        rating = stored[assignment.item_id]
        assert rating.values == {"perception": 4, "correspondence": 2} and rating.answers == {}
        assert rating.presentation == {"slot": assignment.slot} and rating.source == "ui"
        assert rating.time_on_item_ms is not None and rating.study_id == study.pk
        assert Assignment.objects.get(pk=assignment.pk).state == Assignment.State.DONE
    assert QualityRulesSchedule.objects.get(study=study).ratings_since_run == 8  # counted per rating
    assert screen.next_leased is not None  # the second trial


def test_a_trial_with_one_lapsed_unit_stores_nothing_and_says_why():
    study = _trial_study()
    rater = make_rater()
    screen = assignment_next(rater=rater, study=study)
    Assignment.objects.filter(pk=screen.assignments[1].pk).update(state=Assignment.State.EXPIRED)
    with pytest.raises(RatingRejected, match="Image 2: Your time on this item ran out"):
        screen_submit(rater=rater, screen=screen, entries=_entries(screen))
    assert not Rating.objects.exists()
    assert set(Assignment.objects.filter(rater=rater, position=screen.position).values_list("state", flat=True)) == {
        Assignment.State.LEASED, Assignment.State.EXPIRED}


def test_a_second_submit_of_the_same_screen_is_an_edit():
    study = _trial_study()
    rater = make_rater()
    screen = assignment_next(rater=rater, study=study)
    stale = screen_at(rater=rater, study=study, position=screen.position)  # a second tab, loaded before
    screen_submit(rater=rater, screen=screen, entries=_entries(screen, perception=4))
    screen_submit(rater=rater, screen=stale, entries=_entries(stale, perception=1))
    assert set(Rating.objects.filter(rater=rater).values_list("values__perception", flat=True)) == {1}
    assert RatingRevision.objects.count() == 3  # the first answers kept


def test_a_rating_already_there_is_edited_not_doubled():
    study = _trial_study()
    rater = make_rater()
    screen = assignment_next(rater=rater, study=study)
    item = screen.assignments[0].item
    rating_submit(rater=rater, item=item, values={"perception": 5, "correspondence": 5}, source="api",
                  require_assignment=False)  # e.g. sent through the API after the claim
    screen_submit(rater=rater, screen=screen, entries=_entries(screen))
    assert Rating.objects.filter(rater=rater).count() == 3
    assert Rating.objects.get(rater=rater, item=item).values == {"perception": 4, "correspondence": 2}


def test_the_one_statement_stores_what_the_orm_path_stores(monkeypatch, django_capture_on_commit_callbacks):
    """tasks.sql.submit_at_once against the general path (tasks.services._screen_store): the same
    ratings, assignments done and counts on the rule schedule, field by field."""
    from tasks import services

    stored = {}
    for path in ("sql", "orm"):
        study = _trial_study()
        QualityPolicy.objects.create(study=study, rules_after_session=True, rules_every_ratings=100)
        QualityRulesSchedule.objects.create(study=study, ratings_since_run=5)
        rater = make_rater()
        position = assignment_next(rater=rater, study=study).position
        screen = screen_at(rater=rater, study=study, position=position, place=False)
        screen_shown(rater=rater, screen=screen)
        if path == "orm":
            monkeypatch.setattr(services, "_first_answers_to_items", lambda screen: False)
        with django_capture_on_commit_callbacks(execute=True):  # the general path counts after its commit
            screen_submit(rater=rater, screen=screen, entries=_entries(screen))
        monkeypatch.undo()
        fields = ("values", "answers", "checklist", "presentation", "source", "source_detail")
        ratings = [(a.slot, Rating.objects.get(rater=rater, item_id=a.item_id)) for a in screen.assignments]
        stored[path] = (
            sorted((slot, *[getattr(r, f) for f in fields], r.time_on_item_ms is not None,
                    r.protocol_version_id == study.current_protocol_version_id) for slot, r in ratings),
            sorted(Assignment.objects.filter(rater=rater).values_list("slot", "state")),
            QualityRulesSchedule.objects.get(study=study).ratings_since_run,
            screen.next_leased is not None,
        )
    assert stored["sql"] == stored["orm"]
