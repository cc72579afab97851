"""The subject model on the researcher's pages: dashboard card, leaderboard toggle, rater page."""

import re

import pytest
from django.urls import reverse

from analysis.report import build_report
from tests.analysis.test_subject_report import rated_study
from tests.factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def researcher():
    return make_user("researcher")


@pytest.fixture
def evalmi(researcher):
    study, raters = rated_study()
    study.owners.add(researcher)
    return study, raters


def test_the_dashboard_shows_model_quality_and_the_inconsistent_rater(client, researcher, evalmi):
    study, raters = evalmi
    client.force_login(researcher)
    page = client.get(reverse("research-study", args=[study.slug])).content.decode()
    card = page[page.index('data-testid="subject-model"'):]
    card = card[:card.index("</section>")]
    report = build_report(study, n_boot=0)["subject_model"]["dimensions"]["perception"]["models"]
    assert f"{report['Alpha']['quality']:.2f}" in card and f"{report['Beta']['quality']:.2f}" in card
    assert "?method=subject" in card
    # the random rater is flagged in the rater table's new column
    row = re.search(rf"<code>rater{raters[6].id}</code>.*?</tr>", page, re.S).group(0)
    assert "perception" in row.split("</td>")[-2]


def test_the_leaderboard_toggles_to_the_subject_model_ranking(client, researcher, evalmi):
    study, _ = evalmi
    client.force_login(researcher)
    url = reverse("research-leaderboard", args=[study.slug])
    zmos = client.get(url + "?dim=perception").content.decode()
    assert "(z-MOS, 0–100)" in zmos and "Subject model (P.913)" in zmos
    page = client.get(url + "?dim=perception&method=subject").content.decode()
    models = build_report(study, n_boot=0)["subject_model"]["dimensions"]["perception"]["models"]
    best = max(models, key=lambda m: models[m]["quality"])
    assert "Quality perception" in page and "ITU-T P.913" in page
    first = re.search(r"<tbody>\s*<tr[^>]*><td>1</td><td><strong>(\w+)</strong></td>\s*<td>([\d.]+)</td>", page)
    assert first.group(1) == best and float(first.group(2)) == pytest.approx(models[best]["quality"], abs=1e-3)
    # the paired gap test runs on the subject model's item qualities (same prompts for both models)
    gap = models[best]["quality"] - min(m["quality"] for m in models.values())
    row = re.search(r"<td>1</td>.*?</tr>", page, re.S).group(0)
    assert f"<td>{gap:.3f}</td>" in row
    # an unknown method falls back to the report's mean
    assert "(z-MOS, 0–100)" in client.get(url + "?method=%00<x>").content.decode()


def test_the_rater_page_shows_bias_and_inconsistency(client, researcher, evalmi):
    study, raters = evalmi
    client.force_login(researcher)
    page = client.get(reverse("raters:detail", args=[study.slug, raters[6].id])).content.decode()
    assert "Bias and inconsistency" in page and "Inconsistent (subject model, no gold)" in page
    table = page[page.index('class="table subject-model"'):]
    assert "perception" in table and "correspondence" in table and "inconsistent</span>" in table
    careful = client.get(reverse("raters:detail", args=[study.slug, raters[0].id])).content.decode()
    assert "Bias and inconsistency" in careful and "inconsistent</span>" not in careful
