"""A researcher releases a study from the browser and reads its reporting card (Debian chromium)."""

from __future__ import annotations

import pytest

from tasks.models import Study
from tasks.services import rating_submit
from tests.factories import make_instance, make_item, make_user
from tests.research.test_release import _imagenhub_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _login(page, username: str) -> None:
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "pw-for-tests")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state()


@pytest.mark.parametrize("viewport", [(1280, 800), (390, 844)], ids=["laptop", "phone"])
def test_a_researcher_builds_a_release_and_sees_the_reporting_card_and_the_version_mix(browser_page, screenshot,
                                                                                      viewport):
    page = browser_page
    page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
    study, raters = _imagenhub_study()
    study.title = "Text-guided editing, spring round"
    study.instructions = "Rate SC and PQ. Watermarks do not count against PQ."
    study.save()  # a new protocol version while ratings exist: the study now mixes two
    late = make_item(study, instance=make_instance(study, key="uid_late"), model="Alpha")
    late.study = Study.objects.get(pk=study.pk)
    for rater in raters.values():
        rating_submit(rater=rater, item=late, values={"SC": 1, "PQ": 0.5}, require_assignment=False)
    owner = make_user("release-researcher")
    study.owners.add(owner)
    _login(page, "release-researcher")

    page.goto(f"/research/{study.slug}/")
    assert "mixed" in page.inner_text(".version-mix") or "2 protocol versions" in page.inner_text(".version-mix")
    page.click("text=Release & reporting card")
    page.wait_for_selector("h1:has-text('Release as a dataset')")
    page.fill("input[name=pay_per_item]", "0.05")
    page.click("button:has-text('Build release')")
    page.wait_for_selector("text=Download .zip")
    card = page.inner_text(".reporting-card")
    assert "Compensation per hour" in card and "GBP" in card and "Krippendorff" in card
    assert "This study mixes protocol versions" in page.inner_text("body")
    name = "laptop" if viewport[0] > 500 else "phone"
    screenshot(page, f"research-release-{name}")
    page.goto(f"/research/{study.slug}/")
    screenshot(page, f"research-dashboard-version-mix-{name}", full_page=False)
