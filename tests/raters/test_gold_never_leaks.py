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
    client.post(reverse("rating:consent", args=[study.slug]), {"agree": "yes"})  # the rater is created here
    participation = Participation.objects.get(study=study, rater__external_id=external_id)
    Participation.objects.filter(pk=participation.pk).update(consented_at=timezone.now(), instructions_seen_at=timezone.now())
    return participation.rater


def _normalise(html: str, *images) -> str:
    """Only the unit's own content and per-request tokens are normalised: its images (content
    addresses) and the CSRF token and render stamp (a signature that changes on every render). Any
    id left in the page (an assignment's, an item's) would make two raters' pages differ."""
    for number, image in enumerate(images):
        html = html.replace(image.sha256, f"SHA{number}")
    html = re.sub(r'name="(csrfmiddlewaretoken|shown)" value="[^"]+"', r'name="\1" value="TOKEN"', html)
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
def test_the_screen_of_a_gold_item_is_byte_for_byte_a_normal_one_but_for_its_image(client, study_with_gold, htmx):
    study, normal, gold = study_with_gold
    pages = []
    for external_id, item in (("aaaa1111", normal), ("bbbb2222", gold)):
        client.cookies.clear()
        rater = _enter(client, study, external_id=external_id)
        Assignment.objects.filter(rater=rater).delete()
        Assignment.objects.create(study=study, rater=rater, item=item, position=0)
        headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        response = client.get(reverse("rating:unit", args=[study.slug, 0]), **headers)
        assert response.status_code == 200
        pages.append(_normalise(response.content.decode(), item.image))
    assert 'name="u0-SC"' in pages[0]
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
    client.post(response.url, {"question": page.context["question"], "u0-SC": "0", "u0-PQ": "0"})
    html = client.get(response.url).content.decode()
    assert "cannot offer you this study" in html
    html = client.get(reverse("rating:next", args=[study.slug]), follow=True).content.decode()
    assert "cannot offer you this study" in html and "C0MPLETE42" not in html
    # Even with a rating on record, the completion page gives no code.
    Rating.objects.create(study=study, rater=rater, item=normal, values={"SC": 1.0, "PQ": 1.0})
    html = client.get(reverse("rating:done", args=[study.slug])).content.decode()
    assert "C0MPLETE42" not in html and "cannot offer you this study" in html


def test_a_rater_paused_by_a_rule_cannot_submit_more_ratings(client, django_capture_on_commit_callbacks):
    """The gold rule acts when the rater's session ends, not right after the gold screen (which
    would tell the rater that screen was gold); from then on nothing more is stored."""
    study = make_study()
    QualityPolicy.objects.create(study=study, gold_min_items=1, gold_action="pause")
    gold, normal, later = make_item(study), make_item(study), make_item(study)
    make_gold(gold, values={"SC": 1.0, "PQ": 1.0})
    rater = _enter(client, study, external_id="ffff6666")
    Assignment.objects.create(study=study, rater=rater, item=gold, position=0)
    Assignment.objects.create(study=study, rater=rater, item=normal, position=1)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("rating:unit", args=[study.slug, 0]), {"u0-SC": "0", "u0-PQ": "0"})
    assert not rater.standings.exists()  # mid-session: nothing tells the rater what that screen was
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("rating:unit", args=[study.slug, 1]), {"u0-SC": "1", "u0-PQ": "1"})
    assert Rating.objects.filter(rater=rater).count() == 2
    assert rater.standings.get().state == "paused"  # the session ended: the rules ran
    # a screen of a later batch (the end of the session may already have claimed it)
    Assignment.objects.get_or_create(study=study, rater=rater, item=later, defaults={"position": 2})
    position = Assignment.objects.get(rater=rater, item=later).position
    response = client.post(reverse("rating:unit", args=[study.slug, position]), {"u0-SC": "1", "u0-PQ": "1"})
    assert Rating.objects.filter(rater=rater).count() == 2
    assert "paused while a researcher reviews it" in response.content.decode()


def _trial_study(**settings):
    """An EvalMi study of three-image trials: a normal instance and a gold instance with the same
    prompt and question, three models each."""
    study = make_study(protocol="evalmi", task_type="counting", units_per_session=1, raters_per_item=1,
                       settings={"images_per_trial": 3, **settings})
    texts = {"prompt": "three green apples on a plate", "question": "Are there three apples?"}
    normal_instance = make_instance(study, **texts)
    normal = [make_item(study, instance=normal_instance, model=f"Model{m}") for m in "ABC"]
    gold_instance = make_instance(study, **texts)
    gold = [make_item(study, instance=gold_instance, model=f"Model{m}", ground_truth={"secret": SECRET}) for m in "ABC"]
    for item in gold:
        make_gold(item, values={"perception": 4, "correspondence": 5}, answers={"q1": "yes"}, tolerance=1)
    return study, normal, gold


