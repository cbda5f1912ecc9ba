"""The adjacency as pure functions: entity↔relation and relation→passage incidence as scipy.sparse
matrices in an immutable `Graph`, and the walks that read it (the rankers' math is in `ranking`).

`Graph` is a snapshot over positions (row and column numbers, private to one process); the mutable
cache that maps Milvus ids to positions and builds snapshots is `adjacency.GraphCache`.

Every walk reads neighbours through CSR `indptr`/`indices`, so it reads only the rows of the entities and
relations it touches: no dense matrix, no matrix power.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional, Tuple

import numpy as np
import scipy.sparse as sp

_EMPTY = np.zeros(0, dtype=np.int32)


def binary_csr(rows: np.ndarray, cols: np.ndarray, shape: Tuple[int, int]) -> sp.csr_matrix:
    """A binary incidence matrix; its data are int8 ones (1 byte per edge), indices int32."""
    data = np.ones(len(rows), dtype=np.int32)
    matrix = sp.csr_matrix((data, (rows, cols)), shape=shape)
    matrix.sum_duplicates()
    return sp.csr_matrix((np.ones(matrix.nnz, dtype=np.int8), matrix.indices, matrix.indptr), shape=shape)


def unique(values: np.ndarray) -> np.ndarray:
    """`np.unique` of integers by sort and compare (numpy 2's `np.unique` hashes, which is slower on
    the id arrays here)."""
    values = np.sort(np.asarray(values).ravel())
    if len(values) < 2:
        return values
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`np.union1d` by `unique`."""
    return unique(np.concatenate([np.asarray(a).ravel(), np.asarray(b).ravel()]))


def neighbours(matrix: sp.csr_matrix, rows: np.ndarray) -> np.ndarray:
    """The column indices of the given rows of a CSR matrix, concatenated (with repeats)."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0:
        return _EMPTY
    starts = matrix.indptr[rows]
    lengths = matrix.indptr[rows + 1] - starts
    total = int(lengths.sum())
    if total == 0:
        return _EMPTY
    # positions starts[i] .. starts[i]+lengths[i] for every row, without a Python loop
    offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
    return matrix.indices[offsets + np.arange(total)]


@dataclass(frozen=True)
class Graph:
    """An immutable snapshot of the adjacency.

    entity_relation: E×R, 1 where the entity is the subject or the object of the relation.
    relation_entity: R×E, its transpose (CSR, so that a relation's entities are a row slice).
    relation_passage: R×P, 1 where the passage states the relation.
    passage_relation: P×R, its transpose.
    entity_entity: E×E, symmetric, 1 where two entities are synonyms (near-identical embeddings).
    counts: each entity's passage count when the snapshot holds only part of the graph (a neighbourhood
        loaded from Milvus, where the whole store's counts are read from the statements); None: counted
        here.
    """

    entity_relation: sp.csr_matrix
    relation_entity: sp.csr_matrix
    relation_passage: sp.csr_matrix
    passage_relation: sp.csr_matrix
    entity_entity: sp.csr_matrix
    counts: Optional[np.ndarray] = None

    @cached_property
    def passage_counts(self) -> np.ndarray:
        """For each entity, the number of passages stating one of its relations."""
        if self.counts is not None:
            return self.counts
        mentions = (self.entity_relation.astype(np.int32) @ self.relation_passage.astype(np.int32)).tocsr()
        return np.diff(mentions.indptr)

    @cached_property
    def live_relations(self) -> np.ndarray:
        """Which relation positions some passage of the snapshot states."""
        return np.diff(self.relation_passage.indptr) > 0

    @cached_property
    def live_entities(self) -> np.ndarray:
        """Which entity positions name a live relation."""
        return np.diff(self.entity_relation.indptr) > 0

    @property
    def shape(self) -> Tuple[int, int, int]:
        """(entities, relations, passages): the sizes of the position spaces."""
        return (self.entity_relation.shape[0], self.entity_relation.shape[1], self.relation_passage.shape[1])

    def relations_of_entities(self, entities: np.ndarray) -> np.ndarray:
        return unique(neighbours(self.entity_relation, entities))

    def entities_of_relations(self, relations: np.ndarray) -> np.ndarray:
        return unique(neighbours(self.relation_entity, relations))

    def relations_of_passages(self, passages: np.ndarray) -> np.ndarray:
        return unique(neighbours(self.passage_relation, passages))

    def passages_of_relation(self, relation: int) -> np.ndarray:
        matrix = self.relation_passage
        return matrix.indices[matrix.indptr[relation] : matrix.indptr[relation + 1]]


def difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The values of sorted distinct `a` not in sorted distinct `b` (`np.setdiff1d` by binary search)."""
    if len(a) == 0 or len(b) == 0:
        return a
    i = np.minimum(np.searchsorted(b, a), len(b) - 1)
    return a[b[i] != a]


#: A passage is about an entity when at least this share of its relations name it.
ABOUT_SHARE = 0.5


def about(graph: Graph, entities: np.ndarray, share: float = ABOUT_SHARE) -> np.ndarray:
    """The passages about any of `entities` (positions, sorted): a passage is about an entity when at
    least `share` of its relations name it (the subject of a passage's title links, an LLM's triples'
    main subject). Only the rows of the entities' relations and of the passages stating them are read."""
    indptr = graph.passage_relation.indptr
    found = []
    for entity in np.asarray(entities, dtype=np.int64).tolist():
        stating = neighbours(graph.relation_passage, neighbours(graph.entity_relation, np.array([entity])))
        if len(stating) == 0:
            continue
        passages, counts = np.unique(stating, return_counts=True)
        found.append(passages[counts >= share * (indptr[passages + 1] - indptr[passages])])
    return unique(np.concatenate(found)) if found else _EMPTY


def topic_links(graph: Graph, passage: int, hub_passages: float, share: float = ABOUT_SHARE) -> np.ndarray:
    """The passages about an entity that `passage` names (positions, sorted; `passage` left out): the
    second hop of a bridge question, where the top passage names the entity the answer's passage is
    about. The entities `passage` names are those of its relations, hubs (stated in more than
    `hub_passages` passages) left out."""
    named = graph.entities_of_relations(graph.relations_of_passages(np.array([passage])))
    found = about(graph, named[graph.passage_counts[named] <= hub_passages], share)
    return found[found != passage]
