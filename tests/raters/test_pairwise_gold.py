"""Hidden gold in pairwise studies: gold comparisons with an expected preference (A/B terms),
slotted into work like item gold, scored through the side swap, counted toward gold accuracy."""

import re

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from raters.gold import gold_accuracy, gold_accuracy_by_rater, gold_ratings
from raters.models import QualityPolicy, RaterStanding
from tasks.assignment import assignment_batch_claim
from tasks.models import Assignment, Comparison, ComparisonGold, Rating
from tasks.services import rating_submit
from tasks.study_services import study_clone
from tests.factories import crowd_enter, make_comparison, make_rater, make_study, make_user

pytestmark = pytest.mark.django_db


def _pairwise(**fields):
    settings = fields.pop("settings", {})
    return make_study(protocol="pairwise", settings=settings, **fields)


def _gold(comparison, preference="A", note=""):
    gold = ComparisonGold(comparison=comparison, preference=preference, note=note)
    gold.full_clean()
    gold.save()
    return gold


def test_a_gold_comparison_takes_only_the_preferences_its_study_allows():
    study = _pairwise(settings={"allow_both_bad": False})
    comparison = make_comparison(study)
    for preference in ("A", "B", "tie"):
        ComparisonGold(comparison=comparison, preference=preference).full_clean()
    with pytest.raises(ValidationError, match="A, B, tie"):
        ComparisonGold(comparison=comparison, preference="both_bad").full_clean()
    with pytest.raises(ValidationError, match="pairwise studies"):
        ComparisonGold(comparison=make_comparison(make_study()), preference="A").full_clean()
    assert not ComparisonGold.objects.exists()


def test_the_expected_side_follows_the_presentation_and_a_match_is_judged_in_a_b_terms():
    gold = ComparisonGold(comparison=make_comparison(_pairwise()), preference="B")
    assert gold.expected_side({"left": "A"}) == "right" and gold.expected_side({"left": "B"}) == "left"
    assert ComparisonGold(preference="tie").expected_side({"left": "B"}) == "tie"
    assert gold.matches({"preference": "B"}) and not gold.matches({"preference": "A"})
    assert not gold.matches({"preference": "tie"}) and not gold.matches({})


def test_gold_comparisons_fill_their_share_of_a_batch_outside_the_quota_with_random_sides():
    study = _pairwise(settings={"gold_share": 0.25}, units_per_session=6, raters_per_item=1)
    normal = [make_comparison(study) for _ in range(6)]
    golds = [make_comparison(study) for _ in range(3)]
    for comparison in golds:
        _gold(comparison)
    rater = make_rater()
    assert assignment_batch_claim(rater=rater, study=study) == 6
    mine = Assignment.objects.filter(rater=rater)
    # 6 normal screens + floor(6 * 0.25 / 0.75 + phase) = 2 gold screens, one comparison each
    assert mine.count() == 8 and mine.filter(comparison__in=golds).count() == 2
    assert sorted(mine.values_list("position", flat=True)) == list(range(8))
    assert all(a.presentation.get("left") in ("A", "B") for a in mine)
    assert set(mine.exclude(comparison__in=golds).values_list("comparison_id", flat=True)) == {c.pk for c in normal}
    assert all(Comparison.objects.get(pk=c.pk).claims == 0 for c in golds)  # outside the quota
    # A second rater never claims a gold comparison as normal work (quota 1 is used up by rater one).
    other = make_rater()
    assert assignment_batch_claim(rater=other, study=study) == 0
    assert not Assignment.objects.filter(rater=other).exists()


def test_no_gold_comparison_is_slotted_when_the_share_is_zero_or_all_were_had():
    study = _pairwise(units_per_session=4, raters_per_item=2)
    for _ in range(8):
        make_comparison(study)
    gold = _gold(make_comparison(study)).comparison
    rater = make_rater()
    assignment_batch_claim(rater=rater, study=study)
    assert not Assignment.objects.filter(rater=rater, comparison=gold).exists()
    study.settings = {**study.settings, "gold_share": 0.5}
    study.save()
    for _ in range(2):  # a rater claims the next session once the open one is done
        Assignment.objects.filter(rater=rater, state="leased").update(state="done")
        assignment_batch_claim(rater=rater, study=study)
    assert Assignment.objects.filter(rater=rater, comparison=gold).count() == 1  # the pool of one is used up


