"""The API's JSON parser: bounded in size and depth, and strict about what the database can store.

DRF's own ``JSONParser`` reads the request stream past Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE``,
lets Python's decoder recurse until ``RecursionError`` (a 500, not a 400) on ``[[[[…]]]]``, and
accepts strings PostgreSQL refuses to store (NUL, lone surrogates) and numbers it cannot hold in
JSON (``1e999`` becomes infinity). Each of those is a 400 here, naming what is wrong, before any
view sees the data.
"""

from __future__ import annotations

import json
import math
import re

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_BYTES = 1_000_000  # API bodies are small documents; image bundles come as multipart uploads
MAX_DEPTH = 32
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in ``text`` (brackets inside strings do not count).

    Works on the raw text so a hostile document is measured without being parsed (parsing it is
    what recurses). Malformed text gets some number; the decoder rejects it afterwards.
    """
    deepest = depth = 0
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if match.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _refuse_unstorable(value, where: str = "body") -> None:
    """ParseError for a string with NUL or a lone surrogate, or a number that is not finite."""
    if isinstance(value, str):
        if _UNSTORABLE.search(value):
            raise ParseError(f"JSON parse error - {where}: text may not contain NUL characters or lone surrogates")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ParseError(f"JSON parse error - {where}: numbers must be finite")
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_unstorable(key, f"{where} (a key)")
            _refuse_unstorable(item, f"{where}.{key}" if not _UNSTORABLE.search(key) else where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_unstorable(item, f"{where}[{index}]")


def _no_constants(name: str):
    raise ValueError(f"{name} is not valid JSON")


class BoundedJSONParser(JSONParser):
    """``JSONParser`` that refuses with 400: bodies over ``MAX_BYTES``, nesting deeper than
    ``MAX_DEPTH``, NaN/Infinity and overflowing numbers, NUL characters and lone surrogates."""

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        raw = stream.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise ParseError(f"JSON parse error - the body is larger than {MAX_BYTES} bytes")
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            raise ParseError(f"JSON parse error - the body is not valid {encoding}") from None
        if json_depth(text) > MAX_DEPTH:
            raise ParseError(f"JSON parse error - arrays and objects nest deeper than {MAX_DEPTH} levels")
        try:
            data = json.loads(text, parse_constant=_no_constants)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        _refuse_unstorable(data)
        return data
