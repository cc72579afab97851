"""A refused or failed submit on the htmx rating screen is explained on the screen, answers kept."""

from pathlib import Path

import pytest

from annotation_site.errors import RETRY_PAGE
from tasks.models import Assignment, Rating
from tests.browser.test_rating_browser import _demo_study, _enter, _wait_screen

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path("/tmp/shots-prod")


def _answer_first_screen(page):
    for key in ("3", "2"):
        page.keyboard.press(key)
    assert page.is_checked("input[name$='-SC'][value='1']") and page.is_checked("input[name$='-PQ'][value='0.5']")


def _shoot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)


@pytest.mark.parametrize("width", [1366, 390], ids=["laptop", "phone"])
def test_a_503_on_submit_says_try_again_keeps_the_answers_and_the_next_press_saves(browser_page, width):
    page = browser_page
    page.set_viewport_size({"width": width, "height": 800 if width > 400 else 844})
    study = _demo_study("demo-text-to-image", instances=1, units_per_session=2)
    _enter(page, study)
    _wait_screen(page, 1, 2)
    _answer_first_screen(page)

    def outage(route):
        if route.request.method == "POST":
            route.fulfill(status=503, body=RETRY_PAGE, content_type="text/html; charset=utf-8", headers={"Retry-After": "5"})
        else:
            route.continue_()

    page.route("**/rate/*", outage)
    page.keyboard.press("Enter")
    error = page.locator("[data-testid=error][data-failed]")
    error.wait_for()
    assert "Not saved" in error.inner_text() and "press Next again" in error.inner_text()
    assert page.is_checked("input[name$='-SC'][value='1']") and page.is_checked("input[name$='-PQ'][value='0.5']")
    assert Rating.objects.filter(study=study).count() == 0
    error.scroll_into_view_if_needed()
    _shoot(page, f"rating-503-{'phone' if width < 400 else 'laptop'}")

    page.unroute("**/rate/*")
    page.keyboard.press("Enter")  # the same answers, sent again
    _wait_screen(page, 2, 2)
    assert page.locator("[data-testid=error][data-failed]").count() == 0
    assert [(r.values["SC"], r.values["PQ"]) for r in Rating.objects.filter(study=study)] == [(1.0, 0.5)]


def test_a_403_from_the_server_shows_its_reason_and_keeps_the_answers(browser_page):
    page = browser_page
    study = _demo_study("demo-text-to-image", instances=1, units_per_session=2)
    _enter(page, study)
    _wait_screen(page, 1, 2)
    _answer_first_screen(page)
    Assignment.objects.filter(study=study).delete()  # e.g. an admin reset the study meanwhile
    page.keyboard.press("Enter")
    error = page.locator("[data-testid=error][data-failed]")
    error.wait_for()
    assert "Not your item: This item is not assigned to you (any more)." in error.inner_text()
    assert "Reload the page" in error.inner_text()
    assert page.is_checked("input[name$='-SC'][value='1']")
    _shoot(page, "rating-403-laptop")


def test_a_dropped_connection_is_explained_too(browser_page):
    page = browser_page
    study = _demo_study("demo-text-to-image", instances=1, units_per_session=2)
    _enter(page, study)
    _wait_screen(page, 1, 2)
    _answer_first_screen(page)
    page.route("**/rate/*", lambda route: route.abort("connectionreset") if route.request.method == "POST" else route.continue_())
    page.keyboard.press("Enter")
    error = page.locator("[data-testid=error][data-failed]")
    error.wait_for()
    assert "the connection to the site failed" in error.inner_text()
    assert page.is_checked("input[name$='-PQ'][value='0.5']")