def test_pairwise_gold_counts_toward_gold_accuracy_and_the_rules_like_item_gold(django_capture_on_commit_callbacks):
    """Each rating here is a session of its own: the rules run when it commits."""
    study = _pairwise()
    QualityPolicy.objects.create(study=study, gold_min_items=2, gold_min_accuracy=0.7, gold_action="pause")
    golds = [_gold(make_comparison(study), preference) for preference in ("A", "tie")]
    careful, careless = make_rater(), make_rater()
    for gold, preference in zip(golds, ("A", "tie")):
        with django_capture_on_commit_callbacks(execute=True):
            rating_submit(rater=careful, comparison=gold.comparison, values={"preference": preference},
                          require_assignment=False)
    with django_capture_on_commit_callbacks(execute=True):
        rating_submit(rater=careless, comparison=golds[0].comparison, values={"preference": "B"},
                      require_assignment=False)
    assert RaterStanding.of(rater=careless, study=study).state != "paused"  # one gold answer: too few to judge
    with django_capture_on_commit_callbacks(execute=True):
        rating_submit(rater=careless, comparison=golds[1].comparison, values={"preference": "tie"},
                      require_assignment=False)
    assert gold_accuracy(rater=careful, study=study) == (2, 2)
    assert gold_accuracy(rater=careless, study=study) == (1, 2)
    assert gold_accuracy_by_rater(study) == {careful.pk: (2, 2), careless.pk: (1, 2)}
    assert RaterStanding.of(rater=careless, study=study).state == "paused"
    assert RaterStanding.of(rater=careful, study=study).state != "paused"
    # Ratings of normal comparisons are not gold answers.
    rating_submit(rater=careful, comparison=make_comparison(study), values={"preference": "B"}, require_assignment=False)
    assert gold_accuracy(rater=careful, study=study) == (2, 2)


def test_a_study_clone_keeps_its_gold_comparisons():
    study = _pairwise()
    gold = _gold(make_comparison(study), "B", note="B keeps the subject")
    make_comparison(study)
    clone = study_clone(study=study)
    copied = ComparisonGold.objects.get(comparison__study=clone)
    assert (copied.preference, copied.note) == ("B", "B keeps the subject")
    assert copied.comparison.item_a.image_id == gold.comparison.item_a.image_id
    assert copied.comparison.item_a.study_id == clone.pk and clone.comparisons.count() == 2


def _img_order(html: str) -> list[str]:
    return re.findall(r"/img/(\w+)/768 1x", html)


def test_a_rater_s_gold_comparisons_are_scored_through_the_real_pairwise_screens_whatever_the_sides(
        client, django_capture_on_commit_callbacks):
    """End to end: the rater works through the rating views; on the gold screens they pick the
    output that is item A wherever it was shown; a careless rater always picks the left one."""
    study = _pairwise(settings={"gold_share": 0.5}, units_per_session=2, raters_per_item=2)
    owner = make_user("pairwise-owner")
    study.owners.add(owner)
    QualityPolicy.objects.create(study=study, gold_min_items=2, gold_min_accuracy=0.7, gold_action="pause")
    for _ in range(2):
        make_comparison(study)
    golds = [_gold(make_comparison(study), "A", note="GOLD-NOTE-pw") for _ in range(2)]
    gold_ids = {g.comparison_id for g in golds}

    def work(pid, choose):
        client.cookies.clear()
        url = crowd_enter(client, study, pid)
        assignments = Assignment.objects.filter(rater__external_id=pid)
        gold_assignments = list(assignments.filter(comparison_id__in=gold_ids).order_by("position"))
        assert len(gold_assignments) == 2 and assignments.count() == 4
        # one gold comparison shown as is, one swapped, whatever the draw was
        for assignment, left in zip(gold_assignments, "AB"):
            Assignment.objects.filter(pk=assignment.pk).update(presentation={"left": left})
        for _ in range(4):
            page = client.get(url)
            assert page.status_code == 200
            html = page.content.decode()
            assert "GOLD-NOTE-pw" not in html and "gold" not in html.lower()
            (field,) = set(re.findall(r'name="(u\d+-preference)"', html))
            assert field == "u0-preference"  # named by place on the screen, never by assignment
            position = int(url.rstrip("/").rsplit("/", 1)[1])
            assignment = Assignment.objects.select_related("comparison__item_a__image").get(
                rater__external_id=pid, position=position)
            with django_capture_on_commit_callbacks(execute=True):  # the rules run after the session
                response = client.post(url, {field: choose(assignment, _img_order(html))})
            if response.status_code == 422:  # the gold rule paused the rater: no more ratings
                assert "paused while a researcher reviews it" in response.content.decode()
                assert Rating.objects.filter(rater=assignment.rater, comparison_id__in=gold_ids).count() == 2
                break
            assert response.status_code == 302, response.content.decode()[:500]
            url = response.url
        return assignments.first().rater

    def item_a_side(assignment, order):
        return "left" if order[0] == assignment.comparison.item_a.image.sha256 else "right"

    careful = work("carefulP1", item_a_side)
    assert gold_accuracy(rater=careful, study=study) == (2, 2)
    stored = Rating.objects.filter(rater=careful, comparison_id__in=gold_ids)
    assert {r.values["preference"] for r in stored} == {"A"}
    assert {r.presentation["left"] for r in stored} == {"A", "B"}
    assert RaterStanding.of(rater=careful, study=study).state != "paused"

    careless = work("carelessP2", lambda assignment, order: "left")
    assert gold_accuracy(rater=careless, study=study) == (1, 2)
    assert RaterStanding.of(rater=careless, study=study).state == "paused"

    # The researcher sees each gold answer as given and as the rater saw it.
    client.cookies.clear()
    client.force_login(owner)
    rows = gold_ratings(rater=careless, study=study)
    assert sorted((r["given"]["as seen"], r["expected"]["as seen"], r["correct"]) for r in rows) == [
        ("left", "left", True), ("left", "right", False)]
    html = client.get(reverse("raters:detail", args=[study.slug, careless.pk])).content.decode()
    assert "as seen" in html and "1/2" in html


