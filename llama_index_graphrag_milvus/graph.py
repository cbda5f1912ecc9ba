"""The adjacency: entity↔relation and relation→passage incidence as scipy.sparse matrices.

`Graph` is an immutable snapshot that the pure functions below read; `GraphCache` is the mutable cache
the store keeps current on insert and delete and rebuilds from Milvus when it opens. Positions (row and
column numbers) are private to one process; ids are what Milvus stores.

Every walk reads neighbours through CSR `indptr`/`indices`, so its cost follows the subgraph touched,
never the size of the graph: no dense matrix, no matrix power.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cached_property
from typing import Dict, Iterable, List, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

_EMPTY = np.zeros(0, dtype=np.int32)


def _csr(rows: np.ndarray, cols: np.ndarray, shape: Tuple[int, int]) -> sp.csr_matrix:
    """A binary incidence matrix; its data are int8 ones (1 byte per edge), indices int32."""
    data = np.ones(len(rows), dtype=np.int32)
    matrix = sp.csr_matrix((data, (rows, cols)), shape=shape)
    matrix.sum_duplicates()
    return sp.csr_matrix((np.ones(matrix.nnz, dtype=np.int8), matrix.indices, matrix.indptr), shape=shape)


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
    """

    entity_relation: sp.csr_matrix
    relation_entity: sp.csr_matrix
    relation_passage: sp.csr_matrix
    passage_relation: sp.csr_matrix
    entity_entity: sp.csr_matrix

    @cached_property
    def passage_counts(self) -> np.ndarray:
        """For each entity, the number of passages stating one of its relations."""
        mentions = (self.entity_relation.astype(np.int32) @ self.relation_passage.astype(np.int32)).tocsr()
        return np.diff(mentions.indptr)

    @property
    def shape(self) -> Tuple[int, int, int]:
        """(entities, relations, passages): the sizes of the position spaces."""
        return (self.entity_relation.shape[0], self.entity_relation.shape[1], self.relation_passage.shape[1])

    def relations_of_entities(self, entities: np.ndarray) -> np.ndarray:
        return np.unique(neighbours(self.entity_relation, entities))

    def entities_of_relations(self, relations: np.ndarray) -> np.ndarray:
        return np.unique(neighbours(self.relation_entity, relations))

    def relations_of_passages(self, passages: np.ndarray) -> np.ndarray:
        return np.unique(neighbours(self.passage_relation, passages))

    def passages_of_relation(self, relation: int) -> np.ndarray:
        matrix = self.relation_passage
        return matrix.indices[matrix.indptr[relation] : matrix.indptr[relation + 1]]


def expand_from_entities(graph: Graph, entities: Sequence[int], degree: int) -> np.ndarray:
    """Relations reached from seed entities: the nonzero columns of the seeds' rows of (A·Aᵀ)^degree·A.

    Degree 1 gives the seeds' own relations plus the relations of every entity sharing one with a seed.
    """
    frontier = np.unique(np.asarray(entities, dtype=np.int64))
    for _ in range(degree):
        frontier = np.union1d(frontier, graph.entities_of_relations(graph.relations_of_entities(frontier)))
    return graph.relations_of_entities(frontier)


def expand_from_relations(graph: Graph, relations: Sequence[int], degree: int) -> np.ndarray:
    """Relations reached from seed relations: the nonzero columns of the seeds' rows of (Aᵀ·A)^degree.

    Degree 1 gives the seeds plus every relation sharing an entity with a seed.
    """
    frontier = np.unique(np.asarray(relations, dtype=np.int64))
    for _ in range(degree):
        frontier = np.union1d(frontier, graph.relations_of_entities(graph.entities_of_relations(frontier)))
    return frontier


class _Ids:
    """A growable bijection between ids and dense positions; a removed id keeps its position, dead, and
    gets a new one if it comes back."""

    def __init__(self) -> None:
        self.ids: list = []
        self.position: Dict = {}
        self.live = bytearray()  # position -> 1 while the id is stored

    def add(self, key) -> int:
        pos = self.position.get(key)
        if pos is None:
            pos = self.position[key] = len(self.ids)
            self.ids.append(key)
            self.live.append(1)
        return pos

    def remove(self, key) -> None:
        pos = self.position.pop(key, None)
        if pos is not None:
            self.live[pos] = 0

    def mask(self) -> np.ndarray:
        """A boolean mask over positions: True where the id is stored."""
        return np.frombuffer(bytes(self.live), dtype=np.uint8).astype(bool)

    def __len__(self) -> int:
        return len(self.ids)


