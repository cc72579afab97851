"""The report's intervals say which kind they are: items (fixed raters) or items+raters (a sampled crowd)."""

import json

import pytest
from django.core.management import call_command

from analysis.report import build_report
from analysis.science.zmos import mos_from_item_scores
from analysis.science.imagenhub import add_overall, item_scores
from analysis import data
from tasks.demo import build_demo
from tasks.models import Comparison, Study
from tasks.services import rating_submit
from tests.analysis.test_report import _judged_study
from tests.factories import make_rater, make_study

pytestmark = pytest.mark.django_db


def _sampled(study: Study) -> Study:
    Study.objects.filter(pk=study.pk).update(rater_sampling=Study.RaterSampling.SAMPLED)
    study.refresh_from_db()
    return study


def test_a_new_study_samples_its_raters_and_an_imported_imagenhub_study_has_a_fixed_panel(tmp_path):
    assert make_study().rater_sampling == "sampled"
    study, _ = _judged_study(tmp_path, n_items=12)
    assert study.rater_sampling == "fixed"


def test_fixed_raters_keep_the_published_item_intervals_and_say_so(tmp_path, capsys):
    study, _ = _judged_study(tmp_path, n_items=12)
    report = build_report(study, n_boot=200)
    assert report["rater_sampling"] == "fixed"
    items = item_scores(add_overall(data.ratings_frame(study)))
    t_interval = mos_from_item_scores(items, score="O").set_index("model").loc["A"]
    block = report["models"]["A"]["dimensions"]["O"]
    assert block["ci95"] == [t_interval["ci_low"], t_interval["ci_high"]]  # unchanged, exactly
    assert block["intervals"]["ci95"] == "items" and block["intervals"]["alpha_ci95"] == "items"
    assert "ci95_items" not in block
    judge = report["models"]["A"]["judges"]["j"]["SC"]
    assert judge["interval"] == "items" and len(judge["ci95"]["spearman"]) == 2
    call_command("report", study.slug, "--n-boot", "20")
    assert "95% intervals resample items only" in capsys.readouterr().out


def test_sampled_raters_get_rater_inclusive_intervals_beside_the_item_ones(tmp_path):
    study, _ = _judged_study(tmp_path, n_items=12)
    fixed = build_report(study, n_boot=200)
    report = build_report(_sampled(study), n_boot=200)
    assert report["rater_sampling"] == "sampled"
    for model in ("A", "B"):
        for dim in ("SC", "PQ", "O"):
            block, before = report["models"][model]["dimensions"][dim], fixed["models"][model]["dimensions"][dim]
            assert block["mean"] == before["mean"]
            assert block["ci95_items"] == before["ci95"]
            assert block["intervals"]["ci95"] == "items+raters" and block["intervals"]["ci95_items"] == "items"
            low, high = block["ci95"]
            assert 0.0 <= low <= block["mean"] <= high <= 1.0  # percentiles stay on the 0-1 scale
            assert block["alpha_ci95_items"] == before["alpha_ci95"]
            assert block["intervals"]["alpha_ci95"] == "items+raters"
            assert block["intervals"]["gwet_ac1_ci95"] == "items"  # Gwet and percent agreement: items only
    study_level = report["study_level"]["dimensions"]["O"]
    assert study_level["intervals"]["fleiss_kappa_ci95"] == "items+raters"
    assert study_level["fleiss_kappa_ci95_items"] == fixed["study_level"]["dimensions"]["O"]["fleiss_kappa_ci95"]
    judge = report["models"]["A"]["judges"]["j"]["SC"]
    assert judge["interval"] == "items+raters"
    json.dumps(report, allow_nan=False)


