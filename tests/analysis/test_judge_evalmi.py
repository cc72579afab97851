"""EvalMi judges against humans: yes/no answers vs the majority, and z-MOS item scores in the scatter.

The fake OpenAI-compatible server answers "Yes." for bright images and "No." for dark ones, and
scores perception / correspondence by brightness, so every expected number below is known.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse

from analysis.judge_services import judge_create, judge_run_start
from analysis.judge_views import _paired, human_item_means
from analysis.report import build_report
from tasks.images import store_image
from tasks.models import Rating
from tests.factories import make_instance, make_item, make_rater, make_study, make_user, png_bytes
from tests.judge_server import FakeJudgeServer

pytestmark = pytest.mark.django_db

BRIGHT, DARK = (250, 250, 250), (5, 5, 5)
# model → per instance: (image, the three raters' yes/no answers)
DESIGN = {
    "Alpha": [(BRIGHT, "yyn"), (BRIGHT, "yyy"), (DARK, "nny"), (DARK, "nnn")],  # humans agree with the judge 4/4
    "Beta": [(BRIGHT, "yyy"), (BRIGHT, "nny"), (DARK, "nnn"), (DARK, "yny")],  # 2 of 4
}
LIKERT = {0: [5, 4, 2, 1, 4, 3, 2, 1], 1: [4, 5, 1, 2, 5, 2, 3, 2], 2: [3, 5, 2, 2, 4, 1, 1, 3]}


@pytest.fixture(scope="module")
def server():
    with FakeJudgeServer() as running:
        yield running


@pytest.fixture(autouse=True)
def operator_endpoint(settings, server):
    """The fake server is the operator's endpoint named ``default``; judges pick it by name."""
    settings.JUDGE_ENDPOINTS = server.endpoints()


@pytest.fixture
def researcher():
    return make_user("researcher-evalmi")


def evalmi_study(owner):
    study = make_study(protocol="evalmi", task_type="counting", title="EvalMi judged")
    study.owners.add(owner)
    raters = [make_rater() for _ in range(3)]
    instances = [make_instance(study, question="Is there exactly one dog?", sub_questions=[]) for _ in range(4)]
    position = 0
    for model, rows in DESIGN.items():
        for instance, (colour, votes) in zip(instances, rows):
            item = make_item(study, instance=instance, model=model, with_image=False)
            item.image = store_image(png_bytes(color=colour))
            item.save(update_fields=["image"])
            for r, rater in enumerate(raters):
                score = LIKERT[r][position]
                Rating.objects.create(study=study, rater=rater, item=item,
                                      values={"perception": score, "correspondence": 6 - score},
                                      answers={"q1": "yes" if votes[r] == "y" else "no"})
            position += 1
    return study


def run_evalmi_judge(server, study, capture):
    judge = judge_create(name="EvalMi fake", kind="evalmi", params={"model": "fake-good"})
    with capture(execute=True):
        run = judge_run_start(judge=judge, study=study)
    run.refresh_from_db()
    assert (run.state, run.failed) == ("done", 0)
    return run


def test_judge_yes_no_answers_are_compared_with_the_human_majority_per_model_and_overall(
    server, researcher, django_capture_on_commit_callbacks
):
    study = evalmi_study(researcher)
    run_evalmi_judge(server, study, django_capture_on_commit_callbacks)
    report = build_report(study, n_boot=0)

    alpha = report["models"]["Alpha"]["judges"]["EvalMi fake"]["qa"]
    beta = report["models"]["Beta"]["judges"]["EvalMi fake"]["qa"]
    assert (alpha["agreement"], alpha["n"], alpha["cohen_kappa"]) == (1.0, 4, 1.0)
    # Beta: judge yes, yes, no, no; majority yes, no, no, yes → 2/4 agree; both say yes half the time → κ 0
    assert (beta["agreement"], beta["n"]) == (0.5, 4) and beta["cohen_kappa"] == pytest.approx(0.0)
    overall = report["judges"]["EvalMi fake"]["qa"]
    assert overall["agreement"] == pytest.approx(6 / 8) and overall["n"] == 8
    assert overall["judge_yes_rate"] == 0.5 and overall["agreement_model_mean"] == pytest.approx(0.75)
    # the yes/no answer is not correlated with the MOS: only the two human dimensions are keys
    assert set(report["judges"]["EvalMi fake"]) == {"perception", "correspondence", "qa"}
    assert report["models"]["Alpha"]["judges"]["EvalMi fake"]["perception"]["n"] == 4
    json.dumps(report, allow_nan=False)


