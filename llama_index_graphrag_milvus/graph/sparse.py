"""The adjacency as pure functions: entity↔relation and relation→passage incidence as scipy.sparse
matrices in an immutable `Graph`, and the walks and rankers that read it.

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
        loaded from Milvus, where the whole store's counts are read from the adjacency index); None: counted
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


@dataclass(frozen=True)
class Subgraph:
    """A local entity–relation–passage graph: node k of `adjacency` is entity `entities[k]` for
    k < len(entities), then relation `relations[k - len(entities)]`, then the passages."""

    adjacency: sp.csr_matrix
    entities: np.ndarray
    relations: np.ndarray
    passages: np.ndarray

    def slices(self) -> Tuple[slice, slice, slice]:
        e, r = len(self.entities), len(self.relations)
        return slice(0, e), slice(e, e + r), slice(e + r, e + r + len(self.passages))


def entity_passage_subgraph(graph: Graph, relations: np.ndarray) -> Subgraph:
    """HippoRAG 2's graph, around candidate `relations`: their entities and their passages, an entity linked
    to a passage when the passage states a candidate relation of that entity (no relation nodes, so one
    hop is one step). Only the candidates' rows are read: its cost follows the candidates, whatever the
    degree of their entities."""
    relations = np.asarray(relations, dtype=np.int64)
    re = graph.relation_entity[relations]  # C×E, the candidates' rows only
    rp = graph.relation_passage[relations]  # C×P
    entities, passages = unique(re.indices), unique(rp.indices)
    re = sp.csr_matrix((np.ones(re.nnz), np.searchsorted(entities, re.indices), re.indptr), shape=(len(relations), len(entities)))
    rp = sp.csr_matrix((np.ones(rp.nnz), np.searchsorted(passages, rp.indices), rp.indptr), shape=(len(relations), len(passages)))
    ep = (re.T @ rp).tocsr()
    ep.data[:] = 1.0
    adjacency = sp.bmat([[None, ep], [ep.T, None]], format="csr")
    return Subgraph(adjacency.astype(np.float64), entities, np.zeros(0, dtype=np.int64), passages)


def personalized_pagerank(
    adjacency: sp.csr_matrix, personalization: np.ndarray, damping: float = 0.5, iterations: int = 50, tol: float = 1e-9
) -> np.ndarray:
    """Personalized PageRank by power iteration on a small symmetric weighted adjacency.

    `damping` is the probability of following an edge (1 - damping restarts at the personalization).
    Returns a distribution over the nodes; zeros if the personalization is all zero.
    """
    total = personalization.sum()
    if total <= 0:
        return np.zeros_like(personalization, dtype=np.float64)
    restart = personalization / total
    out_weight = np.asarray(adjacency.sum(axis=1)).ravel()
    inverse = np.divide(1.0, out_weight, out=np.zeros_like(out_weight), where=out_weight > 0)
    transition = (sp.diags(inverse) @ adjacency).T.tocsr()  # column-stochastic where edges exist
    dangling = out_weight == 0
    rank = restart.copy()
    for _ in range(iterations):
        step = transition @ rank + rank[dangling].sum() * restart  # dangling mass restarts
        new = (1 - damping) * restart + damping * step
        if np.abs(new - rank).sum() < tol:
            return new
        rank = new
    return rank


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


def specificity(passage_counts: np.ndarray) -> np.ndarray:
    """1 / the number of passages each entity appears in (HippoRAG's node specificity)."""
    return 1.0 / np.maximum(1, np.asarray(passage_counts))


def chain_scores(
    graph: Graph, relations: np.ndarray, similarities: np.ndarray, hub_passages: float, synonyms: bool = True
) -> Tuple[np.ndarray, np.ndarray]:
    """Score candidate relations as two-step chains: s(r) = sim(r) + max sim(r') over the candidates r'
    that share an entity with r, or a synonym of one. Entities stated in more than `hub_passages`
    passages ("United States", "2014") link too much to mean anything and do not chain.

    Returns the scores and, for each relation, the candidate index of its best neighbour (-1 if none).
    The products are |candidates|×|candidates|; the entities' passage counts (`Graph.passage_counts`)
    are computed over the whole graph once per snapshot.
    """
    relations = np.asarray(relations, dtype=np.int64)
    similarities = np.clip(np.asarray(similarities, dtype=np.float64), 0.0, None)
    if len(relations) == 0:
        return similarities, np.zeros(0, dtype=np.int64)
    incidence = graph.relation_entity[relations]  # C×E
    keep = np.asarray(graph.passage_counts[incidence.indices] <= hub_passages, dtype=np.float64)
    incidence = sp.csr_matrix((incidence.data * keep, incidence.indices, incidence.indptr), shape=incidence.shape)
    incidence.eliminate_zeros()
    # renumber the entities touched (the candidates' and their synonyms) 0..L-1, so that no product
    # below allocates anything the size of the whole graph
    ends = unique(incidence.indices)
    linked = graph.entity_entity[ends] if synonyms else None  # rows: ends; columns: their synonyms
    local = ends if linked is None else union(ends, linked.indices)
    incidence = sp.csr_matrix(
        (incidence.data, np.searchsorted(local, incidence.indices), incidence.indptr), shape=(len(relations), len(local))
    )
    with_synonyms = incidence
    if linked is not None:  # entity -> its synonyms, as L×L (the rows of `ends` at their local numbers)
        counts = np.zeros(len(local), dtype=np.int64)
        counts[np.searchsorted(local, ends)] = np.diff(linked.indptr)
        indptr = np.concatenate([[0], np.cumsum(counts)])
        synonyms_of = sp.csr_matrix((linked.data, np.searchsorted(local, linked.indices), indptr), shape=(len(local),) * 2)
        with_synonyms = incidence + incidence @ synonyms_of
    adjacency = (incidence @ with_synonyms.T).tocsr()
    adjacency = (adjacency + adjacency.T).tocsr()
    adjacency.setdiag(0)
    adjacency.eliminate_zeros()
    best = np.full(len(relations), -1, dtype=np.int64)
    neighbour_score = np.zeros(len(relations))
    for i in range(len(relations)):  # rows are short: the candidates' local neighbourhoods
        row = adjacency.indices[adjacency.indptr[i] : adjacency.indptr[i + 1]]
        if len(row):
            j = row[np.argmax(similarities[row])]
            best[i], neighbour_score[i] = j, similarities[j]
    return similarities + neighbour_score, best


def passage_scores(
    graph: Graph, relations: np.ndarray, relation_scores: np.ndarray
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every passage stating one of `relations`: its best relation score and which relation (candidate
    index) gave it. Returns (passage positions, scores, best relation index)."""
    relations = np.asarray(relations, dtype=np.int64)
    block = graph.relation_passage[relations].tocoo()  # C×P
    if block.nnz == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=np.int64)
    scores = np.asarray(relation_scores, dtype=np.float64)[block.row]
    order = np.lexsort((-scores, block.col))  # by passage, best score first
    cols, first = np.unique(block.col[order], return_index=True)
    winners = order[first]
    return cols.astype(np.int64), scores[winners], block.row[winners].astype(np.int64)
