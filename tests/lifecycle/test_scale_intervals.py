"""Confidence intervals of ImagenHub means stay on the 0–1 scale (issue 14: the leaderboard showed
``0.951 [0.928, 1.030]``, the judges page ``SC 0.500 [-5.853, 6.853]`` with two items)."""

import numpy as np
import pytest
from scipy import stats

from analysis.report import build_report
from raters.models import Rater
from tasks.models import Rating
from tests.factories import make_instance, make_item, make_study

pytestmark = pytest.mark.django_db


def _rate(study, scores: dict[str, list[tuple[float, float]]], raters: int = 2) -> None:
    """scores: model -> per item (SC, PQ); every rater gives the same values."""
    people = [Rater.objects.create(platform=Rater.Platform.PROLIFIC, external_id=f"P{i}") for i in range(raters)]
    instances = [make_instance(study) for _ in range(max(len(v) for v in scores.values()))]
    for model, values in scores.items():
        for instance, (sc, pq) in zip(instances, values):
            item = make_item(study, instance=instance, model=model)
            for rater in people:
                Rating.objects.create(study=study, rater=rater, item=item, values={"SC": sc, "PQ": pq})


def test_two_items_interval_is_clipped_and_says_why():
    study = make_study(rater_sampling="fixed")  # the items-only Student-t interval is the one clipped
    _rate(study, {"M": [(0.0, 1.0), (1.0, 1.0)]})
    report = build_report(study, judges=False, n_boot=0)
    block = report["models"]["M"]["dimensions"]["SC"]
    assert block["mean"] == pytest.approx(0.5)
    # Student-t with 1 degree of freedom: 0.5 ± 12.706 · 0.7071 / √2 = [-5.853, 6.853]
    half = stats.t.ppf(0.975, 1) * np.std([0.0, 1.0], ddof=1) / np.sqrt(2)
    assert 0.5 - half == pytest.approx(-5.853, abs=1e-3)
    assert block["ci95"] == [0.0, 1.0]
    assert any("models.M.dimensions.SC.ci95: clipped to the scale 0–1" in r for r in report["reasons"])


def test_mean_near_the_top_is_clipped_only_above():
    study = make_study(rater_sampling="fixed")  # the items-only Student-t interval is the one clipped
    _rate(study, {"M": [(1.0, 1.0)] * 9 + [(0.5, 1.0)]})
    report = build_report(study, judges=False, n_boot=0)
    sc = [1.0] * 9 + [0.5]
    half = stats.t.ppf(0.975, 9) * np.std(sc, ddof=1) / np.sqrt(10)
    block = report["models"]["M"]["dimensions"]["SC"]
    assert np.mean(sc) + half > 1  # the raw interval leaves the scale
    assert block["ci95"][0] == pytest.approx(np.mean(sc) - half)
    assert block["ci95"][1] == 1.0


def test_interval_inside_the_scale_is_unchanged():
    study = make_study(rater_sampling="fixed")  # the items-only Student-t interval is the one clipped
    values = [(0.5, 1.0), (0.5, 0.5), (1.0, 1.0), (0.0, 0.5), (0.5, 1.0), (0.5, 0.5)]
    _rate(study, {"M": values})
    report = build_report(study, judges=False, n_boot=0)
    sc = [v[0] for v in values]
    half = stats.t.ppf(0.975, len(sc) - 1) * np.std(sc, ddof=1) / np.sqrt(len(sc))
    assert report["models"]["M"]["dimensions"]["SC"]["ci95"] == pytest.approx([np.mean(sc) - half, np.mean(sc) + half])
    assert not any(".SC.ci95: clipped" in r for r in report["reasons"])


def test_the_leaderboard_and_judges_page_show_the_clipped_interval(client):
    from tests.factories import make_user

    owner = make_user("scale-owner")
    study = make_study(rater_sampling="fixed")  # the items-only Student-t interval is the one clipped
    study.owners.add(owner)
    _rate(study, {"M": [(0.0, 1.0), (1.0, 1.0)], "N": [(0.5, 0.5), (0.5, 1.0)]})
    client.force_login(owner)
    board = client.get(f"/research/{study.slug}/leaderboard/?dim=SC").content.decode()
    assert "[0.000, 1.000]" in board and 'data-testid="clipped-note"' in board
    assert "-5.853" not in board.split("Undefined values")[0]
    judges = client.get(f"/studies/{study.slug}/judges/").content.decode()
    assert "[0.000, 1.000]" in judges and "-5.853" not in judges and "6.853]" not in judges
