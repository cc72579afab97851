"""The study report, end to end through the database.

Real data (skipped clearly without ../shared/datasets): ImagenHub Table 4, VIEScore GPT-4o and
LPIPS correlations, EvalMi-50K Table 4 human columns. Demo and factory studies: the report
after ratings submitted through tasks.services.rating_submit.
"""

import json
import math
from concurrent.futures import Future

import numpy as np
import pytest
from django.core.management import call_command

from analysis.science.formats import read_evalmi_prompt_tasks, read_evalmi_questions
from analysis.importers import evalmi_store, imagenhub_import, judge_import
from analysis.report import build_report
from raters.models import Rater
from tasks.demo import build_demo
from tasks.models import Comparison, Item, Study
from tasks.services import rating_submit
from tests.factories import make_instance, make_item, make_rater, make_study

pytestmark = pytest.mark.django_db


def imported(shared_datasets, task: str) -> Study:
    imagenhub_import(path=shared_datasets / "imagenhub" / "human_ratings" / task)
    return Study.objects.get(slug=task)


def cell(report, model, dim):
    return report["models"][model]["dimensions"][dim]


# ------------------------------------------------------------------ ImagenHub (real data)


def test_report_on_imported_text_guided_editing_reproduces_imagenhub_table4(shared_datasets):
    report = build_report(imported(shared_datasets, "Text-Guided_IE"), judges=False)
    magicbrush = report["models"]["MagicBrush"]
    assert (magicbrush["items"], magicbrush["raters"]) == (179, 3)
    for dim, mean, std in (("SC", 0.51, 0.01), ("PQ", 0.65, 0.06), ("O", 0.47, 0.02)):
        assert round(cell(report, "MagicBrush", dim)["mean"], 2) == mean
        assert round(cell(report, "MagicBrush", dim)["std_between_raters"], 2) == std
    assert round(cell(report, "MagicBrush", "O")["alpha"]["ordinal"], 2) == 0.67  # Kd
    assert round(cell(report, "MagicBrush", "O")["fleiss_kappa"], 2) == 0.44
    low, high = cell(report, "MagicBrush", "O")["ci95"]
    assert low < cell(report, "MagicBrush", "O")["mean"] < high
    ceiling = cell(report, "MagicBrush", "O")["human_ceiling"]
    assert 0.5 < ceiling["spearman"] < 1 and 0.5 < ceiling["kendall"] < 1


def test_imagic_with_sc_zero_everywhere_gives_nulls_with_reasons_and_strict_json(shared_datasets):
    report = build_report(imported(shared_datasets, "Text-Guided_IE"))
    imagic_sc = cell(report, "Imagic", "SC")
    assert imagic_sc["mean"] == 0.0
    assert imagic_sc["alpha"] == {"nominal": None, "ordinal": None, "interval": None}
    assert imagic_sc["fleiss_kappa"] is None and imagic_sc["human_ceiling"]["spearman"] is None
    assert any(r.startswith("models.Imagic.dimensions.SC.alpha.ordinal: only one value present") for r in report["reasons"])
    json.dumps(report, allow_nan=False)  # raises on any NaN or inf


