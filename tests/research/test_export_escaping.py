"""Every export file a spreadsheet may open is inert: no formula, no cell split by a tab or line break."""

import csv
import io
import json
import zipfile

import openpyxl
import pandas as pd
import pytest

from analysis.export_input import study_export_input
from analysis.science import exports
from analysis.science.exports import FORMULA_PREFIXES, iter_csv, iter_export_zip
from tasks.services import rating_submit
from tests.factories import make_instance, make_item, make_rater, make_study

HOSTILE = ['=HYPERLINK("http://x")', "@SUM(1)", "+1", "-1+2", "tab\there", "line\nbreak", "cr\rhere"]


def _inert(cell: str) -> bool:
    """Text a spreadsheet shows as text: no formula start, unless it is a plain number."""
    if not cell.startswith(FORMULA_PREFIXES):
        return True
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _zip(study) -> zipfile.ZipFile:
    return zipfile.ZipFile(io.BytesIO(b"".join(iter_export_zip(study_export_input(study)))))


def _check_csv(archive: zipfile.ZipFile, name: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(archive.read(name).decode())))
    header, body = rows[0], rows[1:]
    assert all(len(row) == len(header) for row in body), name
    jsonl = archive.read(name.replace(".csv", ".jsonl")).decode().splitlines()
    assert len(body) == len(jsonl), f"{name}: a text cell split a row"
    for row in rows:
        for cell in row:
            assert _inert(cell), f"{name}: {cell!r}"
    return rows


def _check_xlsx(blob: bytes, name: str) -> list[list]:
    sheet = openpyxl.load_workbook(io.BytesIO(blob)).active
    for row in sheet.iter_rows():
        for cell in row:
            assert cell.data_type != "f", f"{name} {cell.coordinate}: formula {cell.value!r}"
            if isinstance(cell.value, str) and cell.value.startswith(FORMULA_PREFIXES):
                assert cell.quotePrefix, f"{name} {cell.coordinate}: {cell.value!r} without quote prefix"
    with zipfile.ZipFile(io.BytesIO(blob)) as parts:
        assert b"<f>" not in parts.read("xl/worksheets/sheet1.xml"), name
    return [[cell.value for cell in row] for row in sheet.iter_rows()]


@pytest.mark.django_db
def test_an_imagenhub_export_of_hostile_keys_and_model_names_has_no_formula_and_intact_rows():
    study = make_study(task_type="text_to_image")
    raters = [make_rater(), make_rater()]
    for key in HOSTILE:
        instance = make_instance(study, key=key, prompt=key)
        for model in ("=cmd|' /C calc'!A0", "Plain"):
            item = make_item(study, instance=instance, model=model, with_image=False)
            for rater in raters:
                rating_submit(rater=rater, item=item, values={"SC": 1, "PQ": 0.5}, require_assignment=False)
    archive = _zip(study)
    votes = _check_csv(archive, "votes.csv")
    assert len(votes) == 1 + len(HOSTILE) * 2 * 2
    assert {row[votes[0].index("instance")] for row in votes[1:]} == {
        "'=HYPERLINK(\"http://x\")", "'@SUM(1)", "'+1", "'-1+2", "tab\there", "line\nbreak", "cr\nhere"}
    for name in ("items.csv", "raters.csv"):
        _check_csv(archive, name)
    exact = {json.loads(line)["instance"] for line in archive.read("votes.jsonl").decode().splitlines()}
    assert exact == set(HOSTILE), "JSONL keeps the text exactly"
    tsvs = [name for name in archive.namelist() if name.endswith(".tsv")]
    assert len(tsvs) == 2
    for name in tsvs:
        lines = archive.read(name).decode().split("\n")
        assert lines[-1] == "" and len(lines) == 2 + len(HOSTILE), f"{name}: a key split a row"
        header = lines[0].split("\t")
        assert header == ["uid", "'=cmd|' /C calc'!A0", "Plain"]
        for line in lines[1:-1]:
            cells = line.split("\t")
            assert len(cells) == 3 and "\r" not in line and all(_inert(cell) for cell in cells), line
        uids = sorted(line.split("\t")[0] for line in lines[1:-1])
        assert uids == sorted(["'=HYPERLINK(\"http://x\")", "'@SUM(1)", "'+1", "'-1+2", "tab here", "line break", "cr here"])


@pytest.mark.django_db
def test_an_evalmi_export_stores_hostile_prompts_and_questions_as_text_never_formulas():
    study = make_study(protocol="evalmi", task_type="counting")
    instances = [
        make_instance(study, key=f"{n}", prompt=text, question=text, sub_questions=["+1", "-1+2", "tab\there"])
        for n, text in enumerate(HOSTILE)
    ]
    first, second = make_rater(), make_rater()
    for n, instance in enumerate(instances):
        for k, model in enumerate(("=1+1", "SD")):
            item = make_item(study, instance=instance, model=model, with_image=False)
            rating_submit(rater=first, item=item, values={"perception": 1 + (n + k) % 5, "correspondence": 2 + k},
                          answers={"q1": "yes", "q2": "no", "q3": "yes", "q4": "no"}, require_assignment=False)
            rating_submit(rater=second, item=item, values={"perception": 5 - n % 4, "correspondence": 5 - k},
                          answers={"q1": "no", "q2": "no", "q3": "no", "q4": "no"}, require_assignment=False)
    archive = _zip(study)
    mos = _check_xlsx(archive.read("evalmi/AIGI_MOS_yn.xlsx"), "AIGI_MOS_yn.xlsx")
    assert mos[0][:3] == ["ImageName", "MOS1", "MOS2"] and len(mos) == 1 + 2 * len(HOSTILE)
    assert "=1+1/0.png" in {row[0] for row in mos[1:]}
    assert all(isinstance(row[1], (int, float)) for row in mos[1:]), "numbers stay numbers"
    questions = _check_xlsx(archive.read("evalmi/question.xlsx"), "question.xlsx")
    assert questions[0] == ["key", "prompt", "question_1", "question_2", "question_3", "question_4", "question_5"]
    # XML reads a bare CR back as LF (openpyxl writes it unescaped); everything else is kept exactly.
    assert [row[1] for row in questions[1:]] == [text.replace("\r", "\n") for text in HOSTILE]
    assert [row[2:5] for row in questions[1:]][0] == ['=HYPERLINK("http://x")', "+1", "-1+2"]
    for name in ("votes.csv", "items.csv", "raters.csv"):
        _check_csv(archive, name)


def test_csv_and_xlsx_drop_nul_and_control_characters_and_keep_negative_numbers_numeric():
    frame = pd.DataFrame({"text": ["a\x00b", "=x\x00", "ok\x01"], "score_z": [-1.5, -2.0, 0.25]})
    text = b"".join(iter_csv(frame)).decode()
    assert "\x00" not in text
    assert list(csv.reader(io.StringIO(text))) == [["text", "score_z"], ["ab", "-1.5"], ["'=x", "-2.0"], ["ok\x01", "0.25"]]
    rows = _check_xlsx(exports.xlsx_bytes(frame), "frame.xlsx")
    assert rows == [["text", "score_z"], ["ab", -1.5], ["=x", -2.0], ["ok", 0.25]]
