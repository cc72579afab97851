"""The datasheet (README.md in the export zip) carries the study report's numbers and says how they were made."""

import io
import json
import zipfile

import pytest

from analysis.export_input import study_export_input
from analysis.science.exports import iter_export_zip
from analysis.report import build_report
from raters.models import Rater
from tasks.services import rating_submit
from tests.factories import make_comparison, make_instance, make_item, make_rater, make_study
from tests.research.test_exports import _imagenhub_study_with_votes

pytestmark = pytest.mark.django_db


def _zip_of(study) -> zipfile.ZipFile:
    return zipfile.ZipFile(io.BytesIO(b"".join(iter_export_zip(study_export_input(study)))))


def _f(value) -> str:
    return "—" if value is None else f"{value:.4f}"


def _ci(ci) -> str:
    return "—" if not ci else f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def test_the_datasheet_has_every_model_and_dimension_number_of_build_report_and_report_json_is_the_report():
    study = _imagenhub_study_with_votes(task_type="text_guided_editing")
    archive = _zip_of(study)
    readme = archive.read("README.md").decode()
    report = build_report(study)
    assert json.loads(archive.read("report.json")) == json.loads(json.dumps(report))
    for model, entry in report["models"].items():
        for dim in ("SC", "PQ", "O"):
            block = entry["dimensions"][dim]
            row = (f"| {model} | 3 | 3 | {_f(block['mean'])} | {_f(block['std_between_raters'])} | "
                   f"[{block['ci95'][0]:.4f}, {block['ci95'][1]:.4f}] | {_f(block['alpha']['ordinal'])} "
                   f"{_ci(block['alpha_ci95']['ordinal'])} | {_f(block['fleiss_kappa'])} {_ci(block['fleiss_kappa_ci95'])} |")
            assert row in readme.split(f"### {dim}\n", 1)[1].split("###", 1)[0], row
    # and the numbers are the ones a person can check by hand: Alpha's SC rater means 5/6, 5/6, 1/2
    # → mean 13/18 = 0.7222, population std √2/9 = 0.1571
    assert "| Alpha | 3 | 3 | 0.7222 | 0.1571 |" in readme
    assert "ImagenHub Table 4" in readme and "population standard deviation (ddof 0)" in readme
    assert "Krippendorff's alpha over the model's items" in readme


def test_a_blocked_rater_is_left_out_of_the_datasheet_numbers_like_the_report():
    study = _imagenhub_study_with_votes()
    blocked = study.ratings.order_by("rater_id").first().rater
    Rater.objects.filter(pk=blocked.pk).update(state=Rater.State.BLOCKED, state_reason="failed gold")
    readme = _zip_of(study).read("README.md").decode()
    alpha_sc = build_report(study)["models"]["Alpha"]["dimensions"]["SC"]
    assert f"| Alpha | 3 | 2 | {_f(alpha_sc['mean'])} |" in readme
    assert f"`rater{blocked.pk}`: blocked: failed gold" in readme


def _likert_study_with_an_erratic_rater():
    """Nine raters who roughly agree on a 1–10 scale and one who answers 1 or 10 in turn."""
    study = make_study(protocol="evalmi", task_type="counting", settings={"likert_min": 1, "likert_max": 10, "qa": False})
    items = [make_item(study, instance=make_instance(study, key=f"p{n}"), model="Flux") for n in range(6)]
    base = [4, 5, 6, 7, 5, 6, 4, 7, 6]
    for r in range(9):
        rater = make_rater()
        for n, item in enumerate(items):
            value = base[(r + n) % 9]
            rating_submit(rater=rater, item=item, values={"perception": value, "correspondence": value},
                          require_assignment=False)
    erratic = make_rater()
    for n, item in enumerate(items):
        value = 1 if n % 2 else 10
        rating_submit(rater=erratic, item=item, values={"perception": value, "correspondence": value},
                      require_assignment=False)
    return study, erratic


def test_the_datasheet_names_the_raters_bt500_would_reject_and_says_the_rule_was_not_applied():
    study, erratic = _likert_study_with_an_erratic_rater()
    archive = _zip_of(study)
    readme = archive.read("README.md").decode()
    screening = build_report(study)["study_level"]["screening"]
    assert screening["perception"]["rejected"] == [str(erratic.pk)]
    assert "BT.500 observer screening: **not applied**" in readme
    assert (f"- perception: 1 rater(s) would be rejected: `rater{erratic.pk}` "
            f"(from report.json `study_level.screening.perception` (10 raters screened))") in readme
    assert "they are **kept** in every number" in readme
    # kept: the erratic rater still counts in the model's z-MOS and rater count
    assert "| Flux | 6 | 10 |" in readme
    assert "z-MOS (0–100)" in readme


def test_a_pairwise_datasheet_has_bradley_terry_scores_with_their_bootstrap_cis():
    study = make_study(protocol="pairwise", task_type="text_to_image")
    comparisons = [make_comparison(study) for _ in range(3)]
    for n in range(4):
        rater = make_rater()
        for k, comparison in enumerate(comparisons):
            choice = "A" if (n + k) % 3 else "B"
            rating_submit(rater=rater, comparison=comparison, values={"preference": choice}, require_assignment=False)
    readme = _zip_of(study).read("README.md").decode()
    report = build_report(study)
    for model, entry in report["models"].items():
        assert (f"{_f(entry['bt_score'])} [{entry['bt_ci95'][0]:.4f}, {entry['bt_ci95'][1]:.4f}] |") in readme
    assert "Bradley–Terry" in readme and "seeded bootstrap over judgements" in readme
    assert "pairwise preferences have no score scale to screen" in readme
