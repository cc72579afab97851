import io
import zipfile

import pytest

from tasks.builder import BundleInvalid, StudySpec, study_build_from_bundle
from tasks.models import Comparison, ConditionImage, Instance, Item, StoredImage, Study
from tests.factories import make_study, make_user, png_bytes
from tests.research.bundles import csv_manifest, jsonl_manifest, make_bundle, text_to_image_bundle

pytestmark = pytest.mark.django_db


def _spec(**overrides) -> StudySpec:
    fields = {"slug": "built", "title": "Built study", "protocol": "imagenhub", "task_type": "text_to_image"}
    fields.update(overrides)
    return StudySpec(**fields)


def _problems(bundle, spec=None) -> list[tuple[int | None, str]]:
    with pytest.raises(BundleInvalid) as caught:
        study_build_from_bundle(upload=bundle, spec=spec or _spec())
    assert Study.objects.count() == 0 and Item.objects.count() == 0 and StoredImage.objects.count() == 0
    return [(p.line, p.message) for p in caught.value.problems]


def test_a_good_csv_bundle_becomes_a_draft_study_owned_by_the_researcher():
    researcher = make_user("researcher")
    study = study_build_from_bundle(upload=text_to_image_bundle(), spec=_spec(), owner=researcher)
    assert study.state == Study.State.DRAFT
    assert list(study.owners.all()) == [researcher]
    assert sorted(study.gen_models.values_list("name", flat=True)) == ["ModelA", "ModelB"]
    assert Instance.objects.filter(study=study).count() == 2
    assert Item.objects.filter(study=study, image__isnull=False).count() == 4
    assert Instance.objects.get(study=study, key="s1").prompt == "a photo of s1"


def test_a_jsonl_bundle_with_subject_sets_tokens_and_a_pairwise_protocol_creates_conditions_and_pairs():
    files = {f"subj/{n}.png": png_bytes(color=(n * 40, 10, 10)) for n in range(3)}
    files.update({f"out/{m}.png": png_bytes(color=(10, 30 * i, 10)) for i, m in enumerate(["A", "B", "C"], 1)})
    rows = [
        {"instance": "dog", "model": m, "output": f"out/{m}.png", "prompt": "[V] dog on a beach",
         "subject_1": ["subj/0.png", "subj/1.png", "subj/2.png"], "subject_1_token": "[V]"}
        for m in ["A", "B", "C"]
    ]
    files["manifest.jsonl"] = jsonl_manifest(rows)
    study = study_build_from_bundle(
        upload=make_bundle(files), spec=_spec(protocol="pairwise", task_type="subject_driven_generation")
    )
    conditions = ConditionImage.objects.filter(instance__study=study).order_by("position")
    assert [(c.role, c.position, c.token) for c in conditions] == [("subject_1", i, "[V]") for i in range(3)]
    assert Comparison.objects.filter(study=study).count() == 3  # A-B, A-C, B-C


def test_every_problem_is_reported_with_its_line_and_nothing_is_stored():
    files = {"ok.png": png_bytes(), "big.png": png_bytes(size=(64, 64)), "notes.txt": b"hello"}
    rows = [
        {"instance": "s1", "model": "A", "output": "ok.png", "source": "ok.png", "mask": "big.png"},  # line 2: wrong size
        {"instance": "s1", "model": "A", "output": "ok.png", "source": "ok.png", "mask": "big.png"},  # line 3: duplicate
        {"instance": "s2", "model": "A", "output": "missing.png", "source": "ok.png", "mask": "ok.png"},  # 4: missing
        {"instance": "s3", "model": "A", "output": "notes.txt", "source": "ok.png", "mask": "ok.png"},  # 5: not an image
        {"instance": "s4", "model": "", "output": "ok.png", "source": "ok.png", "mask": "ok.png"},  # 6: empty model
    ]
    files["manifest.csv"] = csv_manifest(rows)
    problems = _problems(make_bundle(files), _spec(task_type="mask_guided_editing"))
    by_line = {}
    for line, message in problems:
        by_line.setdefault(line, []).append(message)
    assert any("wrong size" in m and "64×64" in m for m in by_line[2])
    assert any("duplicate row" in m and "line 2" in m for m in by_line[3])
    assert any("'missing.png' is not in the zip" in m for m in by_line[4])
    assert any("not a readable image" in m for m in by_line[5])
    assert any("'model' is empty" in m for m in by_line[6])


def test_an_unknown_column_is_reported_on_the_header_line():
    bundle = make_bundle({"a.png": png_bytes(), "manifest.csv": b"instance,model,output,colour\ns1,A,a.png,red\n"})
    assert _problems(bundle) == [(1, "unknown column(s) 'colour'; known: " + ", ".join(sorted(
        ["instance", "model", "output", "prompt", "alt_prompt", "task_tag", "question", "sub_questions", "source",
         "mask", "control", "subject_1", "subject_2", "subject_1_token", "subject_2_token"])))]


