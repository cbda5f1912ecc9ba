"""The walk of a retrieval, written once for both backends: from the seed entities and relations over the
entity–relation graph, never through hubs, every hop after the first cut to the relations most similar
to the question; then the relations of the top dense passages and of the synonyms of the best
candidates' entities. An entity linked to more than `MAX_SYNONYMS` others (both ways counted) is a
crowded name, a dense region of the embedding space rather than one thing's aliases: the walk follows
none of its synonym links. So the synonym step costs at most `MAX_SYNONYMS` entities per source entity,
however many names a store holds.

It reads the graph through `Adjacency`, over keys that are positions in memory (`GraphAdjacency`, on a
`Graph` snapshot) and ids in Milvus (`backends.milvus`): whatever the backend, a walk reaches the same
relations. Keys go in and out as sorted, distinct int64 arrays.
"""

from __future__ import annotations

from typing import Callable, Optional, Protocol, Sequence, Tuple

import numpy as np

from llama_index_graphrag_milvus.graph.sparse import Graph, difference, neighbours, union, unique
from llama_index_graphrag_milvus.schema import MAX_SYNONYMS

#: Given relation keys (sorted, distinct), the ones a walk may continue from, best first.
Cut = Callable[[np.ndarray], np.ndarray]

#: Candidates (best first) whose entities' synonyms add relations.
SYNONYM_SOURCES = 50


class Adjacency(Protocol):
    """The graph as a walk reads it."""

    def relations_of_entities(self, entities: np.ndarray) -> np.ndarray:
        """The relations of these entities (either end)."""

    def entities_of_relations(self, relations: np.ndarray) -> np.ndarray:
        """The entities of these relations."""

    def walkable(self, entities: np.ndarray) -> np.ndarray:
        """A boolean mask: which of these entities a walk continues through (not hubs)."""

    def relations_of_passages(self, passages: Sequence) -> np.ndarray:
        """The relations these passages state (passage keys: positions in memory, ids in Milvus)."""

    def synonyms_of(self, entities: np.ndarray) -> np.ndarray:
        """The synonyms of those of these entities that have at most `MAX_SYNONYMS`."""


class GraphAdjacency:
    """`Adjacency` over a `Graph` snapshot: keys are positions. A walk continues through the entities
    stated in at most `hub_passages` passages, or those `through` (a boolean mask) says; through every
    entity when neither is given."""

    def __init__(self, graph: Graph, hub_passages: Optional[float] = None, through: Optional[np.ndarray] = None) -> None:
        self.graph = graph
        self.through = through if through is not None else (
            graph.passage_counts <= hub_passages if hub_passages is not None else None
        )

    def relations_of_entities(self, entities: np.ndarray) -> np.ndarray:
        return self.graph.relations_of_entities(entities)

    def entities_of_relations(self, relations: np.ndarray) -> np.ndarray:
        return self.graph.entities_of_relations(relations)

    def walkable(self, entities: np.ndarray) -> np.ndarray:
        entities = np.asarray(entities, dtype=np.int64)
        return np.ones(len(entities), dtype=bool) if self.through is None else self.through[entities]

    def relations_of_passages(self, passages: Sequence) -> np.ndarray:
        return self.graph.relations_of_passages(np.asarray(passages, dtype=np.int64))

    def synonyms_of(self, entities: np.ndarray) -> np.ndarray:
        links = self.graph.entity_entity
        entities = np.asarray(entities, dtype=np.int64)
        counts = links.indptr[entities + 1] - links.indptr[entities]  # these rows only, not the whole graph
        return unique(neighbours(links, entities[counts <= MAX_SYNONYMS]))


def _kept(cut: Cut, relations: np.ndarray) -> np.ndarray:
    """The relations of `relations` (sorted, distinct) that `cut` keeps; keys it returns from outside
    `relations` are ignored."""
    if len(relations) == 0:
        return relations
    keep = unique(np.asarray(cut(relations), dtype=np.int64))
    if len(keep) == 0:
        return relations[:0]
    i = np.minimum(np.searchsorted(keep, relations), len(keep) - 1)
    return relations[keep[i] == relations]


def _walkable(adjacency: Adjacency, entities: np.ndarray) -> np.ndarray:
    return entities[adjacency.walkable(entities)] if len(entities) else entities


