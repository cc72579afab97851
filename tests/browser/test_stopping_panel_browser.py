"""The stopping and cost panel on the dashboard and planning from another study on the settings
page, in a real browser. Screenshots: docs/screenshots/stopping_panel.png, planning_sources.png."""

from decimal import Decimal

import pytest
from django.urls import reverse

from tasks.models import Study
from tests.conftest import REPO_ROOT, browser_login
from tests.factories import make_study, make_user
from tests.research.test_stopping_panel import rated_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DOCS = REPO_ROOT / "docs" / "screenshots"
MODELS = {"Flux-dev": 4.3, "SD3.5-large": 3.5, "SDXL": 3.4, "PixArt-Σ": 2.6, "SD1.5": 2.0}


def test_a_researcher_reads_the_stopping_panel_and_plans_from_a_finished_study(browser_page):
    page = browser_page
    owner = make_user(username="researcher")
    study = rated_study(prompts=12, raters=4, true=MODELS, timed=True, title="Counting · five models",
                        pay_per_hour=Decimal("12.00"))
    study.owners.add(owner)
    browser_login(page, "researcher")

    page.goto(reverse("research-study", args=[study.slug]))
    panel = page.locator("[data-testid=stopping-panel]")
    panel.wait_for()
    assert panel.locator("tbody tr").count() == 4  # neighbours of five models
    text = panel.inner_text()
    assert "anytime-valid confidence sequences" in text and "Separated:" in text and "Open:" in text
    assert "GBP" in text and page.locator("[data-testid=stop-advice]").count() == 1
    DOCS.mkdir(parents=True, exist_ok=True)
    panel.screenshot(path=str(DOCS / "stopping_panel.png"))
    # the other dimension: a tab of the panel; the 10 s refresh keeps it
    assert panel.locator("[data-testid=stopping-dims] a.active").inner_text() == "correspondence (primary)"
    panel.locator("[data-testid=stopping-dims] a:text('perception')").click()
    page.wait_for_url("**stopping_dim=perception**")
    panel = page.locator("[data-testid=stopping-panel]")
    assert panel.locator("[data-testid=stopping-dims] a.active").inner_text() == "perception"
    assert "stopping_dim=perception" in page.get_attribute("#live", "hx-get")
    assert panel.locator("tbody tr").count() == 4
    panel.screenshot(path=str(DOCS / "stopping_panel_perception.png"))
    page.click("[data-testid=stopping-panel] a:text('How (README)')")
    page.wait_for_selector("[data-testid=stopping-method]")
    assert "Ville" in page.inner_text("[data-testid=stopping-method]")

    draft = make_study(protocol="evalmi", task_type="counting", state=Study.State.DRAFT, title="Counting · next round")
    draft.owners.add(owner)
    Study.objects.filter(pk=study.pk).update(state=Study.State.CLOSED)
    page.goto(reverse("research-study-configure", args=[draft.slug]))
    card = page.locator("[data-testid=planning-sources]")  # loaded into the settings page by htmx
    card.wait_for()
    page.select_option("select[name=source]", f"study:{study.slug}")
    page.fill("input[name=halfwidth]", "-3")
    page.click("[data-testid=planning-sources] button:text('Plan')")
    page.wait_for_selector("[data-testid=planning-sources] .error:text('greater than or equal to 0.001')")
    page.fill("input[name=halfwidth]", "0.3")
    page.fill("input[name=gap]", "0.2")
    page.fill("input[name=alpha_width]", "0.1")
    page.click("[data-testid=planning-sources] button:text('Plan')")
    page.wait_for_selector("[data-testid=planning-result]")
    assert "Raters per item for a ±0.3 item CI" in card.inner_text()
    assert page.url.endswith("/configure/")  # swapped in place, the settings form stays
    page.locator("[data-testid=planning-sources]").screenshot(path=str(DOCS / "planning_sources.png"))
