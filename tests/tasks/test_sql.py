"""The hand-written screen statement gives what the ORM gives, in one query."""

import datetime

import pytest
from django.db.models import Count, Max, Min, Q

from raters.models import AttentionCheck
from tasks import assignment as engine
from tasks.assignment import assignment_next, screen_at, screen_insert
from tasks.models import Assignment
from tests.factories import make_attention_check, make_gold, make_instance, make_item, make_rater, make_study

pytestmark = pytest.mark.django_db


def _orm_screen(rater, study, position):
    live = Assignment.objects.filter(rater=rater, study=study, state__in=engine.LIVE)
    stats = live.aggregate(total=Count("position", distinct=True),
                           before=Count("position", distinct=True, filter=Q(position__lt=position)),
                           back=Max("position", filter=Q(position__lt=position)),
                           following=Min("position", filter=Q(position__gt=position)))
    related = ("item__instance", "item__gen_model", "item__image", "item__gold", "item__attention_check")
    units = list(live.filter(position=position).select_related(*related).order_by("slot"))
    return stats, units


@pytest.mark.parametrize("protocol", ["imagenhub", "evalmi"])
def test_screens_read_in_one_statement_match_the_orm(protocol, django_assert_num_queries):
    study = make_study(protocol=protocol, units_per_session=4, raters_per_item=2)
    for n in range(4):
        instance = make_instance(study, sub_questions=["Is there a cat?", "Is it red?"] if protocol == "evalmi" else [])
        for model in ("M1", "M2", "M3"):
            make_item(study, instance=instance, model=model)
    rater = make_rater()
    first = assignment_next(rater=rater, study=study)
    gold_item, check_item = make_item(study), make_item(study)
    make_gold(gold_item, values={"SC": 1.0, "PQ": 0.5})
    make_attention_check(check_item)
    screen_insert(rater=rater, study=study, items=[gold_item], position=first.position + 1)
    screen_insert(rater=rater, study=study, items=[check_item])
    positions = sorted(set(Assignment.objects.filter(rater=rater).values_list("position", flat=True)))
    assert len(positions) >= 4
    for position in positions:
        stats, units = _orm_screen(rater, study, position)
        with django_assert_num_queries(1):
            screen = screen_at(rater=rater, study=study, position=position)
            # everything a page and a submit read comes with it: no further query
            for got in screen.assignments:
                item = got.item
                (item.instance.prompt, item.instance.sub_questions, item.gen_model.name, item.image.sha256)
                hasattr(item, "gold"), hasattr(item, "attention_check")  # known, missing or not: no lookup
        assert (screen.number, screen.total, screen.back, screen.following) == (
            stats["before"] + 1, stats["total"], stats["back"], stats["following"])
        assert [a.pk for a in screen.assignments] == [a.pk for a in units]
        for got, want in zip(screen.assignments, units):
            for field in Assignment._meta.concrete_fields:
                assert getattr(got, field.attname) == getattr(want, field.attname), field.name
            assert isinstance(got.presentation, dict) and isinstance(got.lease_expires_at, datetime.datetime)
            assert got.lease_expires_at.tzinfo is not None
            assert got.item.instance.sub_questions == want.item.instance.sub_questions
            assert got.item.image == want.item.image and got.item.gen_model == want.item.gen_model
            assert hasattr(got.item, "gold") == hasattr(want.item, "gold")
            if hasattr(want.item, "gold"):
                assert got.item.gold.values == {"SC": 1.0, "PQ": 0.5} and got.item.gold.item is got.item
            assert hasattr(got.item, "attention_check") == hasattr(want.item, "attention_check")
        if screen.following is not None:
            _, following = _orm_screen(rater, study, screen.following)
            assert [a.pk for a in screen.following_assignments] == [a.pk for a in following]
        else:
            assert screen.following_assignments == []
    check_screen = screen_at(rater=rater, study=study, position=positions[-1])
    assert isinstance(check_screen.assignments[0].item.attention_check, AttentionCheck)


def test_a_position_without_live_units_is_no_screen():
    study = make_study(units_per_session=2)
    make_item(study)
    rater = make_rater()
    assert screen_at(rater=rater, study=study, position=0) is None  # nothing claimed yet
    screen = assignment_next(rater=rater, study=study)
    assert screen_at(rater=rater, study=study, position=screen.position + 5) is None
    assert screen_at(rater=rater, study=study, position=screen.position, place=False).total == 0


def test_a_participation_comes_with_rater_study_policy_and_standing_in_one_statement(django_assert_num_queries):
    from raters.models import QualityPolicy, RaterStanding
    from tasks.assignment import participation_get_or_create, participation_of

    study, other = make_study(), make_study()
    QualityPolicy.objects.create(study=study, gold_min_accuracy=0.8)
    rater = make_rater()
    participation = participation_get_or_create(rater=rater, study=study, crowd={"platform": "prolific", "SESSION_ID": "x"})
    with django_assert_num_queries(1):
        got = participation_of(slug=study.slug, rater_id=rater.pk)
        assert got.pk == participation.pk and got.crowd == {"platform": "prolific", "SESSION_ID": "x"}
        assert got.rater == rater and got.study == study and got.study.protocol_settings == study.protocol_settings
        assert got.study.quality_policy.gold_min_accuracy == 0.8
        assert got.standing.state == RaterStanding.State.PENDING and got.standing.pk is None
    RaterStanding.objects.create(study=study, rater=rater, state=RaterStanding.State.PAUSED)
    assert participation_of(slug=study.slug, rater_id=rater.pk).standing.state == RaterStanding.State.PAUSED
    assert participation_of(slug=other.slug, rater_id=rater.pk) is None  # never entered that study
    participation_get_or_create(rater=rater, study=other)
    with django_assert_num_queries(1):  # no policy: known missing, the defaults apply without a query
        assert QualityPolicy.for_study(participation_of(slug=other.slug, rater_id=rater.pk).study).pk is None


def test_a_logged_in_rater_s_participation_is_found_by_their_user(django_assert_num_queries):
    from tasks.assignment import participation_get_or_create, participation_of
    from tests.factories import make_user

    study = make_study()
    user = make_user()
    rater = make_rater(user=user)
    assert participation_of(slug=study.slug, user_id=user.pk) is None
    participation = participation_get_or_create(rater=rater, study=study)
    with django_assert_num_queries(1):
        got = participation_of(slug=study.slug, user_id=user.pk)
        assert got.pk == participation.pk and got.rater.user_id == user.pk and got.standing.state == "pending"
    assert participation_of(slug=study.slug, user_id=make_user().pk) is None  # another login: not theirs


def test_claiming_many_units_in_one_statement_matches_one_conditional_update_each():
    """tasks.sql.take_many (PostgreSQL; SQLite runs the ORM path on both sides) against
    tasks.assignment._take per unit: the same units get their claim, none goes over the quota."""
    from tasks.models import Item

    study = make_study()
    claimed = {}
    for path in ("sql", "orm"):
        items = [make_item(study, with_image=False) for _ in range(4)]
        Item.objects.filter(pk=items[1].pk).update(claims=2)  # at the quota already
        pks = [item.pk for item in reversed(items)]
        got = (engine._take_many(Item, pks, 2) if path == "sql"
               else {pk for pk in sorted(pks) if engine._take(Item, pk, 2)})
        claims = dict(Item.objects.filter(pk__in=pks).values_list("pk", "claims"))
        claimed[path] = ([items.index(next(i for i in items if i.pk == pk)) for pk in sorted(got)],
                         [claims[item.pk] for item in items])
    assert claimed["sql"] == claimed["orm"] == ([0, 2, 3], [1, 2, 1, 1])
