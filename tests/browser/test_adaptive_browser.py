"""A researcher switches a draft study to adaptive assignment from the settings page, publishes it,
and a crowd rater's first session is chosen by a recorded allocation round that the API shows.
Screenshot: artifacts/screenshots/configure-adaptive.png."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission

from tasks.models import AllocationRound, Study
from tests.conftest import browser_login
from tests.factories import make_instance, make_item, make_study, make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_researcher_turns_on_adaptive_assignment_and_the_first_claim_is_recorded(
        chromium_browser, live_server, browser_page, screenshot):
    page = browser_page
    page.context.set_default_timeout(90_000)
    researcher = make_user("adaptive-researcher")
    researcher.user_permissions.add(Permission.objects.get(codename="add_study"))
    study = make_study(slug="adaptive-pilot", title="Adaptive pilot", state=Study.State.DRAFT, units_per_session=3)
    study.owners.add(researcher)
    for key in range(4):
        instance = make_instance(study, key=f"uid_{key}", prompt=f"a blue sphere number {key}")
        for model in ("Alpha", "Beta", "Gamma"):
            make_item(study, instance=instance, model=model)
    browser_login(page, "adaptive-researcher")

    page.goto(f"/research/{study.slug}/configure/")
    page.fill("input[name=completion_code]", "ADAPT1")
    page.fill("textarea[name=consent_text]", "We keep your ratings and your Prolific id only.")
    page.fill("input[name=estimated_minutes]", "5")
    page.fill("input[name=pay_per_hour]", "9.00")
    page.fill("input[name=contact]", "lab@example.org")
    page.select_option("select[name=assignment_mode]", Study.AssignmentMode.ADAPTIVE)
    page.fill("input[name=adaptive_target_halfwidth]", "0.5")
    page.fill("input[name=adaptive_alpha]", "0.05")
    page.fill("input[name=adaptive_margin]", "0.2")
    page.fill("input[name=adaptive_min_ratings]", "1")
    page.click("button:text('Save settings')")
    page.wait_for_selector("text=Settings saved.")
    page.locator("text=Adaptive assignment").first.scroll_into_view_if_needed()
    screenshot(page, "configure-adaptive")
    study.refresh_from_db()
    assert study.assignment_mode == Study.AssignmentMode.ADAPTIVE
    assert (study.adaptive_target_halfwidth, study.adaptive_margin, study.adaptive_min_ratings) == (0.5, 0.2, 1)

    # A hostile value is refused with the field named, and nothing is stored.
    page.fill("input[name=adaptive_alpha]", "0.9")
    page.click("button:text('Save settings')")
    page.wait_for_selector("[data-testid=form-errors]")
    assert page.locator("span.error", has_text="less than or equal to 0.2").count() == 1
    study.refresh_from_db()
    assert study.adaptive_alpha == 0.05

    page.goto(f"/research/{study.slug}/launch/")
    page.click("[data-testid=publish]")
    page.wait_for_selector("text=is open for rating")

    # A crowd rater starts: consent, instructions, the first screen; the claim records a round.
    context = chromium_browser.new_context(base_url=live_server.url)
    context.set_default_timeout(90_000)
    rater = context.new_page()
    rater.goto(f"/s/{study.slug}/start?PROLIFIC_PID=PIDADAPT1&STUDY_ID=STUDY1&SESSION_ID=SESSION1")
    rater.check("input[name=agree]")
    rater.click("button:text('Continue')")
    rater.wait_for_url("**/instructions")
    rater.click("button:text('Start rating')")
    rater.wait_for_url("**/rate/*")
    assert AllocationRound.objects.filter(study=study).exists()
    context.close()

    response = page.request.get(f"/api/studies/{study.slug}/allocation/")
    assert response.status == 200
    rounds = json.loads(response.text())
    assert rounds, "the API lists the recorded round"
