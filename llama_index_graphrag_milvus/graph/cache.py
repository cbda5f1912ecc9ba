"""The mutable adjacency: `GraphCache`, the in-memory copy of the graph that the store keeps current on
insert and delete and rebuilds from Milvus when it opens.

Writers record relations, passages, entity names and synonym links by id; readers take `snapshot()`, an
immutable `graph.Graph` of scipy.sparse matrices over positions. A write drops the snapshot and the next
`snapshot()` rebuilds every matrix, O(graph); walks on a snapshot read only the rows they touch.
"""

from __future__ import annotations

import threading
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from llama_index_graphrag_milvus.graph.sparse import Graph, binary_csr, unique
from llama_index_graphrag_milvus.graph.ids import Growable, IntIds, Names, StrIds


class GraphCache:
    """The in-memory adjacency, kept current by the store; a cache of what Milvus holds.

    Writers call `add_relations`, `add_passages` and `remove`; readers take `snapshot()`, an
    immutable `Graph`. A write drops the snapshot; the next `snapshot()` rebuilds every matrix, O(graph).
    Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._empty()

    def reset(self) -> None:
        with self._lock:  # the store was cleared
            self._empty()

    def _empty(self) -> None:
        self.entities = IntIds()
        self.relations = IntIds()
        self.passages = StrIds()
        # relation position r -> its subject and object entity positions at 2r, 2r + 1: with every
        # relation live, the snapshot's relation×entity matrix uses this array as its indices
        self._ends = Growable()
        # passage -> relation edges (relation positions), appended in passage position order: passage
        # p's are _edge_relation[_first[p] : _first[p] + _count[p]] (so no passage is stored per edge)
        self._edge_relation = Growable()
        self._first, self._count = Growable(), Growable()
        self._names = Names()  # entity position -> its name as first written
        self._synonym_a, self._synonym_b = Growable(), Growable()  # pairs of entity positions
        self._snapshot: Optional[Graph] = None

    # writes -------------------------------------------------------------------------------------
    def add_relations(self, rows: Iterable[Tuple[int, int, int]]) -> None:
        """Record relations as (relation id, subject entity id, object entity id); vectorized, so that a
        store opens at the speed Milvus reads rows."""
        table = (rows if isinstance(rows, np.ndarray) else np.array(list(rows))).astype(np.int64).reshape(-1, 3)
        if len(table) == 0:
            return
        with self._lock:
            _, first = np.unique(table[:, 0], return_index=True)
            table = table[np.sort(first)]
            table = table[self.relations.lookup(table[:, 0]) < 0]  # a deleted relation stored again is new
            if len(table) == 0:
                return
            ends = table[:, 1:].ravel()
            positions = self.entities.lookup(ends)
            missing = positions < 0
            if missing.any():
                new, first, inverse = np.unique(ends[missing], return_index=True, return_inverse=True)
                order = np.argsort(first, kind="stable")  # new entities in order of appearance
                rank = np.empty(len(order), dtype=np.int64)
                rank[order] = np.arange(len(order))
                positions[missing] = self.entities.add_new(new[order])[rank[inverse.ravel()]]
            self.relations.add_new(table[:, 0])
            self._ends.extend(positions)  # subject, object, subject, object, ...
            self._snapshot = None

    def name_entities(self, entity_ids: Sequence[int], names: Sequence[str]) -> None:
        """Record entity names (as first written); names of unknown entities are ignored."""
        with self._lock:
            positions = self.entities.lookup(np.asarray(entity_ids, dtype=np.int64))
            known = np.flatnonzero(positions >= 0)
            self._names.set(positions[known], [names[i] for i in known.tolist()])

    def entity_name(self, position: int) -> str:
        """The name of the entity at a position ("" if it has none)."""
        return self._names.get(position)

    def add_synonyms(self, pairs: Iterable[Tuple[int, int]]) -> None:
        """Record synonym links as (entity id, entity id); links to unknown entities are ignored."""
        pairs = np.asarray(pairs if isinstance(pairs, np.ndarray) else list(pairs), dtype=np.int64).reshape(-1, 2)
        if len(pairs) == 0:
            return
        self.add_synonym_positions(self.entities.lookup(pairs[:, 0]), self.entities.lookup(pairs[:, 1]))

    def add_synonym_positions(self, a: np.ndarray, b: np.ndarray) -> None:
        """`add_synonyms` by entity positions (-1: unknown, ignored)."""
        with self._lock:
            keep = (a >= 0) & (b >= 0) & (a != b)
            self._synonym_a.extend(a[keep])
            self._synonym_b.extend(b[keep])
            self._snapshot = None

    def add_passages(self, rows: Iterable[Tuple[str, Sequence[int]]]) -> None:
        """Record passages as (passage id, relation ids it states); unknown relations are ignored.
        A passage stored again replaces its relations."""
        latest = dict(rows)  # one row per passage: the last wins
        lengths = np.fromiter((len(r) for r in latest.values()), dtype=np.int64, count=len(latest))
        flat = np.fromiter((r for rels in latest.values() for r in rels), dtype=np.int64, count=int(lengths.sum()))
        self.add_passage_columns(list(latest), np.concatenate([[0], np.cumsum(lengths)]), flat)

    def add_passage_columns(self, passage_ids: List[str], offsets: np.ndarray, relation_ids: np.ndarray) -> None:
        """`add_passages` for distinct passage ids, column by column: passage i states
        relation_ids[offsets[i]:offsets[i + 1]]."""
        if not passage_ids:
            return
        lengths = np.diff(np.asarray(offsets, dtype=np.int64))
        with self._lock:
            keys = self.passages.keys(passage_ids)
            for key in keys[self.passages.lookup(keys) >= 0].tolist():  # stored again: replaced
                self.passages.remove(key)
            positions = self.passages.add_new(keys)
            found = self.relations.lookup(relation_ids)
            owner = np.repeat(np.arange(len(positions), dtype=np.int64), lengths)
            keep = found >= 0
            width = max(len(self.relations), 1)
            pairs = unique(owner[keep] * width + found[keep])  # by passage, then relation; no repeats
            owner, relation = pairs // width, pairs % width
            counts = np.bincount(owner, minlength=len(positions))
            starts = len(self._edge_relation) + np.concatenate([[0], np.cumsum(counts)[:-1]])
            self._first.extend(starts)
            self._count.extend(counts)
            self._edge_relation.extend(relation)
            self._snapshot = None

    def compact(self) -> None:
        """Release the spare capacity of the growable arrays (after a bulk load)."""
        with self._lock:
            for array in (self._ends, self._edge_relation, self._first, self._count,
                          self._synonym_a, self._synonym_b):
                array.shrink()
            self.entities.shrink()
            self.relations.shrink()
            self._names.shrink()

    def remove(self, passages: Iterable[str] = (), relations: Iterable[int] = (), entities: Iterable[int] = ()) -> None:
        """Forget passages, relations and entities (ids not held are ignored); the writer decides what a
        write orphans (`ingest.adjacency`), this only mirrors it."""
        with self._lock:
            for registry, ids in ((self.passages, passages), (self.relations, relations), (self.entities, entities)):
                for key in ids:
                    registry.remove(key)
            self._snapshot = None

    # reads --------------------------------------------------------------------------------------
    def snapshot(self) -> Graph:
        with self._lock:
            if self._snapshot is None:
                self._snapshot = self._build()
            return self._snapshot

    def _build(self) -> Graph:
        n_ent, n_rel, n_pas = len(self.entities), len(self.relations), len(self.passages)
        entity_relation, relation_entity = _entity_incidence(self._ends.array(), self.relations.mask(), n_ent)
        rel = self._edge_relation.array()
        pas = np.repeat(np.arange(len(self._count), dtype=np.int32), self._count.array())
        live = self.passages.mask()[pas] if len(pas) else np.zeros(0, dtype=bool)
        pas, rel = pas[live], rel[live]
        passage_relation = binary_csr(pas, rel, (n_pas, n_rel))
        relation_passage = passage_relation.T.tocsr()
        pairs = np.stack([self._synonym_a.array(), self._synonym_b.array()], axis=1)
        pairs = pairs[self.entities.mask()[pairs].all(axis=1)] if len(pairs) else pairs  # links of removed entities go
        entity_entity = binary_csr(
            np.concatenate([pairs[:, 0], pairs[:, 1]]), np.concatenate([pairs[:, 1], pairs[:, 0]]), (n_ent, n_ent)
        )
        return Graph(entity_relation, relation_entity, relation_passage, passage_relation, entity_entity)

    def export(self) -> Dict[str, np.ndarray]:
        """The live content, as ids, with the positions each row came from (to gather vectors by):
        entity_ids, entity_names, entity_positions; relation_ids, relation_ends (R×2 entity ids), relation_positions; passage_ids, passage_offsets,
        passage_relations (relation ids), passage_positions; synonyms (S×2 indices into entity_ids)."""
        with self._lock:
            entity_ids = self.entities.ids_array()
            relation_ids = self.relations.ids_array()
            rels = np.flatnonzero(self.relations.mask())
            ends = entity_ids[self._ends.array().reshape(-1, 2)[rels]]
            passages = np.flatnonzero(self.passages.mask())
            offsets, edge_relations = _live_edges(
                self._first.array()[passages], self._count.array()[passages], self._edge_relation.array(),
                self.relations.mask(),
            )
            pairs = np.stack([self._synonym_a.array(), self._synonym_b.array()], axis=1).astype(np.int64)
            entity_alive = self.entities.mask()
            pairs = pairs[entity_alive[pairs[:, 0]] & entity_alive[pairs[:, 1]]] if len(pairs) else pairs
            entities = np.flatnonzero(entity_alive)
            synonyms = np.searchsorted(entities, pairs)  # as indices into entity_ids
            return {
                "entity_ids": entity_ids[entities].copy(),
                "entity_names": [self._names.get(p) for p in entities.tolist()],
                "entity_positions": entities,
                "relation_ids": relation_ids[rels].copy(),
                "relation_ends": ends,
                "relation_positions": rels,
                "passage_ids": self.passage_ids(passages),
                "passage_offsets": offsets,
                "passage_relations": relation_ids[edge_relations],
                "passage_positions": passages,
                "synonyms": synonyms,
            }

    def relation_ends(self, positions: np.ndarray) -> np.ndarray:
        """The (subject, object) entity ids of the relations at `positions`, as an N×2 array."""
        with self._lock:
            ends = self._ends.array().reshape(-1, 2)[np.asarray(positions, dtype=np.int64)]
            return self.entities.ids_array()[ends].reshape(-1, 2)

    def has_entity(self, entity_id: int) -> bool:
        return entity_id in self.entities.position

    def has_relation(self, relation_id: int) -> bool:
        return relation_id in self.relations.position

    def has_passage(self, passage_id: str) -> bool:
        return passage_id in self.passages.position

    def passage_relations(self, passage_id: str):
        """The relation ids a stored passage states, or None if the passage is not stored."""
        pos = self.passages.position.get(passage_id)
        if pos is None:
            return None
        start = self._first[pos]
        rels = self._edge_relation.array()[start : start + self._count[pos]]
        return {self.relations.ids[r] for r in rels.tolist()}

    def passages_of_relation(self, relation_id: int) -> List[str]:
        """The ids of the passages stating a relation, in the order they were stored."""
        pos = self.relations.position.get(relation_id)
        if pos is None:
            return []
        return self.passage_ids(self.snapshot().passages_of_relation(pos))

    def passage_ids(self, positions: np.ndarray) -> List[str]:
        """The ids of the passages at `positions` (one gather)."""
        return self.passages.ids_at(positions)

    def synonym_count(self) -> int:
        return len(self._synonym_a)

    def counts(self) -> Dict[str, int]:
        with self._lock:
            return {
                "entities": len(self.entities.position),
                "relations": len(self.relations.position),
                "passages": len(self.passages.position),
            }


def _entity_incidence(ends: np.ndarray, alive: np.ndarray, n_ent: int) -> Tuple[sp.csr_matrix, sp.csr_matrix]:
    """The E×R and R×E incidence of the live relations; `ends` holds the subject and object entity
    positions of relation position r at 2r, 2r + 1, `alive` which relation positions are live."""
    n_rel = len(alive)
    rels = np.flatnonzero(alive).astype(np.int32)
    pairs = ends.reshape(-1, 2)
    entity_relation = binary_csr(np.concatenate([pairs[rels, 0], pairs[rels, 1]]), np.concatenate([rels, rels]), (n_ent, n_rel))
    if alive.all():  # two entities a relation, in order: share the array instead of a copy
        indptr = np.arange(0, 2 * n_rel + 1, 2, dtype=np.int32)
        data = np.ones(2 * n_rel, dtype=np.int8)
        return entity_relation, sp.csr_matrix((data, ends, indptr), shape=(n_rel, n_ent), copy=False)
    return entity_relation, entity_relation.T.tocsr()


def _live_edges(
    first: np.ndarray, count: np.ndarray, edge_relation: np.ndarray, relation_alive: np.ndarray
) -> Tuple[np.ndarray, np.ndarray]:
    """The relation positions the passages with edges `edge_relation[first[i] : first[i] + count[i]]`
    state, flat, with the offsets of each passage's run, less the edges to dead relations."""
    lengths = count.astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    edges = np.repeat(first - offsets[:-1], lengths) + np.arange(int(lengths.sum()))
    edge_relations = edge_relation[edges]
    alive = relation_alive[edge_relations] if len(edge_relations) else np.zeros(0, dtype=bool)
    if not alive.all():  # drop edges to removed relations, keep the offsets right
        owner = np.repeat(np.arange(len(first)), lengths)[alive]
        offsets = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=len(first)))]).astype(np.int64)
        edge_relations = edge_relations[alive]
    return offsets, edge_relations
