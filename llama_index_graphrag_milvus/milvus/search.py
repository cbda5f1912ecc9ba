"""Vector search over entities, relations and passages: in this process, or in Milvus.

One protocol, `VectorSearch`, with two implementations picked once when a store opens:
- `CachedSearch`: a float32 copy of the vectors in memory (`vectors.VectorCache`), aligned with the
  in-memory adjacency's positions. For Milvus Lite, where every call costs tens of milliseconds.
- `MilvusSearch`: every search is a Milvus search. For a server, and for `adjacency="milvus"`.
"""

from __future__ import annotations

from typing import Dict, List, Protocol, Sequence, Tuple

import numpy as np

from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.milvus.collections import ENTITIES, KINDS, PASSAGES, RELATIONS, Collections
from llama_index_graphrag_milvus.schema import ScoredEntity
from llama_index_graphrag_milvus.milvus.vectors import VectorCache

#: (ids, cosines) of a search, best first.
Hits = Tuple[List, List[float]]


class VectorSearch(Protocol):
    """Searches the store's vectors; the adjacency (`GraphCache`) maps positions to ids."""

    def entities(self, vectors: Sequence[Sequence[float]], top_k: int) -> List[List[ScoredEntity]]:
        """For each vector, the `top_k` nearest entities."""

    def relations(self, vector: Sequence[float], top_k: int) -> List[Tuple[int, float]]:
        """The `top_k` relations nearest to `vector`, as (relation id, cosine)."""

    def passages(self, vector: Sequence[float], top_k: int) -> List[Tuple[str, float]]:
        """The `top_k` passages nearest to `vector`, as (passage id, cosine)."""

    def rank_relations(
        self, vector: Sequence[float], cache: GraphCache, positions: np.ndarray, top_k: int
    ) -> Tuple[np.ndarray, np.ndarray]:
        """The `top_k` of the relations at `positions` of `cache` most similar to `vector`, best first,
        with their cosines. Its cost follows the number of positions."""

    def passage_similarities(self, vector: Sequence[float], passage_ids: Sequence[str]) -> Dict[str, float]:
        """The cosine of `vector` with each of the given passages that is stored."""

    def similar_entities(self, vectors: np.ndarray, threshold: float, top_k: int) -> List[Dict[int, float]]:
        """For each vector, at most `top_k` stored entities with cosine ≥ `threshold`, as {id: cosine}."""

    def put(self, kind: str, ids: Sequence, vectors: Sequence[Sequence[float]]) -> None:
        """Rows just written (already in the adjacency), so that later searches find them."""

    def reset(self) -> None:
        """Forget every vector (the store was cleared)."""


def _top(positions: np.ndarray, scores: np.ndarray, top_k: int) -> Tuple[np.ndarray, np.ndarray]:
    """The `top_k` best (position, score) pairs, best first (stable on ties)."""
    if len(positions) > top_k:
        keep = np.argpartition(-scores, top_k - 1)[:top_k]
        positions, scores = positions[keep], scores[keep]
    order = np.argsort(-scores, kind="stable")
    return positions[order], scores[order]


