"""Tolerant parsing of judge replies. Pure Python.

Models wrap JSON in code fences, add prose before it, use single quotes or trailing commas, or
answer in plain text. Parsers here try, in order: strict JSON, the first balanced ``{...}``
block, a lightly repaired block, then a regular expression for the specific field. When nothing
fits they raise :class:`Unparseable`; callers record the item as *failed* and never invent a
score. Refusals ("I'm sorry, I can't help with that") are detected first and raise
:class:`Refused`.
"""

from __future__ import annotations

import json
import re


class Unparseable(ValueError):
    """The reply holds no usable answer; the message says what was expected."""


class Refused(ValueError):
    """The model declined to answer (refusal text, refusal field or content filter)."""


_REFUSAL_PATTERNS = [
    r"\bI(?:'m| am) (?:sorry|afraid)\b.{0,80}\b(?:can(?:'|no)?t|cannot|unable|not able)\b",
    r"\bI (?:can(?:'|no)?t|cannot|won't|will not|am unable to|am not able to) "
    r"(?:help|assist|comply|provide|evaluate|rate|do that|fulfil|fulfill|process|analy[sz]e)",
    r"\b(?:unable|not able) to (?:assist|help|evaluate|rate|comply) with (?:this|that)",
    r"\bas an AI(?: language model)?, I (?:can(?:'|no)?t|cannot|don't)",
]
_REFUSAL_RE = re.compile("|".join(_REFUSAL_PATTERNS), re.IGNORECASE | re.DOTALL)


def looks_like_refusal(text: str) -> bool:
    """True when the reply reads as a refusal and carries no score-like content.

    A reply that apologises but still gives a JSON score is an answer, not a refusal.
    """
    if not text or not text.strip():
        return False
    head = text.strip()[:400]
    if not _REFUSAL_RE.search(head):
        return False
    return _first_json_object(text) is None


def check_refusal(text: str, *, finish_reason: str | None = None, refusal: str | None = None) -> None:
    """Raise :class:`Refused` for an explicit refusal field, a content filter stop, or refusal text."""
    if refusal:
        raise Refused(refusal)
    if finish_reason == "content_filter":
        raise Refused("stopped by the provider's content filter")
    if looks_like_refusal(text):
        raise Refused(text.strip()[:300])


def _balanced_blocks(text: str, opener: str = "{", closer: str = "}"):
    """Yield substrings that start at ``opener`` and end at its matching ``closer``."""
    for start, char in enumerate(text):
        if char != opener:
            continue
        depth, in_string, escape = 0, False, False
        for end in range(start, len(text)):
            c = text[end]
            if in_string:
                if escape:
                    escape = False
                elif c == "\\":
                    escape = True
                elif c == '"':
                    in_string = False
            elif c == '"':
                in_string = True
            elif c == opener:
                depth += 1
            elif c == closer:
                depth -= 1
                if depth == 0:
                    yield text[start : end + 1]
                    break


def _repair(block: str) -> str:
    block = re.sub(r",\s*([}\]])", r"\1", block)  # trailing commas
    if '"' not in block and "'" in block:
        block = block.replace("'", '"')
    return block


def _first_json_object(text: str) -> dict | None:
    if not text:
        return None
    stripped = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip(), flags=re.IGNORECASE)
    for candidate in (stripped, *_balanced_blocks(stripped)):
        for attempt in (candidate, _repair(candidate)):
            try:
                value = json.loads(attempt)
            except (json.JSONDecodeError, TypeError):
                continue
            if isinstance(value, dict):
                return value
    return None


def extract_json(text: str) -> dict:
    """The first JSON object in the reply (fenced, embedded, or lightly malformed)."""
    value = _first_json_object(text)
    if value is None:
        raise Unparseable("no JSON object found in the reply")
    return value


