import io
import json
import zipfile

import pandas as pd
import pytest
from django.core.management import call_command

from analysis import report
from analysis.data import ratings_frame
from analysis.export_input import study_export_input
from analysis.science.exports import escape_cell, iter_csv, iter_export_zip
from analysis.science.imagenhub import model_summary
from raters.models import Rater
from tasks.models import Rating, Study
from tasks.services import rating_submit
from tests.factories import make_instance, make_item, make_rater, make_study

# (rater, instance, model) -> (SC, PQ); three raters, three instances, two models.
VOTES = {
    ("r1", 0, "Alpha"): (1, 1), ("r1", 0, "Beta"): (0.5, 0.5), ("r1", 1, "Alpha"): (1, 0.5),
    ("r1", 1, "Beta"): (0, 1), ("r1", 2, "Alpha"): (0.5, 1), ("r1", 2, "Beta"): (0, 0),
    ("r2", 0, "Alpha"): (1, 0.5), ("r2", 0, "Beta"): (0.5, 1), ("r2", 1, "Alpha"): (0.5, 0.5),
    ("r2", 1, "Beta"): (0, 0.5), ("r2", 2, "Alpha"): (1, 1), ("r2", 2, "Beta"): (0.5, 0),
    ("r3", 0, "Alpha"): (0.5, 1), ("r3", 0, "Beta"): (1, 1), ("r3", 1, "Alpha"): (1, 1),
    ("r3", 1, "Beta"): (0.5, 0.5), ("r3", 2, "Alpha"): (0, 0.5), ("r3", 2, "Beta"): (0.5, 1),
}


def _imagenhub_study_with_votes(**fields) -> Study:
    study = make_study(**fields)
    instances = [make_instance(study, key=f"uid_{n}") for n in range(3)]
    items = {(n, m): make_item(study, instance=instances[n], model=m) for n in range(3) for m in ("Alpha", "Beta")}
    raters = {name: make_rater() for name in ("r1", "r2", "r3")}
    for (rater, n, model), (sc, pq) in VOTES.items():
        rating_submit(rater=raters[rater], item=items[(n, model)], values={"SC": sc, "PQ": pq}, require_assignment=False)
    return study


def _zip_of(study: Study) -> zipfile.ZipFile:
    return zipfile.ZipFile(io.BytesIO(b"".join(iter_export_zip(study_export_input(study)))))


def test_text_cells_that_look_like_formulas_are_escaped_but_negative_numbers_are_not():
    assert [escape_cell(v) for v in ["=1+1", "+x", "-y", "@SUM(A1)", "\tcmd", "fine", -0.5, 3]] == [
        "'=1+1", "'+x", "'-y", "'@SUM(A1)", "'\tcmd", "fine", -0.5, 3
    ]
    frame = pd.DataFrame({"instance": ["=HYPERLINK(\"http://x\")", "ok"], "SC_z": [-1.25, 0.5]})
    text = b"".join(iter_csv(frame)).decode()
    assert text.splitlines() == ["instance,SC_z", "\"'=HYPERLINK(\"\"http://x\"\")\",-1.25", "ok,0.5"]


@pytest.mark.django_db
def test_the_export_zip_holds_every_table_in_three_formats_the_layouts_and_a_datasheet():
    study = _imagenhub_study_with_votes(task_type="text_guided_editing")
    names = set(_zip_of(study).namelist())
    for table in ("votes", "items", "raters"):
        assert {f"{table}.csv", f"{table}.jsonl", f"{table}.parquet"} <= names
    assert {"study.json", "README.md"} <= names
    assert {f"imagenhub/Text-Guided_IE/Text-Guided_IE_rater{n}.tsv" for n in (1, 2, 3)} <= names


