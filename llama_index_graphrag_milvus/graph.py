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
from typing import Dict, Iterable, List, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

_EMPTY = np.zeros(0, dtype=np.int32)


def _csr(rows: np.ndarray, cols: np.ndarray, shape: Tuple[int, int]) -> sp.csr_matrix:
    data = np.ones(len(rows), dtype=np.float32)
    matrix = sp.csr_matrix((data, (rows, cols)), shape=shape)
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return matrix


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
    """

    entity_relation: sp.csr_matrix
    relation_entity: sp.csr_matrix
    relation_passage: sp.csr_matrix
    passage_relation: sp.csr_matrix

    @property
    def shape(self) -> Tuple[int, int, int]:
        """(entities, relations, passages): the sizes of the position spaces."""
        return (self.entity_relation.shape[0], self.entity_relation.shape[1], self.relation_passage.shape[1])

    def relations_of_entities(self, entities: np.ndarray) -> np.ndarray:
        return np.unique(neighbours(self.entity_relation, entities))

    def entities_of_relations(self, relations: np.ndarray) -> np.ndarray:
        return np.unique(neighbours(self.relation_entity, relations))

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
    """A growable bijection between ids and dense positions."""

    def __init__(self) -> None:
        self.ids: list = []
        self.position: Dict = {}

    def add(self, key) -> int:
        pos = self.position.get(key)
        if pos is None:
            pos = self.position[key] = len(self.ids)
            self.ids.append(key)
        return pos

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
        self._alive = bytearray()  # relation position -> 1 while the relation is stored
        self._passage_relations: Dict[int, np.ndarray] = {}  # passage position -> relation positions
        self._snapshot: Graph | None = None

    # writes -------------------------------------------------------------------------------------
    def add_relations(self, rows: Iterable[Tuple[int, int, int]]) -> None:
        """Record relations as (relation id, subject entity id, object entity id)."""
        with self._lock:
            for rel, subj, obj in rows:
                if rel in self.relations.position:
                    continue
                self.relations.add(rel)  # a relation deleted earlier and stored again gets a new position
                self._alive.append(1)
                self._subject.append(self.entities.add(subj))
                self._object.append(self.entities.add(obj))
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
                    del self.passages.position[pid]
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
                self._alive[pos] = 0
                del self.relations.position[self.relations.ids[pos]]
            for pos in dropped:
                del self.entities.position[self.entities.ids[pos]]
            return relation_ids, entity_ids

    # reads --------------------------------------------------------------------------------------
    def snapshot(self) -> Graph:
        with self._lock:
            if self._snapshot is None:
                self._snapshot = self._build()
            return self._snapshot

    def _build(self) -> Graph:
        n_ent, n_rel, n_pas = len(self.entities), len(self.relations), len(self.passages)
        rels = np.flatnonzero(np.frombuffer(bytes(self._alive), dtype=np.uint8)).astype(np.int32)
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
        return Graph(entity_relation, relation_entity, relation_passage, passage_relation)

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

    def counts(self) -> Dict[str, int]:
        with self._lock:
            return {
                "entities": len(self.entities.position),
                "relations": len(self.relations.position),
                "passages": len(self._passage_relations),
            }
