"""Which backend and which vector search a store runs on, chosen once when it opens: the only place
that reads the `adjacency`, `vector_cache` and `snapshot` settings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Tuple

import llama_index_graphrag_milvus.milvus.snapshot as snapshot_file
from llama_index_graphrag_milvus.backends.base import GraphBackend
from llama_index_graphrag_milvus.backends.memory import MemoryGraph
from llama_index_graphrag_milvus.backends.milvus import MilvusGraph
from llama_index_graphrag_milvus.errors import GraphStoreError
from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.milvus.collections import Collections
from llama_index_graphrag_milvus.milvus.search import CachedSearch, MilvusSearch, VectorSearch

ADJACENCY_MODES = ("memory", "milvus")


def check_settings(collection_prefix: str, adjacency: str) -> None:
    """Refuse a prefix Milvus cannot start a collection name with, or an unknown adjacency mode."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,200}", collection_prefix):
        raise GraphStoreError(
            f"collection_prefix {collection_prefix!r} is not a valid Milvus collection name start: "
            "use letters, digits and underscores, starting with a letter or underscore."
        )
    if adjacency not in ADJACENCY_MODES:
        raise GraphStoreError(f'adjacency must be "memory" or "milvus", got {adjacency!r}')


def open_backend(
    collections: Collections, adjacency: str, vector_cache: Optional[bool], snapshot: Optional[str | bool], overwrite: bool
) -> Tuple[GraphBackend, VectorSearch]:
    """The graph backend and the vector search of a store on `collections` (see `MilvusGraphStore`'s
    arguments of the same names); the memory backend builds its caches when first used."""
    if adjacency == "milvus":
        if vector_cache:
            raise GraphStoreError('vector_cache=True needs adjacency="memory": the cache is aligned with it.')
        graph: GraphBackend = MilvusGraph(collections)
        return graph, MilvusSearch(collections, graph.live)
    cache = GraphCache()
    cached = collections.is_lite if vector_cache is None else vector_cache
    search: VectorSearch = CachedSearch(cache, collections.dim) if cached else MilvusSearch(collections)
    path = snapshot_path(collections, snapshot)
    if overwrite and path is not None:
        snapshot_file.discard(path)
    meta = {"prefix": collections.prefix, "dim": collections.dim, "vectors": cached}
    graph = MemoryGraph(collections, search, cache, path, meta)
    if isinstance(search, MilvusSearch):
        search.live = graph.live
    else:
        search.ready = graph.ready
    return graph, search


def snapshot_path(collections: Collections, snapshot: Optional[str | bool]) -> Optional[Path]:
    """Where the caches are saved: the default next to a Lite database, none on a server, or as given."""
    if snapshot is None or snapshot is True:
        if collections.is_lite:
            return Path(f"{collections.lite_path}.graphrag-cache") / f"{collections.prefix}.npz"
        if snapshot:
            raise GraphStoreError(
                'snapshot=True needs a file path on a Milvus server, e.g. snapshot="graph.npz" '
                "(and only if this process is the only writer)."
            )
        return None
    return Path(snapshot).expanduser() if snapshot else None
