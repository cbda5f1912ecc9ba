"""Every use the benchmark makes of the package's internals, and nothing else.

The rest of `benchmarks.scale` goes through the public API (`MilvusGraphStore(...)`, `count()`,
`close()`, `flush()`, `GraphRAGTransform`, `GraphRAGRetriever.retrieve/trace` and its events). What cannot
(the in-memory backend's adjacency and its positions, walks at a given degree, where the open spends
its time, what each in-memory structure weighs) is here, so that following a change of the package's
layout is a change of this file alone.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from llama_index_graphrag_milvus import MilvusGraphStore
from llama_index_graphrag_milvus.graph.sparse import Graph
from llama_index_graphrag_milvus import store as store_module
from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.graph.walk import GraphAdjacency, expand_from_entities, expand_from_relations
from llama_index_graphrag_milvus.schema import entity_id, relation_id

#: cProfile buckets of an ingest: label -> the (file name part, function name) pairs it sums.
PROFILE_BUCKETS: Dict[str, List[Tuple[str, str]]] = {
    "GraphRAGTransform.__call__ (total)": [("graphrag_milvus/transform.py", "__call__")],
    "GraphRAGTransform._given (triplet parsing)": [("graphrag_milvus/transform.py", "_given")],
    "Writer.add (the store's write path)": [("ingest/writes.py", "add")],
    # the same write path split into checked rows first, then the writes (Writer._plan / ._write)
    "Writer._plan (rows, embeddings, synonyms, checks)": [("ingest/writes.py", "_plan")],
    "Writer._synonyms (entity synonym search)": [("ingest/writes.py", "_synonyms")],
    "Writer._write (upserts, adjacency and vector updates)": [("ingest/writes.py", "_write")],
    "rows.passage_row + checked_vectors": [
        ("ingest/rows.py", "passage_row"),
        ("ingest/rows.py", "checked_vectors"),
    ],
    "BaseEmbedding.get_text_embedding_batch (incl. instrumentation)": [
        ("base/embeddings/base.py", "get_text_embedding_batch")
    ],
    "HashEmbedding._get_text_embeddings (the hashing itself)": [("embeddings.py", "_get_text_embeddings")],
    "Collections.upsert": [("milvus/collections.py", "upsert")],
    "MilvusClient.upsert": [("milvus_client.py", "upsert")],
    "node_to_metadata_dict (passage rows)": [("vector_stores/utils.py", "node_to_metadata_dict")],
    "schema.entity_id + relation_id (blake2b ids)": [
        ("schema.py", "entity_id"),
        ("schema.py", "relation_id"),
    ],
    "schema.passage_id": [("schema.py", "passage_id")],
    "GraphCache.add_relations + add_passages": [
        ("graph/cache.py", "add_relations"),
        ("graph/cache.py", "add_passages"),
    ],
    "CachedSearch.put (search.py)": [("milvus/search.py", "put")],
    "CachedSearch.similar_entities (search.py)": [("milvus/search.py", "similar_entities")],
    "VectorCache.put (in-memory vectors)": [("milvus/vectors.py", "put")],
    "VectorCache.within (synonym candidates)": [("milvus/vectors.py", "within")],
    "MilvusClient.search (during ingest)": [("milvus_client.py", "search")],
    "node.get_content": [("core/schema.py", "get_content")],
}


def adjacency_counts(store: MilvusGraphStore) -> Dict[str, int]:
    """Entities, relations and passages the in-memory adjacency holds (to compare with `store.count()`)."""
    return _cache(store).counts()


def snapshot_used(store: MilvusGraphStore) -> bool:
    """Whether the store's caches were built from its snapshot file (rather than from Milvus rows)."""
    return bool(store.backend.snapshot_used)


@contextmanager
def timed_milvus_writes(store: MilvusGraphStore, wrap: Callable[[str, Callable], Callable]) -> Iterator[None]:
    """Time the store's `MilvusClient.upsert` and `.search` calls (`wrap(name, fn)` returns the timed fn)."""
    client = store.collections.client
    client.upsert = wrap("upsert", client.upsert)  # type: ignore[method-assign]
    client.search = wrap("search", client.search)  # type: ignore[method-assign]
    try:
        yield
    finally:
        del client.upsert, client.search


def open_timing_load(
    factory: Callable[..., MilvusGraphStore], **kwargs: Any
) -> Tuple[MilvusGraphStore, Dict]:
    """Open a store through `factory(**kwargs)` and return it with the seconds its cache load took in all
    ("load_cache": the graph backend's `open()`) and reading each collection's row pages from Milvus
    ("read <collection>"), by wrapping the backend that `store.open_backend` gives for this open only."""
    seconds: Dict[str, float] = {}

    def add(name: str, start: float) -> None:
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start

    original = store_module.open_backend

    def timed_backend(collections: Any, *args: Any) -> Any:
        backend, search = original(collections, *args)
        opening, paging = backend.open, collections.pages

        def timed_open() -> None:
            start = time.perf_counter()
            opening()
            add("load_cache", start)

        def timed_pages(kind: str, fields: Any) -> Any:
            pages = paging(kind, fields)
            while True:
                start = time.perf_counter()
                page = next(pages, None)
                add(f"read {collections.names[kind]}", start)
                if page is None:
                    return
                yield page

        backend.open = timed_open  # type: ignore[method-assign]
        collections.pages = timed_pages  # type: ignore[method-assign]
        return backend, search

    store_module.open_backend = timed_backend
    try:
        store = factory(**kwargs)
    finally:
        store_module.open_backend = original
    del store.backend.open, store.collections.pages  # the timing is for this open only
    return store, seconds