@pytest.mark.parametrize("htmx", [False, True])
def test_a_gold_trial_is_byte_for_byte_a_normal_trial_but_for_its_images(client, htmx):
    study, normal, gold = _trial_study()
    pages = []
    for external_id, items in (("trial1111", normal), ("trial2222", gold)):
        client.cookies.clear()
        rater = _enter(client, study, external_id=external_id)
        Assignment.objects.filter(rater=rater).delete()
        for slot, item in enumerate(items):
            Assignment.objects.create(study=study, rater=rater, item=item, position=0, slot=slot)
        headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        html = client.get(reverse("rating:unit", args=[study.slug, 0]), **headers).content.decode()
        pages.append(_normalise(html, *(item.image for item in items)))
    assert pages[0].count('name="u2-perception"') == 5  # three panels, all there
    assert pages[0] == pages[1]
    assert SECRET not in pages[1] and "gold" not in pages[1].lower()


def test_an_evalmi_rater_gets_whole_gold_trials_at_the_study_share_of_screens(client):
    study = make_study(protocol="evalmi", task_type="counting", units_per_session=6, raters_per_item=1,
                       settings={"images_per_trial": 3, "gold_share": 0.25})
    for _ in range(6):
        instance = make_instance(study)
        for m in "ABCD":
            make_item(study, instance=instance, model=f"Model{m}")
    gold_instances = []
    for _ in range(3):
        instance = make_instance(study)
        gold_instances.append(instance.pk)
        for m in "ABCD":
            make_gold(make_item(study, instance=instance, model=f"Model{m}"), values={"perception": 3})
    rater = _enter(client, study, external_id="trial3333")
    assert client.get(reverse("rating:next", args=[study.slug])).status_code == 302
    screens: dict[int, list] = {}
    for a in Assignment.objects.filter(rater=rater).select_related("item__gold").order_by("position", "slot"):
        screens.setdefault(a.position, []).append(a)
    assert sorted(screens) == list(range(8))  # 6 normal trials + floor(6 * 0.25 / 0.75 + phase) = 2 gold trials
    gold_screens = [s for s in screens.values() if hasattr(s[0].item, "gold")]
    assert len(gold_screens) == 2
    for screen in screens.values():
        assert [a.slot for a in screen] == [0, 1, 2]
        assert len({a.item.instance_id for a in screen}) == 1
        assert len({hasattr(a.item, "gold") for a in screen}) == 1  # never gold mixed with normal images
    assert {s[0].item.instance_id for s in gold_screens} <= set(gold_instances)
    # The rater rates a gold trial like any other: three ratings, scored against the gold answers.
    position = gold_screens[0][0].position
    post = {}
    for a in gold_screens[0]:
        post |= {f"u{a.slot}-perception": "3", f"u{a.slot}-correspondence": "2", f"u{a.slot}-q1": "no"}
    client.post(reverse("rating:unit", args=[study.slug, position]), post)
    from raters.gold import gold_accuracy

    assert gold_accuracy(rater=rater, study=study) == (3, 3)


def test_an_instance_with_too_few_gold_items_for_a_trial_is_not_a_gold_trial():
    from tasks.assignment.gold import gold_trial_pool

    study = make_study(protocol="evalmi", task_type="counting", settings={"images_per_trial": 3, "gold_share": 0.5})
    half, small, full = make_instance(study), make_instance(study), make_instance(study)
    make_gold(make_item(study, instance=half, model="ModelA"))
    make_item(study, instance=half, model="ModelB")
    make_item(study, instance=half, model="ModelC")
    small_gold = [make_gold(make_item(study, instance=small, model=f"Model{m}")).item_id for m in "AB"]
    full_gold = [make_gold(make_item(study, instance=full, model=f"Model{m}")).item_id for m in "ABCD"]
    # half: 1 gold of 3 (a trial would mix gold with normal images); small: all of its 2 items are gold
    assert gold_trial_pool(study) == {small.pk: small_gold, full.pk: full_gold}


@pytest.mark.parametrize("htmx", [False, True])
@pytest.mark.parametrize("left", ["A", "B"])
def test_the_screen_of_a_gold_comparison_is_byte_for_byte_a_normal_one_but_for_its_images(client, htmx, left):
    from tasks.models import Comparison, ComparisonGold

    study = make_study(protocol="pairwise", settings={"gold_share": 0.5})
    comparisons = []
    for gold in (False, True):
        instance = make_instance(study, prompt="a red cube on a blue sphere")
        a = make_item(study, instance=instance, model="ModelA", ground_truth={"secret": SECRET})
        b = make_item(study, instance=instance, model="ModelB", ground_truth={"secret": SECRET})
        comparison = Comparison.objects.create(study=study, item_a=a, item_b=b)
        if gold:
            ComparisonGold.objects.create(comparison=comparison, preference="A", note=SECRET)
        comparisons.append(comparison)
    pages = []
    for external_id, comparison in (("pair1111", comparisons[0]), ("pair2222", comparisons[1])):
        client.cookies.clear()
        rater = _enter(client, study, external_id=external_id)
        Assignment.objects.filter(rater=rater).delete()
        Assignment.objects.create(study=study, rater=rater, comparison=comparison, position=0,
                                  presentation={"left": left})
        headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        response = client.get(reverse("rating:unit", args=[study.slug, 0]), **headers)
        assert response.status_code == 200
        pages.append(_normalise(response.content.decode(), comparison.item_a.image, comparison.item_b.image))
    assert 'value="left"' in pages[0] and "SHA1" in pages[0]
    assert pages[0] == pages[1]
    assert SECRET not in pages[1] and "gold" not in pages[1].lower()
