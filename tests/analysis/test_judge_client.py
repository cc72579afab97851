"""The MLLM client and evaluators against the local fake endpoint (no database)."""

from __future__ import annotations

import pytest

from analysis.science.judges.client import ChatClient, ChatError, ClientConfig, RateLimiter
from analysis.science.judges.endpoints import Endpoint, Target, resolve_target
from analysis.science.judges.evaluators import (
    ItemInputs,
    dual_sided,
    evaluate_evalmi,
    evaluate_gpt4v_pair,
    evaluate_gpt4v_single,
    evaluate_vice,
    evaluate_viescore,
)
from tests.factories import png_bytes
from tests.judge_server import FakeJudgeServer

BRIGHT = png_bytes(color=(230, 230, 230))
DARK = png_bytes(color=(40, 40, 40))


@pytest.fixture(scope="module")
def server():
    with FakeJudgeServer(slow_seconds=0.6) as running:
        yield running


def client_for(server, model: str, **params) -> ChatClient:
    target = Target(base_url=server.base_url, model=model, api_key_env="", researcher_url=False,
                    max_concurrency=8, requests_per_minute=0.0, endpoint="fake")
    config = ClientConfig.from_target(target, {"backoff_seconds": 0.01, "timeout_seconds": 5, **params}, env={})
    return ChatClient(config)


def t2i(output=BRIGHT, **fields) -> ItemInputs:
    return ItemInputs(task_type="text_to_image", prompt="a grey square", output=output, **fields)


def test_viescore_turns_good_replies_into_min_sub_scores_and_a_geometric_mean(server):
    sc, pq, overall = evaluate_viescore(t2i(), client_for(server, "fake-good"), {})
    assert [d.parse_status for d in (sc, pq, overall)] == ["ok", "ok", "ok"]
    assert sc.value == pytest.approx(0.9)  # one sub-score, brightness 230/255 → 9/10
    assert [s["name"] for s in pq.sub_scores] == ["naturalness", "artifacts"]
    assert pq.value == pytest.approx(min(s["value"] for s in pq.sub_scores) / 10)
    assert overall.value == pytest.approx((sc.value * pq.value) ** 0.5)
    assert sc.prompt_tokens == 100 and sc.latency_ms is not None


def test_multi_concept_sc_asks_for_three_sub_scores_with_both_concept_images(server):
    server.reset()
    inputs = ItemInputs(
        task_type="multi_concept_composition",
        prompt="[V1] dog next to [V2] cat",
        output=BRIGHT,
        conditions={"subject_1": DARK, "subject_2": DARK},
    )
    sc, _pq, _o = evaluate_viescore(inputs, client_for(server, "fake-good"), {})
    assert [s["name"] for s in sc.sub_scores] == ["prompt", "concept_1", "concept_2"]
    sc_request = server.bodies[0]["messages"][0]["content"]
    assert sum(part["type"] == "image_url" for part in sc_request) == 3


def test_concatenate_option_sends_one_strip_instead_of_several_images(server):
    server.reset()
    inputs = ItemInputs(task_type="text_guided_editing", prompt="make it bright", output=BRIGHT, conditions={"source": DARK})
    evaluate_viescore(inputs, client_for(server, "fake-good"), {"concat_images": True})
    sc_request = server.bodies[0]["messages"][0]["content"]
    assert sum(part["type"] == "image_url" for part in sc_request) == 1
    assert "side by side" in sc_request[0]["text"]


def test_an_editing_item_without_its_source_image_is_a_clear_error(server):
    with pytest.raises(ValueError, match="source"):
        evaluate_viescore(ItemInputs(task_type="text_guided_editing", prompt="x", output=BRIGHT), client_for(server, "fake-good"), {})


def test_malformed_replies_are_failed_never_a_score(server):
    scores = evaluate_viescore(t2i(), client_for(server, "fake-malformed"), {})
    assert [(d.parse_status, d.value) for d in scores] == [("failed", None)] * 3
    assert "quite something" in scores[0].raw_response.lower()


def test_refusals_are_recorded_as_refused(server):
    scores = evaluate_evalmi(t2i(question="Is it grey?"), client_for(server, "fake-refuse"), {})
    assert {(d.dimension, d.parse_status, d.value) for d in scores} == {
        ("perception", "refused", None),
        ("correspondence", "refused", None),
        ("qa", "refused", None),
    }


