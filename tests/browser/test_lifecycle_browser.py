"""Create, check and monitor a study in a real browser, as a researcher who never opens the admin,
and the reference-image keys as a rater (laptop and phone). Screenshots under
artifacts/screenshots/lifecycle-*.png."""

import io

import pytest
from django.core import mail

from raters.models import Rater
from tasks.builder import StudySpec, study_build_from_bundle
from tasks.models import Assignment, Participation, Rating, Study
from tasks.sample_bundles import sample_bundle
from tests.conftest import browser_login, wait_until
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
IPHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
          "Version/17.0 Mobile/15E148 Safari/604.1")


def test_a_researcher_builds_from_a_sample_bundle_then_checks_the_draft(browser_page, screenshot, settings):
    page = browser_page
    owner = make_user(username="researcher", email="researcher@example.org")
    from django.contrib.auth.models import Permission
    owner.user_permissions.add(Permission.objects.get(codename="add_study"))
    browser_login(page, "researcher")
    page.goto("/research/new/")
    # the task select follows the protocol; only that protocol's settings show
    page.select_option("select[name=protocol]", "evalmi")
    # the same task where the protocol has it, under the protocol's own group; others hidden
    assert page.eval_on_selector("select[name=task_type]", "s => s.options[s.selectedIndex].parentNode.label") \
        == "EvalMi (Likert + yes/no)"
    assert page.eval_on_selector_all("select[name=task_type] optgroup:not([disabled]) option", "o => o.length") == 2
    assert page.is_visible("input[name=likert_max]") and not page.is_visible("input[name=checklist_mode]")
    page.select_option("select[name=protocol]", "imagenhub")
    page.select_option("select[name=task_type]", "mask_guided_editing")
    assert page.is_visible("input[name=checklist_mode]") and not page.is_visible("input[name=likert_max]")
    assert not page.is_visible("textarea[name=description_models]")  # text-guided editing only
    page.click("[data-testid=samples] summary")
    screenshot(page, "lifecycle-builder")
    sample = page.request.get("/research/new/sample/imagenhub/mask_guided_editing.zip")
    assert sample.ok
    page.fill("input[name=slug]", "edits-pilot")
    page.fill("input[name=title]", "Mask-guided edits · pilot")
    page.set_input_files("input[name=bundle]", files=[{"name": "sample.zip", "mimeType": "application/zip",
                                                       "buffer": sample.body()}])
    page.click("button:text('Check and create draft')")
    page.wait_for_url("**/research/edits-pilot/")
    study = Study.objects.get(slug="edits-pilot")
    assert study.state == "draft" and "description_models" not in study.settings
    nav = page.locator("[data-testid=study-nav] a")
    assert nav.all_inner_texts()[:4] == ["Dashboard", "Items", "Preview", "Raters"] or "Items" in nav.all_inner_texts()
    screenshot(page, "lifecycle-dashboard-draft")

    page.click("[data-testid=study-nav] a:text('Items')")
    assert page.locator("[data-testid=items] tbody tr").count() == 4
    page.select_option("select[name=model]", "ModelB")
    page.click("button:text('Filter')")
    assert page.locator("[data-testid=items] tbody tr").count() == 2
    screenshot(page, "lifecycle-items")

    before = (Rating.objects.count(), Assignment.objects.count(), Rater.objects.count(), Participation.objects.count())
    page.click("[data-testid=study-nav] a:text('Preview')")
    page.wait_for_selector("#unit")
    output = page.locator("#unit .output img")
    source = page.locator("#unit .condition-mask img").first
    assert abs(output.bounding_box()["width"] - source.bounding_box()["width"]) < 8  # one size
    screenshot(page, "lifecycle-preview-edit", full_page=False)
    original = output.get_attribute("src")
    page.keyboard.press("f")
    assert output.get_attribute("src") == page.get_attribute("[data-flicker]", "data-src") != original
    assert page.inner_text("#unit .output figcaption").lower().startswith("source")
    screenshot(page, "lifecycle-preview-flicker", full_page=False)
    page.keyboard.press("f")
    assert output.get_attribute("src") == original
    assert page.inner_text("#unit .output figcaption").lower() == "output"
    page.keyboard.press("z")
    wait_until(page, "document.getElementById('lightbox').open")
    box = page.locator("#lightbox img").bounding_box()
    assert box["width"] > 0.9 * 1366 or box["height"] > 0.8 * 800  # fills the window, not the file's 128 px
    screenshot(page, "lifecycle-zoom", full_page=False)
    page.keyboard.press("z")
    wait_until(page, "!document.getElementById('lightbox').open")
    page.keyboard.press("1")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    wait_until(page, "location.search === '?n=2'")
    assert "2 of 4" in page.inner_text("#unit .progress-text")
    assert (Rating.objects.count(), Assignment.objects.count(), Rater.objects.count(),
            Participation.objects.count()) == before

    page.goto("/research/edits-pilot/preview/phone/")
    frame = page.frame_locator("[data-testid=phone-frame]")
    frame.locator("#unit").wait_for()
    screenshot(page, "lifecycle-phone-preview")


