"""Hostile values inside a bundle's manifest and study fields: each is a clean 400 naming the line
and the field, and nothing is stored.

These values are harmless on SQLite, which stores anything, but PostgreSQL refuses them with a
server error when they reach it: text longer than its column, NUL characters, lone surrogates
(not UTF-8), numbers JSON cannot hold (NaN, beyond 64 bits) and JSON nested beyond Python's
recursion limit. CI runs this file on PostgreSQL too.

The build job is queued when the upload's row commits; the ``builds_run_at_once`` fixture runs it
when queued, inside the test's transaction. One transactional test checks that a real commit
runs it inside the request too, as the eager (default) configuration does.
"""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.contrib.auth.models import Permission

from tasks.models import GenModel, Instance, Item, StoredImage, Study
from tests.factories import make_user, png_bytes
from tests.hardening.test_hostile_uploads import media_files

pytestmark = pytest.mark.django_db


def zipped(files: dict[str, bytes], *, duplicate: tuple[str, bytes] | None = None) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        if duplicate:
            archive.writestr(*duplicate)  # a second member under a name already in the zip
    buffer.seek(0)
    buffer.name = "bundle.zip"
    return buffer


def images() -> dict[str, bytes]:
    return {"a.png": png_bytes(color=(10, 20, 30)), "b.png": png_bytes(color=(40, 50, 60))}


def jsonl(*records: dict | str) -> bytes:
    """Lines of JSON; a str is written as it is (for text json.dumps would never produce)."""
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records).encode("utf-8", "surrogatepass")


GOOD = {"instance": "s1", "model": "A", "output": "a.png", "prompt": "a cat"}


def row(**overrides) -> dict:
    return {**GOOD, **overrides}


# case -> (manifest name, manifest bytes, the line named, words the message must contain)
MANIFEST_CASES = {
    "instance key longer than its column": (
        "manifest.jsonl", jsonl(row(instance="k" * 201)), 1, ["instance", "200"]),
    "model name longer than its column": (
        "manifest.csv", f"instance,model,output\ns1,{'M' * 101},a.png\n".encode(), 2, ["model", "100"]),
    "task tag longer than its column": (
        "manifest.jsonl", jsonl(row(task_tag="t" * 101)), 1, ["task_tag", "100"]),
    "subject token longer than its column": (
        "manifest.jsonl", jsonl(row(subject_1="b.png", subject_1_token="[" + "V" * 40 + "]")), 1,
        ["subject_1_token", "32"]),
    "NUL in a CSV prompt": (
        "manifest.csv", b"instance,model,output,prompt\ns1,A,a.png,a c\x00t\n", 2, ["prompt", "NUL"]),
    "NUL in a JSONL prompt": (
        "manifest.jsonl", jsonl('{"instance": "s1", "model": "A", "output": "a.png", "prompt": "a c\\u0000t"}'), 1,
        ["prompt", "NUL"]),
    "NUL in a model name": (
        "manifest.jsonl", jsonl('{"instance": "s1", "model": "A\\u0000", "output": "a.png"}'), 1, ["model", "NUL"]),
    "lone surrogate in a JSONL prompt": (
        "manifest.jsonl", jsonl('{"instance": "s1", "model": "A", "output": "a.png", "prompt": "\\ud800 cat"}'), 1,
        ["prompt", "surrogate"]),
    "lone surrogate in a sub-question": (
        "manifest.jsonl",
        jsonl('{"instance": "s1", "model": "A", "output": "a.png", "sub_questions": ["is it \\udfff?"]}'), 1,
        ["sub_questions", "surrogate"]),
    "NUL in a sub-question": (
        "manifest.jsonl",
        jsonl('{"instance": "s1", "model": "A", "output": "a.png", "sub_questions": ["ok?", "x\\u0000"]}'), 1,
        ["sub_questions", "NUL"]),
    "deeply nested JSON line": (
        "manifest.jsonl", jsonl(row(), '{"instance": ' + "[" * 100_000 + "]" * 100_000 + "}"), 2, ["nested"]),
    "integer with more digits than Python converts": (
        "manifest.jsonl", jsonl(row(), '{"instance": ' + "9" * 5000 + ', "model": "A", "output": "b.png"}'), 2,
        ["digits"]),
    "instance key that is a huge integer": (
        "manifest.jsonl", jsonl(row(), '{"instance": ' + "9" * 300 + ', "model": "A", "output": "b.png"}'), 2,
        ["instance", "200"]),
    "NaN as an instance key": (
        "manifest.jsonl", jsonl(row(), '{"instance": NaN, "model": "A", "output": "b.png"}'), 2,
        ["instance", "number"]),
    "NUL in an image path": (
        "manifest.jsonl", jsonl('{"instance": "s1", "model": "A", "output": "a.png\\u0000.txt"}'), 1,
        ["output", "NUL"]),
}


@pytest.fixture
def researcher_client(client, builds_run_at_once):
    researcher = make_user("uploader")
    researcher.user_permissions.add(Permission.objects.get(codename="add_study"))
    client.force_login(researcher)
    return client


def post(client, upload, **fields):
    data = {"bundle": upload, "slug": "hostile", "title": "Hostile", "protocol": "imagenhub",
            "task_type": "text_to_image"}
    data.update(fields)
    return client.post("/api/studies/", data)


def assert_nothing_stored():
    assert (Study.objects.count(), GenModel.objects.count(), Instance.objects.count(), Item.objects.count(),
            StoredImage.objects.count()) == (0, 0, 0, 0, 0)
    assert media_files() == []


