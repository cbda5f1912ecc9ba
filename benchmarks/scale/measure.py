"""What is measured on an ingested store: opening it, its memory, expansion and retrieval latency, and a
write followed by reads."""

from __future__ import annotations

import gc
import time
import tracemalloc
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.schema import QueryBundle, TextNode

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.events import (
    GraphRAGEntitySearchEvent,
    GraphRAGExpansionEvent,
    GraphRAGStepEvent,
)

from benchmarks.scale import internals
from benchmarks.scale.common import DIM, open_store, percentiles, query_embedding, seconds
from benchmarks.scale.corpus import SHAPES, Corpus, questions

#: How a store is opened, by the source its caches are built from.
SOURCES = {"from_milvus": {"snapshot": False}, "from_snapshot": {}}
#: Traceback depth of the memory measurement: 4 frames find 99 % of what 64 attribute to Milvus Lite at
#: 10^4 relations, at a tenth of the cost (tracing is 10-60x slower than an untraced open as it is).
_FRAMES = 4


# --------------------------------------------------------------------------------------------------
# open
# --------------------------------------------------------------------------------------------------
def reopen(path: Path, relations: int) -> Tuple[MilvusGraphStore, Dict[str, Any]]:
    """Open the existing store twice and time the parts: from the rows in Milvus (snapshot=False), then
    from the snapshot file saved when the ingest closed; returns (the second store, figures)."""
    figures: Dict[str, Any] = {}
    for source, kwargs in SOURCES.items():
        gc.collect()
        t0 = time.perf_counter()
        store, load = internals.open_timing_load(open_store, path=path, **kwargs)
        open_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        internals.graph(store)  # built on first read
        csr_s = time.perf_counter() - t1
        figures[source] = _open_figures(store, load, open_s, csr_s, relations)
        if source != "from_snapshot":
            store.close()
    assert figures["from_snapshot"]["used_snapshot"], "the ingest should have left a snapshot"
    return store, figures


def _open_figures(
    store: MilvusGraphStore, load: Dict[str, float], open_s: float, csr_s: float, relations: int
) -> Dict:
    load_s = load.get("load_cache", 0.0)
    reads = {k[len("read ") :]: v for k, v in load.items() if k.startswith("read ")}
    read_s = sum(reads.values())
    return {
        "used_snapshot": internals.snapshot_used(store),
        "open_total_s": round(open_s, 3),
        "load_cache_s": round(load_s, 3),
        "load_cache_read_rows_s": round(read_s, 3),
        "load_cache_build_caches_s": round(load_s - read_s, 3),
        "read_by_collection_s": {k: round(v, 3) for k, v in reads.items()},
        "open_other_s (client, collections, load, counts)": round(open_s - load_s, 3),
        "csr_build_s": round(csr_s, 3),
        "adjacency_build_s (load_cache + csr)": round(load_s + csr_s, 3),
        "adjacency_build_relations_per_s": round(relations / (load_s + csr_s), 1),
        "open_plus_csr_relations_per_s": round(relations / (open_s + csr_s), 1),
        "graph_shape (E, R, P)": internals.graph_shape(store),
    }


# --------------------------------------------------------------------------------------------------
# memory
# --------------------------------------------------------------------------------------------------
def open_memory(path: Path, relations: int, **kwargs: Any) -> Dict[str, Any]:
    """Python heap (tracemalloc) retained once a store is opened and its graph built, and the peak meanwhile.

    Milvus Lite serves from this very process (its segments and primary-key maps are Python objects), so
    the allocations made under `milvus_lite` are counted apart from the store's (ids, edges, names, the
    sparse snapshot, the vector cache)."""
    gc.collect()
    tracemalloc.start(_FRAMES)
    store = open_store(path, **kwargs)
    try:
        internals.graph(store)  # the sparse snapshot is built on first read
        gc.collect()
        retained, peak = tracemalloc.get_traced_memory()
        lite = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(True, "*milvus_lite*", all_frames=True)]
        )
        lite_bytes = sum(stat.size for stat in lite.statistics("filename"))
        tracemalloc.stop()
        counts = store.count()
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
        store.close()
    vectors = 4 * DIM * sum(counts.values())
    per = lambda n: round(n / relations, 1)  # noqa: E731
    return {
        "retained_bytes": retained,
        "retained_bytes_per_relation": per(retained),
        "peak_bytes_per_relation": per(peak),
        "milvus_lite_in_process_bytes_per_relation": per(lite_bytes),
        "store_bytes_per_relation (retained less Milvus Lite)": per(retained - lite_bytes),
        f"vector_cache_bytes_per_relation (estimated: 4·{DIM}·(E+R+P))": per(vectors),
        "store_bytes_per_relation less the vector cache": per(retained - lite_bytes - vectors),
    }