def test_a_missing_required_column_and_a_bad_jsonl_line_are_named():
    assert _problems(make_bundle({"manifest.csv": b"instance,output\n"})) == [
        (1, "missing required column(s) 'model'")
    ]
    bundle = make_bundle({"a.png": png_bytes(), "manifest.jsonl": b'{"instance": "s1", "model": "A", "output": "a.png"}\n{oops\n'})
    assert [line for line, _ in _problems(bundle)] == [2]


def test_a_zip_slip_member_is_refused_by_name():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("../../etc/evil.png", png_bytes())
        archive.writestr("a.png", png_bytes())
        archive.writestr("manifest.csv", b"instance,model,output\ns1,A,a.png\n")
    buffer.seek(0)
    problems = _problems(buffer)
    assert problems == [(None, "refused member '../../etc/evil.png': '..' in path (zip-slip)")]


def test_a_highly_compressed_member_is_refused_as_a_decompression_bomb():
    bundle = make_bundle({"bomb.png": b"\0" * (8 * 1024 * 1024), "manifest.csv": b"instance,model,output\ns1,A,bomb.png\n"})
    messages = [m for _, m in _problems(bundle)]
    assert any("decompression bomb" in m for m in messages)


def test_an_image_with_too_many_pixels_is_refused_by_pillow_checks(monkeypatch):
    monkeypatch.setattr("tasks.images.MAX_PIXELS", 1000)
    bundle = make_bundle({"a.png": png_bytes(size=(40, 40)), "manifest.csv": b"instance,model,output\ns1,A,a.png\n"})
    assert any("larger than 1,000 pixels" in m for _, m in _problems(bundle))


def test_a_task_that_needs_condition_images_names_the_instance_without_them():
    bundle = text_to_image_bundle(instances=("s1",))
    problems = _problems(bundle, _spec(task_type="control_guided_generation"))
    assert problems == [(2, "instance 's1': task control_guided_generation needs a control image")]


def test_a_slug_already_taken_and_a_file_that_is_not_a_zip_are_both_explained():
    make_study(slug="taken")
    with pytest.raises(BundleInvalid) as caught:
        study_build_from_bundle(upload=io.BytesIO(b"not a zip"), spec=_spec(slug="taken"))
    assert [p.message for p in caught.value.problems] == ["a study with slug 'taken' already exists", "not a zip file"]
    assert Study.objects.count() == 1


def test_instance_fields_that_contradict_an_earlier_row_are_reported():
    rows = [
        {"instance": "s1", "model": "A", "output": "a.png", "prompt": "a cat"},
        {"instance": "s1", "model": "B", "output": "b.png", "prompt": "a dog"},
    ]
    bundle = make_bundle({"a.png": png_bytes(), "b.png": png_bytes(color=(1, 2, 3)), "manifest.csv": csv_manifest(rows)})
    assert _problems(bundle) == [(3, "instance 's1': prompt differs from line 2 ('a cat' vs 'a dog')")]


def test_the_same_image_used_twice_is_stored_once():
    image = png_bytes()
    rows = [{"instance": "s1", "model": "A", "output": "x.png"}, {"instance": "s2", "model": "A", "output": "y.png"}]
    bundle = make_bundle({"x.png": image, "y.png": image, "manifest.csv": csv_manifest(rows)})
    study = study_build_from_bundle(upload=bundle, spec=_spec())
    assert study.items.count() == 2 and StoredImage.objects.count() == 1


def test_a_build_cut_short_while_storing_images_leaves_neither_rows_nor_files(monkeypatch, settings):
    from pathlib import Path

    import tasks.builder

    real_store, calls = tasks.builder.images_store_many, []

    def store_then_fail(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise OSError("worker killed")
        return real_store(*args, **kwargs)

    monkeypatch.setattr(tasks.builder, "STORE_CHUNK", 1)
    monkeypatch.setattr(tasks.builder, "images_store_many", store_then_fail)
    with pytest.raises(OSError):
        study_build_from_bundle(upload=text_to_image_bundle(), spec=_spec())
    assert StoredImage.objects.count() == 0 and Study.objects.count() == 0
    assert [p for p in Path(settings.MEDIA_ROOT).rglob("*") if p.is_file()] == []


def test_problems_as_stored_escape_nul_and_surrogates_and_stay_short():
    from tasks.builder import Problem

    stored = Problem("prompt differs ('" + "x" * 5000 + "')", 3, "manifest\x00.jsonl\ud800").as_dict()
    assert stored["file"] == "manifest\\x00.jsonl\\ud800"
    assert len(stored["message"]) == 1000 and stored["message"].endswith("…")