@pytest.mark.parametrize("case", sorted(MANIFEST_CASES))
def test_a_hostile_manifest_value_gets_a_400_naming_its_line_and_column_and_stores_nothing(researcher_client, case):
    name, manifest, line, words = MANIFEST_CASES[case]
    response = post(researcher_client, zipped({name: manifest, **images()}))
    assert response.status_code == 400, response.content[:300]
    problems = response.json()["problems"]
    named = [p for p in problems if p["line"] == line and p["file"] == name]
    assert named, problems
    assert any(all(word.lower() in p["message"].lower() for word in words) for p in named), problems
    assert_nothing_stored()


# case -> (form fields, words the message must contain)
STUDY_CASES = {
    "settings nested beyond the recursion limit": (
        {"settings": '{"description_models": ' + "[" * 100_000 + "]" * 100_000 + "}"}, ["settings", "nested"]),
    "NUL in a settings string": ({"settings": '{"description_models": ["A\\u0000"]}'}, ["settings", "NUL"]),
    "lone surrogate in a settings string": (
        {"settings": '{"description_models": ["\\ud83d"]}'}, ["settings", "surrogate"]),
    "NaN threshold in settings": ({"settings": '{"gold_share": NaN}'}, ["settings", "number"]),
    "integer beyond 64 bits in settings": (
        {"protocol": "evalmi", "task_type": "counting",
         "settings": '{"likert_min": 100000000000000000000000, "likert_max": 100000000000000000000005}'},
        ["settings", "64-bit"]),
    "integer with more digits than Python converts in settings": (
        {"settings": '{"gold_share": ' + "9" * 5000 + "}"}, ["settings", "digits"]),
}


@pytest.mark.parametrize("case", sorted(STUDY_CASES))
def test_a_hostile_study_setting_gets_a_400_naming_the_field_and_stores_nothing(researcher_client, case):
    fields, words = STUDY_CASES[case]
    manifest = b"instance,model,output,question\ns1,A,a.png,is it a cat?\n"
    response = post(researcher_client, zipped({"manifest.csv": manifest, **images()}), **fields)
    assert response.status_code == 400, response.content[:300]
    text = json.dumps(response.json()).lower()
    assert all(word.lower() in text for word in words), response.json()
    assert_nothing_stored()


def test_the_builder_page_answers_hostile_settings_with_a_form_error_not_a_server_error(researcher_client):
    researcher_client.force_login(make_user("page-researcher", is_staff=True))
    response = researcher_client.post("/research/new/", {
        "bundle": zipped({"manifest.csv": b"instance,model,output\ns1,A,a.png\n", **images()}), "slug": "hostile",
        "title": "Hostile", "protocol": "imagenhub", "task_type": "text_guided_editing", "raters_per_item": 3,
        "assignment_mode": "balanced", "description_models": "Imagic\nA\x00B\n" + "[" * 100_000,
        "gold_share": "nan", "agreement_threshold": "1e999",
    })
    assert response.status_code == 400
    page = response.content.decode()
    assert "Null characters are not allowed" in page
    assert page.count('class="error"') >= 3  # gold share and threshold refused too
    assert_nothing_stored()


def test_two_zip_members_under_one_name_are_refused_by_name(researcher_client):
    manifest = b"instance,model,output\ns1,A,a.png\n"
    upload = zipped({"manifest.csv": manifest, **images()}, duplicate=("./a.png", png_bytes(color=(1, 1, 1))))
    response = post(researcher_client, upload)
    assert response.status_code == 400
    assert any("a.png" in p["file"] and "twice" in p["message"] for p in response.json()["problems"])
    assert_nothing_stored()


def test_a_non_image_named_png_and_a_path_out_of_the_zip_are_named_on_their_lines(researcher_client):
    manifest = b"instance,model,output\ns1,A,a.png\ns2,A,../../etc/passwd.png\ns3,A,fake.png\n"
    upload = zipped({"manifest.csv": manifest, "fake.png": b"#!/bin/sh\necho not an image\n", **images()})
    response = post(researcher_client, upload)
    assert response.status_code == 400
    by_line = {p["line"]: p["message"] for p in response.json()["problems"]}
    assert "not in the zip" in by_line[3] and "not a readable image" in by_line[4]
    assert_nothing_stored()


def test_a_clean_bundle_with_long_but_allowed_values_builds(researcher_client):
    """Control: values at their columns' limits are accepted, so the refusals above are about the excess."""
    records = [row(instance="k" * 200, model="M" * 100, task_tag="t" * 100, prompt="p" * 100_000,
                   subject_1="b.png", subject_1_token="[" + "V" * 30 + "]", sub_questions=["é ✓ 🐈?"])]
    response = post(researcher_client, zipped({"manifest.jsonl": jsonl(*records), **images()}),
                    settings='{"description_models": ["' + "M" * 100 + '"]}')
    assert response.status_code == 201, response.content[:500]
    assert Item.objects.get().gen_model.name == "M" * 100


@pytest.mark.django_db(transaction=True)
def test_without_the_fixture_a_real_commit_runs_the_build_within_the_request_and_answers_400():
    from django.test import Client

    researcher = make_user("committer")
    researcher.user_permissions.add(Permission.objects.get(codename="add_study"))
    client = Client()
    client.force_login(researcher)
    response = post(client, zipped({"manifest.jsonl": jsonl(row(model="M" * 101)), **images()}))
    assert response.status_code == 400
    assert response.json()["problems"][0]["line"] == 1 and "'model'" in response.json()["problems"][0]["message"]
    assert_nothing_stored()


@pytest.mark.parametrize("url", ["/api/study-builds/{}/", "/research/new/{}/"])
def test_a_build_id_beyond_bigint_or_of_nobody_is_a_404(researcher_client, url):
    for build_id in ("9" * 40, "0", "2147483648"):
        assert researcher_client.get(url.format(build_id)).status_code == 404
