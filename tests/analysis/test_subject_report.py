"""The report's subject_model section (analysis.science.subject_report) through the database."""

import json

import numpy as np
import pytest

from analysis import data
from analysis.report import build_report
from analysis.science.subject_model import subject_model
from tasks.models import Study
from tasks.services import rating_submit
from tests.factories import make_instance, make_item, make_rater, make_study

pytestmark = pytest.mark.django_db


def rated_study(protocol: str = "evalmi", n_instances: int = 8, seed: int = 3) -> tuple[Study, list]:
    """Two models x ``n_instances`` prompts, 6 careful raters and one who answers at random."""
    study = make_study(protocol=protocol, task_type="counting" if protocol == "evalmi" else "text_to_image")
    rng = np.random.default_rng(seed)
    instances = [make_instance(study, question="Are there two cats?", sub_questions=[]) for _ in range(n_instances)]
    items = [make_item(study, instance=instance, model=model, with_image=False)
             for instance in instances for model in ("Alpha", "Beta")]
    truth = {item.pk: rng.uniform(1.5, 4.5) + (0.5 if item.gen_model.name == "Alpha" else 0.0) for item in items}
    raters = [make_rater() for _ in range(7)]
    for r, rater in enumerate(raters):
        bias = rng.normal(0, 0.4)
        for item in items:
            if r == 6:
                score = int(rng.integers(1, 6))
            else:
                score = int(np.clip(np.rint(truth[item.pk] + bias + rng.normal(0, 0.4)), 1, 5))
            if protocol == "evalmi":
                values = {"perception": score, "correspondence": score}
            else:
                values = {"SC": [0, 0.5, 1][min(2, (score - 1) // 2)], "PQ": [0, 0.5, 1][min(2, (score - 1) // 2)]}
            answers = {"q1": "yes"} if protocol == "evalmi" else {}
            rating_submit(rater=rater, item=item, require_assignment=False, values=values, answers=answers)
    return study, raters


def test_evalmi_report_has_the_subject_model_beside_zmos():
    study, raters = rated_study()
    report = build_report(study, n_boot=0)
    json.dumps(report, allow_nan=False)
    section = report["subject_model"]
    assert "P.913" in section["method"] and "inconsistent" in section["inconsistent_rule"]
    block = section["dimensions"]["perception"]
    direct = subject_model(data.ratings_frame(study), score="perception", tol=1e-5)
    models = direct.model_table()
    for model in ("Alpha", "Beta"):
        entry = block["models"][model]
        assert entry["quality"] == pytest.approx(models.loc[model, "quality"])
        assert entry["ci95"] == pytest.approx([models.loc[model, "ci_low"], models.loc[model, "ci_high"]])
        assert entry["items"] == 8
    assert block["models"]["Alpha"]["quality"] > block["models"]["Beta"]["quality"]
    # z-MOS is still the headline number
    assert report["models"]["Alpha"]["dimensions"]["perception"]["mean"] is not None
    rater = block["raters"][str(raters[0].id)]
    assert rater["bias"] == pytest.approx(direct.raters.loc[str(raters[0].id), "bias"])
    low, high = rater["inconsistency_ci95"]
    assert low < rater["inconsistency"] < high and rater["ratings"] == 16
    # the random rater is the least consistent
    worst = max(block["raters"], key=lambda k: block["raters"][k]["inconsistency"])
    assert worst == str(raters[6].id)
    table = block["items_table"]
    assert len(table["item"]) == len(table["quality"]) == len(table["ci95_low"]) == block["items"] == 16
    assert set(table["model"]) == {"Alpha", "Beta"}
    assert all(lo < q < hi for lo, q, hi in zip(table["ci95_low"], table["quality"], table["ci95_high"]))
    assert block["components"] == 1 and block["converged"]


def test_imagenhub_report_fits_sc_pq_and_o_on_their_0_to_1_scale():
    study, _ = rated_study(protocol="imagenhub", n_instances=6)
    report = build_report(study, n_boot=0)
    json.dumps(report, allow_nan=False)
    dims = report["subject_model"]["dimensions"]
    assert set(dims) == {"SC", "PQ", "O"}
    for block in dims.values():
        for entry in block["models"].values():
            assert -0.5 < entry["quality"] < 1.5


def test_pairwise_and_unrated_studies_have_no_subject_model():
    study = make_study(protocol="evalmi", task_type="counting")
    assert build_report(study, n_boot=0)["subject_model"] is None