def test_a_pairwise_crowd_gets_win_rate_and_bradley_terry_intervals_over_prompts_and_raters():
    build_demo(only=["demo-pairwise"])
    study = Study.objects.get(slug="demo-pairwise")
    assert study.rater_sampling == "sampled"
    for n, rater in enumerate([make_rater() for _ in range(3)]):
        for k, comparison in enumerate(Comparison.objects.filter(study=study).order_by("id")):
            rating_submit(rater=rater, comparison=comparison, require_assignment=False,
                          values={"preference": "A" if (n + k) % 3 else "B"})
    report = build_report(study, n_boot=100)
    for entry in report["models"].values():
        assert entry["intervals"] == {"win_rate_ci95": "items+raters", "bt_ci95": "items+raters",
                                      "win_rate_ci95_items": "judgements", "bt_ci95_items": "judgements"}
        assert 0.0 <= entry["win_rate_ci95"][0] <= entry["win_rate_ci95"][1] <= 1.0
    Study.objects.filter(pk=study.pk).update(rater_sampling="fixed")
    study.refresh_from_db()
    fixed = build_report(study, n_boot=100)
    for name, entry in fixed["models"].items():
        assert entry["intervals"] == {"win_rate_ci95": "judgements", "bt_ci95": "judgements"}
        assert entry["bt_ci95"] == report["models"][name]["bt_ci95_items"]


def test_one_rater_has_no_rater_inclusive_interval_and_the_report_says_why(tmp_path):
    study, _ = _judged_study(tmp_path, n_items=12)
    from tasks.models import Rating

    first = Rating.objects.filter(study=study).order_by("rater_id").values_list("rater_id", flat=True).first()
    Rating.objects.filter(study=study).exclude(rater_id=first).delete()
    report = build_report(_sampled(study), n_boot=50, judges=False)
    assert report["models"]["A"]["dimensions"]["SC"]["ci95"] is None
    assert any(r.startswith("models.A.dimensions.SC.ci95: 1 rater(s)") for r in report["reasons"])


def test_at_scale_the_item_agreement_intervals_are_the_jackknife_and_the_report_says_so(tmp_path, monkeypatch):
    """Past JACKKNIFE_ABOVE (here: any size) alpha, kappa, Gwet's AC1/AC2 and percent agreement over
    items take the delete-one jackknife too: no resamples, so no undefined share; each interval's
    method is recorded, the item one under ``*_items`` once a two-way interval took its key."""
    from analysis.science import agreement

    study, _ = _judged_study(tmp_path, n_items=12)
    small = build_report(study, n_boot=200)
    assert small["item_interval_methods"] == ["percentile bootstrap"]
    assert small["models"]["A"]["dimensions"]["O"]["interval_methods"]["alpha_ci95"] == "percentile bootstrap"
    monkeypatch.setattr(agreement, "JACKKNIFE_ABOVE", 0)
    fixed = build_report(study, n_boot=200)
    assert fixed["item_interval_methods"] == ["jackknife"]
    block = fixed["models"]["A"]["dimensions"]["O"]
    assert block["alpha"]["interval"] == small["models"]["A"]["dimensions"]["O"]["alpha"]["interval"]
    for key in ("alpha_ci95", "fleiss_kappa_ci95", "gwet_ac1_ci95", "gwet_ac2_ci95", "percent_agreement_ci95"):
        assert block["interval_methods"][key] == "jackknife"
    low, high = block["alpha_ci95"]["interval"]
    assert low < block["alpha"]["interval"] < high <= 1.0
    assert "alpha.interval" not in block.get("bootstrap_undefined_share", {})
    sampled = build_report(_sampled(study), n_boot=200)
    block = sampled["models"]["A"]["dimensions"]["O"]
    assert block["interval_methods"]["alpha_ci95"] == "jackknife"  # the two-way one, at this size too
    assert block["interval_methods"]["alpha_ci95_items"] == "jackknife"
    assert block["alpha_ci95_items"] == fixed["models"]["A"]["dimensions"]["O"]["alpha_ci95"]
    assert block["interval_methods"]["gwet_ac1_ci95"] == "jackknife"
    json.dumps(sampled, allow_nan=False)
