"""Rater-quality pages in a real browser: a researcher sorts, filters, opens a rater, rejects them;
a rater takes the qualification test. Screenshots under artifacts/screenshots/quality-*.png."""

import pytest

from raters.models import QualificationAnswer, QualityPolicy, RaterStanding
from tasks.models import Rating
from tests.conftest import browser_login
from tests.factories import make_gold, make_item, make_rater, make_study, make_user
from tests.raters.personas import persona_answers, true_scores

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _persona_study(owner):
    study = make_study(slug="personas", title="Text-to-image · persona pilot")
    study.owners.add(owner)
    truth = true_scores(20)
    items = [make_item(study, with_image=False) for _ in range(20)]
    for item, (sc, pq) in list(zip(items, truth))[:6]:
        make_gold(item, values={"SC": sc, "PQ": pq}, tolerance=0.5)
    raters = {}
    ratings = []
    for a in persona_answers(truth):
        rater = raters.get(a.rater) or raters.setdefault(a.rater, make_rater(platform="prolific", external_id=a.rater))
        ratings.append(Rating(study=study, rater=rater, item=items[a.item], values={"SC": a.SC, "PQ": a.PQ}, time_on_item_ms=a.time_ms))
    Rating.objects.bulk_create(ratings)
    return study, raters


def test_a_researcher_sorts_filters_and_rejects_a_rater_with_a_reason(browser_page, screenshot):
    page = browser_page
    owner = make_user(username="researcher")
    study, raters = _persona_study(owner)
    browser_login(page, "researcher")
    page.goto(f"/studies/{study.slug}/raters/")
    assert page.locator("tbody tr").count() == 8
    page.click("th a:text('Median time')")
    assert page.locator("tbody tr").first.locator("td").first.inner_text().startswith("prolific:speeder")
    screenshot(page, "quality-list")
    page.select_option("select[name=flag]", "none")
    page.click("button:text('Filter')")
    assert page.locator("tbody tr").count() == 4
    page.goto(f"/studies/{study.slug}/raters/{raters['random_clicker'].pk}/")
    assert page.locator("figure.plot svg").count() == 1
    screenshot(page, "quality-detail")
    page.select_option("select[name=decision]", "reject")
    page.fill("textarea[name=reason]", "Answers look random: r = -0.1 with the consensus")
    page.click("button:text('Save decision')")
    page.wait_for_selector("text=is now rejected in this study")
    assert RaterStanding.objects.get(rater=raters["random_clicker"]).state == "rejected"


def test_a_rater_takes_the_qualification_test_on_the_rating_screen_with_the_keyboard(browser_page, screenshot):
    page = browser_page
    study = make_study(slug="qualify", title="Text-to-image · qualified raters only", units_per_session=1)
    QualityPolicy.objects.create(study=study, qualification_required=True, qualification_size=2, qualification_pass_share=0.5)
    for _ in range(2):
        make_gold(make_item(study), values={"SC": 1.0, "PQ": 1.0})
    make_item(study)  # the real work after the test
    page.goto(f"/s/{study.slug}/start?PROLIFIC_PID=abc123&STUDY_ID=st1&SESSION_ID=se1")
    page.wait_for_selector("input[name=agree]:focus")
    page.keyboard.press("Space")
    page.keyboard.press("Enter")
    page.wait_for_url("**/instructions")
    page.keyboard.press("Enter")
    page.wait_for_url("**/qualification/")
    page.wait_for_selector("[data-testid=banner]:has-text('question 1 of 2')")
    assert page.locator(".choice[data-key='3']").count() == 2  # the work screen's keys
    screenshot(page, "quality-qualification")
    page.keyboard.press("3")
    page.keyboard.press("3")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-testid=banner]:has-text('question 2 of 2')")  # htmx swap, same screen
    page.wait_for_selector("#unit [data-question].active")
    page.keyboard.press("1")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=You passed the qualification test.")
    screenshot(page, "quality-qualification-passed")
    page.keyboard.press("Enter")
    page.wait_for_url("**/rate/*")
    page.wait_for_selector(".progress-text:text-is('1 of 1')")
    assert page.locator("[data-testid=banner]").count() == 0
    answers = QualificationAnswer.objects.filter(attempt__study=study).order_by("id")
    assert [(a.values, a.correct) for a in answers] == [({"SC": 1.0, "PQ": 1.0}, True), ({"SC": 0.0, "PQ": 0.0}, False)]
    assert not Rating.objects.filter(study=study).exists()