class CachedSearch:
    """`VectorSearch` on an in-memory copy of the vectors, by the positions of the in-memory adjacency."""

    def __init__(self, cache: GraphCache, dim: int) -> None:
        self.cache, self.dim = cache, dim
        self.reset()

    def reset(self) -> None:
        self.vectors: Dict[str, VectorCache] = {kind: VectorCache(self.dim) for kind in KINDS}

    def _registry(self, kind: str):
        return {ENTITIES: self.cache.entities, RELATIONS: self.cache.relations, PASSAGES: self.cache.passages}[kind]

    def entities(self, vectors: Sequence[Sequence[float]], top_k: int) -> List[List[ScoredEntity]]:
        if not len(vectors):
            return []
        ids = self.cache.entities.ids
        found = self.vectors[ENTITIES].top_k_many(vectors, top_k, self.cache.entities.mask())
        return [
            [ScoredEntity(ids[p], self.cache.entity_name(p), float(s)) for p, s in zip(pos.tolist(), sc.tolist())]
            for pos, sc in found
        ]

    def relations(self, vector: Sequence[float], top_k: int) -> List[Tuple[int, float]]:
        positions, scores = self.vectors[RELATIONS].top_k(vector, top_k, self.cache.relations.mask())
        return list(zip(self.cache.relations.ids_at(positions), scores.tolist()))

    def passages(self, vector: Sequence[float], top_k: int) -> List[Tuple[str, float]]:
        positions, scores = self.vectors[PASSAGES].top_k(vector, top_k, self.cache.passages.mask())
        return list(zip(self.cache.passage_ids(positions), scores.tolist()))

    def rank_relations(
        self, vector: Sequence[float], cache: GraphCache, positions: np.ndarray, top_k: int
    ) -> Tuple[np.ndarray, np.ndarray]:
        assert cache is self.cache, "the vector cache is aligned with the store's own adjacency"
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size == 0:
            return positions, np.zeros(0)
        return _top(positions, self.vectors[RELATIONS].similarity(vector, positions), top_k)

    def passage_similarities(self, vector: Sequence[float], passage_ids: Sequence[str]) -> Dict[str, float]:
        if not len(passage_ids):
            return {}
        found = self.cache.passages.lookup(list(passage_ids))
        known = [p for p, position in zip(passage_ids, found.tolist()) if position >= 0]
        scores = self.vectors[PASSAGES].similarity(vector, found[found >= 0])
        return dict(zip(known, scores.tolist()))

    def similar_entities(self, vectors: np.ndarray, threshold: float, top_k: int) -> List[Dict[int, float]]:
        ids = self.cache.entities.ids
        hits = self.vectors[ENTITIES].within(vectors, threshold, top_k, self.cache.entities.mask())
        return [{ids[p]: s for p, s in zip(pos.tolist(), sc.tolist())} for pos, sc in hits]

    def put(self, kind: str, ids: Sequence, vectors: Sequence[Sequence[float]]) -> None:
        if not len(ids):
            return
        positions = self._registry(kind).lookup(self._registry(kind).keys(ids))
        known = positions >= 0  # an entity with no relation (left by an interrupted write) is not searched
        rows = np.asarray(vectors, dtype=np.float32).reshape(len(positions), -1)
        self.vectors[kind].put(positions[known], rows[known])

    def fill(self, kind: str, positions: np.ndarray, rows: np.ndarray) -> None:
        """Load rows at known positions (opening a store)."""
        self.vectors[kind].put(positions, rows)

    def rows(self, kind: str, positions: np.ndarray) -> np.ndarray:
        """The cached unit vectors at `positions` (saving a snapshot)."""
        return self.vectors[kind].rows(positions)


class MilvusSearch:
    """`VectorSearch` by Milvus searches (ids filters of at most 1,000 ids each)."""

    def __init__(self, collections: Collections) -> None:
        self.collections = collections

    def reset(self) -> None:
        pass

    def put(self, kind: str, ids: Sequence, vectors: Sequence[Sequence[float]]) -> None:
        pass  # Milvus holds them already

    def entities(self, vectors: Sequence[Sequence[float]], top_k: int) -> List[List[ScoredEntity]]:
        found = self.collections.search(ENTITIES, vectors, top_k, fields=["name"])
        return [[ScoredEntity(i, row.get("name", ""), s) for i, s, row in hits] for hits in found]

    def relations(self, vector: Sequence[float], top_k: int) -> List[Tuple[int, float]]:
        return [(i, s) for i, s, _ in self.collections.search(RELATIONS, [vector], top_k)[0]]

    def passages(self, vector: Sequence[float], top_k: int) -> List[Tuple[str, float]]:
        return [(i, s) for i, s, _ in self.collections.search(PASSAGES, [vector], top_k)[0]]

    def rank_relations(
        self, vector: Sequence[float], cache: GraphCache, positions: np.ndarray, top_k: int
    ) -> Tuple[np.ndarray, np.ndarray]:
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size == 0:
            return positions, np.zeros(0)
        ids = cache.relations.ids_at(positions)
        hits = self.collections.search(RELATIONS, [vector], top_k, among=ids)[0]
        found = cache.relations.lookup(np.array([i for i, _, _ in hits], dtype=np.int64))
        scores = np.array([s for _, s, _ in hits])
        return found[found >= 0], scores[found >= 0]

    def passage_similarities(self, vector: Sequence[float], passage_ids: Sequence[str]) -> Dict[str, float]:
        hits = self.collections.search(PASSAGES, [vector], len(passage_ids), among=list(passage_ids))[0]
        return {i: s for i, s, _ in hits}

    def similar_entities(self, vectors: np.ndarray, threshold: float, top_k: int) -> List[Dict[int, float]]:
        found: List[Dict[int, float]] = []
        for start in range(0, len(vectors), 256):
            hits = self.collections.search(ENTITIES, np.asarray(vectors[start : start + 256]).tolist(), top_k)
            found += [{i: s for i, s, _ in row if s >= threshold} for row in hits]
        return found

