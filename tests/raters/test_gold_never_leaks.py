"""Gold never leaks: a gold item looks exactly like any other item to a rater, and nothing a rater
can reach carries expected answers (GoldAnswer) or Item.ground_truth."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from raters.models import QualityPolicy
from tasks.models import Assignment, Participation, Rating
from tests.factories import make_attention_check, make_gold, make_instance, make_item, make_rater, make_study, make_user

pytestmark = pytest.mark.django_db

SECRET = "GOLD-SECRET-7f3a"


def _enter(client, study, *, external_id):
    """A Prolific rater arrives through the study link and is past consent and instructions."""
    client.get(reverse("rating:start", args=[study.slug]), {"PROLIFIC_PID": external_id, "STUDY_ID": "s1", "SESSION_ID": f"x{external_id}"})
    participation = Participation.objects.get(study=study, rater__external_id=external_id)
    Participation.objects.filter(pk=participation.pk).update(consented_at=timezone.now(), instructions_seen_at=timezone.now())
    return participation.rater


def _normalise(html: str, assignment, item) -> str:
    html = html.replace(f"a{assignment.pk}-", "aID-")
    html = html.replace(item.image.sha256, "SHA")
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', 'name="csrfmiddlewaretoken" value="TOKEN"', html)
    return re.sub(r'"X-CSRFToken": "[^"]+"', '"X-CSRFToken": "TOKEN"', html)


@pytest.fixture
def study_with_gold():
    study = make_study(settings={"gold_share": 0.5})
    instance = make_instance(study, prompt="a red cube on a blue sphere")
    normal = make_item(study, instance=instance, model="ModelA", ground_truth={"secret": SECRET})
    gold = make_item(study, instance=instance, model="ModelB", ground_truth={"secret": SECRET})
    make_gold(gold, values={"SC": 0.5, "PQ": 1.0}, tolerance=0.5).__class__.objects.filter(item=gold).update(note=SECRET)
    return study, normal, gold


@pytest.mark.parametrize("htmx", [False, True])
def test_the_screen_of_a_gold_item_differs_from_a_normal_one_only_in_ids(client, study_with_gold, htmx):
    study, normal, gold = study_with_gold
    pages = []
    for external_id, item in (("aaaa1111", normal), ("bbbb2222", gold)):
        client.cookies.clear()
        rater = _enter(client, study, external_id=external_id)
        Assignment.objects.filter(rater=rater).delete()
        assignment = Assignment.objects.create(study=study, rater=rater, item=item, position=0)
        headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        response = client.get(reverse("rating:unit", args=[study.slug, 0]), **headers)
        assert response.status_code == 200
        pages.append(_normalise(response.content.decode(), assignment, item))
    assert pages[0] == pages[1]
    assert SECRET not in pages[1] and "gold" not in pages[1].lower()


def test_hidden_gold_is_slotted_into_real_work_as_an_ordinary_screen(client):
    study = make_study(settings={"gold_share": 0.25}, units_per_session=6, raters_per_item=1)
    for _ in range(6):
        make_item(study)
    golds = [make_item(study) for _ in range(3)]
    for item in golds:
        make_gold(item)
    rater = _enter(client, study, external_id="cccc3333")
    response = client.get(reverse("rating:next", args=[study.slug]))
    assert response.status_code == 302
    mine = Assignment.objects.filter(rater=rater)
    assert mine.count() == 8 and mine.filter(item__in=golds).count() == 2
    assert len(set(mine.values_list("position", flat=True))) == 8  # one screen each, like any item


def test_no_endpoint_a_rater_can_reach_shows_expected_answers(client, study_with_gold):
    study, normal, gold = study_with_gold
    QualityPolicy.objects.create(study=study, qualification_required=True, qualification_size=1)
    user = make_user()
    make_rater(user=user)
    client.force_login(user)
    client.get(reverse("rating:start", args=[study.slug]))
    reachable = [
        reverse("rating:start", args=[study.slug]),
        reverse("raters:qualification", args=[study.slug]),
        reverse("rating:next", args=[study.slug]),
        reverse("rating:done", args=[study.slug]),
    ]
    for url in reachable:
        body = client.get(url, follow=True).content.decode()
        assert SECRET not in body and "tolerance" not in body.lower(), url
    for url in (
        f"/api/studies/{study.slug}/items/",
        f"/api/studies/{study.slug}/ratings/",
        f"/api/studies/{study.slug}/export/",
        reverse("raters:list", args=[study.slug]),
        reverse("raters:gold_candidates", args=[study.slug]),
    ):
        response = client.get(url)
        assert response.status_code in (403, 404), url
        assert SECRET not in response.content.decode()


def test_an_attention_check_shows_its_instruction_on_the_item(client):
    study = make_study()
    item = make_item(study)
    make_attention_check(item, instruction="Please choose 0.5 for Semantic Consistency here")
    rater = _enter(client, study, external_id="dddd4444")
    Assignment.objects.create(study=study, rater=rater, item=item, position=0)
    html = client.get(reverse("rating:unit", args=[study.slug, 0])).content.decode()
    assert "Please choose 0.5 for Semantic Consistency here" in html


def test_a_crowd_rater_who_failed_the_qualification_gets_no_completion_code(client, study_with_gold):
    study, normal, gold = study_with_gold
    study.completion_code = "C0MPLETE42"
    study.save()
    QualityPolicy.objects.create(study=study, qualification_required=True, qualification_size=1, qualification_max_attempts=1)
    rater = _enter(client, study, external_id="eeee5555")
    response = client.get(reverse("rating:next", args=[study.slug]))
    assert response.url == reverse("raters:qualification", args=[study.slug])
    page = client.get(response.url)
    client.post(response.url, {"item": page.context["item"].pk, "SC": "0", "PQ": "0"})
    html = client.get(response.url).content.decode()
    assert "cannot offer you this study" in html
    html = client.get(reverse("rating:next", args=[study.slug]), follow=True).content.decode()
    assert "cannot offer you this study" in html and "C0MPLETE42" not in html
    # Even with a rating on record, the completion page gives no code.
    Rating.objects.create(study=study, rater=rater, item=normal, values={"SC": 1.0, "PQ": 1.0})
    html = client.get(reverse("rating:done", args=[study.slug])).content.decode()
    assert "C0MPLETE42" not in html and "cannot offer you this study" in html


def test_a_rater_paused_by_a_rule_cannot_submit_more_ratings(client):
    study = make_study()
    QualityPolicy.objects.create(study=study, gold_min_items=1, gold_action="pause")
    gold, normal = make_item(study), make_item(study)
    make_gold(gold, values={"SC": 1.0, "PQ": 1.0})
    rater = _enter(client, study, external_id="ffff6666")
    a_gold = Assignment.objects.create(study=study, rater=rater, item=gold, position=0)
    a_normal = Assignment.objects.create(study=study, rater=rater, item=normal, position=1)
    client.post(reverse("rating:unit", args=[study.slug, 0]), {f"a{a_gold.pk}-SC": "0", f"a{a_gold.pk}-PQ": "0"})
    assert Rating.objects.filter(rater=rater).count() == 1
    response = client.post(reverse("rating:unit", args=[study.slug, 1]), {f"a{a_normal.pk}-SC": "1", f"a{a_normal.pk}-PQ": "1"})
    assert Rating.objects.filter(rater=rater).count() == 1
    assert "paused while a researcher reviews it" in response.content.decode()
