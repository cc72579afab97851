"""The API's JSON parser: hostile bodies are 400s that say what is wrong, and nothing is stored."""

from __future__ import annotations

import pytest
from django.urls import reverse

from analysis.models import Judge, JudgeRun
from tasks.api_parsers import MAX_BYTES, MAX_DEPTH, json_depth
from tasks.models import Study
from tests.factories import make_item, make_study, make_user


def test_depth_counts_nesting_but_not_brackets_inside_strings():
    assert json_depth('{"a": [1, {"b": []}]}') == 4
    assert json_depth('{"a": "[[[[{{{{", "b": "\\"[["}') == 1
    assert json_depth("1") == 0


@pytest.fixture
def owner(db):
    user = make_user("parser-owner")
    study = make_study(slug="parser-study")
    study.owners.add(user)
    make_item(study)
    return user


def nested(depth: int) -> str:
    return '{"study": "parser-study", "judge": "j", "params": ' + '{"x": ' * depth + "1" + "}" * depth + "}"


HOSTILE = {
    "nested 5000 deep": nested(5000),
    "nested just past the limit": nested(MAX_DEPTH),
    "a NUL in a string": '{"study": "parser-study", "judge": "j\\u0000", "kind": "viescore"}',
    "a NUL in a key of params": '{"study": "parser-study", "judge": "j", "kind": "viescore", "params": {"a\\u0000": 1}}',
    "a lone surrogate": '{"study": "parser-study", "judge": "j", "kind": "viescore", "params": {"m": "\\ud800"}}',
    "an overflowing number": '{"study": "parser-study", "judge": "j", "kind": "viescore", "params": {"n": 1e999}}',
    "NaN": '{"study": "parser-study", "judge": "j", "kind": "viescore", "params": {"n": NaN}}',
    "a huge integer": '{"study": "parser-study", "judge": "j", "params": {"n": ' + "9" * 5000 + "}}",
    "a body over the size limit": '{"study": "parser-study", "judge": "' + "j" * MAX_BYTES + '"}',
    "not UTF-8": b'{"study": "\xff\xfe"}',
}


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_json_body_is_a_400_naming_the_problem_and_stores_nothing(client, owner, name):
    client.force_login(owner)
    response = client.post(reverse("api-judge-runs"), HOSTILE[name], content_type="application/json")
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert response.json()["detail"].startswith("JSON parse error")
    assert not Judge.objects.exists() and not JudgeRun.objects.exists()


def test_deep_nesting_is_refused_on_a_study_action_too(client, owner):
    client.force_login(owner)
    body = '{"slug": "copy", "title": ' + "[" * 3000 + "]" * 3000 + "}"
    response = client.post(reverse("api-study-clone", args=["parser-study"]), body, content_type="application/json")
    assert response.status_code == 400 and "nest deeper" in response.json()["detail"]
    assert Study.objects.count() == 1


def test_an_ordinary_body_within_the_limits_still_parses(client, owner):
    client.force_login(owner)
    body = '{"slug": "parser-copy", "title": "A copy [with brackets {in} the title]"}'
    response = client.post(reverse("api-study-clone", args=["parser-study"]), body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert Study.objects.get(slug="parser-copy").title == "A copy [with brackets {in} the title]"
