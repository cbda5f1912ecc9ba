"""Milvus filter expressions, built from escaped literals: every filter the package sends is built here.

`PassageFilter` compiles LlamaIndex `MetadataFilters` once, with two readings of one meaning: an
expression over the passages collection (`expr`: a node's metadata keys are Milvus dynamic fields, and
`doc_id`, the document id, a field of its own), for searches inside Milvus; and a test of a passage row
read by key (`matches`), for checking given passages. Keys are checked identifiers, values escaped
literals; whatever cannot be honoured is refused when the filter is compiled, before any search.

The meaning is LlamaIndex's (`build_metadata_filter_fn`), two-valued: a passage without the key (or
with null) fails EQ, GT, IN, CONTAINS, ... and passes NE and NIN. In the expression every test of a
dynamic key is guarded by `exists` to make it so on Milvus Lite and on a server alike (unguarded,
`key != value` and `not (...)` differ between the two for a missing key). A value compares only with
a value of its kind: strings with strings, numbers with numbers (integers and floats alike), booleans
with booleans; lists only through CONTAINS, ANY and ALL.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Union

import numpy as np
from llama_index.core.vector_stores.types import (
    ExactMatchFilter,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

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


# metadata filters --------------------------------------------------------------------------------
EQ, NE, GT, GTE, LT, LTE = (FilterOperator.EQ, FilterOperator.NE, FilterOperator.GT, FilterOperator.GTE,
                            FilterOperator.LT, FilterOperator.LTE)
IN, NIN, CONTAINS, ANY, ALL = (FilterOperator.IN, FilterOperator.NIN, FilterOperator.CONTAINS, FilterOperator.ANY,
                               FilterOperator.ALL)
#: The operators `PassageFilter` compiles: MilvusVectorStore's, with its meanings.
SUPPORTED = (EQ, NE, GT, GTE, LT, LTE, IN, NIN, CONTAINS, ANY, ALL)
_ORDER = {GT: (">", operator.gt), GTE: (">=", operator.ge), LT: ("<", operator.lt), LTE: ("<=", operator.le)}
_ARRAY = {CONTAINS: "array_contains", ANY: "array_contains_any", ALL: "array_contains_all"}
#: Fields of a passage row that are the store's own, not the node's metadata: filtering on them is refused.
STORE_FIELDS = frozenset({"id", "text", "embedding", "relation_ids", "_node_content", "_node_type"})
#: Fields of the passages collection's schema (not dynamic: never missing, so no `exists` guard).
SCHEMA_FIELDS = frozenset({"doc_id"})
#: Words of Milvus' expression grammar, which a key cannot be (compared case-insensitively).
KEYWORDS = frozenset(
    "and or not in like exists true false text_match phrase_match random_sample match_all match_any match_least "
    "match_most match_exact interval iso minimum_should_match threshold json_contains json_contains_all "
    "json_contains_any array_contains array_contains_all array_contains_any array_length element_filter "
    "st_equals st_touches st_overlaps st_crosses st_contains st_intersects st_within st_dwithin st_isvalid".split()
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT64 = (-(2**63), 2**63 - 1)

Row = Mapping[str, Any]


class PassageFilter:
    """LlamaIndex `MetadataFilters` compiled: a Milvus expression over the passages collection (`expr`)
    and the same test of a row read by key (`matches`, which reads the fields `keys`).

    Operators (k a metadata key, v a value): EQ `k == v`; NE `not (k == v)`; GT, GTE, LT, LTE `k > v`, ...
    (a number or a string); IN / NIN `k in [...]` / `not (k in [...])` (a list of strings, of numbers or
    of booleans; an empty IN passes nothing, an empty NIN everything); CONTAINS `array_contains(k, v)` (k
    a list holding v); ANY / ALL `array_contains_any` / `array_contains_all(k, [...])` (a non-empty list).
    Conditions: AND, OR, and NOT (none of the filters holds), nested to any depth. A passage without
    the key fails every test but NE and NIN. `doc_id`, `ref_doc_id` and `document_id` are the passage's
    document id.

    Raises:
        ValueError: naming what cannot be honoured: another operator (TEXT_MATCH,
            TEXT_MATCH_INSENSITIVE, IS_EMPTY), a value of the wrong type for its operator (None, a list
            for EQ, a scalar for IN, booleans to order, strings mixed with numbers, an integer outside
            int64, NaN), an empty ANY/ALL list or nested group, or a key that is not an identifier
            (letters, digits, underscores), is a word of Milvus' grammar, or is one of the store's own
            fields (`STORE_FIELDS`).
    """

    def __init__(self, filters: MetadataFilters) -> None:
        if not isinstance(filters, MetadataFilters):
            raise ValueError(f"filters must be a llama_index MetadataFilters, got {type(filters).__name__}")
        self.filters = filters
        self._root = _group(filters, nested=False)
        self.expr = self._root.expr() if self._root is not None else ""
        self.keys = sorted(self._root.keys()) if self._root is not None else []
        #: Whether it reads metadata (Milvus dynamic fields), not only `doc_id`.
        self.reads_metadata = not set(self.keys) <= SCHEMA_FIELDS

    @classmethod
    def of(cls, filters: Union[None, MetadataFilters, "PassageFilter"]) -> Optional["PassageFilter"]:
        """`filters` compiled; None for None, or for filters that restrict nothing (no filter in them)."""
        compiled = filters if isinstance(filters, PassageFilter) or filters is None else cls(filters)
        return compiled if compiled is not None and compiled.expr else None

    def matches(self, row: Row) -> bool:
        """Whether a passage row (holding at least the fields `keys`) passes."""
        return self._root is None or self._root.matches(row)

    def __repr__(self) -> str:
        return f"PassageFilter({self.expr!r})"


@dataclass(frozen=True)
class _Test:
    """One filter on one key, its value checked."""

    key: str
    operator: FilterOperator
    value: Any  # a scalar, or a tuple of scalars of one kind

    def keys(self) -> Set[str]:
        return {self.key}

    def expr(self) -> str:
        key, op, value = self.key, self.operator, self.value
        if op in (IN, NIN):
            test = f"{key} in {_literals(value)}"
        elif op in _ARRAY:
            test = f"{_ARRAY[op]}({key}, {_literals(value) if op != CONTAINS else _literal(value)})"
        else:
            test = f"{key} {_ORDER[op][0] if op in _ORDER else '=='} {_literal(value)}"
        guarded = f"({test})" if key in SCHEMA_FIELDS else f"(exists {key}) and ({test})"
        return f"not ({guarded})" if op in (NE, NIN) else guarded

    def matches(self, row: Row) -> bool:
        return self._holds(row.get(self.key)) != (self.operator in (NE, NIN))

    def _holds(self, found: Any) -> bool:
        """The test without its negation (NE is EQ's, NIN is IN's), on the row's value."""
        op, value = self.operator, self.value
        if op in (EQ, NE):
            return _equal(found, value)
        if op in (IN, NIN):
            return any(_equal(found, v) for v in value)
        if op in _ORDER:
            return _kind(found) == _kind(value) and _kind(value) in (str, float) and _ORDER[op][1](found, value)
        if not isinstance(found, list):
            return False
        wanted = (value,) if op == CONTAINS else value
        held = [any(_equal(item, v) for item in found) for v in wanted]
        return all(held) if op == ALL else any(held)