def test_a_429_is_retried_with_backoff_and_then_succeeds(server):
    server.reset()
    client = client_for(server, "fake-429-once")
    sc, pq, _ = evaluate_viescore(t2i(), client, {})
    assert sc.parse_status == pq.parse_status == "ok"
    assert server.requests == 4  # two requests, each refused once


def test_persistent_429s_fail_after_the_retry_budget(server):
    server.reset()
    client = client_for(server, "fake-429", max_retries=2)
    with pytest.raises(ChatError, match="HTTP 429") as info:
        client.chat("hello")
    assert server.requests == 3 and info.value.attempts == 3


def test_server_errors_are_retried_too(server):
    server.reset()
    scores = evaluate_evalmi(t2i(), client_for(server, "fake-500", max_retries=1), {})
    assert all(d.parse_status == "failed" for d in scores)
    assert server.requests == 4  # two dimensions, two attempts each


def test_slow_replies_time_out_and_count_as_failed(server):
    client = client_for(server, "fake-slow", timeout_seconds=0.2, max_retries=0)
    sc, _pq, overall = evaluate_viescore(t2i(), client, {})
    assert sc.parse_status == "failed" and "timed out" in sc.rationale
    assert overall.value is None


def test_evalmi_reads_0_to_100_scores_and_yes_no(server):
    scores = {d.dimension: d.value for d in evaluate_evalmi(t2i(question="Is it grey?"), client_for(server, "fake-good"), {})}
    assert scores == {"perception": 90.0, "correspondence": 90.0, "qa": 1.0}


def test_gpt4v_single_grading_adds_the_three_parts(server):
    dims = {d.dimension: d for d in evaluate_gpt4v_single(t2i(), client_for(server, "fake-good"), {})}
    assert dims["relevance"].value + dims["clarity"].value + dims["object_accuracy"].value == dims["total"].value


def test_gpt4v_pairwise_asks_both_orders_and_maps_them_back(server):
    outcome = evaluate_gpt4v_pair("bright", BRIGHT, DARK, client_for(server, "fake-good"), {})
    assert (outcome.first, outcome.second, outcome.final, outcome.status) == ("A", "A", "A", "ok")


@pytest.mark.parametrize(
    ("first", "second", "final"),
    [("A", "A", "A"), ("A", "tie", "A"), ("tie", "B", "B"), ("B", "B", "B"), ("tie", "tie", "tie"), ("A", "B", "tie"), ("B", "A", "tie")],
)
def test_the_dual_sided_rule_follows_the_paper(first, second, final):
    assert dual_sided(first, second) == final


def test_vice_keeps_a_transcript_with_bounded_refinement_rounds(server):
    [sc] = evaluate_vice(t2i(), client_for(server, "fake-good"), {"vice_questions": 4, "vice_max_rounds": 2})
    assert sc.parse_status == "ok" and sc.value == pytest.approx(0.9)
    rounds = sc.details["rounds"]
    assert [r["kind"] for r in rounds] == ["blind", "refinement", "refinement"]  # the fake always wants more
    assert len(rounds[0]["questions"]) == 4 and len(rounds[0]["answers"]) == 4
    assert sc.details["concepts"] == ["a shape", "its colour"]


def test_the_key_comes_from_the_variable_the_operator_endpoint_names():
    endpoint = Endpoint(name="default", base_url="http://h/v1", models=("m", "m2"), api_key_env="JUDGE_API_KEY",
                        requests_per_minute=60)
    target = resolve_target({"model": "m2", "requests_per_minute": 600}, {"default": endpoint}, allow_researcher_urls=False)
    config = ClientConfig.from_target(target, {"requests_per_minute": 600}, env={"JUDGE_API_KEY": "k", "OTHER": "o"})
    assert (config.base_url, config.model, config.api_key) == ("http://h/v1", "m2", "k")
    assert config.requests_per_minute == 60  # the stricter of the endpoint's limit and the judge's
    assert "'k'" not in repr(config)


def test_the_rate_limiter_spaces_request_starts():
    now = [0.0]
    slept = []
    limiter = RateLimiter(120, clock=lambda: now[0], sleep=slept.append)
    for _ in range(3):
        limiter.wait()
    assert slept == [0.5, 1.0]


