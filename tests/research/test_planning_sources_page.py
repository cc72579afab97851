"""Planning from a finished study or a published MOS sheet on the study's settings page."""

from urllib.parse import urlencode

import numpy as np
import pandas as pd
import pytest
from django.urls import reverse

from analysis import planning_sources_page
from analysis.science import planning_sources
from tasks.models import Study
from tests.factories import make_study, make_user
from tests.research.test_stopping_panel import rated_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def researcher():
    return make_user("planner")


@pytest.fixture
def sheet(tmp_path, settings):
    """A small published sheet: 3 models x 40 prompts of 0-100 MOS."""
    rng = np.random.default_rng(2)
    rows = [{"model": m, "prompt_number": p, "perception": 50 + 8 * k + rng.normal(0, 10),
             "correspondence": 60 + rng.normal(0, 12)} for k, m in enumerate("ABC") for p in range(1, 41)]
    path = tmp_path / "mos.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    settings.PUBLISHED_MOS_SOURCES = {"Sheet": {"path": str(path), "noise_sd": 9.0, "raters_per_item": 10},
                                      "Gone": str(tmp_path / "absent.xlsx")}
    return path


@pytest.fixture
def study(researcher):
    study = make_study(protocol="evalmi", task_type="counting", state=Study.State.DRAFT)
    study.owners.add(researcher)
    return study


def url(study, **query):
    return reverse("research-study-planning-sources", args=[study.slug]) + ("?" + urlencode(query) if query else "")


def test_a_published_sheet_plans_with_the_science_numbers(client, researcher, study, sheet):
    client.force_login(researcher)
    page = client.get(url(study, source="mos:Sheet", dimension="perception", halfwidth=5, gap=4, alpha_width=0.1))
    assert page.status_code == 200
    components = planning_sources.components_from_mos(pd.read_csv(sheet), "perception", noise_sd=9.0,
                                                      raters_per_item=10, source="the published MOS “Sheet”")
    plan = planning_sources.plan_from_components(components, halfwidth=5, gap=4, alpha_width=0.1)
    body = page.content.decode()
    assert f"<strong>{plan.raters_per_item}</strong>" in body and f"<strong>{plan.items_for_gap}</strong>" in body
    assert f"<strong>{plan.items_for_alpha}</strong>" in body
    assert "points of the sheet&#x27;s MOS scale" in body or "points of the sheet's MOS scale" in body


def test_a_finished_study_the_researcher_sees_is_a_source(client, researcher, study, sheet):
    done = rated_study(title="Finished pilot")
    done.collaborators.add(researcher)
    hidden = rated_study(title="Someone else's")
    Study.objects.filter(pk__in=[done.pk, hidden.pk]).update(state=Study.State.CLOSED)
    client.force_login(researcher)
    form = client.get(url(study)).content.decode()
    assert "Finished study: Finished pilot" in form and "Someone else" not in form
    assert "Published MOS: Gone (file missing)" in form
    page = client.get(url(study, source=f"study:{done.slug}", halfwidth=0.3)).content.decode()
    assert 'data-testid="planning-result"' in page and "the finished study “Finished pilot”" in page
    # another researcher's study is not a choice, even by name
    refused = client.get(url(study, source=f"study:{hidden.slug}", halfwidth=0.3))
    assert refused.status_code == 400 and "Select a valid choice" in refused.content.decode()


@pytest.mark.parametrize("query, message", [
    ({"source": "mos:Gone", "halfwidth": 5}, "is not on this server"),
    ({"source": "mos:Sheet"}, "Give at least one target"),
    ({"source": "mos:Sheet", "halfwidth": "nan"}, "Enter a number"),
    ({"source": "mos:Sheet", "halfwidth": "1e400"}, "Enter a number"),
    ({"source": "mos:Sheet", "halfwidth": -3}, "greater than or equal to 0.001"),
    ({"source": "mos:Sheet", "alpha_width": 9}, "less than or equal to 2"),
    ({"source": "mos:Sheet", "halfwidth": 5, "dimension": "<script>x</script>"}, "has no column"),
    ({"source": "mos:Sheet", "halfwidth": 5, "dimension": "x" * 500}, "at most 40 characters"),
    ({"source": "../../etc/passwd", "halfwidth": 5}, "Select a valid choice"),
    ({"source": "mos:Sheet", "halfwidth": 5, "raters_per_item": 0}, "greater than or equal to 1"),
])
def test_hostile_input_gets_a_clear_error(client, researcher, study, sheet, query, message):
    client.force_login(researcher)
    response = client.get(url(study, **query))
    body = response.content.decode()
    assert response.status_code == 400 and message in body
    assert "<script>x</script>" not in body


def test_the_settings_page_embeds_the_planning_card(client, researcher, study, sheet):
    client.force_login(researcher)
    page = client.get(reverse("research-study-configure", args=[study.slug])).content.decode()
    assert 'hx-get="' + url(study) + '"' in page and "Plan from another study or published MOS" in page
    partial = client.get(url(study), HTTP_HX_REQUEST="true")
    assert partial.status_code == 200 and b"<html" not in partial.content
    # htmx swaps only 2xx answers: the form with its error comes back as 200 there
    error = client.get(url(study, source="mos:Sheet"), HTTP_HX_REQUEST="true")
    assert error.status_code == 200 and b"Give at least one target" in error.content


def test_the_evalmi_sheet_reads_when_present():
    source = planning_sources_page.published_sources().get("EvalMi-50K")
    if source is None or not source.present:
        pytest.skip("EvalMi-50K's MOS sheet is not under ../shared/datasets/evalmi")
    frame = planning_sources_page.mos_sheet(source)
    assert planning_sources_page.mos_dimensions(frame) == ["perception", "correspondence"]
