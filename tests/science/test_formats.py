import json

import pytest

from analysis.science.formats import (
    parse_imagenhub_tsv,
    parse_viescore_json,
    read_autometrics,
    read_evalmi_prompt_tasks,
    read_evalmi_questions,
    read_imagenhub_task,
    read_viescore_judge,
)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_imagenhub_cells_parse_whatever_the_spacing(tmp_path):
    tsv = write(tmp_path / "T" / "T_rater2.tsv", "uid\tA\tB\r\ns1.jpg\t[0,0]\t[0 , 0.5]\r\ns2.jpg\t[1,  0.5]\t[0.5, 1]")
    frame = parse_imagenhub_tsv(tsv)
    assert set(frame["rater"]) == {"rater2"}
    cells = frame.set_index(["uid", "model"])
    assert tuple(cells.loc[("s1.jpg", "B"), ["SC", "PQ"]]) == (0.0, 0.5)
    assert tuple(cells.loc[("s2.jpg", "A"), ["SC", "PQ"]]) == (1.0, 0.5)


def test_imagenhub_bad_cell_names_file_line_and_model(tmp_path):
    tsv = write(tmp_path / "T_rater1.tsv", "uid\tA\ns1.jpg\t[0, 1]\ns2.jpg\t[0; 1]\n")
    with pytest.raises(ValueError, match=r"T_rater1\.tsv: line 3: model 'A'.*\[0; 1\]"):
        parse_imagenhub_tsv(tsv)


def test_imagenhub_score_outside_the_scale_is_rejected(tmp_path):
    tsv = write(tmp_path / "T_rater1.tsv", "uid\tA\ns1.jpg\t[0, 2]\n")
    with pytest.raises(ValueError, match=r"line 2: .*not in"):
        parse_imagenhub_tsv(tsv)


def test_imagenhub_duplicate_uid_is_rejected(tmp_path):
    tsv = write(tmp_path / "T_rater1.tsv", "uid\tA\ns1.jpg\t[0, 1]\ns1.jpg\t[0, 1]\n")
    with pytest.raises(ValueError, match=r"line 3: duplicate uid"):
        parse_imagenhub_tsv(tsv)


def test_viescore_judge_files_become_long_records(tmp_path):
    entry = {"score": [7, 3], "reasoning": "ok", "prompt_input": "p", "vision_input": []}
    write(tmp_path / "ImagenHub_T" / "M" / "SC.json", json.dumps({"s1": entry}))
    write(tmp_path / "ImagenHub_T" / "M" / "PQ.json", json.dumps({"s1": {"score": [9]}}))
    frame = read_viescore_judge(tmp_path)
    assert sorted(frame["aspect"]) == ["PQ", "SC"]
    assert frame.set_index("aspect").loc["SC", "scores"] == [7.0, 3.0]


def test_viescore_missing_score_is_an_error_not_a_random_value(tmp_path):
    path = write(tmp_path / "SC.json", json.dumps({"s1": {"score": [], "reasoning": "?"}}))
    with pytest.raises(ValueError, match=r"SC\.json: uid 's1'"):
        parse_viescore_json(path)


def test_invalid_json_names_the_line(tmp_path):
    path = write(tmp_path / "SC.json", '{\n "s1": {"score": [1]},\n oops\n}')
    with pytest.raises(ValueError, match=r"SC\.json: line 3"):
        parse_viescore_json(path)


def test_autometrics_become_long_records(tmp_path):
    write(tmp_path / "ImagenHub_T" / "M.json", json.dumps({"s1": {"LPIPS": 0.25}, "s2": {"LPIPS": 0.5}}))
    frame = read_autometrics(tmp_path)
    assert frame["value"].tolist() == [0.25, 0.5]
    assert set(frame["metric"]) == {"LPIPS"}


def test_released_imagenhub_task_has_three_raters_on_every_cell(shared_datasets):
    frame = read_imagenhub_task(shared_datasets / "imagenhub" / "human_ratings" / "Text-Guided_IE")
    assert frame.groupby(["uid", "model"]).size().eq(3).all()
    assert frame["model"].nunique() == 9 and frame["uid"].nunique() == 179


def test_released_evalmi_prompt_files_line_up(shared_datasets):
    questions = read_evalmi_questions(shared_datasets / "evalmi" / "question.xlsx")
    tasks = read_evalmi_prompt_tasks(shared_datasets / "evalmi" / "prompt_tasks.jsonl")
    assert len(questions) == len(tasks) == 2100
    assert (questions["prompt"] == tasks["prompt"]).mean() > 0.99
    assert questions.loc[0, "question_2"] is None


def test_viescore_scores_in_every_released_shape_are_read_as_the_viescore_notebook_reads_them(tmp_path):
    # LLaVA / Qwen-VL: a bare number; CogVLM: numbers as text; GPT-4o: a list of numbers
    entries = {"list": [7, 3], "bare": 9, "bare_float": 8.5, "text_list": ["10", "10"], "text": " 6 "}
    path = write(tmp_path / "SC.json", json.dumps({uid: {"score": s} for uid, s in entries.items()}))
    frame = parse_viescore_json(path).set_index("uid")
    assert frame["scores"].to_dict() == {"list": [7.0, 3.0], "bare": [9.0], "bare_float": [8.5],
                                         "text_list": [10.0, 10.0], "text": [6.0]}
    assert frame["reshaped"].to_dict() == {"list": False, "bare": True, "bare_float": True, "text_list": True,
                                           "text": True}


@pytest.mark.parametrize("score", [None, [], "nan", "inf", [1, "x"], True, [True], {"a": 1}, [[1]], "9" * 40, 1e400])
def test_viescore_scores_that_are_not_numbers_name_the_file_and_uid(tmp_path, score):
    text = json.dumps({"s1": {"score": score}}) if score != 1e400 else '{"s1": {"score": 1e400}}'
    path = write(tmp_path / "PQ.json", text)
    with pytest.raises(ValueError, match=r"PQ\.json: uid 's1': 'score' must be a number or a non-empty list"):
        parse_viescore_json(path)
