"""The mutable adjacency: `GraphCache`, the in-memory copy of a store's facts, from which the graph a
retrieval reads is derived.

Writers record what Milvus stores, by id: relations with their two entities, passages with the relations
they state, entity names, and the links between entities with their cosines. Readers take `snapshot()`,
an immutable `graph.Graph` of scipy.sparse matrices over positions, derived from those facts: only the
relations some stored passage states and the entities of those (the live ones), and each live entity's
synonyms (its `MAX_SYNONYMS` best live links, and the entities keeping it among theirs). A write drops the
snapshot and the next `snapshot()` derives it again, O(graph); walks read only the rows they touch.
"""

from __future__ import annotations

import threading
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from llama_index_graphrag_milvus.graph.ids import Growable, IntIds, Names, StrIds
from llama_index_graphrag_milvus.graph.sparse import Graph, binary_csr, unique
from llama_index_graphrag_milvus.schema import MAX_SYNONYMS


class GraphCache:
    """The facts of a store, in memory, kept current by the store; a cache of what Milvus holds.

    Writers call `add_relations`, `add_passages`, `name_entities`, `add_links` and `remove`; readers take
    `snapshot()`, an immutable `Graph`. Thread-safe."""

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
        # relation position r -> its subject and object entity positions at 2r, 2r + 1
        self._ends = Growable()
        # passage -> relation edges (relation positions), appended in passage position order: passage
        # p's are _edge_relation[_first[p] : _first[p] + _count[p]]
        self._edge_relation = Growable()
        self._first, self._count = Growable(), Growable()
        self._names = Names()  # entity position -> its name as first written
        self._link_a, self._link_b = Growable(), Growable()  # entity positions of each link
        self._link_score = Growable(np.float32)
        self._snapshot: Optional[Graph] = None

    # writes -------------------------------------------------------------------------------------
    def add_relations(self, rows: Iterable[Tuple[int, int, int]]) -> None:
        """Record stored relations as (relation id, subject entity id, object entity id); vectorized, so
        that a cache fills at the speed Milvus reads rows."""
        table = (rows if isinstance(rows, np.ndarray) else np.array(list(rows))).astype(np.int64).reshape(-1, 3)
        if len(table) == 0:
            return
        with self._lock:
            _, first = np.unique(table[:, 0], return_index=True)
            table = table[np.sort(first)]
            table = table[self.relations.lookup(table[:, 0]) < 0]  # a compacted relation stored again is new
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

    def add_links(self, a: np.ndarray, b: np.ndarray, scores: np.ndarray) -> None:
        """Record links between entities, by id, with their cosines; links of unknown entities are ignored."""
        a, b = (self.entities.lookup(np.asarray(ids, dtype=np.int64)) for ids in (a, b))
        keep = (a >= 0) & (b >= 0) & (a != b)
        with self._lock:
            self._link_a.extend(a[keep])
            self._link_b.extend(b[keep])
            self._link_score.extend(np.asarray(scores, dtype=np.float32)[keep])
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
        """Release the spare capacity of the growable arrays (after a big build)."""
        with self._lock:
            for array in (self._ends, self._edge_relation, self._first, self._count, self._link_a, self._link_b,
                          self._link_score, self.entities, self.relations, self._names):
                array.shrink()

    def remove(self, passages: Iterable[str] = (), relations: Iterable[int] = (), entities: Iterable[int] = ()) -> None:
        """Forget passages (deleted), and relations and entities (compacted away); ids not held are ignored."""
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
        rel = self._edge_relation.array()
        pas = np.repeat(np.arange(len(self._count), dtype=np.int32), self._count.array())
        live = self.passages.mask()[pas] & self.relations.mask()[rel] if len(pas) else np.zeros(0, dtype=bool)
        passage_relation = binary_csr(pas[live], rel[live], (n_pas, n_rel))
        relation_passage = passage_relation.T.tocsr()
        stated = np.diff(relation_passage.indptr) > 0  # the live relations
        entity_relation, relation_entity = _entity_incidence(self._ends.array(), stated, n_ent)
        synonyms = self._synonyms(np.diff(entity_relation.indptr) > 0)
        entity_entity = binary_csr(np.concatenate([synonyms[0], synonyms[1]]),
                                   np.concatenate([synonyms[1], synonyms[0]]), (n_ent, n_ent))
        return Graph(entity_relation, relation_entity, relation_passage, passage_relation, entity_entity)

    def _synonyms(self, live: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """The synonym pairs among the live entities (`synonym_pairs` of their links)."""
        a, b = self._link_a.array().astype(np.int64), self._link_b.array().astype(np.int64)
        keep = live[a] & live[b] if len(a) else np.zeros(0, dtype=bool)
        return synonym_pairs(a[keep], b[keep], self._link_score.array()[keep], self.entities.ids_array())

    def export(self) -> Dict[str, np.ndarray]:
        """What the cache holds, as ids (what a snapshot file saves), with the positions each row came
        from (to gather vectors by): entity_ids, entity_names, entity_positions; relation_ids,
        relation_ends (R×2 entity ids), relation_positions; passage_ids, passage_offsets,
        passage_relations (relation ids), passage_positions; links (L×2 indices into entity_ids), link_scores."""
        with self._lock:
            entity_ids, relation_ids = self.entities.ids_array(), self.relations.ids_array()
            rels = np.flatnonzero(self.relations.mask())
            passages = np.flatnonzero(self.passages.mask())
            offsets, edge_relations = _live_edges(self._first.array()[passages], self._count.array()[passages],
                                                  self._edge_relation.array(), self.relations.mask())
            entities = np.flatnonzero(self.entities.mask())
            a, b, score = self._link_a.array(), self._link_b.array(), self._link_score.array()
            held = self.entities.mask()[a] & self.entities.mask()[b] if len(a) else np.zeros(0, dtype=bool)
            return {
                "entity_ids": entity_ids[entities].copy(),
                "entity_names": [self._names.get(p) for p in entities.tolist()],
                "entity_positions": entities,
                "relation_ids": relation_ids[rels].copy(),
                "relation_ends": entity_ids[self._ends.array().reshape(-1, 2)[rels]],
                "relation_positions": rels,
                "passage_ids": self.passage_ids(passages),
                "passage_offsets": offsets,
                "passage_relations": relation_ids[edge_relations],
                "passage_positions": passages,
                "links": np.searchsorted(entities, np.stack([a[held], b[held]], axis=1).astype(np.int64)),
                "link_scores": score[held].copy(),
            }

    def relation_ends(self, positions: np.ndarray) -> np.ndarray:
        """The (subject, object) entity ids of the relations at `positions`, as an N×2 array."""
        with self._lock:
            ends = self._ends.array().reshape(-1, 2)[np.asarray(positions, dtype=np.int64)]
            return self.entities.ids_array()[ends].reshape(-1, 2)

    def passage_relations(self, passage_id: str):
        """The relation ids a stored passage states, or None if the passage is not stored."""
        pos = int(self.passages.lookup([passage_id])[0])
        if pos < 0:
            return None
        start = self._first[pos]
        return set(self.relations.ids_at(self._edge_relation.array()[start : start + self._count[pos]]))

    def passages_of_relation(self, relation_id: int) -> List[str]:
        """The ids of the passages stating a relation, in the order they were stored."""
        pos = int(self.relations.lookup([relation_id])[0])
        if pos < 0:
            return []
        return self.passage_ids(self.snapshot().passages_of_relation(pos))

    def passage_ids(self, positions: np.ndarray) -> List[str]:
        """The ids of the passages at `positions` (one gather)."""
        return self.passages.ids_at(positions)

    def counts(self) -> Dict[str, int]:
        """The live rows: passages stored, relations they state, entities those name."""
        graph = self.snapshot()
        return {"entities": int(graph.live_entities.sum()), "relations": int(graph.live_relations.sum()),
                "passages": self.passages.live_count()}


def synonym_pairs(a: np.ndarray, b: np.ndarray, score: np.ndarray, ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Synonyms from links (`a`, `b`: entity positions, all live; `score`: their cosines; `ids`: the id at
    each position, which settles ties): each entity keeps its `MAX_SYNONYMS` best links, and two
    entities are synonyms when either keeps the other. Returns the kept (entity, other) pairs, one way."""
    low, high = np.minimum(a, b), np.maximum(a, b)
    _, first = np.unique(low * (int(high.max(initial=0)) + 1) + high, return_index=True)  # a link twice counts once
    low, high, score = low[first], high[first], score[first]
    source, other = np.concatenate([low, high]), np.concatenate([high, low])
    if len(source) == 0:
        return source, other
    order = np.lexsort((ids[other], -np.concatenate([score, score]), source))
    source, other = source[order], other[order]
    starts = np.flatnonzero(np.r_[True, source[1:] != source[:-1]])
    rank = np.arange(len(source)) - np.repeat(starts, np.diff(np.r_[starts, len(source)]))
    kept = rank < MAX_SYNONYMS
    return source[kept], other[kept]


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
    state, flat, with the offsets of each passage's run, less the edges to forgotten relations."""
    lengths = count.astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    edges = np.repeat(first - offsets[:-1], lengths) + np.arange(int(lengths.sum()))
    edge_relations = edge_relation[edges]
    alive = relation_alive[edge_relations] if len(edge_relations) else np.zeros(0, dtype=bool)
    if not alive.all():  # drop edges to forgotten relations, keep the offsets right
        owner = np.repeat(np.arange(len(first)), lengths)[alive]
        offsets = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=len(first)))]).astype(np.int64)
        edge_relations = edge_relations[alive]
    return offsets, edge_relations