def test_agreement_carries_bootstrap_cis_over_items_per_model_and_per_study(shared_datasets):
    report = build_report(imported(shared_datasets, "Text-Guided_IE"), judges=False, n_boot=300)
    overall = cell(report, "MagicBrush", "O")
    for level in ("nominal", "ordinal", "interval"):
        low, high = overall["alpha_ci95"][level]
        assert low <= overall["alpha"][level] <= high and high - low < 0.5
    low, high = overall["alpha_ci95"]["ordinal"]
    assert low < 0.67 < high  # ImagenHub's published Kd inside our interval
    assert overall["fleiss_kappa_ci95"][0] <= overall["fleiss_kappa"] <= overall["fleiss_kappa_ci95"][1]
    study = report["study_level"]["dimensions"]["O"]
    assert study["alpha_ci95"]["ordinal"][0] < study["alpha"]["ordinal"] < study["alpha_ci95"]["ordinal"][1]
    assert study["fleiss_kappa_ci95"][0] < study["fleiss_kappa"] < study["fleiss_kappa_ci95"][1]
    # Imagic's SC is 0 everywhere: no coefficient, so no interval either, each with its reason
    imagic = cell(report, "Imagic", "SC")
    assert imagic["alpha_ci95"] == {"nominal": None, "ordinal": None, "interval": None}
    assert imagic["fleiss_kappa_ci95"] is None
    assert any(r.startswith("models.Imagic.dimensions.SC.alpha_ci95.ordinal: only one value present")
               for r in report["reasons"])
    assert any(r.startswith("models.Imagic.dimensions.SC.fleiss_kappa_ci95: only one value present")
               for r in report["reasons"])
    json.dumps(report, allow_nan=False)
    # same seed, same intervals; n_boot=0 leaves them null with a reason
    again = build_report(Study.objects.get(slug="Text-Guided_IE"), judges=False, n_boot=300)
    assert cell(again, "MagicBrush", "O")["alpha_ci95"] == overall["alpha_ci95"]
    bare = build_report(Study.objects.get(slug="Text-Guided_IE"), judges=False, n_boot=0)
    assert cell(bare, "MagicBrush", "O")["alpha_ci95"]["ordinal"] is None
    assert "models.MagicBrush.dimensions.O.alpha_ci95.ordinal: n_boot = 0: no bootstrap interval" in bare["reasons"]


def test_report_on_multi_subject_composition_reproduces_customdiffusion(shared_datasets):
    report = build_report(imported(shared_datasets, "Multi-Subject_IG"), judges=False)
    got = [round(cell(report, "CustomDiffusion", d)[k], 2) for d in ("SC", "PQ", "O") for k in ("mean", "std_between_raters")]
    assert got == [0.26, 0.01, 0.86, 0.05, 0.29, 0.01]
    assert round(cell(report, "CustomDiffusion", "O")["alpha"]["ordinal"], 2) == 0.88
    assert round(cell(report, "CustomDiffusion", "O")["fleiss_kappa"], 2) == 0.73


def test_judges_imported_beside_viescore_human_copy_give_the_published_correlations(shared_datasets, tmp_path):
    viescore = shared_datasets / "viescore"
    slug = "ImagenHub_Text-Guided_IE"
    imagenhub_import(path=viescore / "human_ratings" / slug)
    for kind in ("gpt4o_0shot", "autometrics"):  # only this task's folder: the other studies are not imported
        (tmp_path / kind).mkdir()
        (tmp_path / kind / slug).symlink_to(viescore / kind / slug)
    judge_import(path=tmp_path / "gpt4o_0shot", fmt="viescore", judge_name="gpt4o-0shot")
    judge_import(path=tmp_path / "autometrics", fmt="autometrics")

    report = build_report(Study.objects.get(slug=slug))
    gpt = report["models"]["MagicBrush"]["judges"]["gpt4o-0shot"]
    assert gpt["SC"]["spearman"] == pytest.approx(0.6445, abs=1e-4) and gpt["SC"]["n"] == 179
    lpips = report["models"]["MagicBrush"]["judges"]["LPIPS"]
    assert (round(lpips["SC"]["spearman"], 4), round(lpips["PQ"]["spearman"], 4)) == (0.2146, 0.3722)
    assert lpips["O"]["spearman"] == pytest.approx(0.2667, abs=5e-3)
    assert report["judges"]["LPIPS"]["O"]["model_level"]["footrule"] == 20.0  # VIEScore Table 6
    assert round(report["judges"]["LPIPS"]["O"]["model_level"]["spearman_rho"], 2) == 0.17
    fisher = report["judges"]["gpt4o-0shot"]["SC"]["spearman_fisher_mean"]
    per_model = [m["judges"]["gpt4o-0shot"]["SC"]["spearman"] for m in report["models"].values() if m["judges"]]
    assert fisher == pytest.approx(math.tanh(np.mean(np.arctanh(per_model))))
    assert "Imagic" not in [m for m, v in report["models"].items() if v["judges"]]  # not in VIEScore's copy
    json.dumps(report, allow_nan=False)


# ------------------------------------------------------------------ EvalMi (real data, two models)