def test_staff_make_a_comparison_gold_in_the_admin_and_a_bad_preference_is_refused(client):
    study = _pairwise(settings={"allow_both_bad": False})
    comparison = make_comparison(study)
    client.force_login(make_user("staff-admin", is_staff=True, is_superuser=True))
    url = reverse("admin:tasks_comparisongold_add")
    refused = client.post(url, {"comparison": comparison.pk, "preference": "both_bad", "note": ""})
    assert refused.status_code == 200 and "This study takes one of A, B, tie" in refused.content.decode()
    assert not ComparisonGold.objects.exists()
    done = client.post(url, {"comparison": comparison.pk, "preference": "B", "note": "B keeps the subject"})
    assert done.status_code == 302
    assert ComparisonGold.objects.get().preference == "B"
    page = client.get(reverse("admin:tasks_comparison_change", args=[comparison.pk])).content.decode()
    assert "B keeps the subject" in page  # the inline on the comparison's own page


def test_comparisons_all_pilot_raters_agreed_on_become_gold_candidates_a_researcher_confirms(client):
    study = _pairwise()
    owner = make_user("pilot-owner")
    study.owners.add(owner)
    agreed, split = make_comparison(study), make_comparison(study)
    raters = [make_rater() for _ in range(3)]
    for number, rater in enumerate(raters):
        rating_submit(rater=rater, comparison=agreed, values={"preference": "B"}, require_assignment=False)
        rating_submit(rater=rater, comparison=split, values={"preference": "A" if number else "tie"},
                      require_assignment=False)
    client.force_login(owner)
    url = reverse("raters:gold_candidates", args=[study.slug])
    page = client.get(url)
    assert [(c.item.pk, c.values, c.raters) for c in page.context["candidates"]] == [(agreed.pk, {"preference": "B"}, 3)]
    assert f'name="comparison" value="{agreed.pk}"' in page.content.decode()
    assert client.post(url, {"comparison": split.pk}).status_code == 302
    assert client.post(url, {"comparison": "not-a-number"}).status_code == 404
    assert not ComparisonGold.objects.exists()  # the split comparison was refused
    client.post(url, {"comparison": agreed.pk})
    gold = ComparisonGold.objects.get()
    assert (gold.comparison_id, gold.preference) == (agreed.pk, "B") and "3 raters" in gold.note
    assert client.get(url).context["candidates"] == []
    # someone else's researcher cannot confirm anything
    client.force_login(make_user("outsider-researcher"))
    assert client.post(url, {"comparison": split.pk}).status_code == 404
