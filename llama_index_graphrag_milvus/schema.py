"""Records and deterministic ids: what an entity, a relation and a passage are.

Ids are derived from normalized content, so ingesting the same triplet twice writes the same rows.
Entity and relation ids are signed 64-bit integers (Milvus INT64 primary keys); passage ids are strings
(the primary key of a standard LlamaIndex Milvus collection).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, List, Optional, Sequence, Tuple

_SPACE = re.compile(r"\s+")

#: Longest entity name or predicate accepted, in characters; longer ones are skipped as malformed.
MAX_NAME_LENGTH = 512


def normalize_name(name: str) -> str:
    """The identity of a name: Unicode NFKC, case-folded, whitespace collapsed."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", name).casefold()).strip()


def _hash64(*parts: str) -> int:
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def entity_id(name: str) -> int:
    """Deterministic id of the entity a name denotes ("leonhard Euler" and "Leonhard  Euler" are one)."""
    return _hash64("entity", normalize_name(name))


def relation_id(subject: str, predicate: str, object_: str) -> int:
    """Deterministic id of the relation (subject, predicate, object), on normalized names."""
    return _hash64("relation", normalize_name(subject), normalize_name(predicate), normalize_name(object_))


def passage_id(ref_doc_id: str, text: str) -> str:
    """Deterministic id of a passage: its document and its text (node ids from splitters are random)."""
    return hashlib.blake2b(f"{ref_doc_id}\x1f{text}".encode("utf-8"), digest_size=12).hexdigest()


@dataclass(frozen=True)
class Triplet:
    """A (subject, predicate, object) statement taken from a passage, with display names as written."""

    subject: str
    predicate: str
    object: str

    @property
    def text(self) -> str:
        """The relation sentence that is embedded: "subject predicate object"."""
        return f"{self.subject} {self.predicate} {self.object}"

    # ids are computed once per triplet (normalizing and hashing cost more than the rest of a write)
    @cached_property
    def id(self) -> int:
        return relation_id(self.subject, self.predicate, self.object)

    @cached_property
    def subject_id(self) -> int:
        return entity_id(self.subject)

    @cached_property
    def object_id(self) -> int:
        return entity_id(self.object)


def parse_triplet(value: Any) -> Optional[Triplet]:
    """A `Triplet` from `[subject, predicate, object]`, or None if it is malformed.

    Malformed: not a sequence of exactly three strings, an empty or blank string, or a string longer
    than `MAX_NAME_LENGTH`.
    """
    if isinstance(value, Triplet):
        return value
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or len(value) != 3:
        return None
    parts = []
    for part in value:
        if not isinstance(part, str):
            return None
        part = _SPACE.sub(" ", part).strip()
        if not part or len(part) > MAX_NAME_LENGTH:
            return None
        parts.append(part)
    return Triplet(*parts)


def parse_triplets(values: Any) -> Tuple[List[Triplet], int]:
    """Valid triplets (deduplicated, in order) and the number of malformed ones skipped."""
    if not isinstance(values, (list, tuple)):
        return [], (0 if values is None else 1)
    triplets: dict = {}
    skipped = 0
    for value in values:
        triplet = parse_triplet(value)
        if triplet is None:
            skipped += 1
        else:
            triplets.setdefault(triplet.id, triplet)
    return list(triplets.values()), skipped


@dataclass
class ScoredRelation:
    """A relation found for a query, with its score and the passages it came from."""

    id: int
    subject: str
    predicate: str
    object: str
    score: float = 0.0
    passage_ids: List[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return f"{self.subject} {self.predicate} {self.object}"

    def __str__(self) -> str:
        return f"{self.subject} —[{self.predicate}]→ {self.object}"


def chunked(items: Sequence[Any], size: int):
    """Successive slices of `items` of at most `size` elements."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
