"""Long-format ratings (CSV / Parquet, one rating per row) give the same study and report as the
dedicated ImagenHub importer; bad rows name file and line and store nothing."""

import pandas as pd
import pytest
from django.core.management import CommandError, call_command

from analysis.science.formats import read_imagenhub_task
from analysis.importers import ImportFailed, imagenhub_import, long_ratings_import
from analysis.report import build_report
from tasks.models import Rating, Study

pytestmark = pytest.mark.django_db

HEADER = "study,item,model,rater,dimension,value\n"


def long_rows(rows: list[tuple]) -> str:
    return HEADER + "".join(",".join(str(v) for v in row) + "\n" for row in rows)


def good_rows(study="ext-study"):
    return [(study, f"s{i}", m, r, d, v) for i in range(4) for m in ("A", "B") for r in ("r1", "r2")
            for d, v in (("SC", 1 if i % 2 else 0.5), ("PQ", 0 if (i + len(r)) % 3 else 1))]


def test_long_ratings_of_a_real_task_give_the_same_report_as_the_imagenhub_importer(shared_datasets, tmp_path):
    folder = shared_datasets / "imagenhub" / "human_ratings" / "Text-Guided_IE"
    imagenhub_import(path=folder)
    wide = read_imagenhub_task(folder)
    long = wide.melt(id_vars=["rater", "uid", "model"], value_vars=["SC", "PQ"], var_name="dimension")
    long = long.rename(columns={"uid": "item"}).assign(study="long-text-guided-ie")
    long[["study", "item", "model", "rater", "dimension", "value"]].to_parquet(tmp_path / "ratings.parquet")
    summary = long_ratings_import(path=tmp_path / "ratings.parquet", protocol="imagenhub",
                                  task_type="text_guided_editing")
    assert summary.counts["ratings_created"] == len(wide)

    ours = build_report(Study.objects.get(slug="long-text-guided-ie"), n_boot=0)
    reference = build_report(Study.objects.get(slug="Text-Guided_IE"), n_boot=0)
    assert ours["models"].keys() == reference["models"].keys()
    for model, entry in reference["models"].items():
        assert ours["models"][model]["dimensions"] == entry["dimensions"]
    assert ours["study_level"]["dimensions"] == reference["study_level"]["dimensions"]

    again = long_ratings_import(path=tmp_path / "ratings.parquet")
    assert again.created == 0 and again.counts["ratings_unchanged"] == len(wide)


def test_a_researcher_imports_a_csv_into_a_new_study_with_prompts(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("study,item,model,rater,dimension,value,prompt\n" + "".join(
        f"{s},{i},{m},{r},{d},{v},a cat {i}\n" for s, i, m, r, d, v in good_rows()))
    call_command("import_ratings", str(path), "--protocol", "imagenhub", "--task-type", "text_to_image")
    study = Study.objects.get(slug="ext-study")
    assert (study.protocol, study.task_type, study.raters_per_item) == ("imagenhub", "text_to_image", 2)
    assert Rating.objects.filter(study=study).count() == 16
    assert study.instances.get(key="s2").prompt == "a cat s2"


@pytest.mark.parametrize("rows, text, message", [
    (None, "study,item,model,rater,value\n", r"r\.csv: line 1: missing columns dimension"),
    ([("ext-study", "s0", "A", "r1", "SC", "lots")], None, r"line 2: value 'lots' is not a finite number"),
    ([("ext-study", "s0", "A", "r1", "SC", "inf")], None, r"line 2: value 'inf' is not a finite number"),
    ([("ext-study", "s0", "A", "", "SC", 1)], None, r"line 2: rater '' is empty"),
    ([("ext-study", "s0", "A", "r\x00", "SC", 1)], None, r"line 2: rater 'r\\x00' contains a NUL byte"),
    ([("ext-study", "x" * 201, "A", "r1", "SC", 1)], None, r"line 2: item 'x+' is longer than 200 characters"),
    ([("ext-study", "s0", "A", "r1", "SC", 1), ("ext-study", "s0", "A", "r1", "PQ", 1),
      ("ext-study", "s0", "A", "r1", "SC", 0)], None, r"line 4: r1 rated A/s0 SC again \(first at line 2\)"),
    ([("ext-study", "s0", "A", "r1", "SC", 1)], None, r"line 2: r1's rating of A/s0 has no PQ"),
    ([("ext-study", "s0", "A", "r1", "SC", 1), ("ext-study", "s0", "A", "r1", "PQ", 1),
      ("ext-study", "s0", "A", "r1", "OOPS", 1)], None, r"line 4: dimension 'OOPS' is not one of SC, PQ"),
    ([("ext-study", "s0", "A", "r1", "SC", 0.7), ("ext-study", "s0", "A", "r1", "PQ", 1)], None,
     r"line 2 \(A\): SC must be one of 0 / 0.5 / 1, got 0.7"),
])
def test_bad_rows_name_file_and_line_and_store_nothing(tmp_path, rows, text, message):
    path = tmp_path / "r.csv"
    # the bad rows first (from line 2), then a valid study's rows
    path.write_text(text if text is not None else long_rows(rows) + long_rows(good_rows("other"))[len(HEADER):])
    with pytest.raises(ImportFailed, match=message):
        long_ratings_import(path=path, protocol="imagenhub", task_type="text_to_image")
    assert Study.objects.count() == 0 and Rating.objects.count() == 0


def test_a_new_study_needs_a_protocol_and_the_command_says_nothing_was_imported(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text(long_rows(good_rows()))
    with pytest.raises(CommandError, match="nothing imported: .*study 'ext-study' does not exist: give --protocol"):
        call_command("import_ratings", str(path))
    bad_type = tmp_path / "r.txt"
    bad_type.write_text("x")
    with pytest.raises(ImportFailed, match=r"r\.txt: expected a \.csv or \.parquet file"):
        long_ratings_import(path=bad_type)


def test_parquet_errors_name_the_row(tmp_path):
    frame = pd.DataFrame(good_rows(), columns=["study", "item", "model", "rater", "dimension", "value"])
    frame.loc[5, "value"] = None
    frame.astype({"value": object}).to_parquet(tmp_path / "r.parquet")
    with pytest.raises(ImportFailed, match=r"r\.parquet: row 6: value '' is not a finite number"):
        long_ratings_import(path=tmp_path / "r.parquet", protocol="imagenhub", task_type="text_to_image")