@dataclass(frozen=True)
class _Group:
    """Filters joined by AND, OR or NOT (none holds)."""

    condition: FilterCondition
    parts: Tuple[Union["_Group", _Test], ...]

    def keys(self) -> Set[str]:
        return set().union(*(part.keys() for part in self.parts))

    def expr(self) -> str:
        joined = [f"({part.expr()})" for part in self.parts]
        if self.condition == FilterCondition.NOT:
            return "not (" + " or ".join(joined) + ")"
        return self.parts[0].expr() if len(joined) == 1 else f" {self.condition.value} ".join(joined)

    def matches(self, row: Row) -> bool:
        found = (part.matches(row) for part in self.parts)
        if self.condition == FilterCondition.AND:
            return all(found)
        return any(found) != (self.condition == FilterCondition.NOT)


def _group(filters: MetadataFilters, nested: bool = True) -> Optional[_Group]:
    parts = tuple(_group(f) if isinstance(f, MetadataFilters) else _test(f) for f in filters.filters)
    if not parts:
        if nested:
            raise ValueError("a nested MetadataFilters holds no filter; remove it or give it filters")
        return None
    condition = filters.condition or FilterCondition.AND
    if condition not in (FilterCondition.AND, FilterCondition.OR, FilterCondition.NOT):
        raise ValueError(f"filter condition {condition!r} is not supported: use AND, OR or NOT")
    return _Group(FilterCondition(condition), parts)