def expand_from_entities(adjacency: Adjacency, entities: Sequence[int], degree: int, cut: Optional[Cut] = None) -> np.ndarray:
    """Relations reached from seed entities: the nonzero columns of the seeds' rows of (A·Aᵀ)^degree·A,
    where the walk continues only through walkable entities (a seed that is a hub still gives its own
    relations).

    The walk grows a set of entities hop by hop, from the seeds; the result is every relation of the
    seeds and of the entities walked. Hop 1 adds the entities of the seeds' relations. Hop k ≥ 2 takes
    the relations of the entities hop k-1 added that no earlier hop reached, keeps those `cut` keeps (it
    is not called when there are none), and adds their entities; a relation `cut` drops is never walked
    from. Hop 1 is never cut, so at degree 0 and 1 `cut` changes nothing. So each hop's work follows what
    `cut` keeps and those relations' entities' relations, not the whole neighbourhood."""
    seeds = unique(np.asarray(entities, dtype=np.int64))
    fresh = _walkable(adjacency, seeds)  # the entities the last hop added
    walked, reached = fresh, seeds[:0]
    for hop in range(degree):
        new = difference(adjacency.relations_of_entities(fresh), reached)
        reached = union(reached, new)
        if hop > 0 and cut is not None:
            new = _kept(cut, new)
        ends = adjacency.entities_of_relations(new)
        fresh = difference(_walkable(adjacency, ends), walked)
        walked = union(walked, fresh)
    return union(reached, adjacency.relations_of_entities(union(seeds, fresh)))


def expand_from_relations(adjacency: Adjacency, relations: Sequence[int], degree: int, cut: Optional[Cut] = None) -> np.ndarray:
    """Relations reached from seed relations: the nonzero columns of the seeds' rows of (Aᵀ·A)^degree,
    through walkable entities only.

    Hop 1 walks from the seeds; hop k ≥ 2 from the relations hop k-1 reached that no earlier hop had and
    that `cut` keeps. The seeds are never cut, so at degree 0 and 1 `cut` changes nothing. The result
    holds every relation reached, dropped ones and the last hop's included."""
    fresh = unique(np.asarray(relations, dtype=np.int64))  # the relations the last hop reached first
    reached, walked = fresh, fresh[:0]  # walked: the entities walked through
    for hop in range(degree):
        start = _kept(cut, fresh) if hop > 0 and cut is not None else fresh
        ends = difference(_walkable(adjacency, adjacency.entities_of_relations(start)), walked)
        walked = union(walked, ends)
        fresh = difference(adjacency.relations_of_entities(ends), reached)
        reached = union(reached, fresh)
    return reached


def walk(
    adjacency: Adjacency,
    entities: Sequence[int],
    relations: Sequence[int],
    passages: Sequence[int],
    degree: int,
    cut: Cut,
    with_context: bool = True,
    synonyms: bool = True,
    prefetch: Optional[Callable[[np.ndarray], None]] = None,
) -> Tuple[np.ndarray, int]:
    """Every relation a retrieval considers, and how many the walk touched: the walks from the seed
    entities and relations; with context, cut to the best, plus the relations of the top dense
    `passages` and the best relations of the walkable synonyms of the best candidates' entities (every
    step cut by `cut`, so a hub costs one pass). `prefetch`, when given, is told every relation the
    first cut and the final ranking will score, before the first cut (to score them in one call)."""
    reached = union(
        expand_from_entities(adjacency, entities, degree, cut),
        expand_from_relations(adjacency, relations, degree, cut),
    )
    touched = len(reached)
    if not with_context:
        return reached, touched
    from_passages = adjacency.relations_of_passages(passages) if len(passages) else reached[:0]
    if prefetch is not None:
        prefetch(union(reached, from_passages))
    ranked = np.asarray(cut(reached), dtype=np.int64) if len(reached) else reached
    reached = union(ranked, from_passages)
    if synonyms:  # from the entities of the best candidates only
        sources = union(ranked[:SYNONYM_SOURCES], from_passages)
        linked = _walkable(adjacency, adjacency.synonyms_of(adjacency.entities_of_relations(sources)))
        extra = adjacency.relations_of_entities(linked)
        touched += len(extra)
        if len(extra):
            reached = union(reached, cut(extra))
    return reached, touched
