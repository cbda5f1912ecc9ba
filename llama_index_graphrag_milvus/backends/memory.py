"""`MemoryGraph`: the adjacency as a cache in this process, with its snapshot file.

The cache (`GraphCache`) is built when the store opens: from the snapshot file when it is current,
else from the rows in Milvus, read page by page. Every write is mirrored in it (`apply`). Retrieval walks
it in memory, cutting every step by similarity to the question.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set

import numpy as np

import llama_index_graphrag_milvus.milvus.snapshot as snapshot_file
from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.backends.base import Expansion, Neighbourhood, Written, hub_limit
from llama_index_graphrag_milvus.graph.sparse import Graph, about, topic_links, unique
from llama_index_graphrag_milvus.graph.walk import GraphAdjacency, walk
from llama_index_graphrag_milvus.milvus.collections import ENTITIES, PASSAGES, RELATIONS, Collections
from llama_index_graphrag_milvus.milvus.search import CachedSearch, VectorSearch

logger = logging.getLogger(__name__)

class MemoryGraph:
    """The `GraphBackend` whose adjacency lives in this process.

    Args:
        collections: The store's collections (the source of truth).
        search: The store's vector search; a `CachedSearch` is filled and saved with the adjacency.
        cache: The adjacency, shared with `search`.
        snapshot: The snapshot file, or None for none.
        meta: The settings a snapshot must have been saved under to be used.
    """

    def __init__(
        self,
        collections: Collections,
        search: VectorSearch,
        cache: GraphCache,
        snapshot: Optional[Path],
        meta: Dict[str, Any],
    ) -> None:
        self.collections, self.search, self.cache = collections, search, cache
        self.snapshot, self.meta = snapshot, meta
        self._current = False  # the snapshot file holds exactly what the caches hold
        self._generation: Optional[str] = None  # the Milvus state the caches hold; None: unknown
        self._vectors = search if isinstance(search, CachedSearch) else None

    # the GraphBackend protocol ----------------------------------------------------------------
    def open(self) -> None:
        """Fill the caches: from the snapshot file when it holds Milvus' current state, else from the
        rows in Milvus."""
        self._current = False
        generation = self.collections.generation() or self.collections.advance()  # a store never written
        if self.snapshot is not None and self.snapshot.exists():
            with ThreadPoolExecutor(max_workers=1) as pool:
                state = pool.submit(self._state, generation)  # Milvus counts while the file is read
                loaded = snapshot_file.load(self.snapshot, self.meta)
                if loaded is not None:
                    self._fill(loaded[0])
                    if loaded[1] == state.result():
                        self._current, self._generation = True, generation
                        return
                    logger.info(
                        "Snapshot %s is stale (it holds %s, Milvus %s); rebuilding from Milvus.",
                        self.snapshot, loaded[1], state.result(),
                    )
                    self.reset()
        self._fill(snapshot_file.read_columns(self.collections, with_vectors=self._vectors is not None))
        self._generation = generation  # read before the rows: a write meanwhile makes it stale, never current

    def close(self) -> None:
        """Save the caches for the next open, if they hold what Milvus holds: no other store (in this
        process or another) has written since this one read or wrote the rows."""
        if self.snapshot is None or self._current:
            return
        if self._generation is None or self._generation != self.collections.generation():
            logger.info("Not saving a snapshot of %s: the store changed since its caches were built.", self.snapshot)
            return
        columns = self.columns()
        held = {"relations": len(columns.relation_ids), "passages": len(columns.passage_ids)}
        state = self._state(self._generation)
        # Milvus may also hold entities with no relation, left by an interrupted write: not cached
        if held != {k: state[k] for k in held} or len(columns.entity_ids) > state["entities"]:
            logger.info("Not saving a snapshot: the caches hold %s rows, Milvus %s.", held, state)
            return
        snapshot_file.save(self.snapshot, columns, self.meta, state)
        self._current = True

    def _state(self, generation: str) -> Dict[str, Any]:
        return {**self.collections.counts(), "generation": generation}

    def reset(self) -> None:
        self.cache.reset()
        self.search.reset()

    def writing(self) -> None:
        if self.snapshot is not None:
            snapshot_file.discard(self.snapshot)
        self._current, self._generation = False, None

    def written(self, generation: Optional[str]) -> None:
        self._generation = generation

    def behind(self, since: Optional[str] = None) -> bool:
        known = since or self._generation
        return known is None or known != self.collections.generation()

    def apply(self, written: Written) -> None:
        """Mirror a write: the cache and the vector search follow what Milvus now holds."""
        cache, search = self.cache, self.search
        cache.remove(passages=written.deleted_passages)
        cache.add_relations((r["id"], r["subject_id"], r["object_id"]) for r in written.relations)
        search.put(RELATIONS, [r["id"] for r in written.relations], [r["embedding"] for r in written.relations])
        # the adjacency knows entities once their relations are in
        cache.add_synonyms((r["id"], other) for r in written.entities for other in r["synonym_ids"])
        cache.name_entities([r["id"] for r in written.entities], [r["name"] for r in written.entities])
        search.put(ENTITIES, [r["id"] for r in written.entities], [r["embedding"] for r in written.entities])
        cache.add_passages((r["id"], r["relation_ids"]) for r in written.passages)
        search.put(PASSAGES, [r["id"] for r in written.passages], [r["embedding"] for r in written.passages])
        cache.remove(relations=written.orphan_relations, entities=written.orphan_entities)

    def passage_relations(self, passage_ids: Sequence[str]) -> Dict[str, Set[int]]:
        found = {pid: self.cache.passage_relations(pid) for pid in passage_ids}
        return {pid: relations for pid, relations in found.items() if relations is not None}

    def has_entities(self, ids: np.ndarray) -> np.ndarray:
        return self.cache.entities.lookup(np.asarray(ids, dtype=np.int64)) >= 0

    def has_relations(self, ids: np.ndarray) -> np.ndarray:
        return self.cache.relations.lookup(np.asarray(ids, dtype=np.int64)) >= 0

    def counts(self) -> Dict[str, int]:
        return self.cache.counts()

    def linked_passages(self, passage_id: str, hub_fraction: float) -> List[str]:
        hubs = hub_limit(self.cache.counts()["passages"], hub_fraction)
        return GraphTopics(self.cache.snapshot(), self.cache, hubs).linked(passage_id)

    @property
    def snapshot_used(self) -> bool:
        """Whether the caches hold exactly what the snapshot file holds."""
        return self._current

    def expand(self, request: Expansion) -> Neighbourhood:
        """The walk (`graph.walk`) on the whole adjacency, every step cut by the vector search."""
        cache, graph = self.cache, self.cache.snapshot()
        hubs = hub_limit(cache.counts()["passages"], request.hub_fraction)  # the passages stored now
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

    # filling and saving -------------------------------------------------------------------------
    def _fill(self, columns: snapshot_file.Columns) -> None:
        cache = self.cache
        cache.add_relations(np.column_stack([columns.relation_ids, columns.relation_ends]))
        cache.add_passage_columns(columns.passage_ids, columns.passage_offsets, columns.passage_relations)
        cache.name_entities(columns.entity_ids, columns.entity_names)
        entities = cache.entities.lookup(columns.entity_ids)
        cache.add_synonym_positions(entities[columns.synonyms[:, 0]], entities[columns.synonyms[:, 1]])
        if self._vectors is not None and columns.has_vectors:
            # a fresh cache filled from distinct ids gives them positions 0, 1, ... in order
            fresh = len(cache.relations) == len(columns.relation_ids) and len(cache.passages) == len(columns.passage_ids)
            if fresh:
                relations, passages = np.arange(len(columns.relation_ids)), np.arange(len(columns.passage_ids))
            else:
                relations = cache.relations.lookup(columns.relation_ids)
                passages = cache.passages.lookup(columns.passage_ids)
            self._vectors.fill(RELATIONS, relations, columns.relation_vectors)
            self._vectors.fill(PASSAGES, passages, columns.passage_vectors)
            used = entities >= 0  # an entity with no relation (left by an interrupted write) is not searched
            self._vectors.fill(ENTITIES, entities[used], columns.entity_vectors[used])
        cache.compact()

    def columns(self) -> snapshot_file.Columns:
        """What the caches hold, as `Columns` (what the snapshot file saves; the inverse of `_fill`)."""
        exported = self.cache.export()
        columns = snapshot_file.Columns(
            **{name: exported[name] for name in snapshot_file.ADJACENCY_COLUMNS}
        )
        if self._vectors is not None:
            columns.relation_vectors = self._vectors.rows(RELATIONS, exported["relation_positions"])
            columns.passage_vectors = self._vectors.rows(PASSAGES, exported["passage_positions"])
            columns.entity_vectors = self._vectors.rows(ENTITIES, exported["entity_positions"])
        return columns


_EMPTY = np.zeros(0, dtype=np.int64)


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
