"""Reading an ingested store: opening it, its memory, expansion and retrieval latency.

`reads` runs in a fresh process per adjacency mode (`python -m benchmarks.scale --reads ...`), so that
the resident memory it reports is that mode's own: first a store on an empty prefix (the baseline:
Python, LlamaIndex, pymilvus), then the corpus's store, timed open, 100 retrievals. The expansion (the
in-memory adjacency's whole degree-1 / degree-2 neighbourhood of ~3 entity and ~3 relation seeds, no
hub or similarity cut) is measured in the memory mode. On Milvus Lite the parent also times opening
from Milvus' rows against the snapshot file, and traces the Python heap an open retains.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np
from llama_index.core.schema import QueryBundle

from llama_index_graphrag_milvus import GraphRAGRetriever, MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding
from llama_index_graphrag_milvus.graph.walk import GraphAdjacency, expand_from_entities, expand_from_relations
from llama_index_graphrag_milvus.schema import entity_id, relation_id

from benchmarks.scale.corpus import Corpus, query_seeds, questions
from benchmarks.scale.writes import DIM, Target


def percentiles(values: Sequence[float], scale: float = 1.0) -> Dict[str, float]:
    arr = np.asarray(values, dtype=np.float64) * scale
    return {
        "p50": round(float(np.median(arr)), 3),
        "p90": round(float(np.percentile(arr, 90)), 3),
        "max": round(float(arr.max()), 3),
    }


def _rss_mb() -> float:
    """This process's resident memory now, in MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_sources(target: Target, prefix: str, relations: int) -> Dict[str, Any]:
    """Milvus Lite: the seconds to open the store and build its graph (when first used), from the rows in
    Milvus, then from the snapshot file the build before saved on `close()`."""
    out: Dict[str, Any] = {}
    for source, kwargs in (("from_milvus_rows", {"snapshot": False}), ("from_snapshot", {})):
        gc.collect()
        start = time.perf_counter()
        store = target.store(prefix, **kwargs)
        opened = time.perf_counter() - start
        store.backend.ready().snapshot()  # the caches and the sparse graph, built when first used
        built = time.perf_counter() - start
        out[source] = {
            "open_s": round(opened, 3),
            "with_graph_s": round(built, 3),
            "relations_per_s": round(relations / built),
            "used_snapshot": bool(store.backend.snapshot_used),
        }
        store.close()
    return out


def heap(target: Target, prefix: str, relations: int) -> Dict[str, Any]:
    """Milvus Lite: Python heap (tracemalloc) an open from the snapshot file retains with its graph built,
    per relation. Milvus Lite serves from this process: what it allocates is counted apart; the vector
    cache is estimated at 4·dim bytes a row; the rest is the adjacency (ids, edges, names, links, sparse
    graph) and whatever else the open keeps."""
    gc.collect()
    tracemalloc.start(4)  # frames enough to find Milvus Lite's allocations
    try:
        store = target.store(prefix)
        store.backend.ready().snapshot()
        gc.collect()
        retained, peak = tracemalloc.get_traced_memory()
        lite = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(True, "*milvus_lite*", all_frames=True)]
        )
        lite_bytes = sum(stat.size for stat in lite.statistics("filename"))
    finally:
        tracemalloc.stop()
    counts = store.count()
    store.close()
    vectors = 4 * DIM * sum(counts.values())
    per = {
        "retained": retained,
        "peak": peak,
        "milvus_lite": lite_bytes,
        "store": retained - lite_bytes,
        "vector_cache_estimated": vectors,
        "store_less_vectors": retained - lite_bytes - vectors,
    }
    return {f"{k}_bytes_per_relation": round(v / relations, 1) for k, v in per.items()}


def expansion(store: MilvusGraphStore, corpus: Corpus, seeds: List[tuple]) -> Dict[str, Any]:
    """Latency and size of the whole neighbourhood at degrees 1 and 2 (memory mode)."""
    cache = store.backend.ready()
    adjacency = GraphAdjacency(cache.snapshot())  # through every entity
    positions = [
        (
            [cache.entities.position(entity_id(corpus.names[e])) for e in ents],
            [cache.relations.position(relation_id(*corpus.triplet(r))) for r in rels],
        )
        for ents, rels in seeds
    ]
    out = {}
    for degree in (1, 2):
        ms, size = [], []
        for ents, rels in positions:
            start = time.perf_counter()
            found = np.union1d(
                expand_from_entities(adjacency, ents, degree), expand_from_relations(adjacency, rels, degree)
            )
            ms.append(time.perf_counter() - start)
            size.append(len(found))
        out[f"degree_{degree}"] = {"ms": percentiles(ms, 1e3), "candidates": percentiles(size)}
    return out


def retrieval(store: MilvusGraphStore, texts: List[str]) -> Dict[str, Any]:
    """`GraphRAGRetriever(store, similarity_top_k=10, llm=None).retrieve`, precomputed query embeddings."""
    embed = HashEmbedding(DIM)
    bundles = [QueryBundle(t, embedding=embed.get_query_embedding(t)) for t in texts]
    retriever = GraphRAGRetriever(store=store, similarity_top_k=10, llm=None)
    for bundle in bundles[:3]:  # warm up
        retriever.retrieve(bundle)
    calls = sum(store.collections.calls.values())
    ms, tops = [], []
    for bundle in bundles:
        start = time.perf_counter()
        tops.append([n.node.node_id for n in retriever.retrieve(bundle)])
        ms.append(time.perf_counter() - start)
    return {
        "queries": len(texts),
        "ms": percentiles(ms, 1e3),
        "passages_returned_mean": round(float(np.mean([len(t) for t in tops])), 2),
        "milvus_calls_per_retrieval": round((sum(store.collections.calls.values()) - calls) / len(texts), 1),
        "top10": tops,
    }


def reads(target: Target, prefix: str, corpus: Corpus, mode: str, queries: int, seed: int) -> Dict[str, Any]:
    """In this process: baseline RSS, timed open in `mode`, expansion (memory mode), retrievals, RSS."""
    empty = target.store("empty_baseline", adjacency=mode)
    GraphRAGRetriever(store=empty, llm=None).retrieve("warm up")
    empty.close()
    target.discard("empty_baseline")
    baseline = _rss_mb()
    start = time.perf_counter()
    store = target.store(prefix, adjacency=mode)
    out: Dict[str, Any] = {"open_s": round(time.perf_counter() - start, 3)}
    try:
        rng = np.random.default_rng([seed, corpus.size, 1])
        seeds = query_seeds(corpus, rng, 200)  # drawn in either mode: the questions that follow are the same
        if mode == "memory":
            out["expansion"] = expansion(store, corpus, seeds)
        out["retrieval"] = retrieval(store, questions(corpus, rng, queries))
        out["rss_mb_above_empty_store"] = round(_rss_mb() - baseline, 1)
    finally:
        store.close()
    return out
