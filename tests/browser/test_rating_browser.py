"""A rater in a real browser (Debian chromium): keyboard-only ImagenHub session, an EvalMi
trial, a pairwise choice, a Prolific round trip, and screenshots of every layout."""

from dataclasses import replace

import pytest

from tasks import demo
from tasks.models import Rating, RatingRevision, Study

from tests.conftest import wait_until as _wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]




def _demo_study(slug: str, *, instances: int = 1, **fields) -> Study:
    """One of the demo studies, built small (the demo's scenes, fewer instances)."""
    spec = next(s for s in demo.DEMO_STUDIES if s.slug == slug)
    study = Study(slug=spec.slug, title=spec.title, protocol=spec.protocol, task_type=spec.task_type,
                  instructions=demo.INSTRUCTIONS[spec.protocol], settings=spec.settings, state=Study.State.OPEN,
                  completion_code="C0DE-" + spec.slug[5:9].upper(), **fields)
    study.full_clean()
    study.save()
    demo._populate(study, replace(spec, instances=instances), demo.DEMO_SEED)
    return study


def _enter(page, study, pid="PID123"):
    page.goto(f"/s/{study.slug}/start?PROLIFIC_PID={pid}&STUDY_ID=st1&SESSION_ID=se1")
    page.wait_for_selector("input[name=agree]:focus")  # autofocus: no mouse needed
    page.keyboard.press("Space")  # tick the consent box (it has focus)
    page.keyboard.press("Enter")
    page.wait_for_url("**/instructions")
    page.keyboard.press("Enter")
    page.wait_for_url("**/rate/*")


def _wait_screen(page, number, total):
    page.wait_for_selector(f".progress-text:text-is('{number} of {total}')")
    page.wait_for_selector("#unit [data-question].active")  # rating.js has taken the new screen


def test_a_rater_completes_a_short_imagenhub_study_with_the_keyboard_only(browser_page, screenshot):
    page = browser_page
    study = _demo_study("demo-text-to-image", instances=1, units_per_session=3)
    _enter(page, study)
    _wait_screen(page, 1, 3)
    page.keyboard.press("?")  # the rubric, from every screen
    page.wait_for_selector("#rubric-dialog[open] .rubric")
    screenshot(page, "rubric-dialog", full_page=False)
    page.keyboard.press("Escape")
    page.wait_for_selector("#rubric-dialog:not([open])", state="attached")
    page.keyboard.press("Enter")  # nothing chosen yet: a message, nothing stored
    assert "not answered yet" in page.inner_text("[data-testid=error]")
    for key in ("3", "2", "Enter"):
        page.keyboard.press(key)
    _wait_screen(page, 2, 3)
    for key in ("2", "2", "Enter"):
        page.keyboard.press(key)
    _wait_screen(page, 3, 3)
    page.keyboard.press("ArrowLeft")  # back to screen 2, answers kept
    _wait_screen(page, 2, 3)
    assert page.is_checked("input[name$='-SC'][value='0.5']")
    page.keyboard.press("1")  # change SC to 0: a revision
    page.keyboard.press("Enter")
    _wait_screen(page, 3, 3)
    for key in ("3", "3", "Enter"):
        page.keyboard.press(key)
    page.wait_for_url("**/done")
    assert page.inner_text("[data-testid=completion-code]") == study.completion_code
    ratings = Rating.objects.filter(study=study)
    assert ratings.count() == 3
    assert sorted((r.values["SC"], r.values["PQ"]) for r in ratings) == [(0.0, 0.5), (1.0, 0.5), (1.0, 1.0)]
    assert RatingRevision.objects.filter(rating__study=study).count() == 1
    assert all(r.time_on_item_ms is not None for r in ratings)


def test_a_rater_rates_an_evalmi_trial_of_three_images(browser_page, screenshot):
    page = browser_page
    study = _demo_study("demo-evalmi", instances=1, units_per_session=1)
    _enter(page, study, pid="EVAL1")
    _wait_screen(page, 1, 1)
    assert page.locator(".panel").count() == 3
    screenshot(page, "evalmi-trial")
    anchors = page.locator("[data-question] >> nth=0 >> .choice-hint")
    assert anchors.all_inner_texts() == ["Bad", "Poor", "Fair", "Good", "Excellent"] and anchors.last.is_visible()
    questions = page.locator("[data-question]").all()
    per_image = len(questions) // 3
    for question in questions[:per_image]:  # image 1 only: Enter names the image still open
        page.keyboard.press("y" if "q-yesno" in question.get_attribute("class") else "4")
    page.keyboard.press("Enter")
    assert "Image 2, “Perception” is not answered yet" in page.inner_text("[data-testid=error]")
    for question in questions[per_image:]:
        page.keyboard.press("y" if "q-yesno" in question.get_attribute("class") else "4")
    page.keyboard.press("Enter")
    page.wait_for_url("**/done")
    ratings = list(Rating.objects.filter(study=study))
    assert len(ratings) == 3
    assert {r.values["perception"] for r in ratings} == {4.0}
    assert all(set(r.answers.values()) == {"yes"} for r in ratings)
    assert len({r.item.gen_model_id for r in ratings}) == 3
    assert all(len(r.presentation["trial"]) == 3 for r in ratings)


