"""The rating loop's database work per request, pinned so it cannot creep back up.

Counts exclude SAVEPOINT/RELEASE bookkeeping (the test itself runs inside a transaction). They
do not depend on how many screens a rater has done or how many raters the study has.
"""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tasks.models import Assignment, Item, Rating
from tests.factories import make_instance, make_item, make_rater, make_study

pytestmark = pytest.mark.django_db

SCREEN_MAX = 2  # participation+study+policy, units with their place (+ next screen); +1 for condition images
# participation+standing, units, then: PostgreSQL one statement (assignments done, ratings stored,
# counted, next screen found); SQLite assignment UPDATE, rating INSERT, next leased
SUBMIT_MAX = {"postgresql": 3}.get(connection.vendor, 5)
# A whole session of 10 screens claimed: on PostgreSQL one UPDATE for all the claims and one INSERT;
# SQLite takes one conditional UPDATE per unit.
# +1 (the rater's open and done units with their last position, one aggregate, replaces the
# position lookup), +1 when the random start is near the end of the rank order (the wrap round;
# always in a tiny study like this one), +1 counting the leases of raters who have not rated yet.
FIRST_CLAIM_MAX = {"postgresql": 17}.get(connection.vendor, 28)


def _statements(ctx) -> list[str]:
    return [q["sql"] for q in ctx.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]


def _study(items=12, **fields):
    study = make_study(units_per_session=10, **fields)
    for i in range(items):
        make_item(study, instance=make_instance(study), model=f"M{i % 3}")
    return study


def _enter(client, study, pid):
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID={pid}")
    client.post(f"/s/{study.slug}/consent", {"agree": "yes"})
    client.post(f"/s/{study.slug}/instructions")


def _answer(html: str) -> dict:
    return {f"{prefix}-{dim}": "0.5" for prefix in set(re.findall(r'name="(u\d+)-SC"', html)) for dim in ("SC", "PQ")}


def test_a_rater_s_screens_and_submits_cost_a_fixed_small_number_of_queries(client):
    study = _study()
    _enter(client, study, "busy-rater")
    with CaptureQueriesContext(connection) as claim:
        url = client.get(f"/s/{study.slug}/rate").url
    assert len(_statements(claim)) <= FIRST_CLAIM_MAX, _statements(claim)
    for n in range(4):  # the counts stay flat as the rater works through the session
        with CaptureQueriesContext(connection) as shown:
            page = client.get(url)
        assert page.status_code == 200
        # Until the first submit a rater holds the short first lease, re-set on each screen, and
        # the screen after it turns that into the full lease: one UPDATE more on those two.
        assert len(_statements(shown)) <= SCREEN_MAX + (n < 2), "\n".join(q[:120] for q in _statements(shown))
        with CaptureQueriesContext(connection) as submitted:
            response = client.post(url, _answer(page.content.decode()))
        assert response.status_code == 302
        assert len(_statements(submitted)) <= SUBMIT_MAX, _statements(submitted)
        url = response.url
    assert Rating.objects.filter(study=study).count() == 4


def test_a_three_image_evalmi_trial_submits_with_a_few_queries_per_image(client):
    study = make_study(protocol="evalmi", task_type="counting", units_per_session=2,
                       settings={"qa": False, "images_per_trial": 3})
    for _ in range(2):
        instance = make_instance(study)
        for m in range(3):
            make_item(study, instance=instance, model=f"M{m}")
    _enter(client, study, "trial-rater")
    url = client.get(f"/s/{study.slug}/rate").url
    page = client.get(url)
    form = {name: "3" for name in set(re.findall(r'name="(u\d+-(?:perception|correspondence))"', page.content.decode()))}
    assert len(form) == 6
    with CaptureQueriesContext(connection) as submitted:
        assert client.post(url, form).status_code == 302
    extra = 0 if connection.vendor == "postgresql" else 2 * 2  # UPDATE + INSERT per extra image on SQLite
    assert len(_statements(submitted)) <= SUBMIT_MAX + extra, _statements(submitted)
    assert Rating.objects.filter(study=study).count() == 3


