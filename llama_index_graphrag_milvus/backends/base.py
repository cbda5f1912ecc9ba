"""The graph backend protocol: what retrieval asks (`Expansion`), what it gets (`Neighbourhood`), the
hub rule, and `GraphBackend`, which `MemoryGraph` and `MilvusGraph` implement.

A write asks the backend which facts are stored and tells it what it wrote (`apply`): the memory backend
adds it to its caches, the Milvus one has nothing to do. Retrieval asks `expand(...)` for the candidates
and gets a `Neighbourhood` that the rankers read, with the same meaning from both.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Protocol, Sequence, Set

import numpy as np

from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.graph.sparse import Graph, binary_csr
from llama_index_graphrag_milvus.milvus.collections import PASSAGES, Collections
from llama_index_graphrag_milvus.schema import Candidate


@dataclass(frozen=True)
class Expansion:
    """What retrieval asks the graph for.

    Args:
        vector: The question's embedding: every step is cut by similarity to it.
        entities: Seed entity ids (the question's entities).
        relations: Seed relation ids (the relations nearest to the question).
        passages: Passage ids whose relations join the candidates (the top dense passages), when
            `with_context`.
        degree: Degrees of expansion.
        cap: Candidates kept, by similarity to the question; also each hop's frontier after the first.
        with_context: Add the relations of `passages` and the best relations of the synonyms of the
            candidates' entities (what graph rankings use; the similarity order does not).
        synonyms: Follow synonym links (with `with_context`).
        hub_fraction: Entities stated in more than this fraction of the passages (at least 20 passages, at most 200: `hub_limit`)
            are hubs: walks do not continue through them.
    """

    vector: Sequence[float]
    entities: Sequence[int]
    relations: Sequence[int]
    passages: Sequence[str] = ()
    degree: int = 1
    cap: int = 300
    with_context: bool = True
    synonyms: bool = True
    hub_fraction: float = 0.02


@dataclass(frozen=True)
class Neighbourhood:
    """The candidates of one retrieval and the adjacency around them, as the rankers read it.

    `graph` is an immutable snapshot whose positions `cache` maps to ids (the store's whole adjacency,
    or the neighbourhood loaded from Milvus). `relations` are the candidates' positions, best first by
    `similarities` (cosine to the question). `topics` answers which passages are about which entities
    (for the hop and the topic ranking), with this retrieval's hub limit. `passes`, in a neighbourhood
    `restricted` to the passages that pass a filter, tells which of given passage ids do.
    """

    graph: Graph
    cache: GraphCache
    relations: np.ndarray
    similarities: np.ndarray
    hub_passages: float
    reached: int = 0
    topics: Optional["Topics"] = field(default=None, compare=False, repr=False)
    passes: Optional[Callable[[Sequence[str]], Set[str]]] = field(default=None, compare=False, repr=False)
    counter: Optional[Callable[[np.ndarray], np.ndarray]] = field(default=None, compare=False, repr=False)

    def passage_counts(self, entities: np.ndarray) -> np.ndarray:
        """The passages each entity (positions) is stated in: the graph's counts, or, where the graph
        holds only a bound (a hub the Milvus mode did not count), counted (`counter`)."""
        entities = np.asarray(entities, dtype=np.int64)
        return self.graph.passage_counts[entities] if self.counter is None else self.counter(entities)

    def restricted(self, passes: Callable[[Sequence[str]], Set[str]]) -> "Neighbourhood":
        """This neighbourhood with only the passages that pass (`passes`: of given passage ids, the set
        that pass), as every ranker reads it: the candidates' passages in `graph` (checked at once, one
        call), `passages_of`, and the topics' answers (checked when asked). Each passage is asked about
        once. The candidates, their entities and the entities' passage counts (the hub rule, PPR's
        specificity) stay the store's: the walk crossed the whole graph, only passages are left out.
        `graph` then holds the relation→passage rows of the candidates only."""
        passes = _Passing(passes)
        block = self.graph.relation_passage[self.relations]
        ids = self.passage_ids(block.indices)
        kept = passes(ids)
        keep = np.fromiter((pid in kept for pid in ids), dtype=bool, count=len(ids))
        rows = np.repeat(self.relations, np.diff(block.indptr))[keep]
        columns = block.indices[keep]
        shape = self.graph.relation_passage.shape
        graph = dataclasses.replace(
            self.graph, relation_passage=binary_csr(rows, columns, shape),
            passage_relation=binary_csr(columns, rows, shape[::-1]), counts=self.graph.passage_counts,
        )
        topics = _PassingTopics(self.topics, passes) if self.topics is not None else None
        return dataclasses.replace(self, graph=graph, topics=topics, passes=passes)

    def linked_passages(self, passage_id: str) -> List[str]:
        """The passages about an entity that `passage_id` names (see `graph.topic_links`), hubs not
        followed."""
        return self.topics.linked(passage_id) if self.topics is not None else []

    def passages_about(self, entity_ids: Sequence[int]) -> List[str]:
        """The passages about any of these entities (see `graph.about`)."""
        return self.topics.about(entity_ids) if self.topics is not None and len(entity_ids) else []

    def relation_ids(self) -> List[int]:
        """The candidates' ids, best first."""
        return self.cache.relations.ids_at(self.relations)

    def passage_ids(self, positions: np.ndarray) -> List[str]:
        return self.cache.passage_ids(positions)

    def passages_of(self, relation_id: int) -> List[str]:
        """The passages stating a relation, by passage id (so in the same order from every backend)."""
        found = sorted(self.cache.passages_of_relation(relation_id))
        return found if self.passes is None else _kept(found, self.passes)

    def candidates(self) -> List[Candidate]:
        """The candidates as records: id, cosine to the question, the passages stating it; best first."""
        return [
            Candidate(r, s, passages)
            for r, s, passages in zip(self.relation_ids(), self.similarities.tolist(), self.candidate_passages)
        ]

    @cached_property
    def candidate_passages(self) -> List[List[str]]:
        """The passages stating each candidate (by passage id), in the candidates' order (one gather)."""
        block = self.graph.relation_passage[self.relations]
        ids = self.passage_ids(block.indices)
        return [sorted(ids[start:end]) for start, end in zip(block.indptr[:-1].tolist(), block.indptr[1:].tolist())]



