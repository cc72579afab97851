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
    row = re.search(rf"/raters/{raters[6].id}/\">.*?</tr>", page, re.S).group(0)
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
    # columns: rank, model, rank CI, quality
    first = re.search(r"<tbody>\s*<tr[^>]*><td>1</td><td><strong>(\w+)</strong></td>\s*<td>[^<]*</td>\s*<td>([\d.]+)</td>",
                      page)
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


def test_the_planning_card_sizes_the_study_from_its_own_ratings(client, researcher, evalmi):
    from analysis.science.planning import raters_per_item

    study, _ = evalmi
    client.force_login(researcher)
    url = reverse("research-study", args=[study.slug])
    page = client.get(url + "?plan_dim=correspondence&plan_halfwidth=0.5&plan_gap=0.3&plan_alpha_width=0.2").content.decode()
    card = page[page.index('data-testid="planning"'):]
    card = card[:card.index("</section>")]
    assert "From this study" in card and "as a pilot" in card and 'value="correspondence" selected' in card
    noise = float(re.search(r"one rating scatters by ([\d.]+)", card).group(1))
    k = int(re.search(r"item CI \(95 %\)</th>\s*<td><strong>(\d+)</strong>", card).group(1))
    assert abs(k - raters_per_item(noise, 0.5)) <= 1  # the page rounds the noise it shows
    assert re.search(r"0.3 gap.*?<strong>\d+</strong>", card, re.S)
    # hostile or out-of-range targets fall back to the defaults, never an error
    for query in ("?plan_halfwidth=nan&plan_gap=-1&plan_alpha_width=1e308", "?plan_dim=%00x&plan_halfwidth=" + "9" * 40):
        response = client.get(url + query)
        assert response.status_code == 200 and 'name="plan_halfwidth" step="any" min="0.001" max="100" value="0.25"' in \
            response.content.decode()


def test_an_unrated_study_asks_for_a_pilot(client, researcher):
    from tests.factories import make_study

    study = make_study(protocol="evalmi", task_type="counting")
    study.owners.add(researcher)
    client.force_login(researcher)
    page = client.get(reverse("research-study", args=[study.slug])).content.decode()
    assert "No ratings yet: run a small pilot" in page
