"""The stopping and cost panel (issue #17): verdicts, forecast and money on the dashboard and the
API, against the science modules run directly on the same ratings; the peeking guarantee of the
α-over-time band in simulation; planning from a finished study or a published MOS sheet."""

from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from django.urls import reverse

from analysis import dashboard, stopping_panel
from analysis.science import allocation, live_estimates, simulation, stopping
from tasks.models import Study
from tasks.services import rating_submit
from tests.factories import make_comparison, make_instance, make_item, make_rater, make_study, make_user

pytestmark = pytest.mark.django_db

TRUE = {"Alpha": 4.4, "Beta": 2.6, "Gamma": 2.6}  # Alpha far above; Beta and Gamma truly equal


def rated_study(*, prompts: int = 10, raters: int = 4, seed: int = 5, true: dict | None = None, timed: bool = False,
                **fields) -> Study:
    true = true or TRUE
    fields = {"protocol": "evalmi", "task_type": "counting", "raters_per_item": 6, "pay_per_hour": Decimal("12.00"),
              "seconds_per_unit_estimate": 30, "pay_currency": "GBP", **fields}
    study = make_study(**fields)
    rng = np.random.default_rng(seed)
    instances = [make_instance(study, question="Is it there?", sub_questions=[]) for _ in range(prompts)]
    items = [make_item(study, instance=i, model=m, with_image=False) for i in instances for m in true]
    people = [make_rater() for _ in range(raters)]
    for rater in people:
        for item in items:
            score = int(np.clip(np.rint(true[item.gen_model.name] + rng.normal(0, 0.7)), 1, 5))
            rating_submit(rater=rater, item=item, require_assignment=False,
                          time_on_item_ms=int(rng.integers(20, 40)) * 1000 if timed else None,
                          values={"perception": score, "correspondence": score}, answers={"q1": "yes"})
    return study


@pytest.fixture
def researcher():
    return make_user("researcher")


@pytest.fixture
def study(researcher):
    study = rated_study()
    study.owners.add(researcher)
    return study


def direct_verdicts(study: Study, n_opt: float):
    """The science modules on the study's correspondence ratings, without the panel."""
    ratings = dashboard.scored_ratings(study)
    unit, units = pd.factorize(ratings["item"], sort=True)
    rater, raters = pd.factorize(ratings["rater"], sort=True)
    estimate, std, n = live_estimates.unit_estimates(ratings["correspondence"].to_numpy(float), unit, rater,
                                                     len(units), len(raters))
    models = ratings.groupby(unit)["model"].first().sort_index()
    codes, names = pd.factorize(models, sort=True)
    state = allocation.model_state(allocation.UnitState.of(codes, n, estimate, std, 0), len(names))
    verdicts = stopping.pair_verdicts(state.estimate, state.std, state.n, n_opt=n_opt)
    return list(names), verdicts, stopping.forecast(verdicts, len(names), n_opt=n_opt)


def test_the_panel_matches_the_science_on_the_same_ratings(study):
    panel = stopping_panel.panel(study)
    # 30 items x 6 raters planned, 3 models: a pair of models is planned 2 x 60 ratings
    assert panel.n_opt == 120.0
    names, verdicts, forecast = direct_verdicts(study, 120.0)
    assert panel.method.startswith("subject model") and panel.dimension == "correspondence"
    assert [(p.upper, p.lower) for p in panel.pairs] == [(names[a], names[b]) for a, b in zip(verdicts.a, verdicts.b)]
    assert [p.verdict for p in panel.pairs] == list(verdicts.verdict)
    assert [p.diff for p in panel.pairs] == pytest.approx(list(verdicts.diff))
    assert [p.low for p in panel.pairs] == pytest.approx(list(verdicts.low))
    # Alpha is far above the others; the two equal models stay open
    assert panel.pairs[0].upper == "Alpha" and panel.pairs[0].verdict == "separated"
    assert {panel.pairs[1].upper, panel.pairs[1].lower} == {"Beta", "Gamma"} and panel.pairs[1].verdict == "open"
    assert (panel.separated, panel.tied, panel.open) == (1, 0, 1)
    assert panel.extra_ratings == pytest.approx(forecast.total)
    # 30 s per screen at 12.00/hour: 0.10 a rating; the open pair's cost is its extra ratings x 0.10
    assert panel.pay_per_rating == "0.10" and panel.currency == "GBP"
    open_pair = panel.pairs[1]
    assert open_pair.extra_ratings == pytest.approx(forecast.per_pair[1])
    assert Decimal(open_pair.cost) == (Decimal(str(open_pair.extra_ratings)) * Decimal("0.10")).quantize(Decimal("0.01"))
    assert panel.cost == str((Decimal(str(panel.extra_ratings)) * Decimal("0.10")).quantize(Decimal("0.01")))
    # 120 of 180 ratings done: 60 left; the recommendation is the science's rule
    assert panel.remaining_ratings == 60
    advice = stopping.recommend(verdicts, forecast, remaining_ratings=60)
    assert (panel.stop, panel.reason) == (advice.stop, advice.reason)


