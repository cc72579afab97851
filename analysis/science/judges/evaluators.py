"""What each MLLM judge asks about one item, and how its replies become scores. No Django.

An evaluator takes :class:`ItemInputs` (texts and image bytes of one study item) and a
:class:`~analysis.science.judges.client.ChatClient`, and returns one :class:`DimensionScore` per
dimension. A reply that is a refusal gives ``parse_status="refused"``; a failed call or an
unparseable reply gives ``"failed"``; in both cases ``value`` is ``None`` — never a made-up
score. Derived dimensions (VIEScore's O) are ``None`` when an input dimension is.

Scales stored in ``value``:
- VIEScore SC, PQ, O: 0–1 (sub-scores 0–10 divided by 10; SC = min, PQ = min, O = √(SC·PQ)).
- GPT-4V single: relevance 0–40, clarity 0–30, object_accuracy 0–30, total 0–100.
- ViCE SC: 0–1 (the LLM's 0–10 score / 10; editing: min(edit, preserve) / 10).
- EvalMi: perception 0–100, correspondence 0–100, qa 1 (yes) / 0 (no).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from analysis.science.judges import prompts
from analysis.science.protocols.imagenhub import overall as overall_score
from analysis.science.judges.client import ChatClient, ChatError, ChatReply, image_part, text_part
from analysis.science.judges.images import concat_horizontal, data_url
from analysis.science.judges.parsing import (
    Refused,
    Unparseable,
    check_refusal,
    extract_json,
    parse_final_answer,
    parse_points,
    parse_score_list,
    parse_single_number,
    parse_yes_no,
)

OK, REFUSED, FAILED = "ok", "refused", "failed"


@dataclass
class ItemInputs:
    """One item as a judge sees it. ``conditions`` maps a role (source, mask, control,
    subject_1, subject_2) to that image's bytes; ``tokens`` maps a subject role to its token."""

    task_type: str
    prompt: str
    output: bytes
    conditions: dict[str, bytes] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    question: str = ""

    def text_fingerprint(self) -> str:
        blob = json.dumps(
            {"task": self.task_type, "prompt": self.prompt, "question": self.question, "tokens": self.tokens},
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class DimensionScore:
    dimension: str
    value: float | None
    parse_status: str = OK
    sub_scores: list = field(default_factory=list)
    rationale: str = ""
    raw_response: str = ""
    latency_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    details: dict = field(default_factory=dict)


@dataclass
class Call:
    """The outcome of one request: the reply, or why there is none."""

    reply: ChatReply | None
    status: str
    error: str = ""

    @property
    def text(self) -> str:
        return self.reply.text if self.reply else ""


def _call(client: ChatClient, content, *, system: str | None = None, model: str | None = None) -> Call:
    try:
        reply = client.chat(content, system=system, model=model)
    except ChatError as exc:
        return Call(None, FAILED, str(exc))
    try:
        check_refusal(reply.text, finish_reason=reply.finish_reason, refusal=reply.refusal)
    except Refused as exc:
        return Call(reply, REFUSED, str(exc))
    return Call(reply, OK)


def _usage(calls: list[Call]) -> dict:
    replies = [c.reply for c in calls if c.reply]
    def total(name):
        values = [getattr(r, name) for r in replies if getattr(r, name) is not None]
        return sum(values) if values else None
    return {
        "latency_ms": sum(r.latency_ms for r in replies) if replies else None,
        "prompt_tokens": total("prompt_tokens"),
        "completion_tokens": total("completion_tokens"),
    }


def _not_ok(dimension: str, call: Call, **extra) -> DimensionScore:
    return DimensionScore(
        dimension, None, call.status, rationale=call.error, raw_response=call.text, **_usage([call]), **extra
    )


def _images(blobs: list[bytes], params: dict) -> list[dict]:
    side = int(params.get("max_image_side", 768))
    if params.get("concat_images") and len(blobs) > 1:
        blobs = [concat_horizontal(blobs)]
    return [image_part(data_url(b, max_side=side)) for b in blobs]


# ------------------------------------------------------------------------------- VIEScore

def viescore_sc_request(inputs: ItemInputs, params: dict) -> tuple[str, list[bytes], list[str]]:
    """(prompt text, images in order, sub-score names) for the SC request of the item's task.

    Unknown task types (e.g. EvalMi tags) are judged as text-to-image.
    """
    template, roles, names = prompts.VIESCORE_SC.get(inputs.task_type, prompts.VIESCORE_SC["text_to_image"])
    missing = [role for role in roles if role not in inputs.conditions]
    if missing:
        raise ValueError(f"{inputs.task_type} needs condition image(s): {', '.join(missing)}")
    blobs = [inputs.conditions[role] for role in roles] + [inputs.output]
    subject = inputs.tokens.get("subject_1") or inputs.prompt
    text = template.format(
        prompt=inputs.prompt,
        subject=subject,
        images_intro=prompts.images_intro(len(blobs), concatenated=bool(params.get("concat_images"))),
    )
    return text, blobs, names


def _viescore_part(client, dimension: str, text: str, blobs: list[bytes], names: list[str], params: dict) -> DimensionScore:
    call = _call(client, [text_part(prompts.VIESCORE_CONTEXT + "\n\n" + text), *_images(blobs, params)])
    if call.status != OK:
        return _not_ok(dimension, call)
    try:
        scores, reasoning = parse_score_list(call.text, count=len(names))
    except Unparseable as exc:
        return DimensionScore(dimension, None, FAILED, rationale=str(exc), raw_response=call.text, **_usage([call]))
    return DimensionScore(
        dimension,
        min(scores) / 10.0,
        sub_scores=[{"name": n, "value": s} for n, s in zip(names, scores)],
        rationale=reasoning,
        raw_response=call.text,
        **_usage([call]),
    )


def evaluate_viescore(inputs: ItemInputs, client: ChatClient, params: dict) -> list[DimensionScore]:
    text, blobs, names = viescore_sc_request(inputs, params)
    sc = _viescore_part(client, "SC", text, blobs, names, params)
    pq = _viescore_part(client, "PQ", prompts.VIESCORE_PQ, [inputs.output], prompts.VIESCORE_PQ_NAMES, params)
    if sc.value is not None and pq.value is not None:
        overall = DimensionScore("O", float(overall_score(sc.value, pq.value)), rationale="O = √(SC · PQ)")
    else:
        bad = sc if sc.value is None else pq
        overall = DimensionScore("O", None, bad.parse_status, rationale=f"{bad.dimension} has no score")
    return [sc, pq, overall]


# -------------------------------------------------------------------- GPT-4V evaluator

GPT4V_PARTS = [("relevance", "Relevance", 40), ("clarity", "Visual Clarity", 30), ("object_accuracy", "Object Accuracy", 30)]


def evaluate_gpt4v_single(inputs: ItemInputs, client: ChatClient, params: dict) -> list[DimensionScore]:
    """Single-answer grading: relevance (0–40), clarity (0–30), object accuracy (0–30), total (0–100).

    ``total`` is the sum of the three parts (the model's own "Total Score" line is kept in
    sub_scores but not trusted over the parts it should add up).
    """
    text = prompts.GPT4V_SINGLE.format(prompt=inputs.prompt)
    call = _call(client, [text_part(text), *_images([inputs.output], params)])
    dims = [name for name, _, _ in GPT4V_PARTS] + ["total"]
    if call.status != OK:
        return [_not_ok(d, call) if i == 0 else DimensionScore(d, None, call.status, rationale=call.error) for i, d in enumerate(dims)]
    try:
        parts = {name: parse_points(call.text, label, maximum) for name, label, maximum in GPT4V_PARTS}
    except Unparseable as exc:
        first = DimensionScore(dims[0], None, FAILED, rationale=str(exc), raw_response=call.text, **_usage([call]))
        return [first] + [DimensionScore(d, None, FAILED, rationale=str(exc)) for d in dims[1:]]
    try:
        stated = parse_points(call.text, "Total Score", 100)
    except Unparseable:
        stated = None
    results = [
        DimensionScore(name, value, rationale=call.text, raw_response=call.text if i == 0 else "", **(_usage([call]) if i == 0 else {}))
        for i, (name, value) in enumerate(parts.items())
    ]
    results.append(
        DimensionScore(
            "total",
            sum(parts.values()),
            sub_scores=[{"name": k, "value": v} for k, v in parts.items()] + [{"name": "stated_total", "value": stated}],
            rationale=call.text,
        )
    )
    return results


@dataclass
class PairwiseOutcome:
    """Both orders of one comparison: ``first`` shows A then B, ``second`` shows B then A.

    Choices are mapped back to the comparison's labels: "A", "B" or "tie"; None when refused or
    failed. ``final`` follows the dual-sided rule of seed 002 (see :func:`dual_sided`).
    """

    first: str | None
    second: str | None
    final: str | None
    status: str
    rationale_first: str = ""
    rationale_second: str = ""
    latency_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def dual_sided(first: str, second: str) -> str:
    """Seed 002: A if A twice or A + tie; B if B twice or B + tie; tie if tie twice or A + B."""
    pair = {first, second}
    if pair == {"A"} or pair == {"A", "tie"}:
        return "A"
    if pair == {"B"} or pair == {"B", "tie"}:
        return "B"
    return "tie"


def evaluate_gpt4v_pair(prompt: str, image_a: bytes, image_b: bytes, client: ChatClient, params: dict) -> PairwiseOutcome:
    text = prompts.GPT4V_PAIRWISE.format(prompt=prompt)
    as_label = [{"image 0": "A", "image 1": "B", "tie": "tie"}, {"image 0": "B", "image 1": "A", "tie": "tie"}]
    calls, choices, notes = [], [], []
    for order, blobs in enumerate(([image_a, image_b], [image_b, image_a])):
        call = _call(client, [text_part(text), *_images(blobs, params)])
        calls.append(call)
        if call.status != OK:
            choices.append(None)
            notes.append(call.error or call.text)
            continue
        try:
            choices.append(as_label[order][parse_final_answer(call.text)])
            notes.append(call.text)
        except Unparseable as exc:
            calls[-1] = Call(call.reply, FAILED, str(exc))
            choices.append(None)
            notes.append(f"{exc}\n\n{call.text}")
    statuses = {c.status for c in calls}
    status = OK if statuses == {OK} else (REFUSED if REFUSED in statuses else FAILED)
    final = dual_sided(*choices) if status == OK else None
    return PairwiseOutcome(choices[0], choices[1], final, status, notes[0], notes[1], **_usage(calls))


# ------------------------------------------------------------------------------------ ViCE

def _format_questions(questions: list[str]) -> str:
    return "\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1))


def _format_transcript(rounds: list[dict]) -> str:
    lines = []
    for r in rounds:
        for q, a in zip(r["questions"], r["answers"]):
            lines.append(f"Q: {q}\nA: {a}")
    return "\n".join(lines)


def _string_list(data: dict, key: str, what: str) -> list[str]:
    value = data.get(key)
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise Unparseable(f"{what}: expected a list under {key!r}")
    return [str(v).strip() for v in value if str(v).strip()]


def evaluate_vice(inputs: ItemInputs, client: ChatClient, params: dict) -> list[DimensionScore]:
    """ViCE: concepts and N blind questions (LLM) → answers on the image (MLLM) → at most
    ``vice_max_rounds`` refinement rounds → a 0–10 score from the transcript (LLM).

    Items with a source image (editing tasks) go through :func:`evaluate_vice_editing` instead.
    The whole transcript is kept in ``details``; any refused or failed step ends the item with
    that status and no score.
    """
    if "source" in inputs.conditions:
        return evaluate_vice_editing(inputs, client, params)
    n = int(params.get("vice_questions", 15))
    max_rounds = int(params.get("vice_max_rounds", 2))
    llm = params.get("llm_model") or None
    calls: list[Call] = []
    transcript: dict = {"concepts": [], "rounds": [], "refinement_rounds": 0}

    def stop(call: Call, note: str = "") -> list[DimensionScore]:
        status = call.status if call.status != OK else FAILED
        return [
            DimensionScore(
                "SC", None, status, rationale=note or call.error, raw_response=call.text, details=transcript, **_usage(calls)
            )
        ]

    def step(content, *, model=None) -> Call:
        call = _call(client, content, system=prompts.VICE_SYSTEM, model=model)
        calls.append(call)
        return call

    plan = step(prompts.VICE_PLAN.format(prompt=inputs.prompt, n=n), model=llm)
    if plan.status != OK:
        return stop(plan)
    try:
        data = extract_json(plan.text)
        transcript["concepts"] = _string_list(data, "concepts", "visual concepts")
        questions = _string_list(data, "questions", "blind questions")[:n]
        if not questions:
            raise Unparseable("no blind questions")
    except Unparseable as exc:
        return stop(plan, str(exc))
    side = int(params.get("max_image_side", 768))
    image = image_part(data_url(inputs.output, max_side=side))
    kind = "blind"
    for round_index in range(max_rounds + 1):
        answer = step([text_part(prompts.VICE_ANSWER.format(questions=_format_questions(questions))), image])
        if answer.status != OK:
            return stop(answer)
        try:
            answers = _string_list(extract_json(answer.text), "answers", "answers")
            if len(answers) != len(questions):
                raise Unparseable(f"{len(answers)} answers for {len(questions)} questions")
        except Unparseable as exc:
            return stop(answer, str(exc))
        transcript["rounds"].append({"kind": kind, "questions": questions, "answers": answers})
        if round_index == max_rounds:
            break
        refine = step(
            prompts.VICE_REFINE.format(
                prompt=inputs.prompt,
                concepts="; ".join(transcript["concepts"]),
                transcript=_format_transcript(transcript["rounds"]),
                n=max(1, n // 3),
            ),
            model=llm,
        )
        if refine.status != OK:
            return stop(refine)
        try:
            data = extract_json(refine.text)
        except Unparseable as exc:
            return stop(refine, str(exc))
        follow_up = data.get("questions") if isinstance(data.get("questions"), list) else []
        follow_up = [str(q).strip() for q in follow_up if str(q).strip()][: max(1, n // 3)]
        if not data.get("need_more") or not follow_up:
            break
        questions, kind = follow_up, "refinement"
        transcript["refinement_rounds"] += 1
    score_call = step(
        prompts.VICE_SCORE.format(
            prompt=inputs.prompt,
            concepts="; ".join(transcript["concepts"]),
            transcript=_format_transcript(transcript["rounds"]),
        ),
        model=llm,
    )
    if score_call.status != OK:
        return stop(score_call)
    try:
        data = extract_json(score_call.text)
        score = parse_single_number(json.dumps({"score": data.get("score")}), lo=0, hi=10)
    except Unparseable as exc:
        return stop(score_call, str(exc))
    transcript["score"] = score
    return [
        DimensionScore(
            "SC",
            score / 10.0,
            sub_scores=[{"name": "vice_score", "value": score}],
            rationale=str(data.get("reasoning") or ""),
            raw_response=score_call.text,
            details=transcript,
            **_usage(calls),
        )
    ]


EDIT_SETS = ("remain", "remove", "add")


def _tagged_questions(data: dict, key: str, what: str) -> tuple[list[str], list[str]]:
    """(questions, sets) from ``[{"set": ..., "question": ...}]``; a bare string or an unknown
    set is kept with set "other" (asked, shown to the scorer, never dropped silently)."""
    value = data.get(key)
    if not isinstance(value, list):
        raise Unparseable(f"{what}: expected a list under {key!r}")
    questions, sets = [], []
    for entry in value:
        if isinstance(entry, dict):
            text, tag = str(entry.get("question") or "").strip(), str(entry.get("set") or "").strip().lower()
        else:
            text, tag = str(entry).strip(), ""
        if text:
            questions.append(text)
            sets.append(tag if tag in EDIT_SETS else "other")
    return questions, sets


def _format_edit_transcript(rounds: list[dict]) -> str:
    lines = []
    for r in rounds:
        for tag, q, before, after in zip(r["sets"], r["questions"], r["source_answers"], r["answers"]):
            lines.append(f"[{tag}] Q: {q}\n  original: {before}\n  edited: {after}")
    return "\n".join(lines)


def evaluate_vice_editing(inputs: ItemInputs, client: ChatClient, params: dict) -> list[DimensionScore]:
    """ViCE for editing (seed 001 §6): V = V_remain − V_remove + V_add.

    1. The MLLM describes the source image (the planning LLM never sees images).
    2. The LLM splits the instruction's concepts into remain / remove / add and writes N
       questions tagged with their set.
    3. The MLLM answers every question on the source and, separately, on the edited image.
    4. At most ``vice_max_rounds`` refinement rounds (tagged follow-up questions, both images).
    5. The LLM scores the edit (add/remove achieved) and the preservation (remain unchanged),
       0–10 each. SC = min(edit, preserve) / 10, as VIEScore combines editing success and
       overediting. Sub-scores and the full transcript (both answers per question) are stored.
    """
    n = int(params.get("vice_questions", 15))
    max_rounds = int(params.get("vice_max_rounds", 2))
    llm = params.get("llm_model") or None
    side = int(params.get("max_image_side", 768))
    calls: list[Call] = []
    transcript: dict = {"mode": "editing", "source_description": "", "remain": [], "remove": [], "add": [],
                        "rounds": [], "refinement_rounds": 0}

    def stop(call: Call, note: str = "") -> list[DimensionScore]:
        status = call.status if call.status != OK else FAILED
        return [DimensionScore("SC", None, status, rationale=note or call.error, raw_response=call.text,
                               details=transcript, **_usage(calls))]

    def step(content, *, model=None) -> Call:
        call = _call(client, content, system=prompts.VICE_SYSTEM, model=model)
        calls.append(call)
        return call

    source_image = image_part(data_url(inputs.conditions["source"], max_side=side))
    edited_image = image_part(data_url(inputs.output, max_side=side))
    described = step([text_part(prompts.VICE_EDIT_DESCRIBE), source_image])
    if described.status != OK:
        return stop(described)
    transcript["source_description"] = described.text.strip()[:2000]
    if not transcript["source_description"]:
        return stop(described, "empty description of the source image")

    plan = step(prompts.VICE_EDIT_PLAN.format(prompt=inputs.prompt, description=transcript["source_description"], n=n),
                model=llm)
    if plan.status != OK:
        return stop(plan)
    try:
        data = extract_json(plan.text)
        for key in EDIT_SETS:
            transcript[key] = _string_list(data, key, f"{key} concepts") if data.get(key) is not None else []
        questions, sets = _tagged_questions(data, "questions", "tagged questions")
        questions, sets = questions[:n], sets[:n]
        if not questions:
            raise Unparseable("no questions")
    except Unparseable as exc:
        return stop(plan, str(exc))

    def answers_on(image) -> tuple[Call, list[str] | None, str]:
        call = step([text_part(prompts.VICE_ANSWER.format(questions=_format_questions(questions))), image])
        if call.status != OK:
            return call, None, ""
        try:
            got = _string_list(extract_json(call.text), "answers", "answers")
            if len(got) != len(questions):
                raise Unparseable(f"{len(got)} answers for {len(questions)} questions")
        except Unparseable as exc:
            return call, None, str(exc)
        return call, got, ""

    kind = "planned"
    for round_index in range(max_rounds + 1):
        before_call, before, why = answers_on(source_image)
        if before is None:
            return stop(before_call, why)
        after_call, after, why = answers_on(edited_image)
        if after is None:
            return stop(after_call, why)
        transcript["rounds"].append({"kind": kind, "questions": questions, "sets": sets,
                                     "source_answers": before, "answers": after})
        if round_index == max_rounds:
            break
        refine = step(prompts.VICE_EDIT_REFINE.format(
            prompt=inputs.prompt, remain="; ".join(transcript["remain"]), remove="; ".join(transcript["remove"]),
            add="; ".join(transcript["add"]), transcript=_format_edit_transcript(transcript["rounds"]),
            n=max(1, n // 3)), model=llm)
        if refine.status != OK:
            return stop(refine)
        try:
            data = extract_json(refine.text)
            follow_up, follow_sets = _tagged_questions(data, "questions", "follow-up questions") \
                if isinstance(data.get("questions"), list) else ([], [])
        except Unparseable as exc:
            return stop(refine, str(exc))
        if not data.get("need_more") or not follow_up:
            break
        questions, sets = follow_up[: max(1, n // 3)], follow_sets[: max(1, n // 3)]
        kind = "refinement"
        transcript["refinement_rounds"] += 1

    score_call = step(prompts.VICE_EDIT_SCORE.format(
        prompt=inputs.prompt, remain="; ".join(transcript["remain"]), remove="; ".join(transcript["remove"]),
        add="; ".join(transcript["add"]), transcript=_format_edit_transcript(transcript["rounds"])), model=llm)
    if score_call.status != OK:
        return stop(score_call)
    try:
        data = extract_json(score_call.text)
        edit = parse_single_number(json.dumps({"score": data.get("edit_score")}), lo=0, hi=10)
        preserve = parse_single_number(json.dumps({"score": data.get("preserve_score")}), lo=0, hi=10)
    except Unparseable as exc:
        return stop(score_call, str(exc))
    transcript["edit_score"], transcript["preserve_score"] = edit, preserve
    return [
        DimensionScore(
            "SC",
            min(edit, preserve) / 10.0,
            sub_scores=[{"name": "edit", "value": edit}, {"name": "preserve", "value": preserve}],
            rationale=str(data.get("reasoning") or ""),
            raw_response=score_call.text,
            details=transcript,
            **_usage(calls),
        )
    ]


# ---------------------------------------------------------------------------------- EvalMi

def evaluate_evalmi(inputs: ItemInputs, client: ChatClient, params: dict) -> list[DimensionScore]:
    """Perception (0–100, image only), correspondence (0–100) and, when the item has a task
    question, qa (1 = yes, 0 = no)."""
    image = _images([inputs.output], params)
    results = []
    asks = [
        ("perception", prompts.EVALMI_PERCEPTION, lambda t: parse_single_number(t, lo=0, hi=100)),
        ("correspondence", prompts.EVALMI_CORRESPONDENCE.format(prompt=inputs.prompt), lambda t: parse_single_number(t, lo=0, hi=100)),
    ]
    if inputs.question:
        asks.append(("qa", prompts.EVALMI_QUESTION.format(question=inputs.question.strip()), lambda t: 1.0 if parse_yes_no(t) == "yes" else 0.0))
    for dimension, text, parse in asks:
        call = _call(client, [text_part(text), *image])
        if call.status != OK:
            results.append(_not_ok(dimension, call))
            continue
        try:
            value = parse(call.text)
        except Unparseable as exc:
            results.append(DimensionScore(dimension, None, FAILED, rationale=str(exc), raw_response=call.text, **_usage([call])))
            continue
        results.append(DimensionScore(dimension, value, rationale=call.text.strip()[:2000], raw_response=call.text, **_usage([call])))
    return results


# Judge kind → evaluator of one item. GPT-4V pairwise works on comparisons (see judge_services).
EVALUATORS = {
    "viescore": evaluate_viescore,
    "gpt4v": evaluate_gpt4v_single,
    "vice": evaluate_vice,
    "evalmi": evaluate_evalmi,
}