def test_a_ten_point_likert_scale_is_rated_with_two_digit_keys(browser_page, screenshot):
    from tests.factories import make_item, make_study

    page = browser_page
    study = make_study(slug="likert-ten", protocol="evalmi", task_type="counting", units_per_session=2,
                       settings={"likert_min": 1, "likert_max": 10, "qa": False, "images_per_trial": 1})
    make_item(study)
    make_item(study)
    _enter(page, study, pid="TEN1")
    _wait_screen(page, 1, 2)
    assert page.locator("[data-question] >> nth=0 >> .choice kbd").all_inner_texts() == [str(v) for v in range(1, 11)]
    page.keyboard.press("1")
    page.keyboard.press("0")  # 1 then 0 within 600 ms: ten, taken at once (no longer key starts with 10)
    page.keyboard.press("7")  # the next question: seven
    assert page.is_checked("input[name$='-perception'][value='10']")
    assert page.is_checked("input[name$='-correspondence'][value='7']")
    screenshot(page, "evalmi-likert-10", full_page=False)
    page.keyboard.press("Enter")
    _wait_screen(page, 2, 2)
    page.keyboard.press("1")  # could still become 10: taken when the 600 ms run out
    page.wait_for_selector("input[name$='-perception'][value='1']:checked", state="attached")
    page.keyboard.press("9")  # correspondence 9 …
    page.keyboard.press("1")  # … changed to a pending 1, which Enter takes at once
    page.keyboard.press("Enter")
    page.wait_for_url("**/done")
    values = sorted((r.values["perception"], r.values["correspondence"]) for r in Rating.objects.filter(study=study))
    assert values == [(1.0, 1.0), (10.0, 7.0)]


def test_a_rater_picks_the_left_image_of_a_pairwise_comparison(browser_page):
    page = browser_page
    study = _demo_study("demo-pairwise", instances=1, units_per_session=1)
    _enter(page, study, pid="PAIR1")
    _wait_screen(page, 1, 1)
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    page.wait_for_url("**/done")
    rating = Rating.objects.get(study=study)
    assert rating.values["preference"] == rating.presentation["left"]


def test_a_prolific_worker_goes_from_the_link_to_the_completion_code_and_back_to_prolific(browser_page, screenshot):
    page = browser_page
    study = _demo_study("demo-control-guided-generation", instances=1, units_per_session=2)
    page.goto(f"/s/{study.slug}/start?PROLIFIC_PID=W0RKER&STUDY_ID=st9&SESSION_ID=se9")
    page.click("text=I have read this")
    page.click("button:has-text('Continue')")
    page.click("button:has-text('Start rating')")
    for screen in (1, 2):
        _wait_screen(page, screen, 2)  # the htmx swap has landed before we click
        page.click(".question >> nth=0 >> .choice >> nth=2")
        page.click(".question >> nth=1 >> .choice >> nth=1")
        page.click("button:has-text('Next')")
    page.wait_for_url("**/done")
    assert page.inner_text("[data-testid=completion-code]") == study.completion_code
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.click("[data-testid=copy-code]")  # localhost is a secure context: the clipboard API
    page.wait_for_selector("[data-testid=copy-code]:text-is('Copied')")
    assert page.evaluate("navigator.clipboard.readText()") == study.completion_code
    screenshot(page, "done-prolific")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "done-prolific-phone")
    page.set_viewport_size({"width": 1366, "height": 800})
    href = page.get_attribute("[data-testid=prolific-return]", "href")
    assert href == f"https://app.prolific.com/submissions/complete?cc={study.completion_code}"
    # the same worker opening the link again lands on the completion page, not on new work
    page.goto(f"/s/{study.slug}/start?PROLIFIC_PID=W0RKER&STUDY_ID=st9&SESSION_ID=se9")
    page.wait_for_url("**/done")


LAYOUTS = [
    "demo-text-to-image",
    "demo-mask-guided-editing",
    "demo-text-guided-editing",
    "demo-subject-driven-generation",
    "demo-multi-concept-composition",
    "demo-subject-driven-editing",
    "demo-control-guided-generation",
    "demo-evalmi",
    "demo-pairwise",
]


