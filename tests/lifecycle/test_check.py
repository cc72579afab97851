"""Check (issue 14, step 3): preview a draft's screens as a rater sees them with nothing recorded,
browse and filter its items with their conditions, and see each screen at phone width."""

import io

import pytest
from django.urls import reverse

from raters.models import Rater
from tasks.builder import StudySpec, study_build_from_bundle
from tasks.models import Assignment, Participation, Rating, ScreenReport
from tasks.sample_bundles import sample_bundle
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def _draft(protocol: str, task: str, owner, **settings):
    study = study_build_from_bundle(upload=io.BytesIO(sample_bundle(protocol, task)), owner=owner, spec=StudySpec(
        slug=f"check-{protocol}-{task}".replace("_", "-"), title=f"Check {task}", protocol=protocol,
        task_type=task, settings=settings))
    assert study.state == "draft"
    return study


def _rows():
    return (Rating.objects.count(), Assignment.objects.count(), Rater.objects.count(), Participation.objects.count(),
            ScreenReport.objects.count())


@pytest.fixture
def owner(client):
    user = make_user("checker")
    client.force_login(user)
    return user


@pytest.mark.parametrize("protocol, task, answer, screens", [
    ("imagenhub", "mask_guided_editing", {"u0-SC": "1", "u0-PQ": "0.5"}, 4),
    ("evalmi", "mixed", {f"u{i}-{k}": v for i in range(3) for k, v in
                         (("perception", "4"), ("correspondence", "3"), ("q1", "yes"), ("q2", "no"), ("q3", "yes"))}, 2),
    ("pairwise", "text_to_image", {"u0-preference": "left"}, 2),
])
def test_the_preview_shows_the_raters_screen_and_records_nothing(client, owner, protocol, task, answer, screens):
    study = _draft(protocol, task, owner)
    before = _rows()
    url = reverse("research-study-preview", args=[study.slug])
    page = client.get(url)
    html = page.content.decode()
    assert page.status_code == 200
    assert 'class="unit-form"' in html and f"1 of {screens}" in html  # the rater's screen template
    assert "Nothing you do here is recorded" in html
    assert f'<a href="/research/{study.slug}/" target="_top">Back to the study</a>' in html
    assert "Report a problem" not in html  # a report would be stored: not offered in a preview
    missing = client.post(f"{url}?n=1", {})
    assert missing.status_code == 422 and 'data-testid="error">' in missing.content.decode()
    assert "missing" in missing.content.decode() or "must be one of" in missing.content.decode()
    done = client.post(f"{url}?n=1", answer)
    assert done.status_code == 302 and done["Location"].endswith("?n=2")
    last = client.post(f"{url}?n={screens}", answer)
    assert last["Location"].endswith("?n=1")  # round again, no done page, no code
    assert _rows() == before


def test_the_preview_of_an_evalmi_screen_names_the_image_with_the_missing_answer(client, owner):
    study = _draft("evalmi", "mixed", owner)
    answer = {f"u{i}-{k}": v for i in range(3) for k, v in
              (("perception", "4"), ("correspondence", "3"), ("q1", "yes"), ("q2", "no"), ("q3", "yes"))}
    del answer["u1-correspondence"]
    response = client.post(reverse("research-study-preview", args=[study.slug]) + "?n=1", answer)
    assert "Image 2:" in response.content.decode()


def test_the_preview_may_be_framed_by_this_site_only(client, owner):
    study = _draft("imagenhub", "text_to_image", owner)
    response = client.get(reverse("research-study-preview", args=[study.slug]))
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    assert "frame-ancestors 'self'" in response["Content-Security-Policy"]
    other = client.get(reverse("research-study", args=[study.slug]))
    assert other["X-Frame-Options"] == "DENY" and "frame-ancestors 'none'" in other["Content-Security-Policy"]


def test_the_phone_preview_frames_each_screen_at_390_px(client, owner):
    study = _draft("imagenhub", "subject_driven_generation", owner)
    html = client.get(reverse("research-study-phone-preview", args=[study.slug]) + "?n=2").content.decode()
    assert 'width="390"' in html and f'src="/research/{study.slug}/preview/?n=2"' in html
    assert 'data-testid="study-nav"' in html


def test_outsiders_get_404_on_the_check_pages(client, owner):
    study = _draft("imagenhub", "text_to_image", owner)
    outsider = make_user("outsider-researcher")  # a researcher: owns a study of their own
    _draft("imagenhub", "control_guided_generation", outsider)
    client.force_login(outsider)
    for name in ("research-study-preview", "research-study-items", "research-study-phone-preview"):
        assert client.get(reverse(name, args=[study.slug])).status_code == 404, name
    assert client.post(reverse("research-study-preview", args=[study.slug]), {"u0-SC": "1"}).status_code == 404


def test_the_items_page_filters_and_paginates_with_conditions(client, owner):
    study = _draft("imagenhub", "multi_concept_composition", owner)
    html = client.get(reverse("research-study-items", args=[study.slug])).content.decode()
    assert 'data-testid="items"' in html and html.count("<tr>") == 1 + 4
    assert "Subject 1" in html or "subject_1" in html
    assert html.count("/img/") >= 4 * 3  # output and two subject images a row
    one = client.get(reverse("research-study-items", args=[study.slug]), {"model": "ModelB"}).content.decode()
    assert one.count("<tr>") == 1 + 2 and "ModelA</td>" not in one
    found = client.get(reverse("research-study-items", args=[study.slug]), {"q": "green triangle"}).content.decode()
    assert found.count("<tr>") == 1 + 2
    none = client.get(reverse("research-study-items", args=[study.slug]), {"condition": "none"}).content.decode()
    assert "No items match these filters" in none
    hostile = client.get(reverse("research-study-items", args=[study.slug]),
                         {"q": "x\x00" * 500, "model": "<script>", "page": "99999999999"})
    assert hostile.status_code == 200


def test_the_items_page_pages_through_many_items(client, owner, monkeypatch):
    from tasks import lifecycle_views

    monkeypatch.setattr(lifecycle_views, "ITEMS_PER_PAGE", 3)
    study = _draft("imagenhub", "text_to_image", owner)
    first = client.get(reverse("research-study-items", args=[study.slug])).content.decode()
    assert "Page 1 of 2" in first and "page=2" in first
    second = client.get(reverse("research-study-items", args=[study.slug]), {"page": "2", "model": "ModelA"})
    assert "Page 1 of 1" in second.content.decode()  # ModelA alone fits one page
