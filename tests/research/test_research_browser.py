"""A researcher in a real browser (Debian chromium): build a study from a bundle, watch the dashboard.

Screenshots go to artifacts/screenshots/research-*.png (git-ignored) and are looked at by hand.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from analysis.models import Judge, JudgeRun, JudgeScore
from tests.conftest import SCREENSHOTS
from tests.factories import make_user, png_bytes
from tests.research.bundles import csv_manifest, make_bundle, text_to_image_bundle
from tests.research.test_exports import _imagenhub_study_with_votes

from tests.conftest import wait_until as _wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]




@pytest.fixture
def page(browser_page):
    return browser_page


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def _login(page, username: str) -> None:
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "pw-for-tests")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state()


def test_a_researcher_fixes_a_broken_bundle_and_gets_a_draft_study(page, tmp_path):
    make_user("researcher").user_permissions.add(Permission.objects.get(codename="add_study"))
    _login(page, "researcher")
    broken = tmp_path / "broken.zip"
    rows = [{"instance": "s1", "model": "A", "output": "gone.png", "colour": "red"},
            {"instance": "s2", "model": "A", "output": "tiny.png", "colour": "blue"}]
    broken.write_bytes(make_bundle({"manifest.csv": csv_manifest(rows), "tiny.png": png_bytes(size=(4, 4))}).getvalue())
    page.goto("/research/new/")
    page.set_input_files("input[name=bundle]", str(broken))
    page.fill("input[name=slug]", "browser-built")
    page.fill("input[name=title]", "Built in a browser")
    page.click("button.primary")
    page.wait_for_selector("#problems")
    assert "nothing was created" in page.inner_text("#problems")
    assert "unknown column(s) 'colour'" in page.inner_text("#problems")
    _shot(page, "research-builder-problems")

    rows = [{"instance": "s1", "model": "A", "output": "gone.png"}, {"instance": "s2", "model": "A", "output": "tiny.png"}]
    broken.write_bytes(make_bundle({"manifest.csv": csv_manifest(rows), "tiny.png": png_bytes(size=(4, 4))}).getvalue())
    page.set_input_files("input[name=bundle]", str(broken))
    page.click("button.primary")
    page.wait_for_selector("#problems")
    text = page.inner_text("#problems")
    assert "'gone.png' is not in the zip" in text and "4×4 is too small" in text
    _shot(page, "research-builder-line-problems")

    good = tmp_path / "good.zip"
    good.write_bytes(text_to_image_bundle(models=("Alpha", "Beta", "Gamma"), instances=("s1", "s2", "s3")).getvalue())
    page.set_input_files("input[name=bundle]", str(good))
    page.click("button.primary")
    page.wait_for_url("**/research/browser-built/")
    assert "Created draft study browser-built with 9 items" in page.inner_text("main")
    _shot(page, "research-new-draft")


def test_the_dashboard_shows_progress_agreement_and_plots_and_refreshes_its_live_block(page):
    researcher = make_user("researcher")
    study = _imagenhub_study_with_votes(slug="t2i-live", title="Text-to-image, live")
    study.owners.add(researcher)
    judge = Judge.objects.create(name="viescore-gpt", kind="viescore")
    run = JudgeRun.objects.create(judge=judge, study=study, state="done", total=6, done=6)
    for n, item in enumerate(study.items.order_by("id")):
        JudgeScore.objects.create(run=run, item=item, dimension="SC", value=[0, 0.5, 1][n % 3])
    _login(page, "researcher")
    page.goto("/research/t2i-live/")
    page.wait_for_selector("#live table.agreement")
    for image in page.locator("main img").all():  # lazy images load once scrolled to
        image.scroll_into_view_if_needed()
    _wait_until(page, "Array.from(document.images).every(img => img.complete && img.naturalWidth > 0)")
    assert page.locator("img[alt^='Scatter of viescore-gpt SC']").count() == 1
    assert "18 of 18 ratings needed" in page.inner_text("#live")
    _shot(page, "research-dashboard")
    # The live block is replaced by the server's fragment (what the 10 s trigger does).
    page.evaluate("document.querySelector('#live').dataset.marker = 'old'")
    page.evaluate(
        "htmx.ajax('GET', window.location.pathname, {target: '#live', swap: 'outerHTML'})"
    )
    _wait_until(page, "!document.querySelector('#live').dataset.marker")
    assert page.locator("#live").get_attribute("hx-trigger") == "every 10s"
    # the researcher sets a strict threshold for the study: every α cell turns red
    page.fill("#id_agreement_threshold", "0.9")
    page.click(".threshold-form button")
    page.wait_for_selector("text=Agreement threshold for t2i-live is now 0.9")
    assert page.locator("#live table.agreement td.agree-ok").count() == 0
    page.goto("/research/t2i-live/leaderboard/")
    _shot(page, "research-leaderboard")
    assert page.locator("table.leaderboard tbody tr").count() == 2


def test_a_large_build_shows_its_progress_follows_it_to_the_study_and_a_failed_one_lists_its_problems(page):
    """The build runs in a worker: its page polls its progress block, goes to the study once the
    build is done, and a failed build lists every problem with its line."""
    from django.utils import timezone

    from tasks.models import StudyBuild

    researcher = make_user("researcher")
    researcher.user_permissions.add(Permission.objects.get(codename="add_study"))
    build = StudyBuild.objects.create(owner=researcher, slug="big-t2i", state="running", stage="storing",
                                      done=2_345, total=7_000, heartbeat_at=timezone.now())
    _login(page, "researcher")
    page.goto(f"/research/new/{build.pk}/")
    assert "Storing images: 2345 of 7000" in page.inner_text("#build-progress")
    assert page.get_attribute("#build-progress [role=progressbar]", "aria-valuenow") == "33"
    _shot(page, "research-build-progress")

    study = _imagenhub_study_with_votes(slug="big-t2i", title="Big text-to-image")
    study.owners.add(researcher)
    StudyBuild.objects.filter(pk=build.pk).update(state="done", stage="finished", done=7_000, study=study)
    page.wait_for_url("**/research/big-t2i/")  # the next poll leads to the study
    assert "Created draft study big-t2i" in page.inner_text("main")

    failed = StudyBuild.objects.create(owner=researcher, slug="broken-t2i", state="failed", stage="finished", problems=[
        {"file": "manifest.jsonl", "line": 2, "message": "column 'model': is 140 characters long; at most 100 fit"},
        {"file": "manifest.jsonl", "line": 5, "message": "column 'prompt': contains a NUL character (at position 7)"},
        {"file": "outputs/a.png", "line": None, "message": "the zip holds 'outputs/a.png' twice"},
    ])
    page.goto(f"/research/new/{failed.pk}/")
    text = page.inner_text("#problems")
    assert "3 problems: nothing was created" in text and "at most 100 fit" in text and "NUL character" in text
    assert page.get_attribute("#build-progress", "hx-get") is None
    _shot(page, "research-build-problems")