class _Passing:
    """`passes` asked about each passage once: of given passage ids, the set that pass."""

    def __init__(self, passes: Callable[[Sequence[str]], Set[str]]) -> None:
        self._passes, self._known = passes, {}

    def __call__(self, passage_ids: Sequence[str]) -> Set[str]:
        new = [p for p in dict.fromkeys(passage_ids) if p not in self._known]
        if new:
            passing = self._passes(new)
            self._known.update((p, p in passing) for p in new)
        return {p for p in passage_ids if self._known[p]}


def _kept(passage_ids: List[str], passes: Callable[[Sequence[str]], Set[str]]) -> List[str]:
    kept = passes(passage_ids)
    return [p for p in passage_ids if p in kept]


class _PassingTopics:
    """`Topics` that answer only passages that pass."""

    def __init__(self, topics: "Topics", passes: Callable[[Sequence[str]], Set[str]]) -> None:
        self.topics, self.passes = topics, passes

    def linked(self, passage_id: str) -> List[str]:
        return _kept(self.topics.linked(passage_id), self.passes)

    def about(self, entity_ids: Sequence[int]) -> List[str]:
        return _kept(self.topics.about(entity_ids), self.passes)


class Topics(Protocol):
    """Which passages are about which entities, as a backend reads it (`graph.about`)."""

    def linked(self, passage_id: str) -> List[str]:
        """The passages about an entity that a passage names, hubs left out (sorted ids)."""

    def about(self, entity_ids: Sequence[int]) -> List[str]:
        """The passages about any of these entities (sorted ids)."""


