"""Create (issue 14, step 1): a task-type select valid per protocol, sample bundles that build,
protocol settings as form fields (those of another task not stored), every bundle problem at once
sorted by line."""

import io
import zipfile

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from analysis.science import protocols
from tasks.builder import BundleInvalid, StudySpec, study_build_from_bundle
from tasks.models import ConditionImage, Study
from tasks.sample_bundles import sample_bundle
from analysis.science.protocols.task_types import TASK_TYPES
from tests.factories import make_user, png_bytes
from tests.research.bundles import csv_manifest, make_bundle

pytestmark = pytest.mark.django_db
SAMPLES = [(protocol, task) for protocol, tasks in TASK_TYPES.items() for task in tasks]


@pytest.fixture
def researcher(client, builds_run_at_once):
    user = make_user("builder")
    user.user_permissions.add(Permission.objects.get(codename="add_study"))
    client.force_login(user)
    return user


@pytest.mark.parametrize("protocol, task", SAMPLES)
def test_every_sample_bundle_builds_as_it_is(protocol, task):
    data = sample_bundle(protocol, task)
    assert len(data) < 60_000
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert "manifest.csv" in archive.namelist()
    study = study_build_from_bundle(upload=io.BytesIO(data), spec=StudySpec(
        slug=f"sample-{protocol}-{task}".replace("_", "-"), title="Sample", protocol=protocol, task_type=task))
    assert study.items.count() == (6 if protocol == protocols.EVALMI else 4)
    roles = set(ConditionImage.objects.filter(instance__study=study).values_list("role", flat=True))
    from tasks.builder import TASK_NEEDS
    wanted = set() if protocol == protocols.EVALMI else set(TASK_NEEDS[task])
    assert roles == wanted
    if protocol == protocols.PAIRWISE:
        assert study.comparisons.count() == 2


def test_sample_bundles_download_from_the_builder_page(client, researcher):
    page = client.get(reverse("research-study-new")).content.decode()
    url = reverse("research-sample-bundle", args=["imagenhub", "mask_guided_editing"])
    assert f'href="{url}"' in page
    response = client.get(url)
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert 'filename="sample-imagenhub-mask_guided_editing.zip"' in response["Content-Disposition"]
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        header = archive.read("manifest.csv").decode().splitlines()[0]
    assert header == "instance,model,output,prompt,source,mask"
    assert client.get(reverse("research-sample-bundle", args=["evalmi", "mask_guided_editing"])).status_code == 404
    assert client.get(reverse("research-sample-bundle", args=["nope", "text_to_image"])).status_code == 404


def test_the_task_type_is_a_select_grouped_by_protocol(client, researcher):
    page = client.get(reverse("research-study-new")).content.decode()
    select = page.split('<select name="task_type"')[1].split("</select>")[0]
    assert '<optgroup label="ImagenHub (SC / PQ)">' in select and '<optgroup label="EvalMi (Likert + yes/no)">' in select
    assert select.count("<option") == sum(len(t) for t in TASK_TYPES.values())
    assert '<input type="text" name="task_type"' not in page
    assert 'name="settings"' not in page  # no JSON box: one field per setting
    for name in ("checklist_mode", "description_models", "likert_min", "likert_max", "qa", "images_per_trial",
                 "allow_both_bad", "gold_share", "agreement_threshold"):
        assert f'name="{name}"' in page, name


def _form(bundle, **fields):
    bundle.name = "bundle.zip"
    data = {"slug": "made", "title": "Made", "protocol": "imagenhub", "task_type": "text_to_image",
            "raters_per_item": 3, "assignment_mode": "balanced", "bundle": bundle}
    data.update(fields)
    return data


def test_a_task_type_of_another_protocol_is_refused(client, researcher):
    response = client.post(reverse("research-study-new"), _form(io.BytesIO(sample_bundle("evalmi", "mixed")),
                                                                protocol="evalmi", task_type="mask_guided_editing"))
    assert response.status_code == 400
    assert "is not one of the evalmi tasks: mixed, text_to_image" in response.content.decode()
    assert not Study.objects.exists()


