"""`MemoryGraph`: the adjacency as a cache in this process, with its snapshot file.

The cache (`GraphCache`) is built when first used: from the snapshot file when the log still holds the
ids it was saved with, else from the facts in Milvus, read page by page. This store's own writes are added
to it as they are made; other stores' are read by the next `sync()`. Retrieval walks it in memory,
cutting every step by similarity to the question.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Set

import numpy as np

import llama_index_graphrag_milvus.milvus.snapshot as snapshot_file
from llama_index_graphrag_milvus.backends.base import (
    Expansion, Neighbourhood, Written, hub_limit, passages_in_milvus, stored_in_milvus,
)
from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.graph.sparse import Graph, about, topic_links, unique
from llama_index_graphrag_milvus.graph.walk import GraphAdjacency, walk
from llama_index_graphrag_milvus.milvus.collections import ENTITIES, PASSAGES, RELATIONS, Collections
from llama_index_graphrag_milvus.milvus.search import CachedSearch, VectorSearch

logger = logging.getLogger(__name__)

_EMPTY = np.zeros(0, dtype=np.int64)


class MemoryGraph:
    """The `GraphBackend` whose adjacency lives in this process.

    Args:
        collections: The store's collections (the source of truth).
        search: The store's vector search; a `CachedSearch` is filled and saved with the adjacency.
        cache: The adjacency, shared with `search`.
        snapshot: The snapshot file, or None for none.
        meta: The settings a snapshot must have been saved under to be used.
    """

    def __init__(self, collections: Collections, search: VectorSearch, cache: GraphCache, snapshot: Optional[Path],
                 meta: Dict[str, Any]) -> None:
        self.collections, self.search, self.cache = collections, search, cache
        self.snapshot, self.meta = snapshot, meta
        self._vectors = search if isinstance(search, CachedSearch) else None
        self._lock = threading.Lock()
        self._built = False
        self._log: FrozenSet[str] = frozenset()  # the log ids of the writes the caches hold
        self._stale = False  # another store wrote what the caches do not hold
        self.snapshot_used = False  # the caches hold exactly what the snapshot file holds

    # building -----------------------------------------------------------------------------------
    def ready(self) -> GraphCache:
        """The cache, built on first use."""
        if not self._built:
            with self._lock:
                if not self._built:
                    self._build()
        return self.cache

    def _build(self) -> None:
        log = self.collections.log_ids()  # read before the rows: a write meanwhile makes them behind, never current
        loaded = snapshot_file.load(self.snapshot, self.meta) if self.snapshot is not None else None
        if loaded is not None and loaded[1] == {"log": sorted(log)}:
            self._fill(loaded[0], unit=True)
            self.snapshot_used = True
        else:
            if loaded is not None:
                logger.info("Snapshot %s holds other writes than Milvus; building from Milvus.", self.snapshot)
            self._fill(snapshot_file.read_columns(self.collections, with_vectors=self._vectors is not None))
        self._log, self._built = log, True

    def _fill(self, columns: snapshot_file.Columns, unit: bool = False) -> None:
        cache = self.cache
        cache.add_relations(np.column_stack([columns.relation_ids, columns.relation_ends]))
        cache.add_passage_columns(columns.passage_ids, columns.passage_offsets, columns.passage_relations)
        cache.name_entities(columns.entity_ids, columns.entity_names)
        cache.add_links(columns.entity_ids[columns.links[:, 0]], columns.entity_ids[columns.links[:, 1]], columns.link_scores)
        if self._vectors is not None and columns.has_vectors:
            for kind, registry, ids, rows in ((RELATIONS, cache.relations, columns.relation_ids, columns.relation_vectors),
                                              (PASSAGES, cache.passages, columns.passage_ids, columns.passage_vectors),
                                              (ENTITIES, cache.entities, columns.entity_ids, columns.entity_vectors)):
                positions = registry.lookup(registry.keys(ids))
                used = positions >= 0  # an entity no stored relation names (an interrupted write) is not searched
                self._vectors.fill(kind, positions[used], rows[used], unit)
        cache.compact()

    def columns(self) -> snapshot_file.Columns:
        """What the caches hold, as `Columns` (what the snapshot file saves; the inverse of `_fill`)."""
        exported = self.ready().export()
        columns = snapshot_file.Columns(**{name: exported[name] for name in snapshot_file.ADJACENCY_COLUMNS})
        if self._vectors is not None:
            columns.relation_vectors = self._vectors.rows(RELATIONS, exported["relation_positions"])
            columns.passage_vectors = self._vectors.rows(PASSAGES, exported["passage_positions"])
            columns.entity_vectors = self._vectors.rows(ENTITIES, exported["entity_positions"])
        return columns

    # the GraphBackend protocol ----------------------------------------------------------------
    def behind(self) -> bool:
        """Whether another store wrote what the caches do not hold (one Strong read of the log)."""
        return self._built and (self._stale or not self.collections.log_ids() <= self._log)

    def close(self) -> None:
        """Save the caches for the next build, if they hold what Milvus holds and the file does not yet."""
        if self.snapshot is None or not self._built or self.snapshot_used:
            return
        log = self.collections.log_ids()
        if self._stale or not log <= self._log:
            logger.info("Not saving a snapshot of %s: another store wrote since its caches were built.", self.snapshot)
            return
        snapshot_file.save(self.snapshot, self.columns(), self.meta, {"log": sorted(log)})
        self.snapshot_used = True

    def reset(self) -> None:
        self.cache.reset()
        self.search.reset()
        if self.snapshot is not None:
            snapshot_file.discard(self.snapshot)

    def stored(self, kind: str, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if self.collections.is_lite:  # the only writer: the caches hold every stored fact
            cache = self.ready()
            return (cache.entities if kind == ENTITIES else cache.relations).lookup(ids) >= 0
        return stored_in_milvus(self.collections, kind, ids)

    def passage_relations(self, passage_ids: Sequence[str]) -> Dict[str, Set[int]]:
        if not self.collections.is_lite:
            return passages_in_milvus(self.collections, passage_ids)
        found = {pid: self.ready().passage_relations(pid) for pid in passage_ids}
        return {pid: relations for pid, relations in found.items() if relations is not None}

    def apply(self, written: Written, log: Sequence[str] = ()) -> Optional[FrozenSet[str]]:
        """Add a write of this store to the caches, if they are built (else the build reads it). With the
        write's `log` ids: whether another store wrote too is read from the log, and then the caches are
        behind; the log ids read, if any."""
        if not self._built:
            return None
        self.snapshot_used = False  # the caches hold more than the file now
        cache, search = self.cache, self.search
        cache.remove(passages=written.deleted)
        cache.add_relations((r["id"], r["subject_id"], r["object_id"]) for r in written.relations)
        search.put(RELATIONS, [r["id"] for r in written.relations], [r["embedding"] for r in written.relations])
        cache.name_entities([r["id"] for r in written.entities], [r["name"] for r in written.entities])
        search.put(ENTITIES, [r["id"] for r in written.entities], [r["embedding"] for r in written.entities])
        links = written.links
        cache.add_links(np.array([r["a"] for r in links]), np.array([r["b"] for r in links]), np.array([r["score"] for r in links]))
        cache.add_passages((r["id"], r["relation_ids"]) for r in written.passages)
        search.put(PASSAGES, [r["id"] for r in written.passages], [r["embedding"] for r in written.passages])
        if not log:
            return None
        seen = self.collections.log_ids()
        self._stale = self._stale or not seen <= self._log | set(log)
        self._log |= seen
        return seen

    def live(self, kind: str, ids: np.ndarray) -> np.ndarray:
        cache = self.ready()
        registry, mask = (cache.entities, cache.snapshot().live_entities) if kind == ENTITIES else (
            cache.relations, cache.snapshot().live_relations)
        positions = registry.lookup(np.asarray(ids, dtype=np.int64))
        found = (positions >= 0) & (positions < len(mask))
        found[found] = mask[positions[found]]
        return found

    def counts(self) -> Dict[str, int]:
        return self.ready().counts()

    def linked_passages(self, passage_id: str, hub_fraction: float) -> List[str]:
        cache = self.ready()
        hubs = hub_limit(cache.passages.live_count(), hub_fraction)
        return GraphTopics(cache.snapshot(), cache, hubs).linked(passage_id)

    def synonyms_of(self, entity_ids: Sequence[int]) -> Dict[int, Set[int]]:
        cache = self.ready()
        rows = _positions(cache.entities, entity_ids)
        links = cache.snapshot().entity_entity
        return {e: set(cache.entities.ids_at(links.indices[links.indptr[p]:links.indptr[p + 1]]))
                for e, p in rows.items() if links.indptr[p + 1] > links.indptr[p]}

    def relations_of(self, entity_ids: Sequence[int]) -> Dict[int, Set[int]]:
        cache = self.ready()
        rows = _positions(cache.entities, entity_ids)
        incidence = cache.snapshot().entity_relation
        return {e: set(cache.relations.ids_at(incidence.indices[incidence.indptr[p]:incidence.indptr[p + 1]]))
                for e, p in rows.items() if incidence.indptr[p + 1] > incidence.indptr[p]}

    def passages_stating(self, relation_ids: Sequence[int]) -> Dict[int, Set[str]]:
        cache = self.ready()
        found = {r: set(cache.passages_of_relation(r)) for r in dict.fromkeys(int(r) for r in relation_ids)}
        return {r: pids for r, pids in found.items() if pids}

    def expand(self, request: Expansion) -> Neighbourhood:
        """The walk (`graph.walk`) on the whole adjacency, every step cut by the vector search."""
        cache = self.ready()
        graph = cache.snapshot()
        hubs = hub_limit(cache.passages.live_count(), request.hub_fraction)  # the passages stored now
        entities = _found(cache.entities.lookup(np.asarray(list(request.entities), dtype=np.int64)))
        relations = _found(cache.relations.lookup(np.asarray(list(request.relations), dtype=np.int64)))
        passages = _found(cache.passages.lookup(list(request.passages))) if request.passages else _EMPTY

        def cut(positions: np.ndarray) -> np.ndarray:
            return self.search.rank_relations(request.vector, cache, positions, request.cap)[0]

        reached, touched = walk(
            GraphAdjacency(graph, hubs), entities, relations, passages, request.degree, cut,
            request.with_context, request.synonyms,
        )
        positions, similarities = self.search.rank_relations(request.vector, cache, reached, request.cap)
        return Neighbourhood(graph, cache, positions, similarities, hubs, touched, GraphTopics(graph, cache, hubs))


class GraphTopics:
    """`Topics` on a snapshot of the in-memory adjacency."""

    def __init__(self, graph: Graph, cache: GraphCache, hub_passages: float) -> None:
        self.graph, self.cache, self.hub_passages = graph, cache, hub_passages

    def linked(self, passage_id: str) -> List[str]:
        position = self.cache.passages.lookup([passage_id])
        if position[0] < 0 or position[0] >= self.graph.shape[2]:
            return []
        return sorted(self.cache.passage_ids(topic_links(self.graph, int(position[0]), self.hub_passages)))

    def about(self, entity_ids: Sequence[int]) -> List[str]:
        positions = _found(self.cache.entities.lookup(np.asarray(list(entity_ids), dtype=np.int64)))
        positions = positions[positions < self.graph.shape[0]]
        return sorted(self.cache.passage_ids(about(self.graph, unique(positions))))


def _found(positions: np.ndarray) -> np.ndarray:
    return positions[positions >= 0]


def _positions(registry: Any, ids: Sequence[int]) -> Dict[int, int]:
    """The positions of the known ids (in the snapshot), by id."""
    ids = list(dict.fromkeys(int(i) for i in ids))
    return {i: p for i, p in zip(ids, registry.lookup(np.asarray(ids, dtype=np.int64)).tolist()) if p >= 0}
