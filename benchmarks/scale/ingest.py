"""Ingest throughput, where its time goes, and a cProfile of it."""

from __future__ import annotations

import cProfile
import io
import math
import pstats
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from llama_index_graphrag_milvus import GraphRAGTransform, MilvusGraphStore

from benchmarks.scale import internals
from benchmarks.scale.common import Stopwatch, TimedHashEmbedding, open_store, remove_db, seconds
from benchmarks.scale.corpus import Corpus

FIT_KEY = "batch_time_fit (s = a + b * relations stored before the batch, full batches)"


class _TimedAdd(MilvusGraphStore):
    """The store, timing its public `add` (what `GraphRAGTransform` calls) as "store.add"."""

    watch: Stopwatch

    def add(self, nodes: Any, triplets: Any = None) -> List[str]:
        return self.watch.wrap("store.add", super().add)(nodes, triplets)


def _batches(corpus: Corpus, node_batch: int) -> List[range]:
    return [range(s, min(s + node_batch, corpus.n_passages)) for s in range(0, corpus.n_passages, node_batch)]


def _transform_batches(
    store: MilvusGraphStore, corpus: Corpus, node_batch: int, budget_s: float
) -> Dict[str, Any]:
    """Feed the corpus to the transform batch by batch, until done or past `budget_s` seconds."""
    transform = GraphRAGTransform(store=store, text_links=False)  # the corpus is its triplets
    secs: List[float] = []
    rels: List[int] = []
    node_s = 0.0
    batches = _batches(corpus, node_batch)
    for i, batch in enumerate(batches):
        t0 = time.perf_counter()
        nodes = [corpus.node(p) for p in batch]
        t1 = time.perf_counter()
        transform(nodes)
        secs.append(time.perf_counter() - t1)
        node_s += t1 - t0
        rels.append(corpus.relations_stated_by(batch.stop) - corpus.relations_stated_by(batch.start))
        if sum(secs) > budget_s and i + 1 < len(batches):
            break
    return {"secs": secs, "rels": rels, "node_s": node_s, "short_last": len(batches[-1]) < node_batch}


def ingest(
    corpus: Corpus, path: Path, node_batch: int, batch_size: int, budget_s: float = math.inf
) -> Dict[str, Any]:
    """Ingest the whole corpus into a fresh store at `path`, `node_batch` TextNodes per transform call.

    Stops after the batch that passes `budget_s` seconds, and then extrapolates the total from the batch
    times so far (`stopped_early`)."""
    remove_db(path)
    watch = Stopwatch()
    outside: Dict[str, float] = {}
    holder: List[MilvusGraphStore] = []
    outside["open (fresh, overwrite=True)"] = seconds(
        lambda: holder.append(
            open_store(
                path,
                cls=_TimedAdd,
                embed_model=TimedHashEmbedding(watch),
                overwrite=True,
                batch_size=batch_size,
            )
        )
    )
    store = holder[0]
    store.watch = watch  # type: ignore[attr-defined]
    try:
        with internals.timed_milvus_writes(store, watch.wrap):
            run = _transform_batches(store, corpus, node_batch, budget_s)
        outside["flush() after ingest"] = seconds(store.flush)
        counts: Dict[str, Any] = {}
        outside["count() after ingest"] = seconds(lambda: counts.update(store.count()))
        adjacency = internals.adjacency_counts(store)
    finally:
        outside["close() after ingest (Milvus Lite releases/flushes)"] = seconds(store.close)
    out = _throughput(corpus, run, watch, budget_s)
    out["seconds_outside_transform"] = {k: round(v, 3) for k, v in outside.items()}
    out.update(
        node_batch=node_batch, store_batch_size=batch_size, milvus_counts=counts, cache_counts=adjacency
    )
    return out


