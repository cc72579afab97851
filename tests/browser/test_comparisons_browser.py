"""The judges page says which judge differences are real, and the leaderboard shows rank intervals and
all model pairs (Holm), on real data: ImagenHub text-guided editing with VIEScore's GPT-4o judge and
its automatic metrics (../shared/datasets). Screenshots go to docs/screenshots/."""

import pytest
from django.urls import reverse

from analysis.importers import imagenhub_import, judge_import
from tasks.models import Study
from tests.conftest import SCREENSHOTS, browser_login
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SLUG = "ImagenHub_Text-Guided_IE"


@pytest.fixture
def judged_study(shared_datasets, tmp_path):
    viescore = shared_datasets / "viescore"
    imagenhub_import(path=viescore / "human_ratings" / SLUG)
    for kind in ("gpt4o_0shot", "autometrics"):
        (tmp_path / kind).mkdir()
        (tmp_path / kind / SLUG).symlink_to(viescore / kind / SLUG)
    judge_import(path=tmp_path / "gpt4o_0shot", fmt="viescore", judge_name="gpt4o-0shot")
    judge_import(path=tmp_path / "autometrics", fmt="autometrics")
    study = Study.objects.get(slug=SLUG)
    researcher = make_user("comparer", password="pw-for-tests")
    study.owners.add(researcher)
    return study


def test_the_judges_page_marks_real_differences_and_the_leaderboard_its_pairs(browser_page, judged_study, screenshot):
    page = browser_page
    page.set_default_timeout(120_000)  # the report bootstraps every judge pair on first view
    browser_login(page, "comparer")
    page.goto(reverse("judge_side_by_side", args=[judged_study.slug]))
    section = page.locator("#judge-comparisons")
    assert section.locator("h2").inner_text() == "Which differences are real"
    rows = section.locator("table.comparisons tbody tr")
    assert rows.count() >= 3
    assert section.locator("tr.real").count() >= 1  # GPT-4o beats the metrics on SC by a wide margin
    section.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    section.screenshot(path=str(SCREENSHOTS / "judges-which-differences-are-real.png"))
    section.locator("details summary").click()
    assert section.locator("details table tbody tr").first.is_visible()
    assert "Williams t" in section.locator("details thead").inner_text()
    page.locator("table.compact").first.screenshot(path=str(SCREENSHOTS / "judges-correlation-intervals.png"))

    page.goto(reverse("research-leaderboard", args=[judged_study.slug]))
    assert page.locator("th", has_text="Rank 95 % CI").count() == 1
    page.locator("#model-pairs summary").click()
    models = page.locator("table.leaderboard tbody tr").count()
    assert page.locator("#model-pairs table.pairs tbody tr").count() == models * (models - 1) // 2
    screenshot(page, "leaderboard-rank-intervals-and-pairs")
