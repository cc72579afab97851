"""A rater cannot time a submit to tell gold (or an attention check) from work: a gold screen's
submit runs exactly the statements any screen's submit runs, and is scored afterwards.

Timing is made deterministic by counting the work: the SQL statements of each submit, with their
literals blanked out, must be the same list for gold and ordinary screens. The queries are the
only part of a submit that could differ (the Python around them is the same code path).
"""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from raters.gold import attention_failures, gold_accuracy
from raters.models import AttentionResult
from tasks.models import Assignment, Comparison, ComparisonGold, Participation, Rating
from tests.factories import (
    crowd_enter,
    make_attention_check,
    make_comparison,
    make_gold,
    make_instance,
    make_item,
    make_study,
)

pytestmark = pytest.mark.django_db


def _shape(sql: str) -> str:
    """A statement with its literals (ids, times, JSON values, arrays of ids) blanked out."""
    sql = re.sub(r"'(?:[^']|'')*'", "?", sql)
    sql = re.sub(r"\b\d+(?:\.\d+)?\b", "N", sql)
    return re.sub(r"\s+", " ", sql)


def _statements(ctx) -> list[str]:
    return [_shape(q["sql"]) for q in ctx.captured_queries
            if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]


def _queue(client, study, pid: str, screens: list[list]) -> tuple[str, list[int]]:
    """A crowd rater whose queue is ``screens`` (each a list of items, or a comparison), in that
    order, plus one last ordinary screen so no counted submit ends the session. Returns the
    rater's pid and the positions of the screens."""
    crowd_enter(client, study, pid)
    rater = Participation.objects.get(study=study, rater__external_id=pid).rater
    Assignment.objects.filter(rater=rater).delete()
    for position, units in enumerate(screens):
        for slot, unit in enumerate(units):
            field = "comparison" if isinstance(unit, Comparison) else "item"
            Assignment.objects.create(study=study, rater=rater, position=position, slot=slot, **{field: unit},
                                      presentation={"left": "A"} if field == "comparison" else {})
    return rater, list(range(len(screens) - 1))


def _submit_all(client, study, positions: list[int], answer) -> list[tuple[int, list[str], int]]:
    """GET then POST every screen as a browser does; per submit (position, statement shapes, status)."""
    out = []
    for position in positions:
        url = reverse("rating:unit", args=[study.slug, position])
        html = client.get(url).content.decode()
        form = {"shown": re.search(r'name="shown" value="([^"]+)"', html).group(1)}
        for name in sorted(set(re.findall(r'name="(u\d+-[\w-]+)"', html))):
            form[name] = answer(name)
        with CaptureQueriesContext(connection) as ctx:
            response = client.post(url, form)
        out.append((position, _statements(ctx), response.status_code))
    return out


def _assert_same_work(results, gold_positions: set[int]):
    gold = [statements for position, statements, _ in results if position in gold_positions]
    plain = [statements for position, statements, _ in results if position not in gold_positions]
    assert gold and plain
    assert {status for *_, status in results} == {302}
    # Every submit, gold or not, runs the very same statements (literals aside).
    assert all(statements == plain[0] for statements in plain + gold), (plain[0], gold[0])


def _imagenhub_answer(name: str) -> str:
    return "0.5"


def test_a_gold_item_or_attention_check_submit_runs_the_same_statements_as_any_submit(client):
    study = make_study(units_per_session=20)
    normal = [make_item(study) for _ in range(4)]
    golds = [make_item(study) for _ in range(2)]
    for item in golds:
        make_gold(item, values={"SC": 1.0, "PQ": 1.0})
    check = make_item(study)
    make_attention_check(check, expected={"SC": 0.5})
    last = make_item(study)
    order = [normal[0], golds[0], normal[1], check, normal[2], golds[1], normal[3], last]
    rater, positions = _queue(client, study, "work-1", [[item] for item in order])
    results = _submit_all(client, study, positions, _imagenhub_answer)
    _assert_same_work(results, {1, 3, 5})
    assert Rating.objects.filter(rater=rater).count() == 7
    # Scored afterwards, by the rules and quality code, from what was stored.
    assert not AttentionResult.objects.exists()
    assert attention_failures(rater=rater, study=study) == (0, 1)
    assert gold_accuracy(rater=rater, study=study) == (0, 2)


def test_a_gold_trial_submit_runs_the_same_statements_as_any_trial_submit(client):
    study = make_study(protocol="evalmi", task_type="counting", units_per_session=20,
                       settings={"images_per_trial": 3})
    screens, gold_positions = [], set()
    for n in range(5):
        instance = make_instance(study, question="Are there three apples?")
        items = [make_item(study, instance=instance, model=f"Model{m}") for m in "ABC"]
        if n in (1, 3):
            gold_positions.add(n)
            for item in items:
                make_gold(item, values={"perception": 4, "correspondence": 5}, answers={"q1": "yes"}, tolerance=1)
        screens.append(items)
    rater, positions = _queue(client, study, "trial-1", screens)
    results = _submit_all(client, study, positions, lambda name: "yes" if name.endswith("-q1") else "3")
    _assert_same_work(results, gold_positions)
    assert gold_accuracy(rater=rater, study=study) == (0, 6)


def test_a_gold_comparison_submit_runs_the_same_statements_as_any_comparison_submit(client):
    study = make_study(protocol="pairwise", units_per_session=20)
    comparisons = [make_comparison(study) for _ in range(6)]
    for n in (1, 4):
        ComparisonGold.objects.create(comparison=comparisons[n], preference="A")
    rater, positions = _queue(client, study, "pair-1", [[c] for c in comparisons])
    results = _submit_all(client, study, positions, lambda name: "left")
    _assert_same_work(results, {1, 4})
    assert gold_accuracy(rater=rater, study=study) == (2, 2)
