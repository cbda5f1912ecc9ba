"""Strict parsing of LLM answers: JSON only, never `eval`; anything else is a `ValueError`.

Strict about what is read, tolerant of how real models wrap it: a markdown fence, prose around it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Sequence

#: `{` positions tried when an answer is not JSON alone, so a long garbage answer stays cheap.
MAX_OBJECT_STARTS = 50

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[^\S\n]*\n?(.*?)```", re.DOTALL)
_ID = re.compile(r"^\s*(?:\[\s*([0-9]{1,9})\s*\]|([0-9]{1,9})\s*$)")  # "[3] text", " [ 3 ]", "3"


def parse_json_object(text: str) -> Dict[str, Any]:
    """The JSON object an LLM answered: alone, in a markdown fence, or with prose around it.

    The answer alone, then each fence's content, is read as JSON; a JSON value read so must be an
    object. Otherwise the first `{` of the answer that starts a JSON object is read. Raises `ValueError`."""
    if not isinstance(text, str):
        raise ValueError(f"expected text, got {type(text).__name__}")
    for body in (text, *_FENCE.findall(text)):  # the answer alone, then each fence's content
        try:
            value = json.loads(body.strip())
        except (json.JSONDecodeError, RecursionError):
            continue
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, got {type(value).__name__}")
        return value
    decoder, start = json.JSONDecoder(), text.find("{")
    for _ in range(MAX_OBJECT_STARTS):
        if start < 0:
            break
        try:
            value, _end = decoder.raw_decode(text, start)
            if isinstance(value, dict):
                return value
        except (json.JSONDecodeError, RecursionError):
            pass
        start = text.find("{", start + 1)
    raise ValueError(f"no JSON object in the answer: {text!r:.200}")


def string_list(value: Dict[str, Any], key: str) -> List[str]:
    """The strings of the list `value[key]` (other items are dropped). Raises `ValueError` if it is not a list."""
    items = value.get(key)
    if not isinstance(items, list):
        raise ValueError(f"expected {key!r} to be a list, got {items!r:.200}")
    return [item for item in items if isinstance(item, str)]


def offered_ids(items: Sequence[Any], offered: int) -> List[int]:
    """The ids `n` that `items` name, kept only if 1 <= n <= offered, deduplicated, in order.

    An item names `n` as an int (not a bool), or as a string `"[n] text"`, `"[n]"` or `"n"`; other items
    name nothing."""
    ids: List[int] = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool):
            n = item
        elif isinstance(item, str) and (match := _ID.match(item)):
            n = int(match.group(1) or match.group(2))
        else:
            continue
        if 1 <= n <= offered and n not in ids:
            ids.append(n)
    return ids