def _as_float(value, *, lo: float, hi: float, what: str) -> float:
    if isinstance(value, bool):
        raise Unparseable(f"{what}: expected a number, got {value!r}")
    if isinstance(value, str):
        match = re.search(r"-?\d+(?:\.\d+)?", value)
        if not match:
            raise Unparseable(f"{what}: expected a number, got {value!r}")
        value = match.group()
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise Unparseable(f"{what}: expected a number, got {value!r}") from None
    if not lo <= number <= hi:
        raise Unparseable(f"{what}: {number:g} is outside {lo:g}–{hi:g}")
    return number


def parse_score_list(text: str, *, count: int, lo: float = 0, hi: float = 10) -> tuple[list[float], str]:
    """VIEScore replies: ``{"score": [...], "reasoning": "..."}`` → (scores, reasoning).

    Falls back to a ``score = [a, b]`` / ``"score": [a, b]`` pattern in free text. The list must
    have exactly ``count`` numbers in [lo, hi].
    """
    data = _first_json_object(text)
    reasoning = ""
    scores = None
    if data is not None:
        for key in ("score", "scores", "Score"):
            if key in data:
                scores = data[key]
                break
        reasoning = str(data.get("reasoning") or data.get("rationale") or "")
    if scores is None:
        match = re.search(r"score[s]?\"?\s*[:=]\s*\[([^\]]*)\]", text or "", re.IGNORECASE)
        if not match:
            raise Unparseable(f"expected a score list of {count} numbers")
        scores = [part for part in match.group(1).split(",") if part.strip()]
    if not isinstance(scores, list):
        scores = [scores]
    if len(scores) != count:
        raise Unparseable(f"expected {count} scores, got {len(scores)}")
    values = [_as_float(s, lo=lo, hi=hi, what="score") for s in scores]
    return values, reasoning or (text or "").strip()[:2000]


def parse_single_number(text: str, *, lo: float, hi: float) -> float:
    """A reply that should be "one score" (EvalMi): JSON {"score": n} or the first number in range.

    Numbers out of range make the reply unparseable rather than being clipped.
    """
    data = _first_json_object(text)
    if data is not None:
        for key in ("score", "rating", "value"):
            if key in data:
                return _as_float(data[key], lo=lo, hi=hi, what=key)
    numbers = re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", text or "")
    if not numbers:
        raise Unparseable(f"expected one score from {lo:g} to {hi:g}")
    return _as_float(numbers[0], lo=lo, hi=hi, what="score")


def parse_yes_no(text: str) -> str:
    """"yes" or "no" from a reply; both or neither as the leading word → Unparseable."""
    data = _first_json_object(text)
    if data is not None:
        for key in ("answer", "response"):
            if isinstance(data.get(key), str):
                text = data[key]
                break
    words = re.findall(r"[a-z]+", (text or "").lower())
    if words and words[0] in ("yes", "no"):
        return words[0]
    found = {w for w in words if w in ("yes", "no")}
    if len(found) == 1:
        return found.pop()
    raise Unparseable("expected a yes or no answer")


def parse_points(text: str, label: str, maximum: int) -> float:
    """"Relevance: 32/40" / "Relevance (0-40 points): ... Score: 32/40" → 32."""
    pattern = re.compile(re.escape(label) + r"[^\n]*?(?:\n[^\n]*?){0,6}?(\d+(?:\.\d+)?)\s*/\s*" + str(maximum), re.IGNORECASE)
    match = pattern.search(text or "")
    if not match:
        raise Unparseable(f"no '{label}: n/{maximum}' score found")
    return _as_float(match.group(1), lo=0, hi=maximum, what=label)


def parse_final_answer(text: str, *, options: tuple[str, ...] = ("image 0", "image 1", "tie")) -> str:
    """GPT-4V pairwise: the choice after "Final Answer:" (case-insensitive); last one wins."""
    matches = re.findall(r"final\s+answer\s*[:：]\s*\**\s*(image\s*[01]|tie)", text or "", re.IGNORECASE)
    if not matches:
        raise Unparseable("no 'Final Answer: image 0/image 1/Tie' found")
    choice = re.sub(r"\s+", " ", matches[-1].lower()).replace("image0", "image 0").replace("image1", "image 1")
    if choice not in options:
        raise Unparseable(f"unexpected final answer {choice!r}")
    return choice
