"""The export's items carry prompt, output path and image hash; its raters their crowd id, standing and flags."""

from __future__ import annotations

import io
import zipfile

import pandas as pd
import pytest

from analysis.export_input import study_export_input
from analysis.science.exports import iter_export_zip
from raters.services import rater_decide
from tasks.models import Item, Study
from tasks.services import rating_submit
from tests.factories import make_instance, make_item, make_rater, make_study

pytestmark = pytest.mark.django_db


def _zip_of(study: Study) -> zipfile.ZipFile:
    return zipfile.ZipFile(io.BytesIO(b"".join(iter_export_zip(study_export_input(study)))))


def test_items_carry_prompt_output_path_and_image_hash_and_raters_their_crowd_id_standing_and_flags():
    study = make_study()
    instance = make_instance(study, key="uid_1", prompt="=two cats on a sofa")
    items = [make_item(study, instance=instance, model=m, output_path=f"outputs/{m}/uid_1.png") for m in ("A", "B")]
    crowd = make_rater(platform="prolific", external_id="PID123")
    invited = make_rater()
    for rater in (crowd, invited):
        for item in items:
            rating_submit(rater=rater, item=item, values={"SC": 1.0, "PQ": 0.5}, require_assignment=False)
    rater_decide(study=study, rater=crowd, decision="approve", reason="fine", actor=None)
    archive = _zip_of(study)
    table = pd.read_csv(archive.open("items.csv"), keep_default_na=False)
    assert list(table.columns[:5]) == ["item", "prompt", "output_path", "image_sha256", "instance"]
    row = table.set_index("item").loc[items[0].pk]
    assert row["prompt"] == "'=two cats on a sofa"  # inert in spreadsheets, as every text cell
    assert row["output_path"] == "outputs/A/uid_1.png"
    assert row["image_sha256"] == Item.objects.get(pk=items[0].pk).image.sha256
    raters = pd.read_csv(archive.open("raters.csv"), keep_default_na=False).set_index("rater")
    assert raters.loc[f"rater{crowd.pk}", "crowd_id"] == "PID123"
    assert raters.loc[f"rater{crowd.pk}", "standing"] == "approved"
    assert raters.loc[f"rater{invited.pk}", "crowd_id"] == ""  # a site user's name stays out
    assert raters.loc[f"rater{invited.pk}", "standing"] == "pending"
    assert "quality_flags" in raters.columns
    readme = archive.read("README.md").decode()
    assert "crowd_id" in readme and "before you publish" in readme


def test_the_builder_keeps_each_outputs_path_in_the_bundle():
    from tasks.builder import StudySpec, study_build_from_bundle
    from tests.research.bundles import text_to_image_bundle

    spec = StudySpec(slug="paths", title="Paths", protocol="imagenhub", task_type="text_to_image")
    study = study_build_from_bundle(upload=text_to_image_bundle(), spec=spec)
    assert sorted(study.items.values_list("output_path", flat=True)) == [
        "outputs/ModelA/s1.png", "outputs/ModelA/s2.png", "outputs/ModelB/s1.png", "outputs/ModelB/s2.png"]