#: Whatever a store's size, an entity stated in more passages than this is a hub: so what a walk
#: touches through one entity does not grow with the corpus (no dev set reaches it: 2Wiki's limit is 122).
HUB_CAP = 200.0


def hub_limit(passages: int, fraction: float) -> float:
    """Entities stated in more than this many passages are hubs, in a store of `passages` passages (the
    one hub rule of both backends: the passages stored now): `fraction` of them, at least 20 and at most
    `HUB_CAP`."""
    return min(max(20.0, fraction * passages), HUB_CAP)


@dataclass
class Written:
    """What one write stored, as written: for the caches of the store that made it."""

    entities: List[Dict[str, Any]] = field(default_factory=list)
    relations: List[Dict[str, Any]] = field(default_factory=list)
    links: List[Dict[str, Any]] = field(default_factory=list)
    passages: List[Dict[str, Any]] = field(default_factory=list)
    deleted: List[str] = field(default_factory=list)  # passage ids


class GraphBackend(Protocol):
    """The adjacency of a store, wherever it lives: derived from the facts in Milvus."""

    def behind(self) -> bool:
        """Whether another store wrote what this one's caches do not hold (False if it keeps none)."""

    def close(self) -> None:
        """Save what lets the next build be fast (the snapshot file), if anything."""

    def reset(self) -> None:
        """Forget everything: the store was cleared."""

    def stored(self, kind: str, ids: np.ndarray) -> np.ndarray:
        """Which entity or relation ids Milvus stores (live or not): a write embeds the others."""

    def passage_relations(self, passage_ids: Sequence[str]) -> Dict[str, Set[int]]:
        """The relation ids each stored passage of `passage_ids` states (passages not stored are left out)."""

    def apply(self, written: Written, log: Sequence[str] = ()) -> Optional[FrozenSet[str]]:
        """A write of this store, now in Milvus (with the log ids it added); the log ids read meanwhile,
        if any (the writer then deletes only those)."""

    def live(self, kind: str, ids: np.ndarray) -> np.ndarray:
        """Which entity or relation ids are live: stated (a relation) or named by a live relation."""

    def expand(self, request: Expansion) -> Neighbourhood:
        """The candidate relations of a retrieval and the adjacency around them."""

    def linked_passages(self, passage_id: str, hub_fraction: float) -> List[str]:
        """The passages about an entity that `passage_id` names (see `graph.topic_links`); hubs are the
        entities stated in more than `hub_fraction` of the store's passages (`hub_limit`)."""

    def synonyms_of(self, entity_ids: Sequence[int]) -> Dict[int, Set[int]]:
        """The synonyms of each live entity of `entity_ids` (derived from the live links)."""

    def relations_of(self, entity_ids: Sequence[int]) -> Dict[int, Set[int]]:
        """The live relations of each entity (either end); entities with none are left out."""

    def passages_stating(self, relation_ids: Sequence[int]) -> Dict[int, Set[str]]:
        """The passages stating each relation; relations no passage states are left out."""

    def counts(self) -> Dict[str, int]:
        """Rows the adjacency knows of (the live ones in memory; Milvus' counts in Milvus)."""


def stored_in_milvus(collections: Collections, kind: str, ids: np.ndarray) -> np.ndarray:
    """Which of the entity or relation ids Milvus stores (read by primary key)."""
    ids = np.asarray(ids, dtype=np.int64)
    stored = {row["id"] for row in collections.get(kind, sorted(set(ids.tolist())), ["id"])}
    return np.fromiter((i in stored for i in ids.tolist()), dtype=bool, count=len(ids))


def passages_in_milvus(collections: Collections, passage_ids: Sequence[str]) -> Dict[str, Set[int]]:
    """The relation ids each stored passage of `passage_ids` states, read from the passage rows."""
    rows = collections.get(PASSAGES, list(dict.fromkeys(passage_ids)), ["id", "relation_ids"])
    return {row["id"]: set(row.get("relation_ids") or []) for row in rows}
