"""The report's judge intervals, paired comparisons and VIEScore conventions, through the database."""

import json

import numpy as np
import pytest

from analysis.importers import imagenhub_import, judge_import
from analysis.report import build_report
from tasks.models import Study

pytestmark = pytest.mark.django_db

# VIEScore Tables 2-4, row "GPT-4o 0shot" (SC, PQ, O), for the tasks whose judge files hold a
# fractional sub-score (the truncation convention matters there).
GPT4O = {
    "ImagenHub_Multi-Concept_IC": (0.4516, 0.2751, 0.4136),
    "ImagenHub_Text-Guided_IE": (0.4062, 0.4863, 0.3821),
}


def _two_judges(tmp_path, n_items=30, seed=0):
    """An ImagenHub study (3 raters, models A and B) scored by a good and a poor VIEScore judge."""
    rng = np.random.default_rng(seed)
    uids = [f"s{i}.jpg" for i in range(n_items)]
    folder = tmp_path / "human" / "ImagenHub_Text-Guided_IE"
    folder.mkdir(parents=True)
    truth = rng.integers(0, 3, size=(n_items, 2, 2)) / 2
    for rater in (1, 2, 3):
        noisy = np.clip(truth + rng.choice([-0.5, 0, 0, 0.5], size=truth.shape), 0, 1)
        lines = ["uid\tA\tB"] + [f"{u}\t[{noisy[i, 0, 0]}, {noisy[i, 0, 1]}]\t[{noisy[i, 1, 0]}, {noisy[i, 1, 1]}]"
                                 for i, u in enumerate(uids)]
        (folder / f"Text-Guided_IE_rater{rater}.tsv").write_text("\n".join(lines) + "\n")
    imagenhub_import(path=folder)
    for name, noise in (("good", 1.0), ("poor", 4.0)):
        root = tmp_path / name / "ImagenHub_Text-Guided_IE"
        for m, model in enumerate(("A", "B")):
            (root / model).mkdir(parents=True)
            for a, aspect in enumerate(("SC", "PQ")):
                scores = np.clip(np.round(truth[:, m, a] * 10 + rng.normal(0, noise, n_items)), 0, 10).astype(int)
                (root / model / f"{aspect}.json").write_text(
                    json.dumps({u: {"score": [int(s)]} for u, s in zip(uids, scores)}))
        judge_import(path=tmp_path / name, fmt="viescore", judge_name=name)
    return Study.objects.get(slug="ImagenHub_Text-Guided_IE")


def test_every_judge_correlation_has_an_interval_and_judges_are_compared_with_holm(tmp_path):
    report = build_report(_two_judges(tmp_path), n_boot=300)
    cell = report["models"]["A"]["judges"]["good"]["SC"]
    for name in ("srcc_ci95", "plcc_ci95", "krcc_ci95"):
        low, high = cell[name]
        assert low <= cell[{"srcc_ci95": "spearman", "plcc_ci95": "pearson", "krcc_ci95": "kendall"}[name]] <= high
    assert set(cell["bootstrap_undefined_share"]) == {"srcc", "plcc"}
    summary = report["judges"]["good"]["SC"]
    assert summary["spearman_mean_ci95"][0] <= summary["spearman_fisher_mean"] <= summary["spearman_mean_ci95"][1]
    block = report["judge_comparisons"]
    assert block["n_boot"] == 300 and block["average"] == "fisher" and "Holm" in block["method"]
    kinds = {(c["kind"], c["human_dimension"]) for c in block["comparisons"]}
    assert ("judge_vs_judge", "SC") in kinds and ("judge_vs_ceiling", "O") in kinds
    pair = next(c for c in block["comparisons"] if c["kind"] == "judge_vs_judge" and c["human_dimension"] == "SC")
    assert pair["first"]["judge"] == "good" and pair["difference"] > 0
    ps = [c["p"] for c in block["comparisons"]]
    assert [c["p_holm"] for c in block["comparisons"]] == pytest.approx(_holm(ps))
    json.dumps(report, allow_nan=False)


def _holm(ps):
    order = np.argsort(ps)
    out, running = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out


def test_no_bootstrap_means_no_intervals_and_no_comparisons(tmp_path):
    report = build_report(_two_judges(tmp_path, n_items=10), n_boot=0)
    assert report["judge_comparisons"]["comparisons"] == []
    assert any("n_boot = 0" in r for r in report["reasons"])


@pytest.mark.parametrize("slug", sorted(GPT4O))
def test_viescore_conventions_reproduce_the_published_gpt4o_task_numbers(shared_datasets, tmp_path, slug):
    viescore = shared_datasets / "viescore"
    imagenhub_import(path=viescore / "human_ratings" / slug)
    (tmp_path / "gpt4o").mkdir()
    (tmp_path / "gpt4o" / slug).symlink_to(viescore / "gpt4o_0shot" / slug)
    judge_import(path=tmp_path / "gpt4o", fmt="viescore", judge_name="gpt4o-0shot")
    study = Study.objects.get(slug=slug)

    paper = build_report(study, n_boot=0, conventions="viescore")
    assert paper["conventions"]["name"] == "viescore" and paper["judge_items"] == "all_aspects"
    assert paper["conventions"]["truncated_scores_changed"] == 1  # one [8.5, 9.0] PQ in each of these tasks
    assert len(paper["conventions"]["differences"]) == 4
    sc, pq, o = GPT4O[slug]
    got = {dim: paper["judges"]["gpt4o-0shot"][dim]["spearman_tanh_mean"] for dim in ("SC", "PQ", "O")}
    assert got["SC"] == pytest.approx(sc, abs=5e-5) and got["PQ"] == pytest.approx(pq, abs=5e-5)
    assert got["O"] == pytest.approx(o, abs=5e-3)  # float tie noise in O, see analysis.science.viescore_conventions

    default = build_report(study, n_boot=0)
    assert default["conventions"] == {"name": "default", "differences": []}
    assert "spearman_tanh_mean" not in default["judges"]["gpt4o-0shot"]["PQ"]
    assert default["judges"]["gpt4o-0shot"]["PQ"]["spearman_fisher_mean"] > got["PQ"]  # Fisher, untruncated


def test_the_judges_page_says_which_differences_are_real(client, tmp_path):
    from django.urls import reverse

    from tests.factories import make_user

    study = _two_judges(tmp_path)
    researcher = make_user("researcher-comparisons", is_staff=False)
    study.owners.add(researcher)
    client.force_login(researcher)
    page = client.get(reverse("judge_side_by_side", args=[study.slug])).content.decode()
    assert "Which differences are real" in page and "p (Holm)" in page
    assert "good</strong> − <strong>poor" in page and "human ceiling" in page
    assert "Williams t" in page and "SRCC [" in page


def test_the_report_command_prints_the_comparisons_and_takes_the_conventions(tmp_path, capsys):
    from django.core.management import call_command

    study = _two_judges(tmp_path, n_items=20)
    call_command("report", study.slug, "--n-boot", "200")
    text = capsys.readouterr().out
    assert "SC SRCC good - poor: +" in text and "Holm p" in text
    call_command("report", study.slug, "--json", "--n-boot", "0", "--conventions", "viescore")
    printed = json.loads(capsys.readouterr().out)
    assert printed["conventions"]["name"] == "viescore" and "spearman_tanh_mean" in printed["judges"]["good"]["SC"]
