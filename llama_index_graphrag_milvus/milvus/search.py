"""Vector search over entities, relations and passages: in this process, or in Milvus.

One protocol, `VectorSearch`, with two implementations picked once when a store opens:
- `CachedSearch`: a float32 copy of the vectors in memory (`vectors.VectorCache`), aligned with the
  in-memory adjacency's positions. For Milvus Lite, where every call costs tens of milliseconds.
- `MilvusSearch`: every search is a Milvus search. For a server, and for `adjacency="milvus"`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Set, Tuple, Union

import numpy as np
from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.milvus.collections import ENTITIES, KINDS, PASSAGES, QUERY_LIMIT, RELATIONS, VECTOR_BATCH, Collections
from llama_index_graphrag_milvus.milvus.filters import PassageFilter
from llama_index_graphrag_milvus.schema import ScoredEntity
from llama_index_graphrag_milvus.milvus.vectors import VectorCache, cosines, unit_rows

#: (ids, cosines) of a search, best first.
Hits = Tuple[List, List[float]]


def similarities(collections: Collections, kind: str, vector: Sequence[float], ids: Sequence) -> Dict:
    """The cosine of `vector` with each stored row of `ids`: their vectors read by primary key
    (`VECTOR_BATCH` a query) and the cosines computed here as the in-process cache computes them (float32
    unit vectors), so both backends give the same numbers. (A search filtered by the ids would cost as
    much, and on a server's graph index it can miss some of them.)"""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return {}
    rows = collections.get(kind, ids, ["id", "embedding"], batch_size=VECTOR_BATCH)
    return dict(zip((row["id"] for row in rows), cosines_to(vector, [row["embedding"] for row in rows])))


def cosines_to(vector: Sequence[float], embeddings: List[Sequence[float]]) -> List[float]:
    """The cosine of `vector` with each embedding, as the in-process cache computes it."""
    if not embeddings:
        return []
    matrix = unit_rows(np.asarray(embeddings, dtype=np.float32))
    return cosines(matrix, unit_rows(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]).astype(np.float64).tolist()


class PassageCheck:
    """A `PassageFilter` on a store's passages: `expr`, for a search inside Milvus; and, called with
    passage ids, those of them stored that pass: their filtered fields read by primary key (1,000 ids a
    query), the filter tested here (`PassageFilter.matches`). A Milvus expression on metadata (dynamic
    fields) reads every row's JSON, whatever else the expression says: on Milvus Lite ~250 ms a query
    over 2Wiki's 6,119 passages (`id in [50 ids] and (...)` as well), against ~6 ms for 50 rows read by
    key; on a server (2.3.5) ~7 ms against ~4 ms. `benchmarks/filters.py` measures what it adds to a
    retrieval."""

    def __init__(self, collections: Collections, passage_filter: PassageFilter) -> None:
        self.collections, self.filter = collections, passage_filter
        self.expr = passage_filter.expr

    @classmethod
    def of(cls, collections: Collections, filters: Union[None, MetadataFilters, PassageFilter]) -> Optional["PassageCheck"]:
        """Metadata `filters` compiled (errors raised now: `PassageFilter`) against these passages; None
        when they restrict nothing."""
        passage_filter = PassageFilter.of(filters)
        return cls(collections, passage_filter) if passage_filter is not None else None

    def __call__(self, passage_ids: Sequence[str]) -> Set[str]:
        rows = self.collections.get(PASSAGES, list(dict.fromkeys(passage_ids)), ["id", *self.filter.keys])
        return {row["id"] for row in rows if self.filter.matches(row)}


#: A filtered in-process search first checks the `FILTER_FETCH` × top_k nearest passages, then
#: 4 times as many each round, until top_k of them pass: one round when the filter passes about 1/16 of
#: the passages or more. Past `FILTER_CHECK_MAX` passages checked, Milvus searches with the filter's
#: expression instead (a filter passing too few: reading more rows by key costs more on Lite, ~250 ms
#: for 2,560 of 2Wiki's passages, than the expression, ~230 ms); and at once for a filter on `doc_id`
#: alone, which reads no metadata (~6 ms).
FILTER_FETCH = 16
FILTER_CHECK_MAX = 1024


def checked_top(search: Callable[[int], List[Tuple[str, float]]], passes: Callable[[Sequence[str]], Set[str]],
                top_k: int) -> Optional[List[Tuple[str, float]]]:
    """The `top_k` best hits that pass, in the order of `search` (n -> its n best hits): the best
    `FILTER_FETCH` × top_k hits, checked (`passes`: of given ids, those that pass; each id asked once),
    then 4 times as many each round until `top_k` pass or the search has no more: exactly what a search
    of the passing rows alone gives. None when that would take more than `FILTER_CHECK_MAX` hits (as
    the share passing so far tells)."""
    fetch, passing = FILTER_FETCH * top_k, {}
    while fetch <= FILTER_CHECK_MAX:
        hits = search(fetch)
        new = [pid for pid, _ in hits if pid not in passing]
        kept = passes(new) if new else set()
        passing.update((pid, pid in kept) for pid in new)
        found = [(pid, score) for pid, score in hits if passing[pid]]
        if len(found) >= top_k or len(hits) < fetch:
            return found[:top_k]
        if not found or fetch * top_k / len(found) > FILTER_CHECK_MAX:  # more would be needed: give up now
            return None
        fetch *= 4
    return None


class VectorSearch(Protocol):
    """Searches the store's vectors; the adjacency (`GraphCache`) maps positions to ids."""

    def entities(self, vectors: Sequence[Sequence[float]], top_k: int) -> List[List[ScoredEntity]]:
        """For each vector, the `top_k` nearest entities."""

    def relations(self, vector: Sequence[float], top_k: int) -> List[Tuple[int, float]]:
        """The `top_k` relations nearest to `vector`, as (relation id, cosine)."""

    def passages(self, vector: Sequence[float], top_k: int, only: Optional[PassageCheck] = None) -> List[Tuple[str, float]]:
        """The `top_k` passages nearest to `vector`, as (passage id, cosine); with `only`, the `top_k`
        nearest of those that pass it."""

    def rank_relations(
        self, vector: Sequence[float], cache: GraphCache, positions: np.ndarray, top_k: int
    ) -> Tuple[np.ndarray, np.ndarray]:
        """The `top_k` of the relations at `positions` of `cache` most similar to `vector`, best first,
        with their cosines. Its cost follows the number of positions."""

    def passage_similarities(self, vector: Sequence[float], passage_ids: Sequence[str]) -> Dict[str, float]:
        """The cosine of `vector` with each of the given passages that is stored."""

    def similar_entities(self, vectors: np.ndarray, threshold: float, top_k: int) -> List[Dict[int, float]]:
        """For each vector, at most `top_k` stored entities (live or not) with cosine about ≥ `threshold`,
        as {id: cosine} (a Milvus search's cosines are approximate: the writer scores links again)."""

    def entity_vectors(self, ids: Sequence[int]) -> Dict[int, List[float]]:
        """The unit vectors of the stored entities among `ids`, as searches compare them."""

    def put(self, kind: str, ids: Sequence, vectors: Sequence[Sequence[float]]) -> None:
        """Rows just written (already in the adjacency), so that later searches find them."""

    def reset(self) -> None:
        """Forget every vector (the store was cleared)."""


#: Extra hits a top-k search asks for, so that equal scores at its end are settled by id, alike in every
#: backend (a search keeps an arbitrary one of tied rows).
TIE_MARGIN = 8


def _settled(ids: List, scores: np.ndarray, top_k: int) -> List[Tuple[Any, float]]:
    """The `top_k` best of a search's hits (over-fetched by `TIE_MARGIN`), equal scores by id."""
    keys = np.array(ids, dtype=object if ids and isinstance(ids[0], str) else np.int64)
    kept, kept_scores = best_first(keys, scores, top_k, keys.astype(str) if keys.dtype == object else keys)
    return list(zip(kept.tolist(), kept_scores.tolist()))


def best_first(keys: np.ndarray, scores: np.ndarray, top_k: int, ties: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The `top_k` best (key, score) pairs, best first; equal scores in the order of `ties` (the rows'
    ids), so that every backend keeps and orders the same ones."""
    keys, scores = np.asarray(keys), np.asarray(scores, dtype=np.float64)
    order = np.lexsort((np.asarray(ties), -scores))[:top_k]
    return keys[order], scores[order]


class CachedSearch:
    """`VectorSearch` on an in-memory copy of the vectors, by the positions of the in-memory adjacency;
    entity and relation searches see the live rows only (`GraphCache.snapshot`'s masks)."""

    def __init__(self, cache: GraphCache, dim: int) -> None:
        self.cache, self.dim = cache, dim
        self.ready: Callable[[], Any] = lambda: None  # builds the caches when first used (set by the backend)
        self.reset()

    def reset(self) -> None:
        self.vectors: Dict[str, VectorCache] = {kind: VectorCache(self.dim) for kind in KINDS}

    def _registry(self, kind: str):
        return {ENTITIES: self.cache.entities, RELATIONS: self.cache.relations, PASSAGES: self.cache.passages}[kind]

    def _live(self, kind: str) -> np.ndarray:
        graph = self.cache.snapshot()
        return {ENTITIES: graph.live_entities, RELATIONS: graph.live_relations}.get(kind, self.cache.passages.mask())

    def entities(self, vectors: Sequence[Sequence[float]], top_k: int) -> List[List[ScoredEntity]]:
        if not len(vectors):
            return []
        self.ready()
        registry = self.cache.entities
        found = self.vectors[ENTITIES].top_k_many(vectors, top_k + TIE_MARGIN, self._live(ENTITIES))
        hits = [_settled(registry.ids_at(pos), sc, top_k) for pos, sc in found]
        return [
            [ScoredEntity(e, self.cache.entity_name(p), s) for (e, s), p in zip(row, registry.lookup([e for e, _ in row]).tolist())]
            for row in hits
        ]

    def relations(self, vector: Sequence[float], top_k: int) -> List[Tuple[int, float]]:
        self.ready()
        positions, scores = self.vectors[RELATIONS].top_k(vector, top_k + TIE_MARGIN, self._live(RELATIONS))
        return _settled(self.cache.relations.ids_at(positions), scores, top_k)

    def passages(self, vector: Sequence[float], top_k: int, only: Optional[PassageCheck] = None) -> List[Tuple[str, float]]:
        if only is not None:  # in-process searches, their hits checked (see `PassageCheck`), or Milvus'
            found = checked_top(lambda n: self.passages(vector, n), only, top_k) if only.filter.reads_metadata else None
            return found if found is not None else MilvusSearch(only.collections).passages(vector, top_k, only)
        self.ready()
        positions, scores = self.vectors[PASSAGES].top_k(vector, top_k + TIE_MARGIN, self.cache.passages.mask())
        return _settled(self.cache.passage_ids(positions), scores, top_k)

    def rank_relations(
        self, vector: Sequence[float], cache: GraphCache, positions: np.ndarray, top_k: int
    ) -> Tuple[np.ndarray, np.ndarray]:
        assert cache is self.cache, "the vector cache is aligned with the store's own adjacency"
        ids = cache.relations.ids_array()
        positions = np.asarray(positions, dtype=np.int64)
        positions = positions[positions < len(ids)]  # a clear() meanwhile empties the registry under a walk
        if positions.size == 0:
            return positions, np.zeros(0)
        scores = self.vectors[RELATIONS].similarity(vector, positions)
        return best_first(positions, scores, top_k, ids[positions])

    def passage_similarities(self, vector: Sequence[float], passage_ids: Sequence[str]) -> Dict[str, float]:
        if not len(passage_ids):
            return {}
        self.ready()
        found = self.cache.passages.lookup(list(passage_ids))
        known = [p for p, position in zip(passage_ids, found.tolist()) if position >= 0]
        scores = self.vectors[PASSAGES].similarity(vector, found[found >= 0])
        return dict(zip(known, scores.tolist()))

    def similar_entities(self, vectors: np.ndarray, threshold: float, top_k: int) -> List[Dict[int, float]]:
        self.ready()
        ids = self.cache.entities  # every stored entity, live or not: a link is a fact of both names
        hits = self.vectors[ENTITIES].within(vectors, threshold, top_k, ids.mask())
        return [dict(zip(ids.ids_at(pos), sc.tolist())) for pos, sc in hits]

    def entity_vectors(self, ids: Sequence[int]) -> Dict[int, List[float]]:
        self.ready()
        ids = np.asarray(list(ids), dtype=np.int64)
        positions = self.cache.entities.lookup(ids)
        found = positions >= 0
        found[found] = self.vectors[ENTITIES].has(positions[found])
        return dict(zip(ids[found].tolist(), self.vectors[ENTITIES].rows(positions[found]).tolist()))

    def put(self, kind: str, ids: Sequence, vectors: Sequence[Sequence[float]]) -> None:
        if not len(ids):
            return
        positions = self._registry(kind).lookup(self._registry(kind).keys(ids))
        known = positions >= 0  # an entity no stored relation names (an interrupted write) is not searched
        rows = np.asarray(vectors, dtype=np.float32).reshape(len(positions), -1)
        self.vectors[kind].put(positions[known], rows[known])

    def fill(self, kind: str, positions: np.ndarray, rows: np.ndarray, unit: bool = False) -> None:
        """Load rows at known positions (building the caches; `unit`: from a snapshot, as `rows` gave them)."""
        self.vectors[kind].put(positions, rows, unit)

    def rows(self, kind: str, positions: np.ndarray) -> np.ndarray:
        """The cached unit vectors at `positions` (saving a snapshot)."""
        return self.vectors[kind].rows(positions)


#: Which of given entity or relation ids are live (the store's graph backend answers).
Live = Callable[[str, np.ndarray], np.ndarray]


class MilvusSearch:
    """`VectorSearch` by Milvus searches; the similarity to given rows by reading their vectors. Entity
    and relation hits that are not live (`live`, set by the backend) are dropped, and more fetched."""

    def __init__(self, collections: Collections, live: Optional[Live] = None) -> None:
        self.collections, self.live = collections, live

    def reset(self) -> None:
        pass

    def put(self, kind: str, ids: Sequence, vectors: Sequence[Sequence[float]]) -> None:
        pass  # Milvus holds them already

    def _top(self, kind: str, vectors: Sequence[Sequence[float]], top_k: int, fields: Sequence[str] = (), where: str = ""):
        """Each vector's `top_k` live hits (among the rows `where` matches), their cosines computed again
        here from the vectors the search returns (the numbers the in-process search gives) and ties settled
        by id; and the hits' fields. Rows that are not live (an entity or relation no stored passage states
        any more, until `compact()`) are left out: the search asks for as many more as it found dead."""
        fetch = wanted = top_k + TIE_MARGIN
        while True:
            found = self.collections.search(kind, vectors, fetch, fields=[*fields, "embedding"], where=where)
            dead = self._dead(kind, found)
            if all(len(hits) < fetch or sum(i not in dead for i, _, _ in hits) >= wanted for hits in found):
                break
            fetch = min(2 * fetch, QUERY_LIMIT)
        rows = {i: row for hits in found for i, _, row in hits}
        settled = []
        for vector, hits in zip(vectors, found):
            hits = [hit for hit in hits if hit[0] not in dead]
            exact = cosines_to(vector, [row["embedding"] for _, _, row in hits])
            settled.append(_settled([i for i, _, _ in hits], np.array(exact), top_k))
        return settled, rows

    def _dead(self, kind: str, found: List[List[Tuple[Any, float, Dict[str, Any]]]]) -> Set[Any]:
        if self.live is None or kind == PASSAGES:  # a deleted passage is gone from Milvus
            return set()
        ids = np.array(sorted({i for hits in found for i, _, _ in hits}), dtype=np.int64)
        return set(ids[~self.live(kind, ids)].tolist()) if len(ids) else set()

    def entities(self, vectors: Sequence[Sequence[float]], top_k: int) -> List[List[ScoredEntity]]:
        found, rows = self._top(ENTITIES, vectors, top_k, ["name"])
        return [[ScoredEntity(i, rows[i].get("name", ""), s) for i, s in hits] for hits in found]

    def relations(self, vector: Sequence[float], top_k: int) -> List[Tuple[int, float]]:
        return self._top(RELATIONS, [vector], top_k)[0][0]

    def passages(self, vector: Sequence[float], top_k: int, only: Optional[PassageCheck] = None) -> List[Tuple[str, float]]:
        return self._top(PASSAGES, [vector], top_k, where=only.expr if only is not None else "")[0][0]

    def rank_relations(
        self, vector: Sequence[float], cache: GraphCache, positions: np.ndarray, top_k: int
    ) -> Tuple[np.ndarray, np.ndarray]:
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size == 0:
            return positions, np.zeros(0)
        scored = similarities(self.collections, RELATIONS, vector, cache.relations.ids_at(positions))
        ids = np.fromiter(scored, np.int64, len(scored))
        found = cache.relations.lookup(ids)
        kept = found >= 0
        return best_first(found[kept], np.array(list(scored.values()))[kept], top_k, ids[kept])

    def passage_similarities(self, vector: Sequence[float], passage_ids: Sequence[str]) -> Dict[str, float]:
        return similarities(self.collections, PASSAGES, vector, passage_ids)

    def entity_vectors(self, ids: Sequence[int], consistency: Optional[str] = None) -> Dict[int, List[float]]:
        rows = self.collections.get(ENTITIES, list(dict.fromkeys(ids)), ["id", "embedding"], consistency=consistency)
        unit = unit_rows(np.asarray([row["embedding"] for row in rows], dtype=np.float32).reshape(len(rows), -1))
        return dict(zip((row["id"] for row in rows), unit.tolist()))

    def similar_entities(self, vectors: np.ndarray, threshold: float, top_k: int, consistency: Optional[str] = None) -> List[Dict[int, float]]:
        found: List[Dict[int, float]] = []
        for start in range(0, len(vectors), 2048):
            hits = self.collections.search(ENTITIES, np.asarray(vectors[start : start + 2048]).tolist(), top_k,
                                           consistency=consistency)
            found += [{i: s for i, s, _ in row if s >= threshold} for row in hits]
        return found