@pytest.mark.django_db
def test_item_mos_has_the_mean_ci_and_rater_count_computed_from_the_votes():
    study = _imagenhub_study_with_votes()
    archive = _zip_of(study)
    items = pd.read_parquet(io.BytesIO(archive.read("items.parquet")))
    row = items[(items["instance"] == "uid_0") & (items["model"] == "Alpha")].iloc[0]
    assert row["n_raters"] == 3
    assert row["SC_mean"] == pytest.approx((1 + 1 + 0.5) / 3)
    # t(0.975, 2) = 4.302653; sample std of (1, 1, 0.5) = 0.288675
    assert row["SC_ci_high"] - row["SC_mean"] == pytest.approx(4.302653 * 0.288675 / 3**0.5, rel=1e-5)
    assert row["O_mean"] == pytest.approx((1 + 0.5**0.5 + 0.5**0.5) / 3)
    votes = pd.read_csv(io.BytesIO(archive.read("votes.csv")))
    assert len(votes) == 18 and {"SC_z", "PQ_z", "O_z", "excluded"} <= set(votes.columns)
    jsonl = [json.loads(line) for line in archive.read("items.jsonl").decode().splitlines()]
    assert len(jsonl) == len(items) == 6
    meta = json.loads(archive.read("study.json"))
    assert meta["protocol"] == "imagenhub" and meta["protocol_version"] and "settings" in meta
    assert "sqrt(SC · PQ)" in archive.read("README.md").decode()


@pytest.mark.django_db
def test_a_blocked_rater_is_listed_with_the_reason_and_left_out_of_item_mos():
    study = _imagenhub_study_with_votes()
    blocked = Rating.objects.filter(study=study).order_by("rater_id").first().rater
    Rater.objects.filter(pk=blocked.pk).update(state=Rater.State.BLOCKED, state_reason="failed gold")
    archive = _zip_of(study)
    raters = pd.read_csv(io.BytesIO(archive.read("raters.csv")), keep_default_na=False)
    row = raters[raters["rater"] == f"rater{blocked.pk}"].iloc[0]
    assert bool(row["excluded"]) and "failed gold" in row["reasons"]
    items = pd.read_csv(io.BytesIO(archive.read("items.csv")))
    assert set(items["n_raters"]) == {2}
    assert not any(f"{n}.tsv" in name for name in archive.namelist() for n in ("rater3",))


@pytest.mark.django_db
def test_an_imagenhub_export_reimported_with_import_imagenhub_gives_the_same_model_numbers(tmp_path):
    study = _imagenhub_study_with_votes(task_type="text_guided_editing")
    _zip_of(study).extractall(tmp_path)
    call_command("import_imagenhub", str(tmp_path / "imagenhub" / "Text-Guided_IE"), stdout=io.StringIO())
    imported = Study.objects.get(slug="Text-Guided_IE")
    assert imported.ratings.count() == 18
    original_numbers = model_summary(ratings_frame(study))
    imported_numbers = model_summary(ratings_frame(imported))
    pd.testing.assert_frame_equal(original_numbers, imported_numbers)


@pytest.mark.django_db
def test_the_report_of_a_reimported_export_matches_the_report_of_the_original(tmp_path):
    study = _imagenhub_study_with_votes(task_type="text_guided_editing")
    # the ImagenHub importer declares its raters a fixed panel (ImagenHub's experts); so does the original here
    Study.objects.filter(pk=study.pk).update(rater_sampling="fixed")
    study.refresh_from_db()
    _zip_of(study).extractall(tmp_path)
    call_command("import_imagenhub", str(tmp_path / "imagenhub" / "Text-Guided_IE"), stdout=io.StringIO())
    again_study = Study.objects.get(slug="Text-Guided_IE")
    assert again_study.rater_sampling == "fixed"
    original = report.build_report(study)
    again = report.build_report(again_study)
    assert json.dumps(original["models"], sort_keys=True) == json.dumps(again["models"], sort_keys=True)