def test_the_side_by_side_page_shows_the_yes_no_agreement(client, server, researcher, django_capture_on_commit_callbacks):
    study = evalmi_study(researcher)
    run_evalmi_judge(server, study, django_capture_on_commit_callbacks)
    client.force_login(researcher)
    response = client.get(reverse("judge_side_by_side", args=[study.slug]))
    html = response.content.decode()
    assert "Yes/no answers vs the human majority" in html
    assert "agrees with the raters&#x27; majority answer on 75% of 8 items" in html or \
        "agrees with the raters' majority answer on 75% of 8 items" in html
    assert "agrees 100%" in html and "agrees 50%" in html
    assert all(key != "qa" for _, key in response.context["judge_options"])


def test_the_scatter_plots_the_reports_z_mos_item_scores_not_raw_likert_means(
    client, server, researcher, django_capture_on_commit_callbacks
):
    study = evalmi_study(researcher)
    run_evalmi_judge(server, study, django_capture_on_commit_callbacks)
    human = human_item_means(study)
    perception = human[human["dimension"] == "perception"].set_index("item")["human"]
    # z-MOS by hand: per rater z = (r - mean) / std (ddof 1), z' = 100 (z + 3) / 6, mean over raters
    scaled = [100 * ((np.array(v, float) - np.mean(v)) / np.std(v, ddof=1) + 3) / 6 for v in LIKERT.values()]
    items = list(Rating.objects.filter(study=study, rater__in=Rating.objects.filter(study=study).values("rater")[:1])
                 .order_by("id").values_list("item_id", flat=True))
    first_item = items[0]
    assert perception[first_item] == pytest.approx(np.mean([s[0] for s in scaled]))
    assert perception[first_item] != pytest.approx(np.mean([LIKERT[r][0] for r in range(3)]))
    # the same numbers as the report's per-model mean (the mean of item z-MOS)
    report = build_report(study, n_boot=0)
    alpha_items = human[(human["dimension"] == "perception") & (human["model"] == "Alpha")]["human"]
    assert report["models"]["Alpha"]["dimensions"]["perception"]["mean"] == pytest.approx(alpha_items.mean())
    paired = _paired(study, "EvalMi fake", "perception", "perception")
    assert set(paired["human"].round(9)) == set(perception.round(9))
    client.force_login(researcher)
    response = client.get(reverse("judge_scatter", args=[study.slug]),
                          {"judge": "EvalMi fake", "dim": "perception", "human": "perception"})
    assert response.status_code == 200 and "z-MOS" in response.content.decode()


def test_report_json_shows_a_judge_that_was_run_here_with_its_correlations(
    capsys, server, researcher, django_capture_on_commit_callbacks
):
    study = evalmi_study(researcher)
    run = run_evalmi_judge(server, study, django_capture_on_commit_callbacks)
    assert run.source == "run" and run.calls > 0
    call_command("report", study.slug, "--json", "--n-boot", "50")
    report = json.loads(capsys.readouterr().out)
    summary = report["judges"]["EvalMi fake"]["perception"]
    assert summary["n"] == 8 and summary["models"] == 2
    # brightness-driven judge vs these ratings: defined correlations, in range
    for model in ("Alpha", "Beta"):
        cell = report["models"][model]["judges"]["EvalMi fake"]["perception"]
        assert cell["n"] == 4 and -1 <= cell["spearman"] <= 1
    assert -1 <= summary["spearman_fisher_mean"] <= 1
    assert report["judges"]["EvalMi fake"]["qa"]["agreement"] == pytest.approx(0.75)
    call_command("report", study.slug)
    assert "judge EvalMi fake" in capsys.readouterr().out


def test_yes_no_agreement_and_kappa_carry_bootstrap_intervals_in_the_report(
    server, researcher, django_capture_on_commit_callbacks
):
    study = evalmi_study(researcher)
    run_evalmi_judge(server, study, django_capture_on_commit_callbacks)
    report = build_report(study, n_boot=200)
    overall = report["judges"]["EvalMi fake"]["qa"]
    low, high = overall["agreement_ci95"]
    assert low <= overall["agreement"] <= high
    assert overall["cohen_kappa_ci95"][0] <= overall["cohen_kappa"] <= overall["cohen_kappa_ci95"][1]
    alpha = report["models"]["Alpha"]["judges"]["EvalMi fake"]["qa"]
    assert alpha["agreement_ci95"] == [1.0, 1.0]  # 4 of 4 agree: every resample agrees
    assert 0 < alpha["bootstrap_undefined_share"]["cohen_kappa"] < 1  # resamples with one answer only
    json.dumps(report, allow_nan=False)