def test_evalmi_published_reference_reproduces_table4_human_columns(shared_datasets, evalmi_mos):
    root = shared_datasets / "evalmi"
    mos = evalmi_mos[evalmi_mos["model"].isin(["ali_flux_schnell", "LWM"])]
    evalmi_store(mos=mos, questions=read_evalmi_questions(root / "question.xlsx"),
                 tasks=read_evalmi_prompt_tasks(root / "prompt_tasks.jsonl"), study_slug="evalmi-50k")
    report = build_report(Study.objects.get(slug="evalmi-50k"))
    assert report["human_source"] == "published_reference" and report["judges"] == {}
    for model, (perception, correspondence, qa) in {"ali_flux_schnell": (60.63, 58.10, 80.29),
                                                     "LWM": (28.88, 35.46, 15.48)}.items():
        entry = report["models"][model]
        assert round(entry["dimensions"]["perception"]["mean"], 2) == perception
        assert round(entry["dimensions"]["correspondence"]["mean"], 2) == correspondence
        assert round(100 * entry["qa_accuracy"], 2) == qa
        assert entry["dimensions"]["perception"]["std_between_raters"] is None
    assert "models.*.dimensions.*.alpha: published MOS has no per-rater ratings" in report["reasons"]
    json.dumps(report, allow_nan=False)


# ------------------------------------------------------------------ studies rated on the site


def test_report_on_the_demo_study_after_a_few_ratings(capsys):
    build_demo(only=["demo-text-to-image"])
    study = Study.objects.get(slug="demo-text-to-image")
    items = list(Item.objects.filter(study=study, gen_model__name__in=sorted(
        study.gen_models.values_list("name", flat=True))[:2]).order_by("id")[:4])
    raters = [make_rater() for _ in range(3)]
    scores = {0: [(1, 1), (0.5, 1), (0, 0.5), (1, 0.5)], 1: [(1, 1), (0.5, 0.5), (0, 0.5), (1, 1)],
              2: [(0.5, 1), (0.5, 1), (0, 0), (1, 0.5)]}
    for index, rater in enumerate(raters):
        for item, (sc, pq) in zip(items, scores[index]):
            rating_submit(rater=rater, item=item, values={"SC": sc, "PQ": pq}, require_assignment=False)

    report = build_report(study)
    assert report["study_level"]["ratings"] == 12 and report["study_level"]["raters"] == 3
    model = items[0].gen_model.name
    mine = [i for i, item in enumerate(items) if item.gen_model.name == model]
    expected_sc = np.mean([np.mean([scores[r][i][0] for i in mine]) for r in range(3)])
    assert cell(report, model, "SC")["mean"] == pytest.approx(expected_sc)
    json.dumps(report, allow_nan=False)

    raters[2].state = Rater.State.BLOCKED
    raters[2].state_reason = "failed attention checks"
    raters[2].save()
    without = build_report(study)
    assert without["study_level"]["raters"] == 2
    assert without["excluded_raters"] == [{"rater": str(raters[2].id), "reason": "blocked: failed attention checks",
                                           "included": False}]
    assert build_report(study, include_excluded=True)["study_level"]["raters"] == 3

    call_command("report", study.slug)
    assert "SC mean±std" in capsys.readouterr().out
    call_command("report", study.slug, "--json")
    assert json.loads(capsys.readouterr().out)["study"] == "demo-text-to-image"