@pytest.mark.django_db
def test_an_evalmi_export_has_the_mos_sheet_with_majority_answers():
    study = make_study(protocol="evalmi", task_type="counting")
    instance = make_instance(study, key="7", question="Are there two cats?", sub_questions=["Is one black?"])
    items = [make_item(study, instance=instance, model=m) for m in ("Flux", "SD")]
    for n, (p, c, q1, q2) in enumerate([(5, 4, "yes", "yes"), (3, 2, "yes", "no"), (4, 4, "no", "yes")]):
        rater = make_rater()
        for k, item in enumerate(items):
            rating_submit(rater=rater, item=item, values={"perception": p - k, "correspondence": c - k},
                          answers={"q1": q1, "q2": q2}, require_assignment=False)
    sheet = pd.read_excel(io.BytesIO(_zip_of(study).read("evalmi/AIGI_MOS_yn.xlsx")))
    assert list(sheet.columns) == ["ImageName", "MOS1", "MOS2", "Y/N", "YN_1"]
    assert sorted(sheet["ImageName"]) == ["Flux/7.png", "SD/7.png"]
    assert list(sheet["YN_1"]) == [1.0, 1.0] and list(sheet["Y/N"]) == [1.0, 1.0]
    flux = sheet[sheet["ImageName"] == "Flux/7.png"].iloc[0]
    assert flux["MOS1"] > 50 > sheet[sheet["ImageName"] == "SD/7.png"].iloc[0]["MOS1"]


@pytest.mark.django_db
def test_the_vote_tables_are_written_chunk_by_chunk_from_the_database_before_the_report_is_built(monkeypatch):
    import pyarrow.parquet as pq

    import analysis.export_input as export_input

    monkeypatch.setattr(export_input, "CSV_CHUNK_ROWS", 5)
    study = _imagenhub_study_with_votes()
    data = study_export_input(study)
    chunks_read, report_built = [], []
    rows, build = data.vote_rows, data.report
    data.vote_rows = lambda: (chunks_read.append(len(frame)) or frame for frame in rows())
    data.report = lambda: report_built.append(len(chunks_read)) or build()
    blob = b"".join(iter_export_zip(data))
    assert chunks_read == [5, 5, 5, 3]  # 18 votes, 5 per read
    assert report_built == [4]  # after every vote chunk was written
    archive = zipfile.ZipFile(io.BytesIO(blob))
    csv_lines = archive.read("votes.csv").decode().splitlines()
    assert len(csv_lines) == 19 and csv_lines[0].startswith("rater,item,instance,model,SC,PQ,created_at")
    assert sum(line.startswith("rater,") for line in csv_lines) == 1
    assert len(archive.read("votes.jsonl").decode().splitlines()) == 18
    parquet = pq.ParquetFile(io.BytesIO(archive.read("votes.parquet")))
    assert parquet.metadata.num_row_groups == 4 and parquet.metadata.num_rows == 18
    votes = parquet.read().to_pandas()
    numbers = ratings_frame(study)
    assert sorted(votes["SC"]) == sorted(numbers["SC"]) and votes["SC_z"].notna().all()


@pytest.mark.django_db
def test_attention_check_answers_are_not_exported_as_votes():
    from tests.factories import make_attention_check

    study = _imagenhub_study_with_votes()
    check = make_item(study, instance=make_instance(study, key="attention"), model="Alpha")
    make_attention_check(check)
    rating_submit(rater=make_rater(), item=check, values={"SC": 0.5, "PQ": 1}, require_assignment=False)
    votes = pd.read_csv(io.BytesIO(_zip_of(study).read("votes.csv")))
    assert len(votes) == 18 and "attention" not in set(votes["instance"])


@pytest.mark.django_db
def test_items_and_raters_carry_the_subject_model_beside_zmos():
    from analysis.science.subject_model import subject_model

    study = _imagenhub_study_with_votes()
    archive = _zip_of(study)
    items = pd.read_parquet(io.BytesIO(archive.read("items.parquet")))
    raters = pd.read_parquet(io.BytesIO(archive.read("raters.parquet")))
    votes = ratings_frame(study)
    fitted = subject_model(votes[["rater", "item", "SC"]], score="SC")
    expected = fitted.items["quality"].reindex(items["item"]).to_numpy()
    assert items["SC_subject_quality"].to_numpy() == pytest.approx(expected)
    assert (items["SC_subject_ci_low"] < items["SC_subject_quality"]).all()
    assert {"O_subject_quality", "PQ_subject_ci_high"} <= set(items.columns)
    bias = fitted.raters["bias"].reindex(raters["rater"].str.removeprefix("rater")).to_numpy()
    assert raters["SC_subject_bias"].to_numpy() == pytest.approx(bias)
    assert {"SC_subject_inconsistency", "SC_subject_inconsistent"} <= set(raters.columns)
    assert "subject model" in archive.read("README.md").decode()
