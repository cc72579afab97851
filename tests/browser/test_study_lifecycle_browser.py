"""The whole study lifecycle in a real browser, as a new researcher who never opens the admin.

Build a study from the builder's own sample bundle, configure codes, pay and the quality policy,
preview it (nothing recorded), publish and copy the Prolific link; three Prolific raters take it
(the researcher rejects one after their first screen, who then gets the screened-out code); the
dashboard shows them; an offline metric judge runs from the judges page; the study is closed; the
Prolific decisions and the dataset export are downloaded and opened. Screenshots under
artifacts/screenshots/e2e-*.png.
"""

from __future__ import annotations

import csv
import io
import zipfile

import pytest
from django.contrib.auth.models import Permission

from analysis.models import JudgeRun
from raters.models import Rater
from tasks.models import Assignment, Participation, Rating, Study
from tests.conftest import browser_login, wait_until
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SLUG = "shapes-pilot"


def _rate_screen(rater) -> None:
    """Answer every scale of the screen (the middle of each) and submit."""
    for choice in rater.locator(".choice[data-key='2']").all():
        choice.click()
    rater.click("button[type=submit]:has-text('Next')")


def _enter(browser, url: str, link: str, pid: str):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=url)
    context.set_default_timeout(90_000)
    rater = context.new_page()
    rater.goto(link.replace("{{%PROLIFIC_PID%}}", pid).replace("{{%STUDY_ID%}}", "PSTUDY")
               .replace("{{%SESSION_ID%}}", f"S-{pid}"))
    rater.check("input[name=agree]")
    rater.click("button:text('Continue')")
    rater.wait_for_url("**/instructions")
    rater.click("button:text('Start rating')")
    rater.wait_for_url("**/rate/*")
    return context, rater