def _cache(store: MilvusGraphStore) -> GraphCache:
    """The in-memory adjacency (the default `adjacency="memory"` backend's)."""
    return store.backend.cache


def graph(store: MilvusGraphStore) -> Graph:
    """The store's sparse adjacency snapshot, built on the first read after a write."""
    return _cache(store).snapshot()


def graph_shape(store: MilvusGraphStore) -> list:
    """(entities, relations, passages) of the adjacency's position spaces."""
    return list(graph(store).shape)


def seed_positions(store: MilvusGraphStore, names: Sequence[str], triplets: Sequence[Sequence[str]]) -> tuple:
    """Adjacency positions of entities (by name) and relations (by triplet), the walks' seeds."""
    cache = _cache(store)
    entities = [cache.entities.position[entity_id(n)] for n in names]
    relations = [cache.relations.position[relation_id(*t)] for t in triplets]
    return entities, relations


def expand(graph: Graph, entities: Sequence[int], relations: Sequence[int], degree: int) -> tuple:
    """Relation positions reached at `degree` from seed entity positions, and from seed relation positions
    (no hub cut-off and no similarity cut of later hops, unlike the retriever: the whole neighbourhood)."""
    empty = np.zeros(0, dtype=np.int64)
    adjacency = GraphAdjacency(graph)  # through every entity
    return (
        expand_from_entities(adjacency, entities, degree) if len(entities) else empty,
        expand_from_relations(adjacency, relations, degree) if len(relations) else empty,
    )


def relation_ids_at(store: MilvusGraphStore, positions: Sequence[int]) -> List[int]:
    """Relation ids of adjacency positions; with `relation_key`, to compare candidate sets by id."""
    ids = _cache(store).relations.ids
    return [ids[p] for p in positions]


def relation_key(triplet: Sequence[str]) -> int:
    """The id the store gives a relation."""
    return relation_id(*triplet)


def build_in_memory(relation_rows: List[tuple], passage_rows: List[tuple]) -> float:
    """Seconds to build the adjacency and its sparse snapshot from (relation id, subject id, object id)
    and (passage id, relation ids) rows held in memory (no Milvus)."""
    start = time.perf_counter()
    cache = GraphCache()
    cache.add_relations(relation_rows)
    cache.add_passages(passage_rows)
    cache.snapshot()
    return time.perf_counter() - start


def relation_row(triplet: Sequence[str]) -> tuple:
    """(relation id, subject id, object id) of a triplet, as the adjacency is fed."""
    return relation_key(triplet), entity_id(triplet[0]), entity_id(triplet[2])


def structure_bytes(store: MilvusGraphStore) -> Dict[str, Any]:
    """What each part of the in-memory adjacency weighs: the store's columns are fed to a fresh cache in
    stages under tracemalloc (ids and edges, entity names, synonym pairs, the sparse snapshot), and each
    snapshot matrix's arrays are counted (relation_entity's indices are the cache's relation ends)."""
    columns = store.backend.columns()
    gc.collect()
    tracemalloc.start()
    traced: Dict[str, int] = {}
    mark = tracemalloc.get_traced_memory()[0]

    def stage(name: str) -> None:
        nonlocal mark
        cache.compact()
        gc.collect()
        now = tracemalloc.get_traced_memory()[0]
        traced[name], mark = now - mark, now

    cache = GraphCache()
    cache.add_relations(np.column_stack([columns.relation_ids, columns.relation_ends]))
    cache.add_passage_columns(columns.passage_ids, columns.passage_offsets, columns.passage_relations)
    stage("ids_and_edges")
    cache.name_entities(columns.entity_ids, columns.entity_names)
    stage("entity_names")
    entities = cache.entities.lookup(columns.entity_ids)
    cache.add_synonym_positions(entities[columns.synonyms[:, 0]], entities[columns.synonyms[:, 1]])
    stage("synonym_pairs")
    graph = cache.snapshot()
    stage("snapshot")
    tracemalloc.stop()
    matrices = {
        name: int(sum(a.nbytes for a in (m.data, m.indices, m.indptr)))
        for name, m in vars(graph).items()
        if sp.issparse(m)
    }
    return {"traced": traced, "matrix_bytes": matrices, "synonym_links": int(len(columns.synonyms))}
