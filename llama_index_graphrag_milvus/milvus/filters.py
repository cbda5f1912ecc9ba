"""Milvus filter expressions, built from escaped literals: every filter the package sends is built here."""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def milvus_literal(value: str) -> str:
    """A Milvus filter string literal for `value`, escaped so that it can never widen an expression.

    Milvus accepts the escapes \\" \\' \\\\ \\n \\r \\t and no others (not \\uXXXX, which is why
    `json.dumps` is wrong for non-ASCII text).
    """
    if not isinstance(value, str):
        raise TypeError(f"expected a string id, got {type(value).__name__}")
    return '"' + value.translate(_ESCAPES) + '"'


def literal_list(values: Iterable[Any]) -> str:
    """`[1,2,3]` for integers, `["a","b"]` (escaped) for strings: the right side of `in`."""
    items = [str(int(v)) if isinstance(v, (int, np.integer)) else milvus_literal(v) for v in values]
    return "[" + ",".join(items) + "]"


def id_filter(ids: Iterable[Any], field: str = "id") -> str:
    """`field in [...]`, escaped."""
    return f"{field} in {literal_list(ids)}"