def test_every_layout_renders_its_conditions_and_is_saved_as_a_screenshot(browser_page, screenshot):
    page = browser_page
    for n, slug in enumerate(LAYOUTS):
        study = _demo_study(slug, instances=1, units_per_session=1)
        _enter(page, study, pid=f"SHOT{n}")
        page.wait_for_selector("#unit .question")
        _wait_until(page, "Array.from(document.querySelectorAll('#unit img')).every(i => i.complete && i.naturalWidth > 0)")
        conditions = page.locator(".condition").count()
        expected = {"demo-mask-guided-editing": 2, "demo-text-guided-editing": 1, "demo-subject-driven-generation": 1,
                    "demo-multi-concept-composition": 2, "demo-subject-driven-editing": 2,
                    "demo-control-guided-generation": 1}.get(slug, 0)
        assert conditions == expected, slug
        assert page.inner_text("[data-testid=prompt]").strip()
        screenshot(page, slug.removeprefix("demo-"))
    page.set_viewport_size({"width": 820, "height": 1180})  # a tablet, portrait
    page.reload()
    page.wait_for_selector("#unit .question")
    screenshot(page, "pairwise-tablet")


def test_enter_on_a_focused_back_or_rubric_button_presses_that_button_and_submits_nothing(browser_page):
    page = browser_page
    study = _demo_study("demo-text-to-image", instances=1, units_per_session=3)
    _enter(page, study, pid="ENTERKEY")
    _wait_screen(page, 1, 3)
    for key in ("3", "3", "Enter"):
        page.keyboard.press(key)
    _wait_screen(page, 2, 3)
    page.keyboard.press("2")  # an answer chosen on screen 2, not yet submitted
    page.focus("[data-rubric]")
    page.keyboard.press("Enter")  # opens the rubric, as a click would
    page.wait_for_selector("#rubric-dialog[open] .rubric")
    page.keyboard.press("Escape")
    page.wait_for_selector("#rubric-dialog:not([open])", state="attached")
    page.focus("[data-back]")
    page.keyboard.press("Enter")  # goes back to screen 1 instead of submitting screen 2
    _wait_screen(page, 1, 3)
    assert Rating.objects.filter(study=study).count() == 1


def test_the_consent_checkbox_sits_on_the_line_of_its_label(browser_page, screenshot):
    page = browser_page
    study = _demo_study("demo-text-to-image", instances=1, units_per_session=1)
    page.goto(f"/s/{study.slug}/start?PROLIFIC_PID=CONSENT1&STUDY_ID=st1&SESSION_ID=se1")
    box = page.locator("input[name=agree]").bounding_box()
    label = page.locator("label.check").bounding_box()
    screenshot(page, "consent")
    assert label["height"] < 2 * box["height"] + 16  # one line, not a box above its text
    assert box["x"] - label["x"] < 8  # at the start of the line, not centred


def test_on_a_phone_the_pairwise_images_stay_left_and_right_and_an_evalmi_trial_stays_compact(browser_page, screenshot):
    page = browser_page
    page.set_viewport_size({"width": 390, "height": 844})
    study = _demo_study("demo-pairwise", instances=1, units_per_session=1)
    _enter(page, study, pid="PHONE1")
    page.wait_for_selector("#unit .question")
    left, right = (page.locator(".side").nth(i).bounding_box() for i in (0, 1))
    screenshot(page, "pairwise-phone")
    assert right["x"] > left["x"] + left["width"] - 1 and abs(right["y"] - left["y"]) < 2  # side by side
    assert right["x"] + right["width"] <= 390  # and both on the screen
    study = _demo_study("demo-evalmi", instances=1, units_per_session=1)
    _enter(page, study, pid="PHONE2")
    page.wait_for_selector("#unit .question")
    height = page.evaluate("document.documentElement.scrollHeight")
    screenshot(page, "evalmi-phone")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than the phone
    assert height < 2800, height  # 2,900 px before, without the Likert anchors it now has
    legend = page.locator(".q-scale legend").nth(1).bounding_box()  # "Correspondence" fits its column
    first_choice = page.locator(".q-scale").nth(1).locator(".choice").first.bounding_box()
    assert legend["x"] + legend["width"] <= first_choice["x"] + 1


def test_a_rater_reports_a_broken_image_from_the_screen_and_keeps_rating(browser_page, screenshot):
    from tasks.models import ScreenReport

    page = browser_page
    study = _demo_study("demo-text-to-image", instances=1, units_per_session=2)
    _enter(page, study, pid="REPORT1")
    _wait_screen(page, 1, 2)
    page.keyboard.press("3")  # an answer chosen before reporting stays chosen
    page.click("#report summary")
    page.check("#report input[name=broken]")
    page.fill("#report textarea", "The output is all grey")
    page.keyboard.press("Enter")  # Enter in the report form does not submit the screen
    screenshot(page, "report-form", full_page=False)
    page.click("#report button")
    page.wait_for_selector("[data-testid=report-sent]")
    screenshot(page, "report-sent", full_page=False)
    report = ScreenReport.objects.get()
    assert report.broken_image and report.comment == "The output is all grey"
    assert page.is_checked(".question >> nth=0 >> input[value='1']") and not Rating.objects.exists()
