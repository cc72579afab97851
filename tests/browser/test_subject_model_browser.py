"""The subject model on the researcher's pages in a real browser: the dashboard card and the
rater table's new column, the leaderboard's z-MOS / subject-model toggle, a rater's bias and
inconsistency. Screenshots under artifacts/screenshots/subject-*.png."""

import pytest
from django.urls import reverse

from tests.analysis.test_subject_report import rated_study
from tests.conftest import SCREENSHOTS, browser_login
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_researcher_reads_the_subject_model_on_dashboard_leaderboard_and_rater_page(browser_page, screenshot):
    page = browser_page
    owner = make_user(username="researcher")
    study, raters = rated_study()
    study.title = "Counting · subject model pilot"
    study.save(update_fields=["title"])
    study.owners.add(owner)
    browser_login(page, "researcher")

    page.goto(reverse("research-study", args=[study.slug]))
    card = page.locator("[data-testid=subject-model]")
    card.wait_for()
    assert card.locator("tbody tr").count() == 2
    assert "inconsistent" in card.inner_text()
    flagged = page.locator(f"tr:has(a[href$='/raters/{raters[6].id}/']) td").last
    assert "perception" in flagged.inner_text()
    card.scroll_into_view_if_needed()
    screenshot(page, "subject-dashboard")

    planning = page.locator("[data-testid=planning]")
    page.fill("input[name=plan_halfwidth]", "0.4")
    page.click("[data-testid=planning] button:text('Plan')")
    page.wait_for_url("**plan_halfwidth=0.4**")
    assert "Raters per item for a ±0.4 item CI" in planning.inner_text()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    planning.screenshot(path=str(SCREENSHOTS / "subject-planning.png"))  # the card alone
    page.click("[data-testid=subject-model] a:text('leaderboard')")
    page.wait_for_url("**method=subject**")
    assert page.locator(".method-toggle a.active").inner_text() == "Subject model (P.913)"
    assert page.locator("table.leaderboard tbody tr").count() == 2
    screenshot(page, "subject-leaderboard")
    page.click(".method-toggle a:text('z-MOS')")
    page.wait_for_selector(".method-toggle a.active:text('z-MOS')")

    page.goto(reverse("raters:detail", args=[study.slug, raters[6].id]))
    table = page.locator("table.subject-model")
    assert table.locator("tbody tr").count() == 2
    assert page.locator(".flag-list li:has-text('Inconsistent (subject model, no gold)')").count() == 1
    screenshot(page, "subject-rater")