class GraphCache:
    """The in-memory adjacency, kept current by the store; a cache of what Milvus holds.

    Writers call `add_relations`, `add_passages` and `remove_passages`; readers take `snapshot()`, an
    immutable `Graph` rebuilt lazily after a change. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entities = _Ids()
        self.relations = _Ids()
        self.passages = _Ids()
        self._subject: List[int] = []  # relation position -> entity position
        self._object: List[int] = []
        self._passage_relations: Dict[int, np.ndarray] = {}  # passage position -> relation positions
        self._synonyms: List[Tuple[int, int]] = []  # pairs of entity positions
        self._snapshot: Graph | None = None

    # writes -------------------------------------------------------------------------------------
    def add_relations(self, rows: Iterable[Tuple[int, int, int]]) -> None:
        """Record relations as (relation id, subject entity id, object entity id)."""
        with self._lock:
            for rel, subj, obj in rows:
                if rel in self.relations.position:
                    continue
                self.relations.add(rel)  # a relation deleted earlier and stored again gets a new position
                self._subject.append(self.entities.add(subj))
                self._object.append(self.entities.add(obj))
            self._snapshot = None

    def add_synonyms(self, pairs: Iterable[Tuple[int, int]]) -> None:
        """Record synonym links as (entity id, entity id); links to unknown entities are ignored."""
        with self._lock:
            known = self.entities.position
            for a, b in pairs:
                if a in known and b in known and a != b:
                    self._synonyms.append((known[a], known[b]))
            self._snapshot = None

    def add_passages(self, rows: Iterable[Tuple[str, Sequence[int]]]) -> None:
        """Record passages as (passage id, relation ids it states); unknown relations are ignored."""
        with self._lock:
            known = self.relations.position
            for pid, rel_ids in rows:
                pos = self.passages.add(pid)
                self._passage_relations[pos] = np.array(
                    sorted({known[r] for r in rel_ids if r in known}), dtype=np.int32
                )
            self._snapshot = None

    def remove_passages(self, passage_ids: Iterable[str]) -> Tuple[List[int], List[int]]:
        """Forget passages; return the ids of the relations and the entities they leave unsupported.

        Works on the neighbourhood of the removed passages only.
        """
        with self._lock:
            graph = self._snapshot or self._build()
            removed = set()
            for pid in passage_ids:
                pos = self.passages.position.get(pid)
                if pos is not None:
                    self.passages.remove(pid)
                    if self._passage_relations.pop(pos, None) is not None:
                        removed.add(pos)
            if not removed:
                return [], []
            self._snapshot = None
            touched = np.unique(neighbours(graph.passage_relation, np.fromiter(removed, dtype=np.int64)))
            orphans = [
                int(r) for r in touched if removed.issuperset(graph.passages_of_relation(int(r)).tolist())
            ]
            orphan_set = set(orphans)
            dropped = [
                int(e)
                for e in graph.entities_of_relations(np.array(orphans, dtype=np.int64))
                if orphan_set.issuperset(neighbours(graph.entity_relation, np.array([e])).tolist())
            ]
            relation_ids = [self.relations.ids[p] for p in orphans]
            entity_ids = [self.entities.ids[p] for p in dropped]
            for pos in orphans:
                self.relations.remove(self.relations.ids[pos])
            for pos in dropped:
                self.entities.remove(self.entities.ids[pos])
            return relation_ids, entity_ids

    # reads --------------------------------------------------------------------------------------
    def snapshot(self) -> Graph:
        with self._lock:
            if self._snapshot is None:
                self._snapshot = self._build()
            return self._snapshot

    def _build(self) -> Graph:
        n_ent, n_rel, n_pas = len(self.entities), len(self.relations), len(self.passages)
        rels = np.flatnonzero(self.relations.mask()).astype(np.int32)
        subj = np.asarray(self._subject, dtype=np.int32)[rels]
        obj = np.asarray(self._object, dtype=np.int32)[rels]
        ent_rows = np.concatenate([subj, obj])
        rel_cols = np.concatenate([rels, rels])
        entity_relation = _csr(ent_rows, rel_cols, (n_ent, n_rel))
        relation_entity = entity_relation.T.tocsr()
        if self._passage_relations:
            pas = np.concatenate(
                [np.full(len(r), p, dtype=np.int32) for p, r in self._passage_relations.items()]
            )
            rel = np.concatenate(list(self._passage_relations.values()))
        else:
            pas = rel = _EMPTY
        passage_relation = _csr(pas, rel, (n_pas, n_rel))
        relation_passage = passage_relation.T.tocsr()
        pairs = np.asarray(self._synonyms, dtype=np.int32).reshape(-1, 2)
        entity_entity = _csr(
            np.concatenate([pairs[:, 0], pairs[:, 1]]), np.concatenate([pairs[:, 1], pairs[:, 0]]), (n_ent, n_ent)
        )
        return Graph(entity_relation, relation_entity, relation_passage, passage_relation, entity_entity)

    def has_entity(self, entity_id: int) -> bool:
        return entity_id in self.entities.position

    def has_relation(self, relation_id: int) -> bool:
        return relation_id in self.relations.position

    def has_passage(self, passage_id: str) -> bool:
        return passage_id in self.passages.position

    def passage_relations(self, passage_id: str):
        """The relation ids a stored passage states, or None if the passage is not stored."""
        pos = self.passages.position.get(passage_id)
        rels = None if pos is None else self._passage_relations.get(pos)
        return None if rels is None else {self.relations.ids[r] for r in rels.tolist()}

    def passages_of_relation(self, relation_id: int) -> List[str]:
        """The ids of the passages stating a relation, in the order they were stored."""
        pos = self.relations.position.get(relation_id)
        if pos is None:
            return []
        return [self.passages.ids[p] for p in self.snapshot().passages_of_relation(pos).tolist()]

    def synonym_count(self) -> int:
        return len(self._synonyms)

    def counts(self) -> Dict[str, int]:
        with self._lock:
            return {
                "entities": len(self.entities.position),
                "relations": len(self.relations.position),
                "passages": len(self._passage_relations),
            }


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


def local_subgraph(
    graph: Graph, relations: np.ndarray, relation_weights: np.ndarray, passages: Sequence[int] = ()
) -> Subgraph:
    """The subgraph around candidate `relations`: their entities, themselves and their passages (plus the
    given `passages`). Each relation's edges carry its weight (e.g. its similarity to the question), so
    a walk prefers relevant relations. Its size follows the candidates, never the whole graph."""
    relations = np.asarray(relations, dtype=np.int64)
    entities = graph.entities_of_relations(relations)
    passages = np.union1d(np.unique(neighbours(graph.relation_passage, relations)), np.asarray(passages, dtype=np.int64))
    weights = sp.diags(np.asarray(relation_weights, dtype=np.float64))
    er = graph.entity_relation[entities][:, relations] @ weights
    rp = weights @ graph.relation_passage[relations][:, passages]
    adjacency = sp.bmat([[None, er, None], [er.T, None, rp], [None, rp.T, None]], format="csr")
    return Subgraph(adjacency.astype(np.float64), entities, relations, passages)


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


def specificity(graph: Graph, entities: np.ndarray) -> np.ndarray:
    """1 / the number of passages each entity appears in (HippoRAG's node specificity)."""
    return 1.0 / np.maximum(1, graph.passage_counts[np.asarray(entities, dtype=np.int64)])


def chain_scores(
    graph: Graph, relations: np.ndarray, similarities: np.ndarray, hub_passages: float, synonyms: bool = True
) -> Tuple[np.ndarray, np.ndarray]:
    """Score candidate relations as two-step chains: s(r) = sim(r) + max sim(r') over the candidates r'
    that share an entity with r, or a synonym of one. Entities stated in more than `hub_passages`
    passages ("United States", "2014") link too much to mean anything and do not chain.

    Returns the scores and, for each relation, the candidate index of its best neighbour (-1 if none).
    The cost follows the candidates: a |candidates|×|candidates| sparse product.
    """
    relations = np.asarray(relations, dtype=np.int64)
    similarities = np.clip(np.asarray(similarities, dtype=np.float64), 0.0, None)
    if len(relations) == 0:
        return similarities, np.zeros(0, dtype=np.int64)
    incidence = graph.relation_entity[relations]  # C×E
    keep = np.asarray(graph.passage_counts[incidence.indices] <= hub_passages, dtype=np.float64)
    incidence = sp.csr_matrix((incidence.data * keep, incidence.indices, incidence.indptr), shape=incidence.shape)
    incidence.eliminate_zeros()
    with_synonyms = incidence + incidence @ graph.entity_entity if synonyms else incidence
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