def test_the_dashboard_tells_the_owner_the_study_is_complete(browser_page, screenshot, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    page = browser_page
    owner = make_user(username="researcher", email="researcher@example.org")
    study = study_build_from_bundle(upload=io.BytesIO(sample_bundle("imagenhub", "text_to_image")), owner=owner,
                                    spec=StudySpec(slug="t2i-done", title="Text-to-image · done", protocol="imagenhub",
                                                   task_type="text_to_image", raters_per_item=2))
    Study.objects.filter(pk=study.pk).update(state="open")
    for pid in ("5f1c9e2a7b", "60aa31d4e2"):
        rater = Rater.objects.create(platform="prolific", external_id=pid)
        for item in study.items.all():
            Rating.objects.create(study=study, rater=rater, item=item, values={"SC": 1.0, "PQ": 0.5}, time_on_item_ms=9000)
    browser_login(page, "researcher")
    page.goto("/research/t2i-done/")
    page.wait_for_selector("[data-testid=notice-complete]")
    assert "prolific:5f1c9e2a7b" in page.inner_text("#live")
    screenshot(page, "lifecycle-dashboard-complete")
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["researcher@example.org"]
    page.goto("/research/t2i-done/leaderboard/")
    screenshot(page, "lifecycle-leaderboard")


def test_a_phone_rater_is_told_before_consent_that_the_study_needs_a_larger_screen(chromium_browser, live_server,
                                                                                      screenshot):
    study = study_build_from_bundle(upload=io.BytesIO(sample_bundle("pairwise", "text_to_image")), spec=StudySpec(
        slug="no-phones", title="Pairwise · laptops only", protocol="pairwise", task_type="text_to_image",
        settings={"exclude_phones": True}))
    Study.objects.filter(pk=study.pk).update(state="open")
    phone = chromium_browser.new_context(viewport={"width": 390, "height": 844}, user_agent=IPHONE,
                                         base_url=live_server.url, is_mobile=True, device_scale_factor=2)
    page = phone.new_page()
    page.goto("/s/no-phones/start?PROLIFIC_PID=PHONE9")
    page.wait_for_selector("[data-testid=phones-excluded]")
    assert page.locator("input[name=agree]").count() == 0
    screenshot(page, "lifecycle-phone-excluded")
    phone.close()
    laptop = chromium_browser.new_context(viewport={"width": 1280, "height": 800}, base_url=live_server.url)
    page = laptop.new_page()
    page.goto("/s/no-phones/start?PROLIFIC_PID=LAPTOP9")
    page.wait_for_selector("[data-testid=phones-excluded]")
    assert page.locator("input[name=agree]").count() == 1
    screenshot(page, "lifecycle-consent-laptop-only")
    laptop.close()
    assert not Rater.objects.filter(external_id="PHONE9").exists()


def test_an_edit_on_a_phone_shows_source_and_output_at_one_width(chromium_browser, live_server, screenshot):
    study = study_build_from_bundle(upload=io.BytesIO(sample_bundle("imagenhub", "text_guided_editing")), spec=StudySpec(
        slug="phone-edit", title="Text-guided edits", protocol="imagenhub", task_type="text_guided_editing"))
    Study.objects.filter(pk=study.pk).update(state="open")
    phone = chromium_browser.new_context(viewport={"width": 390, "height": 844}, user_agent=IPHONE,
                                         base_url=live_server.url, is_mobile=True, has_touch=True)
    page = phone.new_page()
    page.goto("/s/phone-edit/start?PROLIFIC_PID=PHONE10")
    page.check("input[name=agree]")
    page.click("button:text('Continue')")
    page.click("button[type=submit]")
    page.wait_for_selector("#unit")
    output = page.locator("#unit .output img").bounding_box()
    source = page.locator("#unit .condition img").first.bounding_box()
    assert abs(output["width"] - source["width"]) < 30 and source["width"] > 250
    screenshot(page, "lifecycle-phone-edit")
    phone.close()