def _throughput(corpus: Corpus, run: Dict[str, Any], watch: Stopwatch, budget_s: float) -> Dict[str, Any]:
    """Rates, the time split between embedding, Milvus and our Python, and the batch-time trend."""
    secs, rels = run["secs"], run["rels"]
    total, done = float(sum(secs)), int(sum(rels))
    stopped = done < corpus.size
    full = len(secs) - (1 if run["short_last"] and not stopped else 0)  # the last batch may be short
    tenth = max(1, full // 10)
    first, last = slice(0, tenth), slice(max(0, full - tenth), max(1, full))
    fit = _fit(rels[1:] if stopped else rels[1:full], secs[1:] if stopped else secs[1:full])
    out: Dict[str, Any] = {}
    if stopped:
        out["stopped_early"] = {
            "budget_s": budget_s,
            "relations_ingested": done,
            "batches_done": len(secs),
            "estimated_total_s (batch-time fit)": round(estimate_ingest_s(fit, corpus.size), 1)
            if fit
            else None,
            "estimated_total_s (constant rate so far)": round(total * corpus.size / done, 1),
        }
    share = done / corpus.size
    out.update(
        {
            "seconds": round(total, 3),
            "relations_per_s": round(done / total, 1),
            "passages_per_s": round(corpus.n_passages * share / total, 1),
            "triplets_per_s": round(len(corpus.passage_rels) * share / total, 1),
            "batches": len(secs),
            **_split(watch, total),
            "relations_per_s_first_tenth_of_batches": round(sum(rels[first]) / sum(secs[first]), 1),
            "relations_per_s_last_tenth_of_full_batches": round(sum(rels[last]) / sum(secs[last]), 1),
            FIT_KEY: fit,
            "batch_seconds": [round(x, 3) for x in secs],
            "node_construction_seconds_excluded": round(run["node_s"], 3),
        }
    )
    return out


def _split(watch: Stopwatch, total: float) -> Dict[str, Any]:
    add = watch.seconds["store.add"]
    embed, upsert, search = watch.seconds["embed"], watch.seconds["upsert"], watch.seconds["search"]
    ours = add - embed - upsert - search
    return {
        "split_seconds": {
            "embedding (HashEmbedding dim 32, get_text_embedding_batch)": round(embed, 3),
            "milvus upsert (MilvusClient.upsert)": round(upsert, 3),
            "milvus search during ingest (MilvusClient.search: synonym links)": round(search, 3),
            "our python in store.add (ids, rows, node dicts, cache, synonym scan)": round(ours, 3),
            "transform outside store.add (triplet parsing, node content exclusion)": round(total - add, 3),
        },
        "split_share": {
            "embedding": round(embed / total, 3),
            "milvus_upsert": round(upsert / total, 3),
            "milvus_search_synonyms": round(search / total, 3),
            "our_python_store_add": round(ours / total, 3),
            "transform_other": round((total - add) / total, 3),
        },
        "calls": {name: watch.calls[name] for name in ("embed", "upsert", "search")},
    }


def _fit(batch_rels: Sequence[int], batch_secs: Sequence[float]) -> Optional[Dict[str, float]]:
    if len(batch_secs) < 3:
        return None
    before = np.cumsum([0] + list(batch_rels[:-1]), dtype=np.float64)
    b, a = np.polyfit(before, np.asarray(batch_secs), 1)
    return {"a": float(a), "b": float(b), "relations_per_batch": float(np.mean(batch_rels))}


def estimate_ingest_s(fit: Dict[str, float], size: int) -> float:
    """Total ingest time at `size` relations from a per-batch fit (linear growth of batch time)."""
    per = fit["relations_per_batch"]
    before = per * np.arange(int(math.ceil(size / per)))
    return float(np.sum(np.maximum(fit["a"] + fit["b"] * before, fit["a"])))


# --------------------------------------------------------------------------------------------------
# cProfile
# --------------------------------------------------------------------------------------------------
def profile_ingest(corpus: Corpus, path: Path, node_batch: int, batch_size: int, out: Path) -> Dict[str, Any]:
    """cProfile a whole ingest; where the time goes, by bucket and by top cumulative functions."""
    remove_db(path)
    store = open_store(path, overwrite=True, batch_size=batch_size)
    batches = [[corpus.node(p) for p in batch] for batch in _batches(corpus, node_batch)]
    transform = GraphRAGTransform(store=store, text_links=False)  # the corpus is its triplets
    profiler = cProfile.Profile()
    try:
        profiler.enable()
        for nodes in batches:
            transform(nodes)
        profiler.disable()
    finally:
        store.close()
        remove_db(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(str(out))
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
    out.with_suffix(".txt").write_text(text.getvalue())
    return {"size": corpus.size, **_profile_summary(pstats.Stats(profiler).stats), "pstats_file": str(out)}


def _profile_summary(stats: Dict[tuple, tuple]) -> Dict[str, Any]:
    def cumulative(file_part: str, func: str) -> float:
        return sum(
            ct for (file, _, name), (_, _, _, ct, _) in stats.items() if name == func and file_part in file
        )

    buckets = {
        label: sum(cumulative(*where) for where in places)
        for label, places in internals.PROFILE_BUCKETS.items()
    }
    total = cumulative("transform.py", "__call__")

    def top(field: int, n: int) -> List[Dict[str, Any]]:
        rows = sorted(stats.items(), key=lambda kv: kv[1][field], reverse=True)[:n]
        return [
            {
                "function": f"{Path(file).parent.name}/{Path(file).name}:{line}({name})",
                "calls": nc,
                "cumulative_s": round(ct, 3),
                "own_s": round(tt, 3),
            }
            for (file, line, name), (_, nc, tt, ct, _) in rows
        ]

    return {
        "profiled_seconds": round(total, 3),
        "buckets_cumulative_s": {k: round(v, 3) for k, v in buckets.items()},
        "buckets_share": {k: round(v / total, 3) for k, v in buckets.items()} if total else {},
        "top_cumulative": top(3, 60),
        "top_own_time": top(2, 25),
    }