def test_a_tie_margin_declares_the_equal_models_tied_and_recommends_stopping(researcher):
    study = rated_study(prompts=30, raters=6, raters_per_item=6)
    study.adaptive_margin = 1.0  # the adaptive mode's field (a plain attribute before its migration)
    panel = stopping_panel.panel(study)
    assert panel.margin == 1.0
    assert [p.verdict for p in panel.pairs] == ["separated", "tied"]
    assert panel.stop and panel.reason == "every pair is separated or tied"
    assert panel.cost == "0.00" and panel.extra_ratings == 0.0


def test_without_pay_or_ratings_the_panel_says_what_is_missing(researcher):
    empty = make_study(protocol="evalmi", task_type="counting")
    panel = stopping_panel.panel(empty)
    assert panel.pairs == [] and panel.note == "no ratings yet" and not panel.stop
    unpaid = rated_study(pay_per_hour=None)
    panel = stopping_panel.panel(unpaid)
    assert panel.open == 1 and panel.pay_per_rating is None and panel.pairs[1].cost is None


def test_a_pairwise_study_ranks_on_bradley_terry(researcher):
    study = make_study(protocol="pairwise", task_type="text_to_image")
    rng = np.random.default_rng(0)
    raters = [make_rater() for _ in range(5)]
    for _ in range(12):
        comparison = make_comparison(study)
        for rater in raters:
            choice = "A" if rng.random() < 0.85 else "B"  # ModelA wins most
            rating_submit(rater=rater, comparison=comparison, require_assignment=False, values={"preference": choice})
    panel = stopping_panel.panel(study)
    assert panel.method == "Bradley–Terry log-strength" and panel.dimension is None
    assert [(p.upper, p.lower) for p in panel.pairs] == [("ModelA", "ModelB")]
    assert panel.pairs[0].verdict == "separated" and panel.models[0].std > 0


def test_the_dashboard_shows_the_panel_and_its_method(client, researcher, study):
    client.force_login(researcher)
    page = client.get(reverse("research-study", args=[study.slug])).content.decode()
    card = page[page.index('data-testid="stopping-panel"'):]
    card = card[:card.index("</section>")]
    assert "anytime-valid confidence sequences" in card and reverse("research-stopping-method") in card
    assert "Separated: 1" in card and "Open: 1" in card and "0.10 GBP per rating" in card
    # the live refresh (htmx) carries it too
    live = client.get(reverse("research-study", args=[study.slug]), HTTP_HX_REQUEST="true").content.decode()
    assert 'data-testid="stopping-panel"' in live
    method = client.get(reverse("research-stopping-method")).content.decode()
    assert "Ville" in method and "confidence sequence" in method


def test_the_api_returns_the_panels_numbers_to_owners_only(client, researcher, study):
    url = reverse("api-study-stopping", args=[study.slug])
    client.force_login(researcher)
    body = client.get(url).json()
    panel = stopping_panel.panel(study)
    assert body["pairs"] == [
        {**p, "diff": pytest.approx(p["diff"]), "low": pytest.approx(p["low"]), "high": pytest.approx(p["high"])}
        for p in panel.as_dict()["pairs"]]
    assert (body["separated"], body["open"], body["stop"], body["reason"]) == (1, 1, panel.stop, panel.reason)
    collaborator = make_user("collab")
    study.collaborators.add(collaborator)
    client.force_login(collaborator)
    assert client.get(url).status_code == 200
    client.force_login(make_user("other", is_staff=False))
    assert client.get(url).status_code in (403, 404)
    schema = client.get(reverse("api-schema")).content.decode()
    assert "/api/studies/{slug}/stopping/" in schema


def test_anytime_bands_hold_under_peeking_where_fixed_ones_do_not():
    """The dashboard's verdicts and the α-over-time band: looked at after every batch, the
    confidence sequence declares two equal models different in at most α of studies; a fixed
    95 % interval checked at every look does so far more often."""
    result = simulation.optional_stopping(reps=1500, looks=30, batch=10, seed=1)
    assert result["anytime"] <= 0.05
    assert result["naive"] > 0.15
    assert result["naive_last_look"] == pytest.approx(0.05, abs=0.02)  # one look: the fixed CI is fine


def test_the_alpha_band_is_the_anytime_one_and_wider_than_the_bootstrap_one(client, researcher, study):
    raw = dashboard.alpha_series(study).dropna(subset=["alpha"])
    band = stopping_panel.alpha_series_anytime(study).dropna(subset=["alpha"])
    assert len(band) == len(raw) and (band["alpha"] == raw["alpha"]).all()
    assert (band["ci_low"] <= raw["ci_low"] + 1e-12).all() and (band["ci_high"] >= raw["ci_high"] - 1e-12).all()
    assert ((band["ci_high"] - band["ci_low"]) > (raw["ci_high"] - raw["ci_low"])).any()
    client.force_login(researcher)
    page = client.get(reverse("research-study", args=[study.slug])).content.decode()
    assert "anytime-valid 95 % band: holds at every look" in page


