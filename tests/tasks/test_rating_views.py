import re
from unittest import mock

import pytest
from django.urls import reverse

from tasks.models import Assignment, ConditionImage, GoldAnswer, Participation, Rating, Study
from tasks.images import store_image
from tests.factories import crowd_enter, make_instance, make_item, make_rater, make_study, make_user, png_bytes

pytestmark = pytest.mark.django_db


def _study(n_items=3, **fields):
    study = make_study(units_per_session=n_items, **fields)
    instance = make_instance(study, prompt="a [V] dog on a beach")
    for m in range(n_items):
        make_item(study, instance=instance, model=f"M{m}")
    return study


def _fields(response):
    return sorted(set(re.findall(r'name="(u\d+-[\w-]+)"', response.content.decode())))


def test_a_rater_must_consent_before_seeing_instructions_and_items(client):
    study = _study()
    response = client.get(f"/s/{study.slug}/start?PROLIFIC_PID=P1")
    assert response.url.endswith("/consent")
    assert client.get(f"/s/{study.slug}/instructions").url.endswith("/consent")
    refused = client.post(f"/s/{study.slug}/consent", {})
    assert refused.status_code == 422 and b"Tick the box" in refused.content
    assert client.post(f"/s/{study.slug}/consent", {"agree": "yes"}).url.endswith("/instructions")
    page = client.get(f"/s/{study.slug}/instructions")
    assert b"Semantic consistency" in page.content and b"Worked examples" in page.content


def test_a_screen_shows_keys_for_every_choice_and_the_progress(client):
    study = _study()
    page = client.get(crowd_enter(client, study))
    html = page.content.decode()
    assert "1 of 3" in html
    assert html.count('data-key="') == 6  # SC and PQ, three choices each
    assert '<mark class="token">[V]</mark>' in html
    assert 'hx-post="' in html and 'href="/s/' in html


@pytest.mark.parametrize(
    "likert, keys, hint",
    [
        ((1, 10), [str(v) for v in range(1, 11)], "For 10 type both digits quickly"),
        ((0, 100), [str(v) for v in range(0, 101)], "For 10–100 type both digits quickly"),
        ((-5, 5), [str(v) for v in range(1, 12)], "For 10–11 type both digits quickly"),
        ((1, 5), ["1", "2", "3", "4", "5"], None),
    ],
)
def test_a_likert_scale_of_any_length_has_a_key_for_every_choice_and_says_how_to_type_it(client, likert, keys, hint):
    study = make_study(protocol="evalmi", task_type="counting", units_per_session=1,
                       settings={"likert_min": likert[0], "likert_max": likert[1], "qa": False, "images_per_trial": 1})
    make_item(study)
    html = client.get(crowd_enter(client, study)).content.decode()
    perception = html[html.index("Perception"):html.index("Correspondence")]
    assert re.findall(r'data-key="([^"]*)"', perception) == keys
    assert re.findall(r"<kbd[^>]*>([^<]*)</kbd>", perception) == keys  # every key shown on its choice
    if hint:
        assert hint in perception
    else:
        assert "key-hint" not in html


def test_a_rating_is_stored_with_the_time_on_item_measured_on_the_server(client):
    study = _study()
    url = crowd_enter(client, study)
    page = client.get(url)
    fields = _fields(page)
    shown = re.search(r'name="shown" value="([^"]+)"', page.content.decode()).group(1)
    response = client.post(url, {fields[0]: "0.5", fields[1]: "1", "shown": shown})  # PQ, SC
    assert response.status_code == 302
    rating = Rating.objects.get()
    assert rating.values == {"SC": 1.0, "PQ": 0.5}
    assert rating.time_on_item_ms is not None and 0 <= rating.time_on_item_ms < 60_000


@pytest.mark.parametrize("stamp", ["genuine", "forged", "other rater", "other screen", "missing"])
def test_time_on_item_counts_from_the_signed_render_time_and_a_doctored_one_counts_as_unknown(client, stamp):
    """The render writes nothing: its time comes back signed in the form. Only a genuine stamp of
    this rater and this screen is believed; anything else leaves the time on item unknown (the
    rater's first submit: no previous submit bounds it either)."""
    from datetime import timedelta

    from django.utils import timezone

    from tasks.models import Participation
    from tasks.rating_context import shown_stamp

    study = _study()
    url = crowd_enter(client, study)
    fields = _fields(client.get(url))
    participation = Participation.objects.get(study=study)
    position = int(url.rstrip("/").rsplit("/", 1)[1])
    units = list(Assignment.objects.filter(rater_id=participation.rater_id, position=position)
                 .order_by("slot").values_list("pk", flat=True))
    earlier = timezone.now() - timedelta(seconds=7)
    value = {
        "genuine": shown_stamp(rater_id=participation.rater_id, position=position, at=earlier, units=units),
        "forged": shown_stamp(rater_id=participation.rater_id, position=position, at=earlier, units=units)[:-3] + "abc",
        "other rater": shown_stamp(rater_id=participation.rater_id + 1, position=position, at=earlier, units=units),
        "other screen": shown_stamp(rater_id=participation.rater_id, position=position + 1, at=earlier, units=units),
        "missing": "",
    }[stamp]
    assert client.post(url, {fields[0]: "0.5", fields[1]: "1", "shown": value}).status_code == 302
    rating = Rating.objects.get()
    if stamp == "genuine":
        assert 7_000 <= rating.time_on_item_ms < 60_000
    else:
        assert rating.time_on_item_ms is None


