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
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

_SPACE = re.compile(r"\s+")

#: Longest entity name or predicate accepted, in characters; longer ones are skipped as malformed.
MAX_NAME_LENGTH = 512
#: The most synonym links an ingest gives a new entity (its entity row holds them); a walk follows no
#: link of an entity that has more, both ways counted (`graph.walk`).
MAX_SYNONYMS = 8


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


def statement_id(passage: str, relation: int) -> int:
    """Deterministic id of a statement: passage `passage` states relation `relation`."""
    return _hash64("statement", passage, str(relation))


def link_id(a: int, b: int) -> int:
    """Deterministic id of the link between two entities, whichever order they come in."""
    return _hash64("link", *map(str, sorted((a, b))))


#: Slots of a statement's entity: `slot(passage, entity)` is in [0, SLOTS).
SLOTS = 1024


def slot(passage: str, entity: int) -> int:
    """The slot of (passage, entity): the same for every relation the passage states about the entity,
    so that reading an entity's statements in a range of slots reads a share of its passages."""
    return _hash64("slot", passage, str(entity)) % SLOTS


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


class ScoredEntity(NamedTuple):
    """An entity found for a query: its id, its name as first written, and its cosine to a mention."""

    id: int
    name: str
    score: float


class Candidate(NamedTuple):
    """A relation reached by a retrieval's expansion: its id, its cosine to the question, and the
    passages that state it."""

    id: int
    score: float
    passage_ids: List[str]


@dataclass(frozen=True)
class ScoredRelation:
    """A relation found for a query, with its score and the passages that state it."""

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


@dataclass
class Retrieval:
    """What one retrieval did, step by step: the record `GraphRAGRetriever.trace` returns and
    `Explanation` shows.

    Attributes:
        query: The question.
        mentions: The entity names taken from the question (LLM NER, or known names matched).
        seed_entities: The entities found for the mentions.
        seed_relations: The relations nearest to the question.
        dense: Dense retrieval's passages, as (passage id, cosine), best first.
        candidates: The relations reached by expanding the seeds, best first (their texts are not read:
            `Explanation` reads them).
        reached: How many relations the expansion touched before the candidates were cut.
        reranker: The ranking that ordered the passages (its `name`: "fused", "chain", "ppr",
            "similarity", "hop", "topic", or "llm" when an LLM's choice came first).
        chosen: The relations the ranking chose, best first (the chain followed).
        thought_process: The LLM's reasoning, when an LLM reranked and gave one.
        llm_decision: With an LLM that answered: whether its pick led the ranking or only voted, and why.
        nodes: The passages returned, as the ingested nodes.
        via: For each returned node (by `node_id`), the relations that selected it.
    """

    query: str
    mentions: List[str] = field(default_factory=list)
    seed_entities: List[ScoredEntity] = field(default_factory=list)
    seed_relations: List[ScoredRelation] = field(default_factory=list)
    dense: List[Tuple[str, float]] = field(default_factory=list)
    candidates: List[Candidate] = field(default_factory=list)
    reached: int = 0
    reranker: Optional[str] = None
    chosen: List[ScoredRelation] = field(default_factory=list)
    thought_process: Optional[str] = None
    llm_decision: Optional[str] = None
    nodes: List[Any] = field(default_factory=list)  # NodeWithScore
    via: Dict[str, List[ScoredRelation]] = field(default_factory=dict)


def chunked(items: Sequence[Any], size: int):
    """Successive slices of `items` of at most `size` elements."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