def test_evalmi_ratings_give_zmos_qa_accuracy_and_screening(monkeypatch):
    study = make_study(protocol="evalmi", task_type="counting")
    instances = [make_instance(study, question="Are there two cats?", sub_questions=[]) for _ in range(3)]
    items = [make_item(study, instance=inst, model=model, with_image=False)
             for inst in instances for model in ("Alpha", "Beta")]
    raters = [make_rater() for _ in range(4)]
    likert = {0: [5, 2, 4, 1, 5, 3], 1: [4, 1, 5, 2, 4, 2], 2: [5, 3, 5, 1, 4, 2], 3: [3, 3, 3, 3, 3, 3]}
    yes = {0: "yyynyn", 1: "yynnyn", 2: "ynynyy", 3: "yyyyyy"}
    for r, rater in enumerate(raters):
        for i, item in enumerate(items):
            rating_submit(rater=rater, item=item, require_assignment=False,
                          values={"perception": likert[r][i], "correspondence": likert[r][i]},
                          answers={"q1": "yes" if yes[r][i] == "y" else "no"})
    report = build_report(study)

    # rater 4 gave 3 everywhere: sigma = 0, left out of z-MOS with a reason (never a crash)
    assert any(f"rater {raters[3].id}" in r and "sigma = 0" in r for r in report["reasons"])
    z = {}
    for r in range(3):
        values = np.array(likert[r], float)
        z[r] = 100 * ((values - values.mean()) / values.std(ddof=1) + 3) / 6
    alpha_items = [np.mean([z[r][i] for r in range(3)]) for i in (0, 2, 4)]
    assert cell(report, "Alpha", "perception")["mean"] == pytest.approx(np.mean(alpha_items))
    assert cell(report, "Alpha", "perception")["std_between_raters"] is not None
    # QA majorities: Alpha yes, yes (3:1), yes; Beta yes (3:1), no (3:1), 2:2 → undecided, counted against it
    assert report["models"]["Alpha"]["qa_accuracy"] == pytest.approx(1.0)
    assert report["models"]["Beta"]["qa_accuracy"] == pytest.approx(1 / 3)
    assert report["study_level"]["qa"]["undecided"] == 1
    screening = report["study_level"]["screening"]["perception"]
    assert screening["raters"] == 4 and set(screening["mos_all"]) == {"Alpha", "Beta"}
    json.dumps(report, allow_nan=False)

    # agreement and screening run in a background thread: the same report, reasons in the same order
    class InThisThread:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def submit(self, fn, *args, **kwargs):
            future = Future()
            future.set_result(fn(*args, **kwargs))
            return future

    monkeypatch.setattr("analysis.science.report._background", InThisThread)
    assert build_report(study) == report


def test_pairwise_demo_reports_win_rates_and_bradley_terry():
    build_demo(only=["demo-pairwise"])
    study = Study.objects.get(slug="demo-pairwise")
    raters = [make_rater() for _ in range(2)]
    for rater in raters:
        for comparison in Comparison.objects.filter(study=study).select_related("item_a__gen_model", "item_b__gen_model"):
            names = (comparison.item_a.gen_model.name, comparison.item_b.gen_model.name)
            best = min(names)  # the alphabetically first model always wins
            rating_submit(rater=rater, comparison=comparison, require_assignment=False,
                          values={"preference": "A" if names[0] == best else "B"})
    report = build_report(study, n_boot=200)
    ordered = list(report["models"])
    assert ordered[0] == min(ordered) and report["models"][ordered[0]]["win_rate"] == 1.0
    assert report["models"][ordered[-1]]["win_rate"] == 0.0
    top = report["models"][ordered[0]]
    assert top["bt_ci95"][0] <= top["bt_score"] <= top["bt_ci95"][1]
    assert top["bootstrap_undefined_share"] == {"win_rate": 0.0, "bt_score": 0.0}
    board = report["leaderboard"]["bt_score"]
    assert list(board["ranks"])[0] == ordered[0] and board["ranks"][ordered[0]]["rank_ci95"][0] == 1
    assert len(board["pairs"]) == len(ordered) * (len(ordered) - 1) // 2
    assert report["study_level"]["preference"]["alpha_nominal"] == pytest.approx(1.0)
    json.dumps(report, allow_nan=False)


def test_a_higher_is_better_metric_named_unlike_the_human_dimension_keeps_its_sign_at_model_level(
        shared_datasets, tmp_path):
    # VIEScore Subject-Driven IG: DINO and CLIP-I rank the models as the humans' O does (+0.80, +0.60);
    # negating them (the old lower_is_better=True for any differently named dimension) gave -0.80 and -0.60.
    from scipy import stats

    viescore = shared_datasets / "viescore"
    slug = "ImagenHub_Subject-Driven_IG"
    imagenhub_import(path=viescore / "human_ratings" / slug)
    (tmp_path / "autometrics").mkdir()
    (tmp_path / "autometrics" / slug).symlink_to(viescore / "autometrics" / slug)
    judge_import(path=tmp_path / "autometrics", fmt="autometrics")

    report = build_report(Study.objects.get(slug=slug), n_boot=0)
    for metric, published in (("DINO", 0.80), ("CLIP_I", 0.60)):
        judge_means = {m: np.mean([v for v in _metric_values(viescore / "autometrics" / slug / f"{m}.json", metric)])
                       for m in report["models"] if (viescore / "autometrics" / slug / f"{m}.json").exists()}
        human_means = {m: report["models"][m]["dimensions"]["O"]["mean"] for m in judge_means}
        expected = stats.spearmanr(list(judge_means.values()), list(human_means.values()))[0]
        level = report["judges"][metric]["O"]["model_level"]
        assert level["spearman_rho"] == pytest.approx(expected) and round(level["spearman_rho"], 2) == published
        assert level["rmse"] is None  # a similarity is not on the human 0-1 scale