def structure_memory(store: MilvusGraphStore, relations: int) -> Dict[str, Any]:
    """The adjacency's structures one by one (ids and edges, names, synonym pairs, sparse matrices)."""
    parts = internals.structure_bytes(store)
    traced, matrices = parts["traced"], parts["matrix_bytes"]
    synonyms = traced["synonym_pairs"] + matrices.get("entity_entity", 0)
    total = sum(traced.values())
    per = lambda n: round(n / relations, 1)  # noqa: E731
    return {
        "csr_bytes (each matrix's arrays; relation_entity's indices are the relation ends)": matrices,
        "csr_bytes_per_relation (traced snapshot build)": per(traced["snapshot"]),
        "id_maps_bytes_per_relation (ids and edges)": per(traced["ids_and_edges"]),
        "entity_names_bytes_per_relation": per(traced["entity_names"]),
        "synonym_links": parts["synonym_links"],
        "synonym_links_per_relation": round(parts["synonym_links"] / relations, 2),
        "synonym_bytes_per_relation (pairs + entity_entity csr)": per(synonyms),
        "total_bytes_per_relation (csr + id maps + names + synonyms)": per(total),
        "adjacency_bytes_per_relation without synonym links (csr + ids + edges + names)": per(
            total - synonyms
        ),
    }


# --------------------------------------------------------------------------------------------------
# expansion
# --------------------------------------------------------------------------------------------------
def seed_positions(store: MilvusGraphStore, corpus: Corpus, seeds: List[tuple]) -> List[tuple]:
    """Seed sets of corpus indices (entities, relations) as the adjacency's positions."""
    return [
        internals.seed_positions(store, [corpus.names[e] for e in ents], [corpus.triplet(r) for r in rels])
        for ents, rels in seeds
    ]


def expansion_latency(store: MilvusGraphStore, positions: List[tuple], degree: int) -> Dict[str, Any]:
    """Time the walk from ~3 entity and ~3 relation seeds at `degree`; the candidate set sizes."""
    graph = internals.graph(store)
    for e, r in positions[:5]:  # warm up
        np.union1d(*internals.expand(graph, e, r, degree))
    times: Dict[str, List[float]] = {"ms": [], "from_entities_ms": [], "from_relations_ms": []}
    sizes: Dict[str, List[int]] = {
        "candidates": [],
        "candidates_from_entities": [],
        "candidates_from_relations": [],
    }
    for e, r in positions:
        t0 = time.perf_counter()
        a, _ = internals.expand(graph, e, [], degree)
        t1 = time.perf_counter()
        _, b = internals.expand(graph, [], r, degree)
        t2 = time.perf_counter()
        c = np.union1d(a, b)
        t3 = time.perf_counter()
        for key, value in zip(times, (t3 - t0, t1 - t0, t2 - t1)):
            times[key].append(value)
        for key, value in zip(sizes, (c, a, b)):
            sizes[key].append(len(value))
    return {
        "queries": len(positions),
        **{key: percentiles(values, 1e3) for key, values in times.items()},
        **{key: percentiles(values, 1, 1) for key, values in sizes.items()},
        "candidates_share_of_relations_p50": round(
            float(np.median(sizes["candidates"])) / internals.graph_shape(store)[1], 5
        ),
    }


# --------------------------------------------------------------------------------------------------
# retrieval
# --------------------------------------------------------------------------------------------------
class _Steps(BaseEventHandler):
    """The retriever's step events, collected."""

    events: List[BaseEvent] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "ScaleBenchmarkSteps"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, GraphRAGStepEvent):
            self.events.append(event)


def _timed_retrievals(
    retriever: GraphRAGRetriever, bundles: List[QueryBundle]
) -> Tuple[List[float], List[int], _Steps]:
    root, steps = get_dispatcher(), _Steps()
    for q in bundles[:5]:  # warm up
        retriever.retrieve(q)
    root.add_event_handler(steps)
    times, returned = [], []
    try:
        for q in bundles[5:]:
            t0 = time.perf_counter()
            nodes = retriever.retrieve(q)
            times.append(time.perf_counter() - t0)
            returned.append(len(nodes))
    finally:
        root.event_handlers.remove(steps)
    return times, returned, steps