def test_a_new_researcher_runs_a_crowd_study_from_bundle_to_payment_without_the_admin(
        chromium_browser, live_server, browser_page, screenshot, tmp_path):
    page = browser_page
    page.context.set_default_timeout(90_000)  # a long walk on a small, shared machine
    researcher = make_user("first-study", email="first@example.org")
    researcher.user_permissions.add(Permission.objects.get(codename="add_study"))
    browser_login(page, "first-study")

    # 1. Create: the builder's sample bundle, uploaded back
    page.goto("/research/new/")
    page.select_option("select[name=protocol]", "imagenhub")
    page.select_option("select[name=task_type]", "text_to_image")
    sample = page.request.get("/research/new/sample/imagenhub/text_to_image.zip")
    assert sample.ok and zipfile.ZipFile(io.BytesIO(sample.body())).read("manifest.csv").startswith(b"instance,")
    page.fill("input[name=slug]", SLUG)
    page.fill("input[name=title]", "Shapes pilot")
    page.set_input_files("input[name=bundle]", files=[{"name": "bundle.zip", "mimeType": "application/zip",
                                                       "buffer": sample.body()}])
    screenshot(page, "e2e-1-builder")
    page.click("button:text('Check and create draft')")
    page.wait_for_url(f"**/research/{SLUG}/")
    study = Study.objects.get(slug=SLUG)
    assert study.state == "draft" and study.items.count() == 4 and study.owners.filter(pk=researcher.pk).exists()

    # 2. Configure: codes per outcome, session size, pay, consent
    page.click("[data-testid=study-nav] a:text('Configure')")
    page.wait_for_url("**/configure/")
    page.fill("input[name=completion_code]", "DONE4242")
    page.fill("input[name=screened_out_code]", "OUT5151")
    page.fill("input[name=closed_code]", "SHUT6060")
    page.fill("input[name=units_per_session]", "4")
    page.fill("input[name=raters_per_item]", "3")
    page.fill("textarea[name=consent_text]", "We keep your ratings and your Prolific id, nothing else.")
    page.fill("input[name=estimated_minutes]", "4")
    page.fill("input[name=pay_per_hour]", "12.00")
    page.fill("input[name=seconds_per_unit_estimate]", "15")
    page.click("button:text('Save settings')")
    page.wait_for_selector("text=Settings saved.")
    # 4 units × 3 raters = 12 screens × 15 s at 12.00/h = 0.60
    assert page.inner_text("[data-testid=cost-total]").startswith("0.60")
    screenshot(page, "e2e-2-configure")
    study.refresh_from_db()
    assert (study.completion_code, study.screened_out_code, study.closed_code, study.units_per_session,
            study.raters_per_item) == ("DONE4242", "OUT5151", "SHUT6060", 4, 3)

    # 3. Check: preview the draft as a rater sees it; nothing is recorded
    before = (Rating.objects.count(), Assignment.objects.count(), Rater.objects.count(), Participation.objects.count())
    page.click("[data-testid=study-nav] a:text('Preview')")
    page.wait_for_selector("#unit")
    screenshot(page, "e2e-3-preview", full_page=False)
    assert (Rating.objects.count(), Assignment.objects.count(), Rater.objects.count(),
            Participation.objects.count()) == before

    # 4. Launch: publish, copy the Prolific link
    page.goto(f"/research/{SLUG}/")  # the preview is the rater's page: back to the study's pages
    page.click("[data-testid=study-nav] a:text('Launch')")
    page.wait_for_url("**/launch/")
    page.click("[data-testid=publish]")
    page.wait_for_selector("text=is open for rating")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page.click("[data-testid=copy-prolific]")
    wait_until(page, "document.querySelector('[data-testid=copy-prolific]').textContent === 'Copied'")
    link = page.evaluate("navigator.clipboard.readText()")
    assert link.startswith(f"{live_server.url}/s/{SLUG}/start?PROLIFIC_PID=")
    screenshot(page, "e2e-4-launch")

    # 5. Three Prolific raters; the researcher rejects the third after their first screen
    raters = {pid: _enter(chromium_browser, live_server.url, link, pid) for pid in ("PIDONE", "PIDTWO", "PIDTHREE")}
    context, third = raters["PIDTHREE"]
    _rate_screen(third)
    wait_until(third, "document.body.textContent.indexOf('2 of 4') >= 0")
    page.goto(f"/studies/{SLUG}/raters/")
    page.click("a:text('prolific:PIDTHREE')")
    page.select_option("select[name=decision]", "reject")
    page.fill("textarea[name=reason]", "Answered the middle of every scale")
    page.click("button:text('Save decision')")
    page.wait_for_selector("text=is now rejected in this study")
    _rate_screen(third)
    third.wait_for_selector("[data-testid=exit]")
    assert third.inner_text("[data-testid=completion-code]") == "OUT5151"
    assert SLUG not in third.content()
    screenshot(third, "e2e-5-screened-out")
    context.close()
    for pid in ("PIDONE", "PIDTWO"):
        context, rater = raters[pid]
        for _ in range(4):
            _rate_screen(rater)
        rater.wait_for_selector("[data-testid=completion-code]")
        assert rater.inner_text("[data-testid=completion-code]") == "DONE4242"
        if pid == "PIDONE":
            screenshot(rater, "e2e-5-done")
        context.close()
    assert Rating.objects.filter(study=study).count() == 9  # 4 + 4 + the rejected rater's one

    # 6. Monitor: the dashboard shows the raters and their standing
    page.goto(f"/research/{SLUG}/")
    live = page.inner_text("#live")
    assert "prolific:PIDONE" in live and "prolific:PIDTHREE" in live
    screenshot(page, "e2e-6-dashboard")

    # 7. Judges: an offline metric from the page (no endpoint needed)
    page.click("[data-testid=study-nav] a:text('Judges')")
    page.select_option("select[name=kind]", "metric")
    page.check("input[name=metrics][value=sharpness]")
    page.click("#judge-start button[type=submit]")
    page.wait_for_selector("table.compact th:has-text('sharpness')", timeout=120_000)
    run = JudgeRun.objects.get(study=study)
    assert (run.state, run.done, run.total) == ("done", 4, 4)
    screenshot(page, "e2e-7-judges")

    # 8. Close the study
    page.goto(f"/research/{SLUG}/")
    page.click("button:text('Close')")
    page.wait_for_selector("text=is closed")
    assert Study.objects.get(pk=study.pk).state == "closed"

    # 9. Pay: the Prolific decisions
    page.goto(f"/studies/{SLUG}/raters/")
    with page.expect_download() as download:
        page.click("[data-testid=prolific-decisions]")
    path = tmp_path / "decisions.csv"
    download.value.save_as(path)
    rows = {row["participant_id"]: row for row in csv.DictReader(io.StringIO(path.read_text()))}
    assert set(rows) == {"PIDONE", "PIDTWO", "PIDTHREE"}
    assert rows["PIDTHREE"]["decision"] == "REJECT" and "middle of every scale" in rows["PIDTHREE"]["reason"]
    assert rows["PIDONE"]["session_id"] == "S-PIDONE" and rows["PIDONE"]["decision"] in ("APPROVE", "REVIEW")
    screenshot(page, "e2e-9-raters")

    # 10. Export: the dataset zip, opened
    page.goto(f"/research/{SLUG}/")
    page.click("a:text('Export dataset')")
    page.wait_for_url(f"**/studies/{SLUG}/exports/")
    screenshot(page, "e2e-10-export")
    with page.expect_download() as download:
        page.click("[data-testid=download-export]")
    archive = zipfile.ZipFile(download.value.path())
    votes_name = next(n for n in archive.namelist() if n.endswith("votes.csv"))
    votes = list(csv.DictReader(io.StringIO(archive.read(votes_name).decode("utf-8-sig"))))
    assert len(votes) == 9
    items_name = next(n for n in archive.namelist() if n.endswith("items.csv"))
    items = list(csv.DictReader(io.StringIO(archive.read(items_name).decode("utf-8-sig"))))
    assert {row["prompt"] for row in items} == {"two red circles left of a blue square",
                                                  "a green triangle above a yellow star"}
    assert all(row["image_sha256"] for row in items)
