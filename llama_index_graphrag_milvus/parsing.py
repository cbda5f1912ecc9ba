"""Strict parsing of LLM answers: JSON only, never `eval`; anything else is a `ValueError`."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Sequence

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_LINE_ID = re.compile(r"^\s*\[\s*(\d{1,9})\s*\]")


def parse_json_object(text: str) -> Dict[str, Any]:
    """The JSON object an LLM answered, allowing a markdown fence around it. Raises `ValueError`."""
    if not isinstance(text, str):
        raise ValueError(f"expected text, got {type(text).__name__}")
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def string_list(value: Dict[str, Any], key: str) -> List[str]:
    """`value[key]` if it is a list of strings. Raises `ValueError`."""
    items = value.get(key)
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError(f"expected {key!r} to be a list of strings, got {items!r:.200}")
    return items


def offered_ids(lines: Sequence[str], offered: int) -> List[int]:
    """The ids `n` read from the `[n]` prefix of each line, kept only if 1 <= n <= offered, deduplicated."""
    ids: List[int] = []
    for line in lines:
        match = _LINE_ID.match(line)
        if match:
            n = int(match.group(1))
            if 1 <= n <= offered and n not in ids:
                ids.append(n)
    return ids
