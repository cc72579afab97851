"""A new researcher configures, publishes, copies the Prolific link, closes mid-session and
downloads the Prolific decisions, never opening the admin; a Prolific rater caught by the close
gets their code on a phone. Screenshots under artifacts/screenshots/configure-*.png."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import Permission

from tasks.models import Participation, Study
from tests.conftest import browser_login, wait_until
from tests.factories import make_instance, make_item, make_study, make_user, png_bytes

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _decisions(page, tmp_path, *, full: bool = False):
    with page.expect_download() as download:
        page.click("[data-testid=prolific-decisions]")
    path = tmp_path / "decisions.csv"
    download.value.save_as(path)
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    return rows if full else [(r["participant_id"], r["session_id"], r["decision"]) for r in rows]


def test_a_new_researcher_configures_publishes_closes_and_pays_without_the_admin(
        chromium_browser, live_server, browser_page, screenshot, tmp_path):
    page = browser_page
    page.context.set_default_timeout(90_000)  # a long walk on a small, shared machine
    researcher = make_user("new-researcher")
    researcher.user_permissions.add(Permission.objects.get(codename="add_study"))
    study = make_study(slug="t2i-pilot", title="Text-to-image pilot", state=Study.State.DRAFT, units_per_session=3)
    study.owners.add(researcher)
    for key in range(3):
        instance = make_instance(study, key=f"uid_{key}", prompt=f"a red cube number {key}")
        for model in ("Alpha", "Beta"):
            make_item(study, instance=instance, model=model)
    browser_login(page, "new-researcher")

    # Configure: codes per outcome, pay, quality policy
    page.goto(f"/research/{study.slug}/")
    page.click("a:text('Configure')")
    page.wait_for_url("**/configure/")
    page.fill("input[name=completion_code]", "C1A2B3")
    page.fill("input[name=screened_out_code]", "SCREENED9")
    page.fill("input[name=closed_code]", "CLOSED7")
    page.fill("textarea[name=consent_text]", "We keep your ratings and your Prolific id only.")
    page.fill("input[name=estimated_minutes]", "5")
    page.fill("input[name=pay_per_hour]", "9.00")
    page.fill("input[name=contact]", "lab@example.org")
    page.fill("input[name=seconds_per_unit_estimate]", "20")
    page.fill("input[name=gold_share]", "0.1")
    page.check("input[name=qualification_required]")
    page.uncheck("input[name=qualification_required]")
    page.select_option("select[name=behaviour_action]", "pause")
    page.click("button:text('Save settings')")
    page.wait_for_selector("text=Settings saved.")
    # 6 items × 3 raters / 0.9 = 20 screens × 20 s at 9.00/h = 1.00
    assert page.inner_text("[data-testid=cost-total]") == "1.00 GBP"
    page.set_input_files("input[name=image]", files=[{"name": "example.png", "mimeType": "image/png",
                                                      "buffer": png_bytes(color=(40, 160, 60), size=(320, 240))}])
    page.fill("textarea[name=caption]", "SC 1, PQ 1: every object of the prompt is there, no artefacts.")
    page.click("button:text('Add example')")
    page.wait_for_selector("text=Example added.")
    wait_until(page, "document.querySelector('.example img') && document.querySelector('.example img').naturalWidth > 0")
    screenshot(page, "configure-draft")
    study.refresh_from_db()
    assert (study.completion_code, study.closed_code, str(study.pay_per_hour)) == ("C1A2B3", "CLOSED7", "9.00")

    # Publish, then copy the Prolific link
    page.click("a:text('Publish…')")
    page.wait_for_url("**/launch/")
    screenshot(page, "configure-launch-draft")
    page.click("[data-testid=publish]")
    page.wait_for_selector("text=is open for rating")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page.click("[data-testid=copy-prolific]")
    wait_until(page, "document.querySelector('[data-testid=copy-prolific]').textContent === 'Copied'")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == (f"{live_server.url}/s/{study.slug}/start?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
                      "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}")
    screenshot(page, "configure-launch")

    # A Prolific rater on a phone opens the link as Prolific fills it, and rates one screen
    phone = chromium_browser.new_context(viewport={"width": 390, "height": 844}, base_url=live_server.url,
                                         is_mobile=True, has_touch=True)
    phone.set_default_timeout(90_000)
    rater = phone.new_page()
    link = copied.replace("{{%PROLIFIC_PID%}}", "PIDPHONE1").replace("{{%STUDY_ID%}}", "STUDY1") \
        .replace("{{%SESSION_ID%}}", "SESSION1")
    rater.goto(link)
    rater.wait_for_selector("text=We keep your ratings and your Prolific id only.")
    assert rater.locator("text=9.00 GBP per hour").count() == 1
    screenshot(rater, "configure-consent-phone")
    rater.check("input[name=agree]")
    rater.click("button:text('Continue')")
    rater.wait_for_url("**/instructions")
    assert rater.locator(".worked-example img").count() == 1
    wait_until(rater, "document.querySelector('.worked-example img').naturalWidth > 0")
    screenshot(rater, "configure-instructions-phone")
    rater.click("button:text('Start rating')")
    rater.wait_for_url("**/rate/*")
    for choice in rater.locator(".choice[data-key='3']").all():
        choice.click()
    rater.click("button[type=submit]:has-text('Next')")
    wait_until(rater, "document.body.textContent.indexOf('2 of 3') >= 0")

    # The researcher closes the study mid-session
    page.goto(f"/research/{study.slug}/")
    page.click("button:text('Close')")
    page.wait_for_selector("text=is closed")

    # The rater's next submit takes them to their code and back to Prolific, not to a slug
    for choice in rater.locator(".choice[data-key='3']").all():
        choice.click()
    rater.click("button[type=submit]:has-text('Next')")
    rater.wait_for_selector("[data-testid=exit]")
    assert rater.inner_text("[data-testid=completion-code]") == "C1A2B3"
    assert rater.get_attribute("[data-testid=prolific-return]", "href") == \
        "https://app.prolific.com/submissions/complete?cc=C1A2B3"
    assert study.slug not in rater.content()
    screenshot(rater, "configure-closed-phone")
    phone.close()
    assert Participation.objects.get(rater__external_id="PIDPHONE1").completed_at is not None

    # Pay: the Prolific decisions from the raters page. The test's rater clicked faster than any
    # person, so screening flags them and the list leaves them to review; the researcher decides.
    page.goto(f"/studies/{study.slug}/raters/")
    screenshot(page, "configure-raters")
    assert _decisions(page, tmp_path) == [("PIDPHONE1", "SESSION1", "REVIEW")]
    page.click("a:text('prolific:PIDPHONE1')")
    page.select_option("select[name=decision]", "approve")
    page.fill("textarea[name=reason]", "Fast but consistent on the checks")
    page.click("button:text('Save decision')")
    page.wait_for_selector("text=is now approved in this study")
    page.goto(f"/studies/{study.slug}/raters/")
    rows = _decisions(page, tmp_path, full=True)
    assert [(r["participant_id"], r["decision"], r["reason"]) for r in rows] == [
        ("PIDPHONE1", "APPROVE", "Fast but consistent on the checks")]

    # Export: the page says before download that this balanced study's TSVs are sparse
    page.goto(f"/research/{study.slug}/")
    page.click("a:text('Export dataset')")
    page.wait_for_selector("[data-testid=sparse-warning]")
    screenshot(page, "configure-export")

    # While closed, the draft-only fields are locked and say so
    page.goto(f"/research/{study.slug}/configure/")
    assert page.locator("[data-testid=open-lock]").count() == 1
    assert page.locator("textarea[name=instructions]").is_disabled()
    assert not page.locator("input[name=closed_code]").is_disabled()
    screenshot(page, "configure-closed")
