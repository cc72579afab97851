"""The rater-inclusive intervals in a real browser: a researcher reads the leaderboard and the judges
page of a crowd study and of a fixed-panel one, and switches the study's raters on its dashboard.
Screenshots under artifacts/screenshots/intervals-*.png (copies in docs/screenshots)."""

import pytest

from analysis.science import agreement
from tasks.models import Study
from tests.analysis.test_report import _judged_study
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _login(page, username):
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "pw-for-tests")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url("**/")


def _crowd_study_open(page, tmp_path):
    """A judged study of sampled raters, its owner logged in at laptop width."""
    page.set_viewport_size({"width": 1280, "height": 800})
    owner = make_user(username="researcher")
    study, _ = _judged_study(tmp_path, n_items=12)
    study.owners.add(owner)
    Study.objects.filter(pk=study.pk).update(rater_sampling="sampled")
    _login(page, "researcher")
    return study


def test_a_researcher_sees_which_intervals_include_the_raters_and_switches_them(browser_page, screenshot, tmp_path):
    page = browser_page
    study = _crowd_study_open(page, tmp_path)

    page.goto(f"/research/{study.slug}/leaderboard/?dim=O")
    assert "items and raters" in page.locator("[data-testid=interval-kind]").inner_text()
    assert page.locator("td span[title='items resampled, raters fixed']").count() == 2  # one per model
    screenshot(page, "intervals-leaderboard-crowd")

    page.goto(f"/studies/{study.slug}/judges/")
    assert "items and raters" in page.locator("[data-testid=interval-kind]").inner_text()
    assert page.locator("td:has-text('SRCC [')").count() >= 2
    screenshot(page, "intervals-judges-crowd")

    page.goto(f"/research/{study.slug}/")
    page.wait_for_load_state("networkidle")  # the plots are drawn by requests of their own
    page.select_option("select[name=rater_sampling]", "fixed")
    page.click("form.threshold-form button")
    page.wait_for_selector("text=Fixed (experts)")
    screenshot(page, "intervals-dashboard-setting", full_page=False)
    page.goto(f"/research/{study.slug}/leaderboard/?dim=O")
    assert "items only" in page.locator("[data-testid=interval-kind]").inner_text()
    assert page.locator("td span[title='items resampled, raters fixed']").count() == 0
    screenshot(page, "intervals-leaderboard-fixed")


def test_a_large_crowd_study_says_its_intervals_are_the_jackknife(browser_page, screenshot, tmp_path, monkeypatch):
    """Past JACKKNIFE_ABOVE (here: any size) the model means and agreement come from the
    delete-one jackknife over items plus over raters, and the page says so."""
    monkeypatch.setattr(agreement, "JACKKNIFE_ABOVE", 0)
    page = browser_page
    study = _crowd_study_open(page, tmp_path)
    page.goto(f"/research/{study.slug}/leaderboard/?dim=O")
    text = page.locator("[data-testid=interval-kind]").inner_text()
    assert "items and raters" in text and "delete-one jackknife" in text
    assert "item-only agreement intervals the jackknife over items" in text
    assert page.locator("td:has-text('[')").count() >= 2  # the models' intervals are there
    screenshot(page, "intervals-leaderboard-jackknife")


def test_a_large_fixed_panel_study_says_its_agreement_intervals_are_the_jackknife(browser_page, screenshot, tmp_path,
                                                                                 monkeypatch):
    """Raters fixed, past JACKKNIFE_ABOVE: the agreement intervals over items are the delete-one
    jackknife, and the note under the leaderboard says so."""
    monkeypatch.setattr(agreement, "JACKKNIFE_ABOVE", 0)
    page = browser_page
    page.set_viewport_size({"width": 1280, "height": 800})
    owner = make_user(username="panel-owner")
    study, _ = _judged_study(tmp_path, n_items=12)
    study.owners.add(owner)
    assert study.rater_sampling == "fixed"
    _login(page, "panel-owner")
    page.goto(f"/research/{study.slug}/leaderboard/?dim=O")
    text = page.locator("[data-testid=interval-kind]").inner_text()
    assert "items only" in text and "agreement intervals use the delete-one jackknife over items" in text
    screenshot(page, "intervals-leaderboard-fixed-jackknife")
    page.goto(f"/studies/{study.slug}/judges/")  # the judges page carries the same note
    assert "agreement intervals use the delete-one jackknife" in page.locator("[data-testid=interval-kind]").inner_text()
    screenshot(page, "intervals-judges-fixed-jackknife")