def test_a_form_rendered_for_other_units_at_the_same_place_is_refused_not_misfiled(client):
    """Fields are named by place on the screen (u0-…), so the stamp also names the units the form
    was rendered for: if the place now holds another unit, nothing is stored."""
    from django.utils import timezone

    from tasks.models import Participation
    from tasks.rating_context import shown_stamp

    study = _study()
    url = crowd_enter(client, study)
    fields = _fields(client.get(url))
    participation = Participation.objects.get(study=study)
    position = int(url.rstrip("/").rsplit("/", 1)[1])
    other = Assignment.objects.filter(rater_id=participation.rater_id).exclude(position=position).first()
    stale = shown_stamp(rater_id=participation.rater_id, position=position, at=timezone.now(), units=[other.pk])
    response = client.post(url, {fields[0]: "0.5", fields[1]: "1", "shown": stale})
    assert response.status_code == 409 and "out of date" in response.content.decode()
    assert not Rating.objects.exists()
    assert not Assignment.objects.filter(rater_id=participation.rater_id, state="done").exists()


def test_a_missing_dimension_or_a_value_off_the_scale_is_refused_with_a_message_and_nothing_is_stored(client):
    study = _study()
    url = crowd_enter(client, study)
    pq, sc = _fields(client.get(url))
    missing = client.post(url, {sc: "1"})
    assert missing.status_code == 422 and b"Perceptual quality (PQ) is missing" in missing.content
    assert b'value="1" checked' in missing.content  # the rater's choice is kept
    off_scale = client.post(url, {sc: "2", pq: "1"})
    assert off_scale.status_code == 422 and b"must be one of 0 / 0.5 / 1" in off_scale.content
    assert Rating.objects.count() == 0


def test_submitting_the_same_screen_twice_stores_one_rating(client):
    study = _study()
    url = crowd_enter(client, study)
    pq, sc = _fields(client.get(url))
    client.post(url, {sc: "1", pq: "1"})
    client.post(url, {sc: "1", pq: "1"})
    assert Rating.objects.count() == 1
    assert Rating.objects.get().revisions.count() == 0


def test_an_item_of_another_rater_cannot_be_rated(client):
    study = _study()
    crowd_enter(client, study, pid="P1")
    other = client.__class__()
    crowd_enter(other, study, pid="P2")
    theirs_position = Assignment.objects.filter(rater__external_id="P2").first().position
    response = client.post(f"/s/{study.slug}/rate/{theirs_position + 50}", {"u0-SC": "1"})
    assert response.status_code == 403
    assert Rating.objects.count() == 0


def test_a_study_closed_while_rating_refuses_the_submit(client):
    study = _study()
    url = crowd_enter(client, study)
    pq, sc = _fields(client.get(url))
    Study.objects.filter(pk=study.pk).update(state=Study.State.CLOSED)
    response = client.post(url, {sc: "1", pq: "1"})
    assert response.status_code == 410 and b"This study is closed" in response.content
    assert study.slug.encode() not in response.content  # raters know the study by its title, never its slug
    assert Rating.objects.count() == 0


