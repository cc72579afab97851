"""Importers: ImagenHub TSVs, judge outputs (VIEScore, autometrics, csv) and EvalMi-50K MOS.

Small synthetic files cover the error paths (file and line named, nothing stored); the real
data (../shared/datasets, skipped when absent) covers idempotence at full size for one task.
"""

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from django.core.management import CommandError, call_command

from analysis.importers import (
    EVALMI_REFERENCE_JUDGE,
    ImportFailed,
    evalmi_read,
    evalmi_store,
    imagenhub_import,
    judge_import,
)
from analysis.models import Judge, JudgeRun, JudgeScore
from raters.models import Rater
from tasks.models import GenModel, Instance, Item, Rating, RatingRevision, Study

pytestmark = pytest.mark.django_db

UIDS = ("sample_1.jpg", "sample_2.jpg", "sample_3.jpg", "sample_4.jpg")


def write_task(folder: Path, cells: dict[int, list[list[str]]], models=("ModelA", "ModelB")) -> Path:
    """cells: rater number -> rows (one list of '[SC, PQ]' strings per uid)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rater, rows in cells.items():
        lines = ["uid\t" + "\t".join(models)]
        lines += [uid + "\t" + "\t".join(row) for uid, row in zip(UIDS, rows)]
        (folder / f"{folder.name.removeprefix('ImagenHub_')}_rater{rater}.tsv").write_text("\n".join(lines) + "\n")
    return folder


GOOD = [["[1, 1]", "[0,0]"], ["[0.5, 1]", "[0, 0.5]"], ["[1 , 0.5]", "[0.5,0.5]"], ["[0, 1]", "[1, 1]"]]


def counts() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (Study, GenModel, Instance, Item, Rater, Rating, JudgeScore))


# ------------------------------------------------------------------ ImagenHub


def test_a_researcher_imports_a_task_folder_as_one_study_with_one_rater_per_file(tmp_path):
    folder = write_task(tmp_path / "Text-Guided_IE", {1: GOOD, 2: GOOD, 3: GOOD})
    summary = imagenhub_import(path=folder)

    study = Study.objects.get(slug="Text-Guided_IE")
    assert (study.protocol, study.task_type, study.raters_per_item) == ("imagenhub", "text_guided_editing", 3)
    assert list(study.instances.values_list("key", flat=True)) == list(UIDS)
    assert sorted(study.gen_models.values_list("name", flat=True)) == ["ModelA", "ModelB"]
    assert study.items.filter(image__isnull=True).count() == 8
    raters = Rater.objects.filter(platform="import").values_list("external_id", flat=True)
    assert sorted(raters) == [f"imagenhub/Text-Guided_IE/rater{n}" for n in (1, 2, 3)]
    rating = Rating.objects.get(rater__external_id="imagenhub/Text-Guided_IE/rater2", item__instance__key="sample_2.jpg",
                                item__gen_model__name="ModelB")
    assert rating.values == {"SC": 0.0, "PQ": 0.5}
    assert (rating.source, rating.source_detail) == ("import", "Text-Guided_IE_rater2.tsv")
    assert summary.counts["ratings_created"] == 24


def test_importing_the_same_files_twice_creates_nothing_the_second_time(tmp_path):
    folder = write_task(tmp_path / "Text-To-Image", {1: GOOD, 2: GOOD})
    imagenhub_import(path=tmp_path)
    before = counts()
    again = imagenhub_import(path=tmp_path)
    assert again.created == 0 and again.counts["ratings_unchanged"] == 16
    assert counts() == before
    assert Study.objects.get(slug=folder.name).task_type == "text_to_image"


def test_a_changed_cell_updates_the_rating_and_keeps_the_old_value_as_a_revision(tmp_path):
    folder = write_task(tmp_path / "Mask-Guided_IE", {1: GOOD})
    imagenhub_import(path=folder)
    changed = [row[:] for row in GOOD]
    changed[0][0] = "[0, 0]"
    write_task(folder, {1: changed})
    summary = imagenhub_import(path=folder)
    assert summary.counts["ratings_updated"] == 1 and summary.created == 0
    rating = Rating.objects.get(item__instance__key="sample_1.jpg", item__gen_model__name="ModelA")
    assert rating.values == {"SC": 0.0, "PQ": 0.0}
    assert RatingRevision.objects.get(rating=rating).values == {"SC": 1.0, "PQ": 1.0}


def test_a_bad_cell_names_the_file_and_line_and_nothing_is_stored(tmp_path):
    write_task(tmp_path / "Control-Guided_IG", {1: GOOD})  # a good folder, imported in the same run
    bad = [row[:] for row in GOOD]
    bad[2][1] = "[0.7, 1]"
    write_task(tmp_path / "Subject-Driven_IG", {1: GOOD, 2: bad})
    with pytest.raises(ImportFailed, match=r"Subject-Driven_IG_rater2\.tsv: line 4: model 'ModelB'"):
        imagenhub_import(path=tmp_path)
    assert counts() == (0, 0, 0, 0, 0, 0, 0)


def test_an_unknown_task_folder_is_refused_with_the_known_names(tmp_path):
    write_task(tmp_path / "Text-To-Video", {1: GOOD})
    with pytest.raises(ImportFailed, match="unknown ImagenHub task folder"):
        imagenhub_import(path=tmp_path)


def test_the_command_prints_a_summary_and_turns_bad_input_into_a_command_error(tmp_path, capsys):
    write_task(tmp_path / "Multi-Subject_IG", {1: GOOD, 2: GOOD})
    call_command("import_imagenhub", str(tmp_path))
    assert "ratings created: 16" in capsys.readouterr().out
    with pytest.raises(CommandError, match="nothing imported: .*not a directory"):
        call_command("import_imagenhub", str(tmp_path / "missing"))


def test_a_full_real_task_imports_once_and_reimports_as_unchanged(shared_datasets):
    folder = shared_datasets / "imagenhub" / "human_ratings" / "Text-Guided_IE"
    first = imagenhub_import(path=folder)
    assert (first.counts["items_created"], first.counts["ratings_created"]) == (9 * 179, 3 * 9 * 179)
    second = imagenhub_import(path=folder)
    assert second.created == 0 and second.counts["ratings_unchanged"] == 3 * 9 * 179


# ------------------------------------------------------------------ judges


def viescore_file(path: Path, scores: dict[str, list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({uid: {"score": s, "reasoning": f"because {uid}"} for uid, s in scores.items()}))


@pytest.fixture
def small_study(tmp_path):
    imagenhub_import(path=write_task(tmp_path / "human" / "ImagenHub_Text-Guided_IE", {1: GOOD, 2: GOOD, 3: GOOD}))
    return Study.objects.get(slug="ImagenHub_Text-Guided_IE")


def test_viescore_outputs_become_sc_pq_and_overall_scores_of_one_imported_run(tmp_path, small_study):
    root = tmp_path / "gpt4o"
    viescore_file(root / small_study.slug / "ModelA" / "SC.json", {u: [3, 8] for u in UIDS})
    viescore_file(root / small_study.slug / "ModelA" / "PQ.json", {u: [9, 12] for u in UIDS})
    summary = judge_import(path=root, fmt="viescore", judge_name="gpt4o-0shot")
    assert summary.counts["scores_created"] == 12

    run = JudgeRun.objects.get()
    assert (run.judge.name, run.judge.kind, run.source, run.state) == ("gpt4o-0shot", "viescore", "import", "done")
    sc = JudgeScore.objects.get(dimension="SC", item__instance__key="sample_1.jpg")
    assert (sc.value, sc.sub_scores, sc.rationale) == (0.3, [3, 8], "because sample_1.jpg")
    assert JudgeScore.objects.filter(dimension="PQ").first().value == 0.9  # min(9, 12) / 10
    overall = JudgeScore.objects.filter(dimension="O").first()
    assert overall.value == pytest.approx(math.sqrt(0.3 * 0.9))

    again = judge_import(path=root, fmt="viescore", judge_name="gpt4o-0shot")
    assert again.created == 0 and again.counts["scores_unchanged"] == 12
    assert JudgeRun.objects.count() == 1


def test_a_judge_score_for_an_unknown_sample_names_the_file_and_stores_nothing(tmp_path, small_study):
    root = tmp_path / "gpt4o"
    viescore_file(root / small_study.slug / "ModelA" / "SC.json", {"sample_99.jpg": [5]})
    with pytest.raises(ImportFailed, match=r"ModelA/SC\.json: uid 'sample_99.jpg'"):
        judge_import(path=root, fmt="viescore", judge_name="gpt4o")
    assert Judge.objects.count() == 0 and JudgeScore.objects.count() == 0


def test_judge_scores_for_a_study_that_was_never_imported_are_refused(tmp_path):
    root = tmp_path / "gpt4o"
    viescore_file(root / "ImagenHub_Unknown" / "ModelA" / "SC.json", {"sample_1.jpg": [5]})
    with pytest.raises(ImportFailed, match="no study with slug 'ImagenHub_Unknown'; import its human ratings first"):
        judge_import(path=root, fmt="viescore", judge_name="gpt4o")


def test_autometrics_make_one_judge_per_metric_and_lpips_is_lower_is_better(tmp_path, small_study):
    root = tmp_path / "metrics" / small_study.slug
    root.mkdir(parents=True)
    (root / "ModelA.json").write_text(json.dumps({u: {"LPIPS": 0.1 * i} for i, u in enumerate(UIDS)}))
    (root / "ModelB.json").write_text(json.dumps({u: {"CLIP_I": 0.5} for u in UIDS}))
    judge_import(path=root.parent, fmt="autometrics")
    assert dict(Judge.objects.values_list("name", "lower_is_better")) == {"LPIPS": True, "CLIP_I": False}
    assert set(JudgeScore.objects.values_list("dimension", flat=True)) == {"LPIPS", "CLIP_I"}


def test_a_csv_of_judge_scores_is_imported_and_a_bad_value_names_its_line(tmp_path, small_study):
    good = tmp_path / "scores.csv"
    good.write_text(
        "study,model,item,judge,dimension,value\n"
        f"{small_study.slug},ModelA,sample_1.jpg,my-judge,O,0.8\n"
        f"{small_study.slug},ModelB,sample_2.jpg,my-judge,O,\n"
    )
    judge_import(path=good, fmt="csv")
    assert sorted(JudgeScore.objects.values_list("parse_status", flat=True)) == ["failed", "ok"]
    bad = tmp_path / "bad.csv"
    bad.write_text("study,model,item,judge,dimension,value\n"
                   f"{small_study.slug},ModelA,sample_3.jpg,other,O,0.5\n"
                   f"{small_study.slug},ModelA,sample_4.jpg,other,O,high\n")
    with pytest.raises(CommandError, match=r"bad\.csv: line 3: value 'high' is not a number"):
        call_command("import_judge", str(bad), "--format", "csv")
    assert not Judge.objects.filter(name="other").exists()


# ------------------------------------------------------------------ EvalMi


def evalmi_files(tmp_path: Path, *, bad_name: bool = False) -> tuple[Path, Path, Path]:
    mos = pd.DataFrame({
        "ImageName": ["m1/001.png", "m1/002.png", "m2/001.png", "m2/002" if bad_name else "m2/002.png"],
        "MOS1": [60.0, 40.0, 55.0, 45.0], "MOS2": [70.0, 30.0, 50.0, 50.0], "Y/N": [1, 0, 1, 1],
        "YN_1": [None, 0, None, 1], "YN_2": [None, 1, None, 1], "YN_3": [None] * 4, "YN_4": [None] * 4,
    })
    questions = pd.DataFrame({
        "prompt": ["a photo of a bench", "two cats and a red ball"],
        "question_1": ["Is there a bench?", "Does the image match?"],
        "question_2": [None, "Are there two cats?"], "question_3": [None, "Is the ball red?"],
        "question_4": [None, None], "question_5": [None, None],
    })
    paths = tmp_path / "MOS.xlsx", tmp_path / "question.xlsx", tmp_path / "prompt_tasks.jsonl"
    mos.to_excel(paths[0], index=False)
    questions.to_excel(paths[1], index=False)
    paths[2].write_text(
        json.dumps({"tag": "single_class", "include": [{"class": "bench", "count": 1}], "prompt": "a photo of a bench"})
        + "\n" + json.dumps({"tag": "counting", "include": [], "prompt": "two cats and a red ball"}) + "\n"
    )
    return paths


def test_evalmi_files_become_prompts_questions_items_and_a_published_reference(tmp_path, capsys):
    mos, questions, tasks = evalmi_files(tmp_path)
    call_command("import_evalmi", str(mos), "--questions", str(questions), "--tasks", str(tasks), "--study", "evalmi")
    assert "items created: 4" in capsys.readouterr().out
    study = Study.objects.get(slug="evalmi")
    assert study.protocol == "evalmi"
    second = Instance.objects.get(study=study, key="0002")
    assert (second.task_tag, second.question) == ("counting", "Does the image match?")
    assert second.sub_questions == ["Are there two cats?", "Is the ball red?"]
    judge = Judge.objects.get(name=EVALMI_REFERENCE_JUDGE)
    assert judge.params["role"] == "human_reference"
    qa = JudgeScore.objects.get(dimension="qa", item__gen_model__name="m1", item__instance__key="0002")
    assert (qa.value, qa.sub_scores) == (0.0, [0, 1])
    assert Rating.objects.count() == 0  # published MOS are not one person's Likert ratings

    call_command("import_evalmi", str(mos), "--questions", str(questions), "--tasks", str(tasks), "--study", "evalmi")
    assert "created" not in capsys.readouterr().out


def test_a_malformed_evalmi_image_name_names_the_file_and_line(tmp_path):
    mos, questions, tasks = evalmi_files(tmp_path, bad_name=True)
    with pytest.raises(CommandError, match=r"MOS\.xlsx: line 5: ImageName 'm2/002'"):
        call_command("import_evalmi", str(mos), "--questions", str(questions), "--tasks", str(tasks), "--study", "e")
    assert Study.objects.count() == 0


def test_evalmi_store_refuses_a_prompt_number_without_a_question(tmp_path):
    mos_path, questions_path, tasks_path = evalmi_files(tmp_path)
    mos, questions, tasks = evalmi_read(mos_path=mos_path, questions_path=questions_path, tasks_path=tasks_path)
    mos.loc[3, "prompt_number"] = 7
    with pytest.raises(ImportFailed, match="line 5: prompt number 7 has no row in question.xlsx"):
        evalmi_store(mos=mos, questions=questions, tasks=tasks, study_slug="e", source_detail="MOS.xlsx")
    assert Study.objects.count() == 0


def test_the_bulk_writer_stores_tabs_newlines_backslashes_nulls_and_json_exactly():
    from analysis.sql import fast_insert
    from tests.factories import make_item, make_rater, make_study

    study = make_study(protocol="imagenhub")
    items = [make_item(study, model=f"Model{i}", with_image=False) for i in range(3)]
    rater = make_rater()
    details = ["C:\\ratings\\file.tsv", "tab\there", "two\nlines\r\nand \\N"]
    values = [{"SC": 1.0, "PQ": 0.5}, {"SC": 0.0, "PQ": 1.0}, {"SC": 0.5, "PQ": 0.5}]
    rows = [(study.id, rater.id, item.id, values[i], "import", details[i]) for i, item in enumerate(items)]
    from django.db import connection

    prepare = Rating._meta.get_field("values").get_db_prep_save
    rows = [(s, r, i, prepare(v, connection), src, d) for s, r, i, v, src, d in rows]
    assert fast_insert(Rating, ["study", "rater", "item", "values", "source", "source_detail"], rows) == 3
    stored = {r.item_id: r for r in Rating.objects.filter(study=study)}
    for i, item in enumerate(items):
        assert stored[item.id].source_detail == details[i]
        assert stored[item.id].values == values[i]
        assert stored[item.id].answers == {} and stored[item.id].time_on_item_ms is None


def test_viescore_scores_given_as_bare_numbers_or_text_import_and_the_summary_says_how_many(tmp_path, small_study):
    root = tmp_path / "llava"
    viescore_file(root / small_study.slug / "ModelA" / "SC.json", {u: 6 for u in UIDS})  # LLaVA's bare numbers
    viescore_file(root / small_study.slug / "ModelA" / "PQ.json",
                  {u: s for u, s in zip(UIDS, (["8", "9"], [7], [5, 6], 4.0))})
    summary = judge_import(path=root, fmt="viescore", judge_name="llava-0shot")
    assert summary.counts["scores_created"] == 12 and summary.counts["scores_reshaped"] == 6
    assert "6 of 8 judge outputs gave 'score' as a bare number or numeric text" in str(summary)
    values = dict(JudgeScore.objects.filter(dimension="PQ").values_list("item__instance__key", "value"))
    assert values == {"sample_1.jpg": 0.8, "sample_2.jpg": 0.7, "sample_3.jpg": 0.5, "sample_4.jpg": 0.4}
    assert set(JudgeScore.objects.filter(dimension="SC").values_list("value", flat=True)) == {0.6}