def _test(f: Union[MetadataFilter, ExactMatchFilter]) -> _Test:
    """One filter, checked: its key, its operator, its value's type for that operator."""
    op = FilterOperator(getattr(f, "operator", EQ))
    key, value = filter_key(f.key), f.value
    if op not in SUPPORTED:
        names = ", ".join(o.name for o in SUPPORTED)
        raise ValueError(f"filter operator {op.name} (on {key!r}) is not supported; use one of {names}")
    if value is None:
        raise ValueError(f"filter on {key!r} with operator {op.name} has no value (None)")
    lists = op in (IN, NIN, ANY, ALL)
    if lists != isinstance(value, (list, tuple)):
        wanted = "a list of values" if lists else "one value (for a list: IN, NIN, ANY or ALL)"
        raise ValueError(f"filter on {key!r}: {op.name} takes {wanted}, got {type(value).__name__}")
    if lists:
        if not value and op in _ARRAY:  # a server cannot parse an empty list there
            raise ValueError(f"filter on {key!r}: {op.name} needs at least one value")
        return _Test(key, op, _values(list(value), key))
    value = _checked(value, key)
    if op in _ORDER and _kind(value) not in (str, float):
        raise ValueError(f"filter on {key!r}: {op.name} orders numbers or strings, not {type(value).__name__}")
    return _Test(key, op, value)


def filter_key(key: Any) -> str:
    """`key` as a Milvus field reference: an identifier, not a grammar word, not a store field."""
    if not isinstance(key, str) or not _IDENTIFIER.fullmatch(key):
        raise ValueError(
            f"metadata key {key!r} cannot be filtered: a filtered key must be an identifier (ASCII letters, digits "
            "and underscores, not starting with a digit); rename the key at ingest"
        )
    if key.lower() in KEYWORDS:
        raise ValueError(f"metadata key {key!r} is a word of Milvus' filter grammar and cannot be filtered; rename the key")
    if key in STORE_FIELDS:
        raise ValueError(f"{key!r} is the store's own passage field, not metadata: it cannot be filtered")
    return key


def _kind(value: Any) -> Optional[type]:
    """The kind a value compares within: str, float (any number), bool; None for anything else."""
    if isinstance(value, (bool, np.bool_)):
        return bool
    if isinstance(value, str):
        return str
    return float if isinstance(value, (int, float, np.number)) else None


def _equal(found: Any, value: Any) -> bool:
    return _kind(found) is not None and _kind(found) == _kind(value) and found == value


def _checked(value: Any, key: str) -> Union[str, int, float, bool]:
    """A scalar value as Python's own str, bool, int (int64) or float (finite)."""
    kind = _kind(value)
    if kind is str or kind is bool:
        return kind(value)
    if kind is None:
        raise ValueError(f"filter on {key!r}: a value of type {type(value).__name__} cannot be compared; "
                         "use a string, a number or a boolean")
    if isinstance(value, (int, np.integer)):
        if not _INT64[0] <= int(value) <= _INT64[1]:
            raise ValueError(f"filter on {key!r}: {value} is outside Milvus' 64-bit integers")
        return int(value)
    if not math.isfinite(value):
        raise ValueError(f"filter on {key!r}: {value} cannot be compared (not a finite number)")
    return float(value)


def _values(values: List[Any], key: str) -> Tuple[Any, ...]:
    """A list of values of one kind. Integers beside floats become floats (a server refuses mixed
    lists), if they are exactly floats."""
    checked = [_checked(v, key) for v in values]
    kinds = {_kind(v) for v in checked}
    if len(kinds) > 1:
        raise ValueError(f"filter on {key!r}: a list of values of one kind, got {sorted(type(v).__name__ for v in checked)}")
    if any(isinstance(v, float) for v in checked):
        if any(float(v) != v for v in checked):
            raise ValueError(f"filter on {key!r}: an integer beside floats is not exactly a float; give floats")
        checked = [float(v) for v in checked]
    return tuple(checked)


def _literal(value: Union[str, int, float, bool]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return milvus_literal(value) if isinstance(value, str) else repr(value)


def _literals(values: Sequence[Any]) -> str:
    return "[" + ", ".join(_literal(v) for v in values) + "]"