def test_settings_come_from_their_fields_and_another_tasks_are_not_stored(client, researcher):
    response = client.post(reverse("research-study-new"), _form(
        io.BytesIO(sample_bundle("imagenhub", "text_to_image")), description_models="Imagic\nSDEdit",
        checklist_mode="on", agreement_threshold="0.6", likert_max="9"))
    assert response.status_code == 302, response.content.decode()[:2000]
    study = Study.objects.get(slug="made")
    assert study.settings == {"checklist_mode": True, "gold_share": 0.0, "agreement_threshold": 0.6}
    response = client.post(reverse("research-study-new"), _form(
        io.BytesIO(sample_bundle("imagenhub", "text_guided_editing")), slug="editing", task_type="text_guided_editing",
        description_models="Imagic\n\nSDEdit\nImagic"))
    assert response.status_code == 302
    assert Study.objects.get(slug="editing").settings["description_models"] == ["Imagic", "SDEdit"]
    response = client.post(reverse("research-study-new"), _form(
        io.BytesIO(sample_bundle("evalmi", "mixed")), slug="likert", protocol="evalmi", task_type="mixed",
        likert_min="0", likert_max="10", qa="on", images_per_trial="3", checklist_mode="on"))
    assert response.status_code == 302
    assert Study.objects.get(slug="likert").settings == {
        "likert_min": 0, "likert_max": 10, "qa": True, "images_per_trial": 3, "gold_share": 0.0}


def test_the_api_does_not_store_a_setting_of_another_task(researcher):
    study = study_build_from_bundle(upload=io.BytesIO(sample_bundle("imagenhub", "text_to_image")), spec=StudySpec(
        slug="api-t2i", title="T2I", protocol="imagenhub", task_type="text_to_image",
        settings={"description_models": ["Imagic"]}))
    study.refresh_from_db()
    assert "description_models" not in study.settings


def test_an_unknown_column_hides_no_other_problem_and_problems_are_sorted_by_line():
    rows = [{"instance": "s1", "model": "A", "output": "a.png", "colour": "red"},
            {"instance": "s2", "model": "A", "output": "gone.png", "colour": "blue"},
            {"instance": "s2", "model": "A", "output": "a.png", "colour": "blue"},
            {"instance": "s3", "model": "A", "output": "fake.png", "colour": ""}]
    bundle = make_bundle({"manifest.csv": csv_manifest(rows), "a.png": png_bytes(), "fake.png": b"not an image"})
    with pytest.raises(BundleInvalid) as caught:
        study_build_from_bundle(upload=bundle, spec=StudySpec(slug="bad", title="", protocol="imagenhub",
                                                               task_type="text_to_image"))
    problems = caught.value.problems
    lines = [p.line for p in problems]
    assert lines == sorted(lines, key=lambda line: (line is not None, line or 0))
    text = "\n".join(map(str, problems))
    assert "the study needs a title" in text  # the study's own problems first
    assert "unknown column(s) 'colour'" in text
    assert "line 3: file 'gone.png' is not in the zip" in text
    assert "line 4: duplicate row" in text
    assert "line 5: fake.png: not a readable image" in text
    assert "BytesIO" not in text and "0x" not in text


def test_the_phone_exclusion_is_a_setting_of_every_protocol(client, researcher):
    response = client.post(reverse("research-study-new"), _form(
        io.BytesIO(sample_bundle("pairwise", "text_to_image")), slug="no-phones", protocol="pairwise",
        exclude_phones="on", allow_both_bad="on"))
    assert response.status_code == 302
    assert Study.objects.get(slug="no-phones").settings == {"allow_both_bad": True, "gold_share": 0.0,
                                                            "exclude_phones": True}
    with pytest.raises(protocols.ProtocolError, match="exclude_phones must be true or false"):
        protocols.get_protocol("evalmi").clean_settings({"exclude_phones": "yes"})
