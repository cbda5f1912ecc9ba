"""Strict parsing of LLM answers: JSON only, never `eval`; anything else is a `ValueError`. Strict about
what is read, tolerant of how real models wrap it: a markdown fence, prose around it."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from typing import Any, Dict, List, Sequence

#: `{` positions tried when an answer is not JSON alone, so a long garbage answer stays cheap.
MAX_OBJECT_STARTS = 50

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[^\S\n]*\n?(.*?)```", re.DOTALL)
_ID = re.compile(r"^\s*(?:\[\s*([0-9]{1,9})\s*\]|([0-9]{1,9})\s*$)")  # "[3] text", " [ 3 ]", "3"


def parse_json_object(text: str) -> Dict[str, Any]:
    """The JSON object an LLM answered: the answer alone, then each markdown fence's content, read as JSON
    (a JSON value read so must be an object); else from the first `{` (of the first `MAX_OBJECT_STARTS`)
    that starts a JSON object, prose around it. Raises `ValueError`."""
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
    decoder = json.JSONDecoder()
    for match in itertools.islice(re.finditer("{", text), MAX_OBJECT_STARTS):
        with contextlib.suppress(json.JSONDecodeError, RecursionError):
            value, _end = decoder.raw_decode(text, match.start())
            if isinstance(value, dict):
                return value
    raise ValueError(f"no JSON object in the answer: {text!r:.200}")


def offered_ids(items: Sequence[Any], offered: int) -> List[int]:
    """The ids `n` that `items` name (as an int, not a bool, or a string `"[n] text"`, `"[n]"` or `"n"`),
    kept only if 1 <= n <= offered, deduplicated, in order."""
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