def test_a_revisited_screen_is_prefilled_with_one_more_query(client):
    study = _study(items=3)
    _enter(client, study, "second-thoughts")
    url = client.get(f"/s/{study.slug}/rate").url
    first = client.get(url)
    following = client.post(url, {key: "1" for key in _answer(first.content.decode())}).url
    client.get(following)  # the first screen after the first submit turns the short first lease into a full one
    with CaptureQueriesContext(connection) as shown:
        again = client.get(url)
    assert len(_statements(shown)) <= SCREEN_MAX + 1
    assert again.content.decode().count("checked") >= 2  # SC and PQ as given


def test_a_lapsed_lease_goes_back_to_the_pool_when_the_next_rater_claims_work(client):
    """Leases are swept when someone claims (not on every request), so a late rater's units free up then."""
    study = make_study(units_per_session=1, raters_per_item=1)
    item = make_item(study)
    late, punctual = make_rater(), make_rater()
    from tasks.assignment import assignment_next

    assert assignment_next(rater=late, study=study).items == [item]
    later = timezone.now() + timedelta(hours=2)
    assert assignment_next(rater=punctual, study=study, now=later).items == [item]
    assert Assignment.objects.get(rater=late).state == Assignment.State.EXPIRED
    assert Item.objects.get(pk=item.pk).claims == 1


def test_showing_a_screen_extends_the_leases_only_when_they_were_not_extended_lately(django_assert_num_queries):
    from tasks.assignment import TOUCH_EVERY, assignment_next, lease_length, screen_shown

    study = _study(items=3)
    rater = make_rater()
    screen = assignment_next(rater=rater, study=study)
    # a rater who has submitted (their last unit done) and whose leases were just extended
    Assignment.objects.filter(rater=rater, position=2).update(state="done")
    screen = assignment_next(rater=rater, study=study)
    leased = Assignment.objects.filter(rater=rater, state="leased")
    claimed_until = leased.values_list("lease_expires_at", flat=True).first()
    soon = timezone.now() + TOUCH_EVERY / 2
    with django_assert_num_queries(0):  # fresh leases: nothing to write (the page carries its render time)
        screen_shown(rater=rater, screen=screen, now=soon)
    leases = set(leased.values_list("lease_expires_at", flat=True))
    assert leases == {claimed_until}
    assert screen.assignments[0].shown_at == soon
    later = timezone.now() + 2 * TOUCH_EVERY
    screen_shown(rater=rater, screen=screen, now=later)
    leases = set(leased.values_list("lease_expires_at", flat=True))
    assert leases == {later + lease_length()}  # every leased unit of the rater, not only this screen's


def test_a_rater_who_has_not_submitted_yet_keeps_only_the_short_first_lease_however_often_screens_are_shown(settings):
    """Ids that claim a session and show screens without ever rating must not hold units for the
    full lease: their leases are re-set to the short first lease on each screen until a submit."""
    from tasks.assignment import assignment_next, first_lease_length, lease_length, screen_shown

    settings.ASSIGNMENT_LEASE_SECONDS, settings.ASSIGNMENT_FIRST_LEASE_SECONDS = 1800, 300
    study = _study(items=3)
    rater = make_rater()
    screen = assignment_next(rater=rater, study=study)
    leases = set(Assignment.objects.filter(rater=rater).values_list("lease_expires_at", flat=True))
    assert max(leases) <= timezone.now() + first_lease_length()
    later = timezone.now() + timedelta(minutes=4)
    screen_shown(rater=rater, screen=screen, now=later)
    assert set(Assignment.objects.filter(rater=rater).values_list("lease_expires_at", flat=True)) == {
        later + timedelta(seconds=300)}
    done = screen.assignments[0]
    Assignment.objects.filter(pk=done.pk).update(state="done")  # the first submit
    screen = assignment_next(rater=rater, study=study, now=later)
    assert set(Assignment.objects.filter(rater=rater, state="leased").values_list("lease_expires_at", flat=True)) == {
        later + lease_length()}