def _metric_values(path, metric):
    return [entry[metric] for entry in json.loads(path.read_text()).values()]


def test_skewed_cells_report_percent_agreement_and_gwets_ac1_beside_a_low_kappa(shared_datasets):
    # ImagenHub Text-Guided IE, DiffEdit SC: raters agree on 95.5 % of pairs yet kappa is 0.18
    # (nearly every rating is 0); AC1 = 0.954 says what the raw agreement says.
    report = build_report(imported(shared_datasets, "Text-Guided_IE"), n_boot=200)
    sc = cell(report, "DiffEdit", "SC")
    assert round(sc["percent_agreement"], 3) == 0.955 and round(sc["fleiss_kappa"], 2) == 0.18
    assert round(sc["gwet_ac1"], 3) == 0.954 and sc["gwet_ac2"] > sc["fleiss_kappa"]
    low, high = sc["gwet_ac1_ci95"]
    assert low <= sc["gwet_ac1"] <= high
    assert set(sc["bootstrap_undefined_share"]) >= {"alpha.nominal", "fleiss_kappa", "gwet_ac1", "percent_agreement"}
    assert all(0 <= share <= 1 for share in sc["bootstrap_undefined_share"].values())
    assert report["study_level"]["dimensions"]["SC"]["gwet_ac1"] is not None
    imagic = cell(report, "Imagic", "SC")  # SC = 0 everywhere: full agreement, no chance-corrected value
    assert imagic["percent_agreement"] == 1.0 and imagic["gwet_ac1"] is None
    json.dumps(report, allow_nan=False)


def _judged_study(tmp_path, rng_seed=4, n_items=8):
    """An ImagenHub study (3 raters, models A and B, ``n_items`` samples) and a VIEScore judge that
    scored SC on every sample but PQ (hence O) only on the first 5 of model A's."""
    rng = np.random.default_rng(rng_seed)
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
    root = tmp_path / "judge" / "ImagenHub_Text-Guided_IE"
    judge_sc = {u: int(rng.integers(0, 11)) for u in uids}
    for model in ("A", "B"):
        (root / model).mkdir(parents=True)
        (root / model / "SC.json").write_text(json.dumps({u: {"score": [judge_sc[u]]} for u in uids}))
    (root / "A" / "PQ.json").write_text(json.dumps({u: {"score": [int(rng.integers(0, 11))]} for u in uids[:5]}))
    judge_import(path=tmp_path / "judge", fmt="viescore", judge_name="j")
    return Study.objects.get(slug="ImagenHub_Text-Guided_IE"), judge_sc


def test_each_judge_dimension_says_how_many_items_it_used_and_all_aspects_keeps_only_complete_items(tmp_path):
    study, _ = _judged_study(tmp_path)
    report = build_report(study, n_boot=0)
    assert report["judge_items"] == "per_dimension"
    sc, pq = report["judges"]["j"]["SC"], report["judges"]["j"]["PQ"]
    assert (sc["items"], pq["items"], report["judges"]["j"]["O"]["items"]) == (16, 5, 5)
    assert sc["items_missing_other_dimensions"] == 11 and pq["items_missing_other_dimensions"] == 0

    strict = build_report(study, n_boot=0, judge_items="all_aspects")
    assert strict["judge_items"] == "all_aspects"
    assert {dim: strict["judges"]["j"][dim]["items"] for dim in ("SC", "PQ", "O")} == {"SC": 5, "PQ": 5, "O": 5}
    assert strict["models"]["A"]["judges"]["j"]["SC"]["n"] == 5 and "B" not in [
        m for m, v in strict["models"].items() if v["judges"]]
    with pytest.raises(ValueError, match="judge_items must be one of per_dimension, all_aspects, got 'some'"):
        build_report(study, judge_items="some")