def test_an_alpha_band_checked_at_every_look_keeps_its_coverage_only_when_anytime():
    """α of single ratings as items arrive (one-way intraclass correlation, true value 0.5, with
    Fisher's large-sample standard error as the dashboard's bootstrap estimates it), its band
    read at 20 looks: the anytime band misses the true α at any look in at most 5 % of studies,
    the fixed 95 % band in far more."""
    rng = np.random.default_rng(7)
    reps, k, looks, per_look, rho = 600, 3, 20, 15, 0.5
    items = per_look * np.arange(1, looks + 1)
    quality = rng.normal(0, np.sqrt(rho), (reps, items[-1], 1))
    ratings = quality + rng.normal(0, np.sqrt(1 - rho), (reps, items[-1], k))
    missed = {"anytime": 0, "fixed": 0}
    for anytime in (True, False):
        ever = np.zeros(reps, bool)
        for n in items:
            x = ratings[:, :n]
            means = x.mean(axis=2)
            msb = k * means.var(axis=1, ddof=1)
            msw = ((x - means[:, :, None]) ** 2).sum(axis=(1, 2)) / (n * (k - 1))
            icc = (msb - msw) / (msb + (k - 1) * msw)
            se = np.sqrt(2 * (1 - icc) ** 2 * (1 + (k - 1) * icc) ** 2 / (k * (k - 1) * (n - 1)))
            half = stopping.halfwidth(se, np.full(reps, n * k), n_opt=items[-1] * k, anytime=anytime)
            ever |= np.abs(icc - rho) > half
        missed["anytime" if anytime else "fixed"] = ever.mean()
    assert missed["anytime"] <= 0.05
    assert missed["fixed"] > 0.10


def two_way_study(researcher) -> Study:
    """Correspondence ranks the models the other way round from perception."""
    study = make_study(protocol="evalmi", task_type="counting", raters_per_item=4)
    study.owners.add(researcher)
    rng = np.random.default_rng(2)
    instances = [make_instance(study, question="Is it there?", sub_questions=[]) for _ in range(8)]
    items = [make_item(study, instance=i, model=m, with_image=False) for i in instances for m in TRUE]
    for rater in [make_rater() for _ in range(4)]:
        for item in items:
            score = int(np.clip(np.rint(TRUE[item.gen_model.name] + rng.normal(0, 0.5)), 1, 5))
            rating_submit(rater=rater, item=item, require_assignment=False,
                          values={"perception": score, "correspondence": 6 - score}, answers={"q1": "yes"})
    return study


def test_the_panel_ranks_on_the_dimension_asked_for_and_refuses_one_the_study_lacks(client, researcher):
    study = two_way_study(researcher)
    primary = stopping_panel.panel(study)
    assert primary.dimension == primary.primary == "correspondence"
    assert set(primary.dimensions) == {"perception", "correspondence"}
    perception = stopping_panel.panel(study, dimension="perception")
    assert perception.dimension == "perception"
    assert perception.models[0].model == "Alpha" and primary.models[-1].model == "Alpha"
    with pytest.raises(stopping_panel.UnknownDimension, match="dimension must be one of"):
        stopping_panel.panel(study, dimension="O")

    url = reverse("api-study-stopping", args=[study.slug])
    client.force_login(researcher)
    body = client.get(url, {"dimension": "perception"}).json()
    assert body["dimension"] == "perception" and body["primary"] == "correspondence"
    assert [m["model"] for m in body["models"]] == [m.model for m in perception.models]
    refused = client.get(url, {"dimension": "perception\x00"})
    assert refused.status_code == 400 and "dimension must be one of" in refused.json()["dimension"][0]
    assert client.get(url, {"dimension": "x" * 10_000}).status_code == 400

    page = client.get(reverse("research-study", args=[study.slug]), {"stopping_dim": "perception"}).content.decode()
    card = page[page.index('data-testid="stopping-panel"'):]
    assert 'class="active" aria-current="true">perception<' in card and "correspondence (primary)" in card
    assert "stopping_dim=perception" in page[page.index('id="live"'):][:300]  # the refresh keeps it
    page = client.get(reverse("research-study", args=[study.slug]), {"stopping_dim": "<b>x"}).content.decode()
    assert 'aria-current="true">correspondence (primary)<' in page  # an unknown one: the primary
    assert "<b>x" not in page and "stopping_dim" not in page[page.index('id="live"'):][:300]
    live = client.get(reverse("research-study", args=[study.slug]), {"stopping_dim": "perception"},
                      HTTP_HX_REQUEST="true").content.decode()
    assert 'aria-current="true">perception<' in live


def test_a_pairwise_study_has_no_dimension_to_choose(client, researcher):
    study = make_study(protocol="pairwise", task_type="text_to_image")
    study.owners.add(researcher)
    assert stopping_panel.panel(study).dimensions == []
    with pytest.raises(stopping_panel.UnknownDimension, match="pairwise study has no dimensions"):
        stopping_panel.panel(study, dimension="O")