def test_the_htmx_submit_swaps_in_the_next_screen_and_pushes_its_url(client):
    study = _study()
    url = crowd_enter(client, study)
    pq, sc = _fields(client.get(url))
    response = client.post(url, {sc: "1", pq: "1"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert response["HX-Push-Url"].startswith(f"/s/{study.slug}/rate/")
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="unit"') and "2 of 3" in html and "<html" not in html


def test_the_last_screen_leads_to_the_completion_page_with_the_code(client):
    study = _study(n_items=1, completion_code="THANKS-42")
    url = crowd_enter(client, study)
    pq, sc = _fields(client.get(url))
    done = client.post(url, {sc: "0", pq: "0.5"}, follow=True)
    assert b"THANKS-42" in done.content
    assert Participation.objects.get().completed_at is not None


def test_going_back_shows_the_earlier_answers_and_a_change_keeps_the_history(client):
    study = _study()
    url = crowd_enter(client, study)
    pq, sc = _fields(client.get(url))
    client.post(url, {sc: "1", pq: "1"})
    again = client.get(url)
    assert again.content.decode().count("checked") == 2
    client.post(url, {sc: "0.5", pq: "1"})
    assert Rating.objects.get().revisions.get().values == {"SC": 1.0, "PQ": 1.0}


def test_a_gold_item_looks_like_any_other_item(client):
    study = _study(n_items=2)
    url = crowd_enter(client, study)
    first = client.get(url).content.decode()
    assignment = Assignment.objects.filter(position=0).get()
    GoldAnswer.objects.create(item=assignment.item, values={"SC": 1, "PQ": 1}, note="obviously right")
    gold = client.get(url).content.decode()
    strip = lambda html: re.sub(  # noqa: E731  (the per-render tokens differ; nothing else may)
        r'name="(?:csrfmiddlewaretoken|shown)" value="[^"]+"|"X-CSRFToken": "[^"]+"', "", html)
    assert strip(first) == strip(gold)
    assert "obviously right" not in gold


def test_checklist_mode_derives_sc_as_the_minimum_over_conditions_and_stores_both(client):
    study = _study(n_items=1, task_type="subject_driven_generation", settings={"checklist_mode": True})
    url = crowd_enter(client, study)
    fields = _fields(client.get(url))
    assert [f.split("-", 1)[1] for f in fields] == ["c-artifacts", "c-objects", "c-prompt", "c-subject_1", "c-unusual"]
    prefix = fields[0].split("-")[0]
    client.post(url, {f"{prefix}-c-subject_1": "most", f"{prefix}-c-prompt": "some", f"{prefix}-c-objects": "recognizable",
                      f"{prefix}-c-artifacts": "none", f"{prefix}-c-unusual": "some"})
    rating = Rating.objects.get()
    assert rating.values == {"SC": 0.5, "PQ": 0.5}
    assert rating.checklist["subject_1"] == "most" and rating.checklist["unusual"] == "some"


def test_the_mask_guided_layout_shows_the_source_with_the_mask_over_it(client):
    study = _study(n_items=1, task_type="mask_guided_editing")
    instance = study.instances.get()
    ConditionImage.objects.create(instance=instance, role="source", image=store_image(png_bytes((10, 10, 10))))
    ConditionImage.objects.create(instance=instance, role="mask", image=store_image(png_bytes((255, 255, 255))))
    html = client.get(crowd_enter(client, study)).content.decode()
    assert "Edit instruction" in html and "Region to edit (mask)" in html and 'class="mask"' in html


def test_the_next_screens_images_are_preloaded(client):
    study = _study()
    html = client.get(crowd_enter(client, study)).content.decode()
    second = Assignment.objects.get(position=1).item.image.sha256
    assert re.search(rf'class="preload" hidden><img src="/img/{second}/768"', html)


def test_an_invited_rater_logs_in_and_gets_a_local_rater(client):
    study = _study()
    assert client.get(f"/s/{study.slug}/start").url.startswith("/accounts/login/")
    user = make_user()
    client.force_login(user)
    assert client.get(f"/s/{study.slug}/start").url.endswith("/consent")
    assert user.rater.platform == "local"


def test_a_blocked_rater_is_told_so(client):
    study = _study()
    make_rater(platform="prolific", external_id="BAD", state="blocked")
    response = client.get(f"/s/{study.slug}/start?PROLIFIC_PID=BAD")
    assert response.status_code == 403 and b"not active" in response.content


def test_a_derivative_is_rendered_once_and_then_served_from_disk_with_cache_headers(client):
    study = _study(n_items=1)
    crowd_enter(client, study)  # a rater with an assignment in the study
    item = study.items.get()
    url = reverse("rating:image", args=[item.image.sha256, 160])
    first = client.get(url)
    assert first.status_code == 200 and first["Content-Type"] == "image/webp"
    assert "immutable" in first["Cache-Control"] and "private" in first["Cache-Control"]
    with mock.patch("tasks.derivatives.Image.open", side_effect=AssertionError("Pillow was called")):
        second = client.get(url)
    assert second.status_code == 200 and b"".join(second.streaming_content)[:4] == b"RIFF"
    assert client.get(url, headers={"If-None-Match": first["ETag"]}).status_code == 304
    assert client.get(reverse("rating:image", args=[item.image.sha256, 999])).status_code == 404
    assert client.get(reverse("rating:image", args=[item.image.sha256, "full"]))["Content-Type"] == "image/png"
    assert client.head(url).status_code == 200
    assert client.post(url).status_code == 405  # images are read, never written through this URL


def test_an_image_is_checked_with_one_query_whatever_the_number_of_studies(client, django_assert_num_queries):
    study = _study(n_items=1)
    crowd_enter(client, study)
    for _ in range(3):  # more studies, raters and images do not add queries
        make_item(_study(n_items=1))
    url = reverse("rating:image", args=[study.items.get().image.sha256, 160])
    client.get(url)  # renders the derivative
    with django_assert_num_queries(1):  # the authorisation query, which also fetches the image (no session: a crowd cookie)
        assert client.get(url).status_code == 200


def test_images_are_served_only_to_those_who_may_see_them(client):
    """A rater with work in the study, its owners and staff see its output and condition images;
    an outsider, a rater of another study and a researcher of another study get 404."""
    study = make_study(task_type="control_guided_generation", units_per_session=1)
    instance = make_instance(study)
    control = store_image(png_bytes(color=(1, 2, 3)))
    ConditionImage.objects.create(instance=instance, role="control", image=control)
    item = make_item(study, instance=instance)
    urls = [reverse("rating:image", args=[sha, size]) for sha in (item.image.sha256, control.sha256)
            for size in ("full", 768)]
    other = _study(n_items=1)
    owner, stranger, admin = make_user(), make_user(), make_user(is_staff=True)
    study.owners.add(owner)
    other.owners.add(stranger)

    def statuses(c):
        return {c.get(url).status_code for url in urls}

    assert statuses(client) == {404}  # anonymous outsider who learnt the hashes
    crowd_enter(client, other, pid="OTHER1")  # a rater, but of another study
    assert statuses(client) == {404}
    crowd_enter(client, study, pid="OTHER1")  # the same browser joins this study and gets work in it
    assert statuses(client) == {200}
    for user, expected in ((stranger, {404}), (owner, {200}), (admin, {200})):
        client.logout()
        client.force_login(user)
        assert statuses(client) == expected, user


def test_a_pairwise_screen_keeps_its_recorded_sides_on_reload_and_stores_them(client):
    from tasks.models import Comparison

    study = make_study(protocol="pairwise", units_per_session=1)
    instance = make_instance(study)
    a, b = make_item(study, instance=instance, model="A"), make_item(study, instance=instance, model="B")
    Comparison.objects.create(study=study, item_a=a, item_b=b)
    url = crowd_enter(client, study)
    order = lambda html: re.findall(r'/img/(\w+)/768 1x', html)  # noqa: E731
    first = order(client.get(url).content.decode())
    assert first == order(client.get(url).content.decode()) and len(first) == 2
    left = Assignment.objects.get().presentation["left"]
    assert first[0] == (a if left == "A" else b).image.sha256
    (field,) = _fields(client.get(url))
    client.post(url, {field: "right"})
    rating = Rating.objects.get()
    assert rating.values["preference"] == ("B" if left == "A" else "A") and rating.presentation["left"] == left


def _visibility_personas():
    owner, rater_user = make_user(), make_user()
    return {"anonymous": None, "a rater": rater_user, "owner": owner, "admin": make_user(is_staff=True)}, owner


@pytest.mark.parametrize("page", ["start", "start?PROLIFIC_PID=P9", "start?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE",
                                  "rubric", "consent", "instructions", "rate", "rate/0", "more", "done"])
def test_a_draft_study_is_a_404_to_everyone_but_its_owners_and_staff(client, page):
    personas, owner = _visibility_personas()
    study = _study(state=Study.State.DRAFT, title="Secret draft title", instructions="Secret rubric words")
    study.owners.add(owner)
    for persona, user in personas.items():
        client.logout()
        if user is not None:
            client.force_login(user)
        response = (client.post if page == "more" else client.get)(f"/s/{study.slug}/{page}")
        text = response.content.decode()
        if persona in ("owner", "admin"):
            assert response.status_code != 404 or page not in ("start", "rubric"), (persona, page)
            continue
        assert response.status_code == 404, (persona, page, response.status_code)
        assert "Secret draft title" not in text and "Secret rubric words" not in text


@pytest.mark.parametrize("page", ["start", "start?PROLIFIC_PID=P9", "rubric", "consent", "instructions", "rate",
                                  "rate/0"])
def test_a_closed_study_shows_raters_a_neutral_closed_page_without_its_title_or_rubric(client, page):
    study = _study(title="Closed study title", instructions="Closed rubric words")
    crowd_enter(client, study, pid="P9")  # a rater who took part before it closed
    Study.objects.filter(pk=study.pk).update(state=Study.State.CLOSED)
    response = client.get(f"/s/{study.slug}/{page}")
    text = response.content.decode()
    assert response.status_code in (403, 410), (page, response.status_code)
    assert "Closed study title" not in text and "Closed rubric words" not in text
    if response.status_code == 410:
        assert "This study is closed" in text
    client.logout()
    client.cookies.clear()
    anonymous = client.get(f"/s/{study.slug}/{page}")
    assert "Closed study title" not in anonymous.content.decode()


def test_the_owner_still_sees_the_rubric_of_a_draft_to_check_it_before_publishing(client):
    owner = make_user()
    study = _study(state=Study.State.DRAFT, title="Draft to check")
    study.owners.add(owner)
    client.force_login(owner)
    response = client.get(f"/s/{study.slug}/rubric")
    assert response.status_code == 200 and "Draft to check" in response.content.decode()


@pytest.mark.parametrize("sha256", ["a\x00b", "%00", "A" * 64, "0" * 63, "g" * 64, "x" * 5000])
def test_a_malformed_image_hash_is_a_404_before_any_query(client, django_assert_num_queries, sha256):
    with django_assert_num_queries(0):  # a NUL reaching PostgreSQL is a 500
        assert client.get(f"/img/{sha256}/160").status_code == 404


def test_a_speeder_who_opens_every_screen_first_and_submits_later_is_credited_only_the_time_between_submits(client):
    """The red team's speeder: fetch every screen of the batch, wait, then submit them all in a
    second. Time on item counts from the later of the render and the previous submit, so only the
    first answer keeps the wait; the others get the fraction of a second they really took, and the
    too-fast rule sees it."""
    from datetime import timedelta

    from django.utils import timezone

    from raters.quality import study_quality

    study = _study(n_items=8)
    crowd_enter(client, study)
    slug = study.slug
    rater_id = Participation.objects.get(study=study).rater_id
    positions = sorted(set(Assignment.objects.filter(rater_id=rater_id).values_list("position", flat=True)))
    assert len(positions) == 8
    ten_minutes_ago = timezone.now() - timedelta(minutes=10)
    with mock.patch("django.utils.timezone.now", return_value=ten_minutes_ago):
        pages = {p: client.get(f"/s/{slug}/rate/{p}").content.decode() for p in positions}
    for position in positions:  # every answer in a quick burst, each from its own ten-minute-old page
        html = pages[position]
        form = {name: "1" for name in set(re.findall(r'name="(u0-(?:SC|PQ))"', html))}
        form["shown"] = re.search(r'name="shown" value="([^"]+)"', html).group(1)
        assert client.post(f"/s/{slug}/rate/{position}", form).status_code == 302
    times = [r.time_on_item_ms for r in Rating.objects.filter(rater_id=rater_id).order_by("created_at", "pk")]
    assert len(times) == 8
    assert times[0] >= 10 * 60 * 1000  # the first screen may really have been looked at all along
    assert all(t < 5_000 for t in times[1:]), times  # not 6.4 s each, let alone ten minutes
    assert "too_fast" in [f.code for f in study_quality(study)[rater_id].flags]


def test_without_a_render_stamp_time_on_item_is_bounded_by_the_previous_submit(client):
    from datetime import timedelta

    from django.utils import timezone

    study = _study(n_items=2)
    url = crowd_enter(client, study)
    rater_id = Participation.objects.get(study=study).rater_id
    fields = _fields(client.get(url))
    assert client.post(url, {fields[0]: "1", fields[1]: "1"}).status_code == 302  # no stamp: unknown
    first = Rating.objects.get(rater_id=rater_id)
    assert first.time_on_item_ms is None
    Rating.objects.filter(pk=first.pk).update(updated_at=timezone.now() - timedelta(seconds=20))
    second = Assignment.objects.filter(rater_id=rater_id, state="leased").get().position
    assert client.post(f"/s/{study.slug}/rate/{second}", {"u0-SC": "1", "u0-PQ": "1"}).status_code == 302
    assert 20_000 <= Rating.objects.exclude(pk=first.pk).get(rater_id=rater_id).time_on_item_ms < 60_000


@pytest.mark.parametrize("position", [2**31, 2**63, 10**30])
def test_a_position_past_any_queue_is_no_screen_not_a_server_error(client, position):
    study = _study()
    crowd_enter(client, study)
    assert client.get(f"/s/{study.slug}/rate/{position}").status_code == 302
    assert client.post(f"/s/{study.slug}/rate/{position}", {}).status_code == 403
    assert Rating.objects.count() == 0