def retrieval_latency(
    store: MilvusGraphStore, corpus: Corpus, rng: np.random.Generator, n: int, degree: int
) -> Dict:
    """`GraphRAGRetriever(store, expansion_degree=degree).retrieve` with no LLM and a precomputed query
    embedding, on questions of the corpus's shape; time split by step from the retriever's events."""
    bundles = [QueryBundle(query_str=q, embedding=query_embedding(q)) for q in questions(corpus, rng, n + 5)]
    retriever = GraphRAGRetriever(store=store, expansion_degree=degree)
    times, returned, steps = _timed_retrievals(retriever, bundles)
    by_step: Dict[str, float] = {}
    for event in steps.events:
        name = event.class_name().removeprefix("GraphRAG").removesuffix("Event")
        by_step[name] = by_step.get(name, 0.0) + event.duration_ms / 1e3
    total = sum(times)
    share = {k: round(v / total, 3) for k, v in by_step.items()}
    share["rest (llama-index retriever wrapper, between steps)"] = round(1 - sum(by_step.values()) / total, 3)
    knobs = ("expansion_degree", "entity_top_k", "relation_top_k", "max_candidate_relations", "reranker")
    return {
        "queries": len(times),
        "retriever": {k: getattr(retriever, k, None) for k in knobs},
        "ms": percentiles(times, 1e3),
        "passages_returned_mean": round(float(np.mean(returned)), 2),
        **_what_was_found(steps.events, SHAPES[corpus.shape].question_entities),
        "time_share": share,
        "mean_ms_by_step": {k: round(v / len(times) * 1e3, 3) for k, v in by_step.items()},
    }


def _what_was_found(events: List[BaseEvent], named: int) -> Dict[str, Any]:
    mentions = [len(e.mentions) for e in events if isinstance(e, GraphRAGEntitySearchEvent)]
    expansions = [e for e in events if isinstance(e, GraphRAGExpansionEvent)]
    return {
        "entities_named_per_question": named,
        "mentions_matched": percentiles(mentions, 1, 2),
        "share_of_questions_with_every_named_entity_matched": round(
            float(np.mean([m >= named for m in mentions])), 3
        ),
        "relations_reached": percentiles([e.reached for e in expansions], 1, 1),
        "candidates_kept": percentiles([e.candidates for e in expansions], 1, 1),
    }


# --------------------------------------------------------------------------------------------------
# a write, then reads
# --------------------------------------------------------------------------------------------------
def _extra_node(node_id: str, triplets: List[List[str]]) -> TextNode:
    text = " ".join(f"{s} {p} {o}." for s, p, o in triplets)
    return TextNode(id_=node_id, text=text, metadata={"triplets": triplets})


def write_then_read(store: MilvusGraphStore, corpus: Corpus, size: int, degree: int) -> Dict[str, Any]:
    """Add one passage (3 new triplets) through the transform, then read: every write drops the snapshot,
    so the first graph read after it rebuilds the whole CSR, and the first retrieval pays for whatever
    is derived from the snapshot lazily."""
    one = _extra_node(
        f"s{size}-extra",
        [
            ["zzextra one", "founded", "zzextra two"],
            ["zzextra two", "owns", "zzextra three"],
            ["zzextra three", "cites", "zzextra one"],
        ],
    )
    another = _extra_node(f"s{size}-extra2", [["zzextra four", "owns", "zzextra five"]])
    q = f"Who or what founded {corpus.names[int(corpus.subj[0])]}?"
    bundle = QueryBundle(query_str=q, embedding=query_embedding(q))
    retriever = GraphRAGRetriever(store=store, expansion_degree=degree)
    transform = GraphRAGTransform(store=store, text_links=False)  # the corpus is its triplets
    retrieve = lambda: retriever.retrieve(bundle)  # noqa: E731
    steady = min(seconds(retrieve) for _ in range(3))
    timings = [
        ("add_one_passage_s", lambda: transform([one]), 4),
        ("first_graph_read_after_write_s (full CSR rebuild)", lambda: internals.graph(store), 4),
        ("next_graph_read_s", lambda: internals.graph(store), 6),
        ("first_retrieval_after_write_s (graph already rebuilt)", retrieve, 4),
        ("second_retrieval_after_write_s", retrieve, 4),
        ("add_another_passage_s", lambda: transform([another]), 4),
        ("first_retrieval_right_after_write_s (pays the rebuild)", retrieve, 4),
    ]
    out = {"retrieval_steady_s": round(steady, 4)}
    for name, fn, digits in timings:
        out[name] = round(seconds(fn), digits)
    return out