def test_the_judge_is_set_beside_the_ceiling_like_for_like(tmp_path):
    from scipy import stats

    study, judge_sc = _judged_study(tmp_path, n_items=12)
    report = build_report(study, n_boot=0)
    from analysis import data

    frame = data.ratings_frame(study)
    wide = frame[frame["model"] == "A"].pivot_table(index="item", columns="rater", values="SC")
    keys = dict(Item.objects.filter(study=study).values_list("id", "instance__key"))
    judge = np.array([judge_sc[keys[i]] / 10 for i in wide.index])
    per_rater = [stats.spearmanr(judge, wide.drop(columns=r).mean(axis=1))[0] for r in wide.columns]
    block = report["models"]["A"]["judges"]["j"]["SC"]
    assert block["vs_rest"]["spearman"] == pytest.approx(np.tanh(np.mean(np.arctanh(per_rater))))
    assert block["vs_rest"]["raters"] == 3
    comparison = report["judges"]["j"]["SC"]["ceiling_comparison"]
    assert comparison["pooled"]["human_ceiling"] == report["study_level"]["dimensions"]["SC"]["human_ceiling"]
    assert comparison["pooled"]["judge_vs_rest"]["spearman"] is not None
    ceilings = [report["models"][m]["dimensions"]["SC"]["human_ceiling"]["spearman"] for m in ("A", "B")]
    assert comparison["per_model"]["human_ceiling"]["spearman"] == pytest.approx(
        np.tanh(np.mean(np.arctanh(ceilings))))
    assert report["judges"]["j"]["SC"]["pooled"]["spearman"] == report["judges"]["j"]["SC"]["pooled_spearman"]
    assert "Kendall's tau is averaged the same way" in report["study_level"]["judge_averaging"]


def test_kendall_tau_a_is_an_option_of_the_report(tmp_path):
    study, _ = _judged_study(tmp_path, n_items=12)
    tau_b, tau_a = build_report(study, n_boot=0), build_report(study, n_boot=0, kendall="a")
    assert (tau_b["kendall"], tau_a["kendall"]) == ("tau-b", "tau-a")
    b, a = (r["models"]["A"]["judges"]["j"]["SC"]["kendall"] for r in (tau_b, tau_a))
    assert abs(a) < abs(b)  # ties on both sides: tau-a divides by all pairs
    assert tau_a["models"]["A"]["judges"]["j"]["SC"]["spearman"] == tau_b["models"]["A"]["judges"]["j"]["SC"]["spearman"]


def test_the_report_command_passes_the_judge_item_convention_and_the_kendall_variant(tmp_path, capsys):
    study, _ = _judged_study(tmp_path)
    call_command("report", study.slug, "--json", "--n-boot", "0", "--judge-items", "all_aspects", "--kendall", "a")
    printed = json.loads(capsys.readouterr().out)
    assert (printed["judge_items"], printed["kendall"]) == ("all_aspects", "tau-a")
    assert printed["judges"]["j"]["SC"]["items"] == 5


@pytest.mark.django_db
def test_the_pages_report_is_kept_until_a_rating_a_judge_score_or_a_rater_decision_changes_it():
    from analysis.dashboard import cached_report
    from raters.models import Decision
    from raters.services import rater_decide
    from tasks.models import Rating
    from tests.factories import make_item, make_rater, make_study

    study = make_study(rater_sampling="fixed")
    items = [make_item(study, model=model) for model in ("A", "B")]
    raters = [make_rater(external_id=f"C{n}") for n in range(3)]
    for n, rater in enumerate(raters):
        for item in items:
            Rating.objects.create(study=study, rater=rater, item=item, values={"SC": 0.5 * (n % 3), "PQ": 1.0})
    first = cached_report(study, judges=False)
    assert cached_report(study, judges=False)["study_level"] == first["study_level"]
    assert first["study_level"]["ratings"] == 6
    Rating.objects.create(study=study, rater=make_rater(external_id="C9"), item=items[0], values={"SC": 1.0, "PQ": 1.0})
    assert cached_report(study, judges=False)["study_level"]["ratings"] == 7  # a new rating: rebuilt
    rater_decide(study=study, rater=raters[0], decision=Decision.REJECT, reason="test", actor=None)
    assert [str(e["rater"]) for e in cached_report(study, judges=False)["excluded_raters"]] == [str(raters[0].pk)]