def test_pairwise_agreement_counts_matches_and_position_bias():
    from analysis.science.judges.pairwise_agreement import majority_label, pairwise_agreement, single_label

    assert majority_label(["A", "A", "B"]) == "A"
    assert majority_label(["A", "B"]) == "tie" and majority_label(["both_bad", "tie", "A"]) == "tie"
    assert majority_label([]) is None
    assert single_label(80, 70) == "A" and single_label(5, 5) == "tie" and single_label(None, 1) is None
    rows = [
        {"human": "A", "final": "A", "first": "A", "second": "A", "single": "A"},
        {"human": "B", "final": "tie", "first": "A", "second": "B", "single": "B"},  # picked the first shown twice
        {"human": "A", "final": "tie", "first": "B", "second": "A", "single": "tie"},  # picked the second shown twice
        {"human": None, "final": "B", "first": "B", "second": "tie", "single": "B"},
    ]
    result = pairwise_agreement(rows)
    assert (result.n_pair, result.pair_vs_human) == (3, 1 / 3)
    assert (result.n_single, result.single_vs_human) == (3, 2 / 3)
    assert result.single_vs_pair == 3 / 4
    assert (result.consistency, result.biased_first, result.biased_second) == (0.25, 0.25, 0.25)
    assert result.chance == pytest.approx(0.333, abs=1e-3)


def editing(output, source, **fields) -> ItemInputs:
    return ItemInputs(task_type="text_guided_editing", prompt="make the square white", output=output,
                      conditions={"source": source}, **fields)


def test_vice_on_an_edit_describes_the_source_plans_remain_remove_add_and_asks_both_images(server):
    server.reset()
    [sc] = evaluate_vice(editing(BRIGHT, DARK), client_for(server, "fake-good"), {"vice_questions": 3, "vice_max_rounds": 1})
    assert sc.parse_status == "ok", sc.rationale
    details = sc.details
    assert details["mode"] == "editing" and "brightness 2" in details["source_description"]
    assert (details["remain"], details["remove"], details["add"]) == (["the square's shape"], ["the old colour"], ["the new colour"])
    first = details["rounds"][0]
    assert first["sets"] == ["remain", "add", "remove"]
    # the same questions answered on the source (dark) and on the edited image (bright)
    assert all("brightness 2" in a for a in first["source_answers"]) and all("brightness 9" in a for a in first["answers"])
    assert [r["kind"] for r in details["rounds"]] == ["planned", "refinement"]  # bounded by vice_max_rounds
    # fake scorer: answers moved 7 steps → edit 10, preserve 3 → SC = min / 10
    assert [s["value"] for s in sc.sub_scores] == [10, 3] and sc.value == pytest.approx(0.3)
    # what each step saw: the description request carries the source only; the plan is text with the
    # instruction and the description (the planning LLM is blind)
    bodies = server.bodies
    describe, plan = bodies[0]["messages"][-1]["content"], bodies[1]["messages"][-1]["content"]
    assert sum(p["type"] == "image_url" for p in describe) == 1
    plan_text = plan if isinstance(plan, str) else " ".join(p.get("text", "") for p in plan)
    assert "make the square white" in plan_text and "brightness 2" in plan_text and "image_url" not in str(plan)
    assert len(bodies) == 1 + 1 + 2 + 1 + 2 + 1  # describe, plan, 2 answers, refine, 2 answers, score


def test_vice_on_an_edit_that_changed_nothing_scores_zero_for_the_edit(server):
    [sc] = evaluate_vice(editing(DARK, DARK), client_for(server, "fake-good"), {"vice_questions": 3, "vice_max_rounds": 0})
    assert [s["value"] for s in sc.sub_scores] == [0, 10] and sc.value == 0.0


def test_vice_on_an_edit_records_a_refusal_with_the_transcript_so_far(server):
    [sc] = evaluate_vice(editing(BRIGHT, DARK), client_for(server, "fake-refuse"), {"vice_questions": 3})
    assert sc.parse_status == "refused" and sc.value is None and sc.details["mode"] == "editing"


def test_a_retry_after_header_that_is_not_ascii_digits_is_a_429_like_any_other(server):
    client = client_for(server, "fake-429-odd-retry", max_retries=1)
    with pytest.raises(ChatError, match="HTTP 429"):  # not a ValueError that would fail the whole run
        client.chat("hello")
