"""The judges page's "judge · dimension" picker works from its static script (no inline handler)."""

import pytest
from django.urls import reverse

from tests.analysis.test_judge_page import rated_study, run_viescore
from tests.factories import make_user
from tests.judge_server import FakeJudgeServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_choosing_another_dimension_reloads_the_scatter_for_it(browser_page, settings, django_capture_on_commit_callbacks):
    page = browser_page
    researcher = make_user("picker", password="pw-for-tests")
    study = rated_study(researcher)
    with FakeJudgeServer() as server:
        settings.JUDGE_ENDPOINTS = server.endpoints()  # the operator's endpoint, picked by name
        run_viescore(server, study, django_capture_on_commit_callbacks)
    page.goto("/accounts/login/")
    page.fill("input[name=username]", "picker")
    page.fill("input[name=password]", "pw-for-tests")
    page.click("button[type=submit]")
    page.wait_for_url("**/")
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto(reverse("judge_side_by_side", args=[study.slug]))
    picker = page.locator("select[data-judge-pick]")
    values = picker.locator("option").evaluate_all("options => options.map(o => o.value)")
    assert len(values) >= 2, values
    chosen = next(v for v in values if v != picker.input_value())
    picker.select_option(chosen)
    judge, dimension = chosen.split("|")
    page.wait_for_url(f"**dim={dimension}**")
    assert page.locator("select[data-judge-pick]").input_value() == chosen
    assert not [e for e in errors if "Content Security Policy" in e], errors
