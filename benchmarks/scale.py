"""Scale benchmark of the graph part: ingest, adjacency build and memory, expansion and retrieval latency.

    python -m benchmarks.scale --sizes 1e3,1e4,1e5,1e6 --out benchmarks/results/scale.json

For each size (the number of distinct relations) a seeded synthetic corpus is generated (power-law entity
degrees, 3–10 triplets per passage), ingested through `GraphRAGTransform` into a fresh Milvus Lite store
under /tmp/scale, and measured:

- ingest throughput, split into embedding (a 32-dim `HashEmbedding`, so the embedder is not what is
  measured), Milvus upserts and the rest (our Python and LlamaIndex's node handling);
- reopening the store: total open, `_load_cache` (reading rows from Milvus vs building the id maps) and
  the CSR build (`cache.snapshot()`);
- adjacency memory: the CSR arrays and the `GraphCache` Python structures (tracemalloc), per relation;
- expansion latency at degrees 1 and 2 with ~3 entity and ~3 relation seeds, and the candidate set size;
- whole retrieval latency with no LLM (`GraphRAGRetriever.retrieve` with a precomputed query embedding);
- the reference notebook's algorithm (list.index build, dense incidence, A·Aᵀ products) side by side,
  where it fits in ~2 GB and ~5 minutes, with a check that both give the same candidate sets.

Results merge into the JSON file (one entry per size, so sizes can be run one invocation at a time), and a
log-log PNG of the cost curves is written next to it. Time ratios matter more than absolute times: the
machine is shared.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import logging
import math
import os
import platform
import pstats
import shutil
import sys
import time
import threading
import tracemalloc
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import scipy.sparse as sp

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from llama_index.core.schema import QueryBundle, TextNode  # noqa: E402

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore  # noqa: E402
from llama_index_graphrag_milvus.embeddings import HashEmbedding  # noqa: E402
from llama_index_graphrag_milvus.adjacency import GraphCache  # noqa: E402
from llama_index_graphrag_milvus.graph import (  # noqa: E402
    Graph,
    expand_from_entities,
    expand_from_relations,
)
from llama_index_graphrag_milvus.schema import entity_id, relation_id  # noqa: E402

DIM = 32
DB_ROOT = Path("/tmp/scale")
REFERENCE_MAX_DENSE_BYTES = 2 * 1024**3
REFERENCE_MAX_SECONDS = 300.0
PREDICATES = (
    "works with", "born in", "part of", "located near", "founded", "studied under", "wrote", "married",
    "succeeded", "invented", "funded", "acquired", "teaches", "advises", "competes with", "owns",
    "directed", "discovered", "collaborates with", "influenced", "supplies", "borders", "leads",
    "member of", "published by", "named after", "descends from", "opposes", "hosts", "translated",
    "painted", "composed", "built", "governs", "mentors", "sponsors", "visited", "replaced", "cites",
    "inherited from",
)
_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]  # 70


# --------------------------------------------------------------------------------------------------
# the synthetic corpus
# --------------------------------------------------------------------------------------------------
def _word(i: int, min_syllables: int = 2) -> str:
    out = []
    while i or len(out) < min_syllables:
        i, r = divmod(i, len(_SYLLABLES))
        out.append(_SYLLABLES[r])
    return "".join(out)


def entity_name(i: int) -> str:
    """A unique two-word name: a unique word, and one of 97 'family' words (so embeddings vary)."""
    return f"{_word(i)} {_word(5000 + i % 97, 3)}"


@dataclass
class Corpus:
    """Relations as index arrays into `names` and `PREDICATES`; passages as slices of `passage_rels`."""

    size: int
    seed: int
    names: List[str]  # entity index -> display name
    subj: np.ndarray  # relation index -> entity index
    pred: np.ndarray  # relation index -> predicate index
    obj: np.ndarray
    passage_ptr: np.ndarray  # passage p states passage_rels[passage_ptr[p]:passage_ptr[p+1]]
    passage_rels: np.ndarray

    @property
    def n_passages(self) -> int:
        return len(self.passage_ptr) - 1

    def triplet(self, r: int) -> List[str]:
        return [self.names[self.subj[r]], PREDICATES[self.pred[r]], self.names[self.obj[r]]]

    def passage_triplets(self, p: int) -> List[List[str]]:
        return [self.triplet(r) for r in self.passage_rels[self.passage_ptr[p] : self.passage_ptr[p + 1]]]

    def node(self, p: int) -> TextNode:
        triplets = self.passage_triplets(p)
        text = " ".join(f"{s} {pr} {o}." for s, pr, o in triplets)
        return TextNode(id_=f"s{self.size}-p{p:07d}", text=text, metadata={"triplets": triplets})

    def used_entities(self) -> np.ndarray:
        return np.unique(np.concatenate([self.subj, self.obj]))


def make_corpus(size: int, seed: int = 0, zipf_s: float = 0.8, reuse: float = 0.1) -> Corpus:
    """`size` distinct relations; entity endpoints drawn with P(rank k) ∝ k^-zipf_s (a power-law degree
    distribution, exponent ≈ 1 + 1/zipf_s), from a pool of size/2 entities; each passage states 3–10
    triplets, of which about `reuse` restate an earlier relation (relations stated by several passages).
    Deterministic in (size, seed)."""
    rng = np.random.default_rng([seed, size])
    pool = max(50, size // 2)
    weights = np.arange(1, pool + 1, dtype=np.float64) ** -zipf_s
    cdf = np.cumsum(weights) / weights.sum()
    rank_to_entity = rng.permutation(pool)  # so that entity index says nothing of degree

    def draw(n: int) -> np.ndarray:
        return rank_to_entity[np.minimum(np.searchsorted(cdf, rng.random(n)), pool - 1)]

    subj = np.empty(0, dtype=np.int64)
    obj = np.empty(0, dtype=np.int64)
    pred = np.empty(0, dtype=np.int64)
    while len(subj) < size:  # draw, drop repeated (s, p, o), draw again for the rest
        n = int((size - len(subj)) * 1.2) + 16
        s, o, p = draw(n), draw(n), rng.integers(len(PREDICATES), size=n)
        subj, obj, pred = np.concatenate([subj, s]), np.concatenate([obj, o]), np.concatenate([pred, p])
        key = (subj * pool + obj) * len(PREDICATES) + pred
        _, first = np.unique(key, return_index=True)
        keep = np.sort(first)
        subj, obj, pred = subj[keep], obj[keep], pred[keep]
    subj, obj, pred = subj[:size], obj[:size], pred[:size]

    ptr = [0]
    rels: List[int] = []
    next_new = 0
    while next_new < size:
        k = int(rng.integers(3, 11))
        chosen: List[int] = []
        for _ in range(k):
            if next_new > 0 and rng.random() < reuse:
                old = int(rng.integers(next_new))
                if old not in chosen:
                    chosen.append(old)
            elif next_new < size:
                chosen.append(next_new)
                next_new += 1
        rels.extend(chosen)
        ptr.append(len(rels))
    # names only for the entities used, indexed by entity index (unused pool slots stay unnamed)
    names = [""] * pool
    for e in np.unique(np.concatenate([subj, obj])).tolist():
        names[e] = entity_name(e)
    return Corpus(
        size=size,
        seed=seed,
        names=names,
        subj=subj,
        pred=pred,
        obj=obj,
        passage_ptr=np.asarray(ptr, dtype=np.int64),
        passage_rels=np.asarray(rels, dtype=np.int64),
    )


def corpus_stats(corpus: Corpus) -> Dict[str, Any]:
    ends = np.concatenate([corpus.subj, corpus.obj])
    degree = np.bincount(ends)
    degree = degree[degree > 0]
    per_passage = np.diff(corpus.passage_ptr)
    return {
        "relations": corpus.size,
        "entities": int(len(degree)),
        "passages": corpus.n_passages,
        "triplets": int(len(corpus.passage_rels)),
        "triplets_per_passage_mean": round(float(per_passage.mean()), 2),
        "entity_degree": {
            "mean": round(float(degree.mean()), 2),
            "median": float(np.median(degree)),
            "p99": float(np.percentile(degree, 99)),
            "max": int(degree.max()),
        },
    }


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------
class Stopwatch:
    """Accumulated seconds and call counts by name."""

    def __init__(self) -> None:
        self.seconds: Dict[str, float] = defaultdict(float)
        self.calls: Dict[str, int] = defaultdict(int)

    def wrap(self, name: str, fn: Callable) -> Callable:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1

        return timed


class TimedEmbedding:
    """A proxy of the store's embed model that times `get_text_embedding_batch` (what the store calls)."""

    def __init__(self, model: Any, watch: Stopwatch) -> None:
        self._model = model
        self.get_text_embedding_batch = watch.wrap("embed", model.get_text_embedding_batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


class TimedOpenStore(MilvusGraphStore):
    """The store, with `_load_cache` timed and the time spent fetching row pages from Milvus counted."""

    load_watch: Stopwatch

    def _load_cache(self) -> None:
        self.load_watch = Stopwatch()
        self.load_watch.wrap("load_cache", super()._load_cache)()

    def _pages(self, collection: str, fields: List[str]) -> Any:
        pages = super()._pages(collection, fields)
        fetch = self.load_watch.wrap(f"read {collection}", lambda: next(pages, None))
        while (page := fetch()) is not None:
            yield page


def percentiles(values: Sequence[float], scale: float = 1.0, digits: int = 3) -> Dict[str, float]:
    arr = np.asarray(values, dtype=np.float64) * scale
    return {
        "p50": round(float(np.percentile(arr, 50)), digits),
        "p95": round(float(np.percentile(arr, 95)), digits),
        "mean": round(float(arr.mean()), digits),
        "max": round(float(arr.max()), digits),
    }


threading_lock_type = type(threading.Lock())

#: Extra MilvusGraphStore arguments for every store opened (from the command line).
STORE_KWARGS: Dict[str, Any] = {}


def open_store(path: Path, cls: type = MilvusGraphStore, **kwargs: Any) -> MilvusGraphStore:
    return cls(uri=str(path), embed_model=HashEmbedding(dim=DIM), dim=DIM, **STORE_KWARGS, **kwargs)


def fmt_size(n: int) -> str:
    exp = int(round(math.log10(n)))
    return f"1e{exp}" if 10**exp == n else str(n)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------------------------------
# 1. ingest
# --------------------------------------------------------------------------------------------------
def ingest(
    corpus: Corpus, path: Path, node_batch: int, batch_size: int, budget_s: float = math.inf
) -> Dict[str, Any]:
    """Ingest the whole corpus into a fresh store at `path`, `node_batch` TextNodes per transform call.

    Stops after the batch that passes `budget_s` seconds, and then extrapolates the total from the batch
    times so far (`stopped_early`)."""
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        path.unlink()
    watch = Stopwatch()
    t_open = time.perf_counter()
    store = open_store(path, overwrite=True, batch_size=batch_size)
    open_s = time.perf_counter() - t_open
    try:
        store.embed_model = TimedEmbedding(store.embed_model, watch)  # type: ignore[assignment]
        store.client.upsert = watch.wrap("upsert", store.client.upsert)  # type: ignore[method-assign]
        store.client.search = watch.wrap("search", store.client.search)  # type: ignore[method-assign]
        store.add = watch.wrap("store.add", store.add)  # type: ignore[method-assign]
        transform = GraphRAGTransform(store=store)
        batch_secs: List[float] = []
        batch_rels: List[int] = []
        build_nodes = 0.0
        for start in range(0, corpus.n_passages, node_batch):
            t0 = time.perf_counter()
            nodes = [corpus.node(p) for p in range(start, min(start + node_batch, corpus.n_passages))]
            before = len(store.cache.relations)
            t1 = time.perf_counter()
            transform(nodes)
            batch_secs.append(time.perf_counter() - t1)
            batch_rels.append(len(store.cache.relations) - before)
            build_nodes += t1 - t0
            if sum(batch_secs) > budget_s and start + node_batch < corpus.n_passages:
                break
        total = float(sum(batch_secs))
        done_rels = int(sum(batch_rels))
        t_flush = time.perf_counter()
        if hasattr(store, "flush"):
            store.flush()
        flush_s = time.perf_counter() - t_flush
        t_count = time.perf_counter()
        counts = store.count()
        count_s = time.perf_counter() - t_count
        cache_counts = store.cache.counts()
    finally:
        t_close = time.perf_counter()
        store.close()
        close_s = time.perf_counter() - t_close
    add = watch.seconds["store.add"]
    embed, upsert, search = watch.seconds["embed"], watch.seconds["upsert"], watch.seconds["search"]
    stopped = done_rels < corpus.size
    full = len(batch_secs) - (1 if corpus.n_passages % node_batch and not stopped else 0)  # last may be short
    tenth = max(1, full // 10)
    first, last = slice(0, tenth), slice(max(0, full - tenth), max(1, full))
    fit = _fit(batch_rels[1:full] if not stopped else batch_rels[1:], batch_secs[1:full] if not stopped else batch_secs[1:])
    out: Dict[str, Any] = {}
    if stopped:
        out["stopped_early"] = {
            "budget_s": budget_s,
            "relations_ingested": done_rels,
            "batches_done": len(batch_secs),
            "estimated_total_s (batch-time fit)": round(estimate_ingest_s(fit, corpus.size), 1) if fit else None,
            "estimated_total_s (constant rate so far)": round(total * corpus.size / done_rels, 1),
        }
    return out | {
        "seconds": round(total, 3),
        "relations_per_s": round(done_rels / total, 1),
        "passages_per_s": round(corpus.n_passages * done_rels / corpus.size / total, 1),
        "triplets_per_s": round(len(corpus.passage_rels) * done_rels / corpus.size / total, 1),
        "seconds_outside_transform": {
            "open (fresh, overwrite=True)": round(open_s, 3),
            "flush() after ingest": round(flush_s, 3),
            "count() after ingest": round(count_s, 3),
            "close() after ingest (Milvus Lite releases/flushes)": round(close_s, 3),
        },
        "node_batch": node_batch,
        "store_batch_size": batch_size,
        "batches": len(batch_secs),
        "split_seconds": {
            "embedding (HashEmbedding dim 32, get_text_embedding_batch)": round(embed, 3),
            "milvus upsert (MilvusClient.upsert)": round(upsert, 3),
            "milvus search during ingest (MilvusClient.search: synonym links)": round(search, 3),
            "our python in store.add (ids, rows, node dicts, cache, synonym scan)": round(
                add - embed - upsert - search, 3
            ),
            "transform outside store.add (triplet parsing, node content exclusion)": round(total - add, 3),
        },
        "split_share": {
            "embedding": round(embed / total, 3),
            "milvus_upsert": round(upsert / total, 3),
            "milvus_search_synonyms": round(search / total, 3),
            "our_python_store_add": round((add - embed - upsert - search) / total, 3),
            "transform_other": round((total - add) / total, 3),
        },
        "calls": {"embed": watch.calls["embed"], "upsert": watch.calls["upsert"], "search": watch.calls["search"]},
        "relations_per_s_first_tenth_of_batches": round(sum(batch_rels[first]) / sum(batch_secs[first]), 1),
        "relations_per_s_last_tenth_of_full_batches": round(sum(batch_rels[last]) / sum(batch_secs[last]), 1),
        "batch_time_fit (s = a + b * relations stored before the batch, full batches)": fit,
        "batch_seconds": [round(x, 3) for x in batch_secs],
        "node_construction_seconds_excluded": round(build_nodes, 3),
        "milvus_counts": counts,
        "cache_counts": cache_counts,
    }


def _fit(batch_rels: List[int], batch_secs: List[float]) -> Optional[Dict[str, float]]:
    if len(batch_secs) < 3:
        return None
    before = np.cumsum([0] + list(batch_rels[:-1]), dtype=np.float64)
    b, a = np.polyfit(before, np.asarray(batch_secs), 1)
    return {"a": float(a), "b": float(b), "relations_per_batch": float(np.mean(batch_rels))}


def estimate_ingest_s(fit: Dict[str, float], size: int) -> float:
    """Total ingest time at `size` relations from a per-batch fit (linear growth of batch time)."""
    per = fit["relations_per_batch"]
    batches = int(math.ceil(size / per))
    before = per * np.arange(batches)
    return float(np.sum(np.maximum(fit["a"] + fit["b"] * before, fit["a"])))


def profile_ingest(corpus: Corpus, path: Path, node_batch: int, batch_size: int, out: Path) -> Dict[str, Any]:
    """cProfile a whole ingest; where the time goes, by bucket and by top cumulative functions."""
    shutil.rmtree(path, ignore_errors=True)
    store = open_store(path, overwrite=True, batch_size=batch_size)
    nodes_batches = [
        [corpus.node(p) for p in range(s, min(s + node_batch, corpus.n_passages))]
        for s in range(0, corpus.n_passages, node_batch)
    ]
    transform = GraphRAGTransform(store=store)
    profiler = cProfile.Profile()
    try:
        profiler.enable()
        for nodes in nodes_batches:
            transform(nodes)
        profiler.disable()
    finally:
        store.close()
        shutil.rmtree(path, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(str(out))
    stats = pstats.Stats(profiler)

    def cumulative(file_part: str, func: str) -> float:
        return sum(
            ct for (file, _, name), (_, _, _, ct, _) in stats.stats.items() if name == func and file_part in file
        )

    transform_total = cumulative("transform.py", "__call__")
    total = transform_total
    buckets = {
        "GraphRAGTransform.__call__ (total)": transform_total,
        "GraphRAGTransform._given (triplet parsing)": cumulative("transform.py", "_given"),
        "MilvusGraphStore._add": cumulative("store.py", "_add"),
        "BaseEmbedding.get_text_embedding_batch (incl. instrumentation)": cumulative(
            "base/embeddings/base.py", "get_text_embedding_batch"
        ),
        "HashEmbedding._get_text_embeddings (the hashing itself)": cumulative(
            "embeddings.py", "_get_text_embeddings"
        ),
        "MilvusClient.upsert": cumulative("milvus_client.py", "upsert"),
        "node_to_metadata_dict (passage rows)": cumulative("vector_stores/utils.py", "node_to_metadata_dict"),
        "schema.entity_id + relation_id (blake2b ids)": cumulative("schema.py", "entity_id")
        + cumulative("schema.py", "relation_id"),
        "schema.passage_id": cumulative("schema.py", "passage_id"),
        "GraphCache.add_relations + add_passages": cumulative("adjacency.py", "add_relations")
        + cumulative("adjacency.py", "add_passages"),
        "GraphCache.passage_relations (skip check)": cumulative("adjacency.py", "passage_relations"),
        "MilvusGraphStore._find_synonyms (entity synonym search)": cumulative("store.py", "_find_synonyms"),
        "VectorCache.put (in-memory vectors)": cumulative("vectors.py", "put"),
        "MilvusClient.search (during ingest)": cumulative("milvus_client.py", "search"),
        "node.get_content": cumulative("core/schema.py", "get_content"),
    }
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
    (out.with_suffix(".txt")).write_text(text.getvalue())
    top = []
    for (file, line, name), (_, nc, tt, ct, _) in sorted(
        stats.stats.items(), key=lambda kv: kv[1][3], reverse=True
    )[:60]:
        top.append(
            {
                "function": f"{Path(file).parent.name}/{Path(file).name}:{line}({name})",
                "calls": nc,
                "cumulative_s": round(ct, 3),
                "own_s": round(tt, 3),
            }
        )
    top_own = []
    for (file, line, name), (_, nc, tt, _, _) in sorted(
        stats.stats.items(), key=lambda kv: kv[1][2], reverse=True
    )[:25]:
        top_own.append(
            {
                "function": f"{Path(file).parent.name}/{Path(file).name}:{line}({name})",
                "calls": nc,
                "own_s": round(tt, 3),
            }
        )
    return {
        "size": corpus.size,
        "profiled_seconds": round(total, 3),
        "buckets_cumulative_s": {k: round(v, 3) for k, v in buckets.items()},
        "buckets_share": {k: round(v / total, 3) for k, v in buckets.items()} if total else {},
        "top_cumulative": top,
        "top_own_time": top_own,
        "pstats_file": str(out),
    }


# --------------------------------------------------------------------------------------------------
# 2. open, adjacency build and memory
# --------------------------------------------------------------------------------------------------
def reopen(path: Path, relations: int) -> tuple:
    """Open the existing store twice and time the parts: from the rows in Milvus (snapshot=False), then
    from the snapshot file saved when the ingest closed; returns (the second store, figures)."""
    figures: Dict[str, Any] = {}
    for source, kwargs in (("from_milvus", {"snapshot": False}), ("from_snapshot", {})):
        gc.collect()
        t0 = time.perf_counter()
        store = open_store(path, cls=TimedOpenStore, **kwargs)
        open_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        graph = store.cache.snapshot()
        csr_s = time.perf_counter() - t1
        watch = store.load_watch  # type: ignore[attr-defined]
        load = watch.seconds["load_cache"]
        read = sum(v for k, v in watch.seconds.items() if k.startswith("read "))
        figures[source] = {
            "used_snapshot": store._snapshot_current,
            "open_total_s": round(open_s, 3),
            "load_cache_s": round(load, 3),
            "load_cache_read_rows_s": round(read, 3),
            "load_cache_build_caches_s": round(load - read, 3),
            "read_by_collection_s": {k[5:]: round(v, 3) for k, v in watch.seconds.items() if k.startswith("read ")},
            "open_other_s (client, collections, load, counts)": round(open_s - load, 3),
            "csr_build_s": round(csr_s, 3),
            "adjacency_build_s (load_cache + csr)": round(load + csr_s, 3),
            "adjacency_build_relations_per_s": round(relations / (load + csr_s), 1),
            "open_plus_csr_relations_per_s": round(relations / (open_s + csr_s), 1),
            "graph_shape (E, R, P)": list(graph.shape),
        }
        if source == "from_milvus":
            store.close()
    assert figures["from_snapshot"]["used_snapshot"], "the ingest should have left a snapshot"
    return store, figures


def csr_bytes(graph: Graph, cache: Optional[GraphCache] = None) -> Dict[str, int]:
    """data + indices + indptr of every sparse matrix of the snapshot, less arrays it shares with the
    cache (relation_entity's indices are the cache's relation ends)."""
    out = {}
    shared = [a.array() for a in (getattr(cache, "_ends", None),) if a is not None]
    for name in getattr(graph, "__dataclass_fields__", {}):
        m = getattr(graph, name)
        if sp.issparse(m):
            arrays = [m.data, m.indices, m.indptr]
            out[name] = int(sum(a.nbytes for a in arrays if not any(np.shares_memory(a, b) for b in shared)))
    return out


def vector_cache_bytes(store: MilvusGraphStore) -> Dict[str, Any]:
    """The store's in-memory vector copies (Milvus Lite): allocated and used bytes."""
    out: Dict[str, Any] = {}
    for name in ("_entity_vectors", "_relation_vectors", "_passage_vectors"):
        cache = getattr(store, name, None)
        if cache is not None and hasattr(cache, "_vectors"):
            used = int(getattr(cache, "_size", len(cache._vectors))) * cache._vectors.shape[1] * cache._vectors.itemsize
            out[name.strip("_")] = {"allocated": int(cache._vectors.nbytes + cache._known.nbytes), "used": used}
    return out


def _deep_ids_bytes(cache: GraphCache) -> Dict[str, int]:
    """sys.getsizeof sums of each GraphCache attribute, containers walked, each object counted once."""
    seen: set = set()

    def deep(obj: Any) -> int:
        if id(obj) in seen or isinstance(obj, (threading_lock_type, Graph)):
            return 0
        seen.add(id(obj))
        total = sys.getsizeof(obj)
        if isinstance(obj, dict):
            total += sum(deep(k) + deep(v) for k, v in obj.items())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            total += sum(deep(v) for v in obj)
        elif hasattr(obj, "__dict__") and not isinstance(obj, (np.ndarray, type)):
            total += sum(deep(v) for v in vars(obj).values())
        return total

    return {
        name: deep(value)
        for name, value in vars(cache).items()
        if name not in ("_lock", "_snapshot") and value is not None
    }


def adjacency_memory(store: MilvusGraphStore, relations: int) -> Dict[str, Any]:
    """CSR bytes of the store's graph; bytes of a GraphCache (ids, edges, entity names) rebuilt from the
    store's columns under tracemalloc."""
    csr = csr_bytes(store.graph, store.cache)
    columns = store._columns()
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    cache = GraphCache()
    cache.add_relations(np.column_stack([columns.relation_ids, columns.relation_ends]))
    cache.add_passage_columns(columns.passage_ids, columns.passage_offsets, columns.passage_relations)
    cache.compact()
    gc.collect()
    id_maps = tracemalloc.get_traced_memory()[0] - base
    cache.name_entities(columns.entity_ids, columns.entity_names)
    cache.compact()
    gc.collect()
    with_names = tracemalloc.get_traced_memory()[0] - base
    entities = cache.entities.lookup(columns.entity_ids)
    cache.add_synonym_positions(entities[columns.synonyms[:, 0]], entities[columns.synonyms[:, 1]])
    cache.compact()
    gc.collect()
    synonym_pairs = tracemalloc.get_traced_memory()[0] - base - with_names
    names_only = with_names - id_maps
    with_names += synonym_pairs
    graph = cache.snapshot()
    gc.collect()
    snapshot_traced = tracemalloc.get_traced_memory()[0] - base - with_names
    tracemalloc.stop()
    getsizeof_parts = _deep_ids_bytes(cache)
    csr_total = sum(csr.values())
    assert graph.shape == store.graph.shape
    vectors = vector_cache_bytes(store)
    vectors_used = sum(v["used"] for v in vectors.values())
    return {
        "vector_cache_bytes (dim %d)" % DIM: vectors,
        "vector_cache_bytes_per_relation (used; scales with dim)": round(vectors_used / relations, 1),
        "csr_bytes": csr,
        "csr_bytes_total": csr_total,
        "csr_bytes_per_relation": round(csr_total / relations, 1),
        "id_maps_bytes_tracemalloc": id_maps,
        "id_maps_bytes_per_relation": round(id_maps / relations, 1),
        "entity_names_bytes_tracemalloc": names_only,
        "entity_names_bytes_per_relation": round(names_only / relations, 1),
        "snapshot_traced_bytes (cross-check of csr)": snapshot_traced,
        "id_maps_bytes_getsizeof": getsizeof_parts,
        "id_maps_bytes_getsizeof_total": sum(getsizeof_parts.values()),
        "total_bytes_per_relation (csr + id maps + names)": round((csr_total + with_names) / relations, 1),
        "synonym_links": len(columns.synonyms),
        "synonym_links_per_relation": round(len(columns.synonyms) / relations, 2),
        "synonym_bytes_per_relation (pairs + entity_entity csr)": round((synonym_pairs + csr.get("entity_entity", 0)) / relations, 1),
        "adjacency_bytes_per_relation without synonym links (csr + ids + edges + names)": round(
            (csr_total - csr.get("entity_entity", 0) + with_names - synonym_pairs) / relations, 1
        ),
    }


# --------------------------------------------------------------------------------------------------
# 3. expansion and retrieval latency
# --------------------------------------------------------------------------------------------------
def query_seeds(corpus: Corpus, rng: np.random.Generator, n: int, k: int = 3) -> List[tuple]:
    """`n` seed sets: `k` entity indices and `k` relation indices of the corpus, uniformly at random."""
    used = corpus.used_entities()
    return [
        (rng.choice(used, size=k, replace=False).tolist(), rng.choice(corpus.size, size=k, replace=False).tolist())
        for _ in range(n)
    ]


def our_positions(store: MilvusGraphStore, corpus: Corpus, seeds: List[tuple]) -> List[tuple]:
    cache = store.cache
    out = []
    for ents, rels in seeds:
        e = [cache.entities.position[entity_id(corpus.names[i])] for i in ents]
        r = [cache.relations.position[relation_id(*corpus.triplet(i))] for i in rels]
        out.append((e, r))
    return out


def expansion_latency(graph: Graph, positions: List[tuple], degree: int) -> Dict[str, Any]:
    for e, r in positions[:5]:  # warm up
        np.union1d(expand_from_entities(graph, e, degree), expand_from_relations(graph, r, degree))
    ent_t, rel_t, tot_t, sizes, ent_sizes, rel_sizes = [], [], [], [], [], []
    for e, r in positions:
        t0 = time.perf_counter()
        a = expand_from_entities(graph, e, degree)
        t1 = time.perf_counter()
        b = expand_from_relations(graph, r, degree)
        t2 = time.perf_counter()
        c = np.union1d(a, b)
        t3 = time.perf_counter()
        ent_t.append(t1 - t0)
        rel_t.append(t2 - t1)
        tot_t.append(t3 - t0)
        sizes.append(len(c))
        ent_sizes.append(len(a))
        rel_sizes.append(len(b))
    n_rel = graph.shape[1]
    return {
        "queries": len(positions),
        "ms": percentiles(tot_t, 1e3),
        "from_entities_ms": percentiles(ent_t, 1e3),
        "from_relations_ms": percentiles(rel_t, 1e3),
        "candidates": percentiles(sizes, 1, 1),
        "candidates_from_entities": percentiles(ent_sizes, 1, 1),
        "candidates_from_relations": percentiles(rel_sizes, 1, 1),
        "candidates_share_of_relations_p50": round(float(np.median(sizes)) / n_rel, 5),
    }


#: Store methods a retrieval may call; each is timed (outermost calls only) when the store has it.
STORE_READS = (
    "match_entities", "search_entities", "search_relations", "search_passage_ids", "passage_similarities",
    "describe", "get_passages", "search_passages",
)


def retrieval_latency(store: MilvusGraphStore, corpus: Corpus, rng: np.random.Generator, n: int) -> Dict[str, Any]:
    """`GraphRAGRetriever(store=store).retrieve` with no LLM and a precomputed query embedding.

    Each question names one entity (so ~3 entity seeds by entity_top_k=3) and a predicate; the relation
    search adds ~3 relation seeds. Time inside the store's Milvus calls is split out."""
    embedder = HashEmbedding(dim=DIM)
    used = corpus.used_entities()
    questions = []
    for _ in range(n + 5):
        e = int(rng.choice(used))
        p = PREDICATES[int(rng.integers(len(PREDICATES)))]
        q = f"Who or what {p} {corpus.names[e]}, and what came of it?"
        questions.append(QueryBundle(query_str=q, embedding=embedder.get_query_embedding(q)))
    retriever = GraphRAGRetriever(store=store)
    watch = Stopwatch()
    among_sizes: List[int] = []
    wrapped = []
    depth = [0]

    def outermost(name: str, fn: Callable) -> Callable:  # time store calls, not the calls they make
        timed = watch.wrap(name, fn)

        def call(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            try:
                return timed(*args, **kwargs) if depth[0] == 1 else fn(*args, **kwargs)
            finally:
                depth[0] -= 1

        return call

    for name in STORE_READS:
        if hasattr(store, name) and name != "search_relations":
            setattr(store, name, outermost(name, getattr(store, name)))
            wrapped.append(name)
    plain_search = store.search_relations
    seed_search = outermost("search_relations (seeds)", plain_search)
    among_search = outermost("search_relations among candidates", plain_search)

    def search_relations(vector, top_k, *args, **kwargs):
        among = args[0] if args else kwargs.get("among")
        if among is None:
            return seed_search(vector, top_k, *args, **kwargs)
        among_sizes.append(len(among))
        return among_search(vector, top_k, *args, **kwargs)

    store.search_relations = search_relations  # type: ignore[method-assign]
    wrapped.append("search_relations")
    try:
        for q in questions[:5]:
            retriever.retrieve(q)
        watch.seconds.clear()
        watch.calls.clear()
        among_sizes.clear()
        times, returned = [], []
        for q in questions[5:]:
            t0 = time.perf_counter()
            nodes = retriever.retrieve(q)
            times.append(time.perf_counter() - t0)
            returned.append(len(nodes))
    finally:
        for name in wrapped:
            delattr(store, name)
    total = sum(times)
    split = {f"store.{k}": round(v / total, 3) for k, v in watch.seconds.items()}
    split["rest (expansion, id maps, rerank, mention embedding, llama-index wrapper)"] = round(
        1 - sum(watch.seconds.values()) / total, 3
    )
    knobs = ("expansion_degree", "entity_top_k", "relation_top_k", "max_candidate_relations", "reranker")
    return {
        "queries": len(times),
        "retriever_defaults": {k: getattr(retriever, k) for k in knobs if hasattr(retriever, k)},
        "vector_cache": getattr(store, "_relation_vectors", None) is not None,
        "ms": percentiles(times, 1e3),
        "passages_returned_mean": round(float(np.mean(returned)), 2),
        "candidate_search_among_ids": percentiles(among_sizes, 1, 1) if among_sizes else None,
        "time_share": split,
        "mean_ms_by_call": {f"store.{k}": round(v / len(times) * 1e3, 3) for k, v in watch.seconds.items()},
    }


def write_then_read(store: MilvusGraphStore, corpus: Corpus, size: int) -> Dict[str, Any]:
    """Add one passage (3 new triplets) through the transform, then read: every write drops the snapshot,
    so the first `store.graph` after it rebuilds the whole CSR, and the first retrieval pays for whatever
    is derived from the snapshot lazily."""
    node = TextNode(
        id_=f"s{size}-extra",
        text="zzextra one founded zzextra two. zzextra two owns zzextra three. zzextra three cites zzextra one.",
        metadata={"triplets": [["zzextra one", "founded", "zzextra two"], ["zzextra two", "owns", "zzextra three"],
                               ["zzextra three", "cites", "zzextra one"]]},
    )
    q = f"Who or what founded {corpus.names[int(corpus.subj[0])]}?"
    bundle = QueryBundle(query_str=q, embedding=HashEmbedding(dim=DIM).get_query_embedding(q))
    retriever = GraphRAGRetriever(store=store)

    def timed(fn: Callable) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    steady = min(timed(lambda: retriever.retrieve(bundle)) for _ in range(3))
    add_s = timed(lambda: GraphRAGTransform(store=store)([node]))
    graph_s = timed(lambda: store.graph)
    next_graph_s = timed(lambda: store.graph)
    first_retrieval_s = timed(lambda: retriever.retrieve(bundle))
    second_retrieval_s = timed(lambda: retriever.retrieve(bundle))
    add2_s = timed(lambda: GraphRAGTransform(store=store)([TextNode(
        id_=f"s{size}-extra2", text="zzextra four owns zzextra five.",
        metadata={"triplets": [["zzextra four", "owns", "zzextra five"]]})]))
    first_retrieval_no_prior_graph_s = timed(lambda: retriever.retrieve(bundle))
    return {
        "add_one_passage_s": round(add_s, 4),
        "first_graph_read_after_write_s (full CSR rebuild)": round(graph_s, 4),
        "next_graph_read_s": round(next_graph_s, 6),
        "retrieval_steady_s": round(steady, 4),
        "first_retrieval_after_write_s (graph already rebuilt)": round(first_retrieval_s, 4),
        "second_retrieval_after_write_s": round(second_retrieval_s, 4),
        "add_another_passage_s": round(add2_s, 4),
        "first_retrieval_right_after_write_s (pays the rebuild)": round(first_retrieval_no_prior_graph_s, 4),
    }


# --------------------------------------------------------------------------------------------------
# 4. the reference notebook's algorithm
# --------------------------------------------------------------------------------------------------
class Reference:
    """The tutorial notebook's build and expansion, as written there (degree 1).

    The entity and relation lists are built with `x not in list` and `list.index` in the loop; the
    incidence matrix is a dense np.zeros((E, R)) converted to CSR; A·Aᵀ, Aᵀ·A and (A·Aᵀ)·A are computed
    at build; a query takes the nonzero columns of the seeds' rows."""

    def __init__(self) -> None:
        self.timings: Dict[str, float] = {}

    def build_lists(self, passages: List[List[List[str]]]) -> None:
        t0 = time.perf_counter()
        entities: List[str] = []
        relations: List[str] = []
        entityid_2_relationids: Dict[int, List[int]] = defaultdict(list)
        relationid_2_passageids: Dict[int, List[int]] = defaultdict(list)
        for passage_id, triplets in enumerate(passages):
            for triplet in triplets:
                if triplet[0] not in entities:
                    entities.append(triplet[0])
                if triplet[2] not in entities:
                    entities.append(triplet[2])
                relation = " ".join(triplet)
                if relation not in relations:
                    relations.append(relation)
                    entityid_2_relationids[entities.index(triplet[0])].append(len(relations) - 1)
                    entityid_2_relationids[entities.index(triplet[2])].append(len(relations) - 1)
                relationid_2_passageids[relations.index(relation)].append(passage_id)
        self.entities, self.relations = entities, relations
        self.entityid_2_relationids = entityid_2_relationids
        self.relationid_2_passageids = relationid_2_passageids
        self.timings["lists_s"] = time.perf_counter() - t0

    def build_matrices(self, degree: int = 1) -> None:
        t0 = time.perf_counter()
        adj = np.zeros((len(self.entities), len(self.relations)))
        for eid in range(len(self.entities)):
            adj[eid, self.entityid_2_relationids[eid]] = 1
        t1 = time.perf_counter()
        adj = sp.csr_matrix(adj)
        t2 = time.perf_counter()
        entity_adj_1 = adj @ adj.T
        relation_adj_1 = adj.T @ adj
        entity_adj = entity_adj_1
        for _ in range(degree - 1):
            entity_adj = entity_adj * entity_adj_1
        relation_adj = relation_adj_1
        for _ in range(degree - 1):
            relation_adj = relation_adj * relation_adj_1
        entity_relation_adj = entity_adj @ adj
        t3 = time.perf_counter()
        self.adj, self.relation_adj, self.entity_relation_adj = adj, relation_adj, entity_relation_adj
        self.timings.update(dense_fill_s=t1 - t0, to_csr_s=t2 - t1, products_s=t3 - t2)
        self.product_nnz = {
            "A": int(adj.nnz),
            "A·Aᵀ": int(entity_adj_1.nnz),
            "Aᵀ·A": int(relation_adj.nnz),
            "(A·Aᵀ)·A": int(entity_relation_adj.nnz),
        }
        self.product_bytes = int(
            sum(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes for m in (adj, relation_adj, entity_relation_adj))
        )

    def expand(self, entity_seeds: Sequence[int], relation_seeds: Sequence[int]) -> List[int]:
        from_relations: set = set()
        from_entities: set = set()
        for r in relation_seeds:
            from_relations.update(self.relation_adj[r].nonzero()[1].tolist())
        for e in entity_seeds:
            from_entities.update(self.entity_relation_adj[e].nonzero()[1].tolist())
        return list(from_relations | from_entities)


def reference_benchmark(
    corpus: Corpus,
    store: MilvusGraphStore,
    seeds: List[tuple],
    our_pos: List[tuple],
    previous: Optional[Dict[str, Any]],
    check_sets: bool,
) -> Dict[str, Any]:
    """Run the reference where it fits; compare build and degree-1 expansion with ours on the same seeds."""
    passages = [corpus.passage_triplets(p) for p in range(corpus.n_passages)]
    n_ent = int(len(corpus.used_entities()))
    dense_bytes = n_ent * corpus.size * 8
    out: Dict[str, Any] = {"dense_matrix_bytes": dense_bytes}
    # the list build is quadratic: predict it from the previous size before starting
    if previous and previous.get("lists_s"):
        predicted = previous["lists_s"] * (corpus.size / previous["size"]) ** 2
        out["lists_predicted_s"] = round(predicted, 1)
        if predicted > REFERENCE_MAX_SECONDS:
            out["skipped"] = (
                f"list build predicted at {predicted:.0f} s (> {REFERENCE_MAX_SECONDS:.0f} s, quadratic from "
                f"{previous['lists_s']:.2f} s at {previous['size']}); dense matrix would be "
                f"{dense_bytes / 1e9:.1f} GB"
            )
            return out
    ref = Reference()
    ref.build_lists(passages)
    out["lists_s"] = round(ref.timings["lists_s"], 3)
    out["size"] = corpus.size
    assert len(ref.relations) == corpus.size and len(ref.entities) == n_ent, "reference lists disagree"
    if dense_bytes > REFERENCE_MAX_DENSE_BYTES:
        out["skipped"] = (
            f"dense np.zeros(({n_ent}, {corpus.size})) would take {dense_bytes / 1e9:.1f} GB "
            f"(> {REFERENCE_MAX_DENSE_BYTES / 1e9:.1f} GB): list build measured, matrices not built"
        )
        return out
    ref.build_matrices(degree=1)
    build = sum(ref.timings.values())
    out.update({k: round(v, 3) for k, v in ref.timings.items()})
    out["build_s"] = round(build, 3)
    out["product_nnz"] = ref.product_nnz
    out["product_bytes"] = ref.product_bytes

    # ours, built from the same data in memory: GraphCache from (id, subject, object) rows + snapshot
    rel_rows = [
        (relation_id(*corpus.triplet(r)), entity_id(corpus.names[corpus.subj[r]]), entity_id(corpus.names[corpus.obj[r]]))
        for r in range(corpus.size)
    ]
    pas_rows = [
        (f"p{p}", [rel_rows[r][0] for r in corpus.passage_rels[corpus.passage_ptr[p] : corpus.passage_ptr[p + 1]]])
        for p in range(corpus.n_passages)
    ]
    t0 = time.perf_counter()
    cache = GraphCache()
    cache.add_relations(rel_rows)
    cache.add_passages(pas_rows)
    cache.snapshot()
    ours_mem = time.perf_counter() - t0
    out["ours_in_memory_build_s"] = round(ours_mem, 4)
    out["build_ratio_reference_over_ours_in_memory"] = round(build / ours_mem, 1)

    # the same seeds, mapped to the reference's list positions (mapping not timed)
    ent_index = {name: i for i, name in enumerate(ref.entities)}
    rel_index = {text: i for i, text in enumerate(ref.relations)}
    ref_seeds = [
        ([ent_index[corpus.names[e]] for e in ents], [rel_index[" ".join(corpus.triplet(r))] for r in rels])
        for ents, rels in seeds
    ]
    for e, r in ref_seeds[:5]:
        ref.expand(e, r)
    ref_times = []
    for e, r in ref_seeds:
        t0 = time.perf_counter()
        ref.expand(e, r)
        ref_times.append(time.perf_counter() - t0)
    graph = store.graph
    our_times = []
    for e, r in our_pos:
        t0 = time.perf_counter()
        np.union1d(expand_from_entities(graph, e, 1), expand_from_relations(graph, r, 1))
        our_times.append(time.perf_counter() - t0)
    out["expansion_deg1_ms"] = percentiles(ref_times, 1e3)
    out["expansion_ratio_reference_over_ours_p50"] = round(
        float(np.median(ref_times)) / float(np.median(our_times)), 2
    )
    if check_sets:
        text_to_id = {" ".join(corpus.triplet(r)): relation_id(*corpus.triplet(r)) for r in range(corpus.size)}
        cache_ids = store.cache.relations.ids
        mismatches = 0
        for (re_, rr), (oe, orr) in zip(ref_seeds, our_pos):
            ref_set = {text_to_id[ref.relations[i]] for i in ref.expand(re_, rr)}
            our_set = {cache_ids[i] for i in np.union1d(expand_from_entities(graph, oe, 1), expand_from_relations(graph, orr, 1)).tolist()}
            ref_e = {text_to_id[ref.relations[i]] for i in ref.expand(re_, [])}
            our_e = {cache_ids[i] for i in expand_from_entities(graph, oe, 1).tolist()}
            ref_r = {text_to_id[ref.relations[i]] for i in ref.expand([], rr)}
            our_r = {cache_ids[i] for i in expand_from_relations(graph, orr, 1).tolist()}
            mismatches += (ref_set != our_set) + (ref_e != our_e) + (ref_r != our_r)
        out["same_candidate_sets"] = {
            "queries": len(ref_seeds),
            "checks (union, from entities, from relations)": 3 * len(ref_seeds),
            "mismatches": mismatches,
        }
    return out


# --------------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------------
def run_size(size: int, args: argparse.Namespace, results: Dict[str, Any]) -> Dict[str, Any]:
    entry: Dict[str, Any] = {"size": size}
    t0 = time.perf_counter()
    corpus = make_corpus(size, args.seed)
    entry["corpus"] = corpus_stats(corpus)
    entry["corpus"]["generate_s"] = round(time.perf_counter() - t0, 2)
    log(f"size {size}: corpus {entry['corpus']}")
    path = DB_ROOT / f"scale_{fmt_size(size)}.db"

    # ingest, unless the previous sizes say it would take too long
    prev = [r for r in results.values() if r.get("ingest") and r["size"] < size]
    same_tag = [r for r in prev if r.get("tag", "") == args.tag]  # same store settings first
    prev = same_tag or prev
    if prev:
        last = max(prev, key=lambda r: r["size"])
        linear = size / last["ingest"]["relations_per_s"]
        fit = last["ingest"].get("batch_time_fit (s = a + b * relations stored before the batch, full batches)")
        estimate = max(linear, estimate_ingest_s(fit, size)) if fit else linear
        entry["ingest_estimate_s"] = {
            "from": last["size"],
            "linear (constant relations/s)": round(linear, 1),
            "batch-time fit (batch time grows with the store)": round(estimate_ingest_s(fit, size), 1) if fit else None,
        }
        if estimate > args.max_ingest_minutes * 60 and not args.force:
            entry["skipped"] = (
                f"ingest estimated at {estimate / 60:.0f} min (> {args.max_ingest_minutes} min) from the batch times "
                f"at {last['size']} relations ({last['ingest']['relations_per_s']:.0f} relations/s overall there, "
                f"{linear / 60:.0f} min if that held); rerun with --force"
            )
            log(entry["skipped"])
            return entry
    budget = args.ingest_budget_minutes or args.max_ingest_minutes
    log(f"size {size}: ingest into {path} (budget {budget} min)")
    entry["ingest"] = ingest(corpus, path, args.node_batch, args.batch_size, budget_s=budget * 60)
    log(f"size {size}: ingest {entry['ingest']['seconds']} s, {entry['ingest']['relations_per_s']} rel/s, "
        f"split {entry['ingest']['split_share']}")
    if "stopped_early" in entry["ingest"]:
        stop = entry["ingest"]["stopped_early"]
        entry["skipped"] = (
            f"ingest stopped after {entry['ingest']['seconds'] / 60:.0f} min (budget {budget} min) at "
            f"{stop['relations_ingested']} of {size} relations; estimated total "
            f"{(stop['estimated_total_s (batch-time fit)'] or 0) / 60:.0f} min (batch-time fit), "
            f"{stop['estimated_total_s (constant rate so far)'] / 60:.0f} min (constant rate); rest not measured"
        )
        log(entry["skipped"])
        if not args.keep_db:
            shutil.rmtree(path, ignore_errors=True)
        return entry
    if args.profile_size == size:
        log(f"size {size}: cProfile of a second ingest")
        entry["ingest_profile"] = profile_ingest(
            corpus, DB_ROOT / f"profile_{fmt_size(size)}.db", args.node_batch, args.batch_size,
            Path(args.out).parent / f"{Path(args.out).stem}_ingest_profile_{fmt_size(size)}.prof",
        )
        log(f"size {size}: profile buckets {entry['ingest_profile']['buckets_share']}")

    store, entry["open"] = reopen(path, size)
    log(f"size {size}: reopen {entry['open']}")
    try:
        entry["memory"] = adjacency_memory(store, size)
        log(f"size {size}: memory {entry['memory']['csr_bytes_per_relation']} B/rel csr, "
            f"{entry['memory']['id_maps_bytes_per_relation']} B/rel id maps")
        rng = np.random.default_rng([args.seed, size, 1])
        seeds = query_seeds(corpus, rng, args.expansion_queries)
        positions = our_positions(store, corpus, seeds)
        graph = store.graph
        entry["expansion"] = {f"degree_{d}": expansion_latency(graph, positions, d) for d in (1, 2)}
        log(f"size {size}: expansion " + ", ".join(
            f"d{d} p50 {entry['expansion'][f'degree_{d}']['ms']['p50']} ms, "
            f"{entry['expansion'][f'degree_{d}']['candidates']['p50']} candidates" for d in (1, 2)))
        entry["retrieval"] = retrieval_latency(store, corpus, rng, args.retrieval_queries)
        log(f"size {size}: retrieval {entry['retrieval']['ms']} ms; share {entry['retrieval']['time_share']}")
        if not args.no_reference and size <= args.reference_max_size:
            previous = None
            ref_prev = [r for r in results.values() if r.get("reference", {}).get("lists_s") and r["size"] < size]
            if ref_prev:
                previous = max(ref_prev, key=lambda r: r["size"])["reference"]
            entry["reference"] = reference_benchmark(
                corpus, store, seeds, positions, previous, check_sets=size <= args.check_max_size
            )
            ref = entry["reference"]
            if "build_s" in ref:
                ours_open = entry["open"]["from_milvus"]["adjacency_build_s (load_cache + csr)"]
                ref["build_ratio_reference_over_ours_from_milvus"] = round(ref["build_s"] / ours_open, 2)
            log(f"size {size}: reference {ref}")
        entry["write_then_read"] = write_then_read(store, corpus, size)
        log(f"size {size}: write then read {entry['write_then_read']}")
    finally:
        store.close()
        if not args.keep_db:
            shutil.rmtree(path, ignore_errors=True)
    return entry


def plot(results: Dict[str, Any], png: Path) -> None:
    """Log-log cost curves. Solid: the store's defaults; dashed: a tagged run (e.g. synonym links off);
    hollow markers: estimates for runs that were stopped or skipped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = list(results.values())
    default = sorted((r for r in entries if not r.get("tag")), key=lambda r: r["size"])
    tags = sorted({r["tag"] for r in entries if r.get("tag")})
    measured = [r for r in entries if "open" in r]
    if not measured:
        return
    by_size: Dict[int, Dict[str, Any]] = {}  # for figures the store settings barely touch
    for r in sorted(measured, key=lambda r: bool(r.get("tag"))):
        by_size.setdefault(r["size"], r)
    any_rows = [by_size[k] for k in sorted(by_size)]
    ref_by_size: Dict[int, Dict[str, Any]] = {}  # the reference does not depend on the store settings
    for r in sorted((r for r in entries if "reference" in r), key=lambda r: bool(r.get("tag"))):
        ref_by_size.setdefault(r["size"], r)
    ref_rows = [ref_by_size[k] for k in sorted(ref_by_size)]

    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 7.2))

    def series(axis, rows, get, label, style, **kw):
        pts = []
        for r in rows:
            try:
                y = get(r)
            except (KeyError, TypeError):
                continue
            if y is not None and y > 0:
                pts.append((r["size"], y))
        if pts:
            axis.plot(*zip(*pts), style, label=label, **kw)
            a, b = pts[-1]
            axis.annotate(f"{b:.3g}", (a, b), textcoords="offset points", xytext=(6, -3), fontsize=8)

    def tagged(tag):
        return sorted((r for r in entries if r.get("tag") == tag), key=lambda r: r["size"])

    tag_label = {t: ", ".join(f"{k}={v}" for k, v in (tagged(t)[0].get("store_kwargs") or {}).items()) or t
                 for t in tags}

    series(left, default, lambda r: r["retrieval"]["ms"]["p50"], "retrieval p50, no LLM (store defaults)", "o-",
           color="C0")
    for t in tags:
        series(left, tagged(t), lambda r: r["retrieval"]["ms"]["p50"], f"retrieval p50 ({tag_label[t]})", "o--",
               color="C0", mfc="white")
    series(left, any_rows, lambda r: r["expansion"]["degree_1"]["ms"]["p50"], "expansion d=1 p50 (ours)", "s-",
           color="C1")
    series(left, any_rows, lambda r: r["expansion"]["degree_2"]["ms"]["p50"], "expansion d=2 p50 (ours)", "s-",
           color="C2")
    series(left, ref_rows, lambda r: r["reference"]["expansion_deg1_ms"]["p50"],
           "expansion d=1 p50 (reference: rows of precomputed A·Aᵀ·A, Aᵀ·A)", "^:", color="C3")
    left.set_title("Per-query latency (ms)")
    left.set_ylabel("ms (log)")

    series(right, default, lambda r: r["ingest"]["seconds"] if "stopped_early" not in r["ingest"] else None,
           "ingest (store defaults)", "d-", color="C4")
    series(right, default, lambda r: r["ingest"]["stopped_early"]["estimated_total_s (batch-time fit)"],
           "ingest, estimated (stopped at the time budget)", "d", color="C4", mfc="white", markersize=9)
    for t in tags:
        series(right, tagged(t), lambda r: r["ingest"]["seconds"], f"ingest ({tag_label[t]})", "d--", color="C4",
               mfc="white")
    series(right, any_rows, lambda r: r["open"]["from_milvus"]["adjacency_build_s (load_cache + csr)"],
           "adjacency build on open from Milvus (ours: read rows + caches + CSR)", "o-", color="C0")
    series(right, any_rows, lambda r: r["open"]["from_snapshot"]["adjacency_build_s (load_cache + csr)"],
           "adjacency build on open from the snapshot file (ours)", "o--", color="C0", mfc="white")
    series(right, any_rows, lambda r: r["open"]["from_snapshot"]["csr_build_s"],
           "CSR build only (ours, cache.snapshot())", "s-", color="C1")
    series(right, ref_rows, lambda r: r["reference"]["ours_in_memory_build_s"],
           "in-memory build (ours: GraphCache from id rows + snapshot)", "s:", color="C2")
    series(right, ref_rows, lambda r: r["reference"]["build_s"], "build (reference: lists + dense + products)", "^:",
           color="C3")
    series(right, ref_rows, lambda r: r["reference"]["lists_s"] if "build_s" not in r["reference"] else None,
           "reference list build only (dense matrix would not fit)", "x", color="C3", markersize=10)
    series(right, ref_rows, lambda r: r["reference"].get("lists_predicted_s") if "lists_s" not in r["reference"]
           else None, "reference list build, predicted (quadratic)", "^", color="C3", mfc="white", markersize=9)
    right.set_title("Build / ingest time (s)")
    right.set_ylabel("seconds (log)")
    for axis in (left, right):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("relations")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=1, frameon=False)
    fig.suptitle("llama_index_graphrag_milvus: graph cost vs corpus size (Milvus Lite, HashEmbedding dim 32; "
                 "shared 2-core machine)")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def _git_state() -> str:
    import subprocess

    snapshot = Path(__file__).resolve().parent.parent / "SNAPSHOT"
    if snapshot.exists():
        return snapshot.read_text().strip()
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent.parent, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "llama_index_graphrag_milvus"], capture_output=True,
                               text=True, cwd=Path(__file__).resolve().parent.parent, check=True).stdout.strip()
        return head + (" + uncommitted changes in llama_index_graphrag_milvus/" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse_sizes(text: str) -> List[int]:
    return [int(float(s)) for s in text.split(",") if s.strip()]


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1e3,1e4", help="relations per corpus, comma separated (1e3,1e4,...)")
    parser.add_argument("--out", default="benchmarks/results/scale.json")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--node-batch", type=int, default=1000, help="TextNodes per transform call")
    parser.add_argument("--batch-size", type=int, default=256, help="MilvusGraphStore(batch_size=...)")
    parser.add_argument("--expansion-queries", type=int, default=200)
    parser.add_argument("--retrieval-queries", type=int, default=100)
    parser.add_argument("--profile-size", type=lambda s: int(float(s)), default=10_000,
                        help="cProfile a second ingest at this size (if it is among --sizes); 0: never")
    parser.add_argument("--check-max-size", type=lambda s: int(float(s)), default=10_000,
                        help="check reference and ours give the same candidate sets up to this size")
    parser.add_argument("--max-ingest-minutes", type=float, default=25.0)
    parser.add_argument("--ingest-budget-minutes", type=float, default=None,
                        help="stop an ingest after this long and extrapolate (default: --max-ingest-minutes)")
    parser.add_argument("--force", action="store_true", help="ingest even if estimated over the limit")
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--reference-max-size", type=lambda s: int(float(s)), default=100_000,
                        help="largest size at which the reference algorithm runs (its list build is quadratic)")
    parser.add_argument("--keep-db", action="store_true", help="keep the Milvus Lite files under /tmp/scale")
    parser.add_argument("--synonym-threshold", default=None,
                        help="MilvusGraphStore(synonym_threshold=...): a float, or 'none' to disable the links "
                             "(default: the store's own default)")
    parser.add_argument("--tag", default="", help="suffix of the result key, e.g. 'nosyn' -> '1000000-nosyn'")
    args = parser.parse_args(argv)
    if args.synonym_threshold is not None:
        STORE_KWARGS["synonym_threshold"] = None if args.synonym_threshold.lower() == "none" else float(
            args.synonym_threshold
        )
    logging.getLogger("llama_index_graphrag_milvus").setLevel(logging.WARNING)
    logging.getLogger("pymilvus").setLevel(logging.ERROR)  # "failed to get mvccTs" on every Lite iterator
    DB_ROOT.mkdir(parents=True, exist_ok=True)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    data: Dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    results: Dict[str, Any] = data.get("sizes", {})
    for size in parse_sizes(args.sizes):
        started = time.perf_counter()
        entry = run_size(size, args, results)
        entry["wall_s"] = round(time.perf_counter() - started, 1)
        entry["command"] = " ".join(sys.argv)
        entry["package_commit"] = _git_state()
        entry["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        key = f"{size}-{args.tag}" if args.tag else str(size)
        entry["tag"] = args.tag
        entry["store_kwargs"] = {k: repr(v) for k, v in STORE_KWARGS.items()}
        earlier = results.get(key, {})
        if args.no_reference and "reference" in earlier:
            entry["reference"] = dict(earlier["reference"], note="from an earlier run (--no-reference)")
        results[key] = entry
        data = {
            "meta": {
                "benchmark": "benchmarks/scale.py",
                "embedder": f"HashEmbedding(dim={DIM})",
                "store": "MilvusGraphStore on Milvus Lite under /tmp/scale",
                "python": platform.python_version(),
                "machine": f"{platform.machine()}, {os.cpu_count()} cpus (shared: compare ratios)",
                "seed": args.seed,
                "package_commit": _git_state(),
                "note": "latencies in ms, times in s; sizes are distinct relations",
            },
            "sizes": dict(sorted(results.items(), key=lambda kv: (kv[1]["size"], kv[0]))),
        }
        out.write_text(json.dumps(data, indent=2, ensure_ascii=False))
        plot(data["sizes"], out.with_suffix(".png"))
        log(f"size {size}: done in {entry['wall_s']} s; wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
