"""What a metadata filter costs a retrieval: the retrieval latency with a filter passing about 10 % of the
passages (and one passing about 1 %) against none, side by side on one store, in both adjacency modes.

    python -m benchmarks.filters --data DIR [--limit N] [--server] [--index FLAT] [--out F]

Each passage gets two metadata keys from a hash of its corpus id, kept out of its embedded text:
`bucket` (0-9) and `shard` (0-99); the filters are `bucket == 0` and `shard == 0`. The store (Milvus
Lite in a temporary directory, or with `--server` a fresh Milvus 2.3.5 standalone in a private network
namespace; `--index` sets the vector index type, else the store's default: FLAT on Lite, AUTOINDEX on a
server) is ingested once with `GraphRAGTransform(store, llm=None)` (the embeddings cached in
`$GRAPHRAG_CACHE/embeddings.sqlite`), then opened with `adjacency="memory"` and with `"milvus"`. For each
question (embedded beforehand) the unfiltered and the filtered retrievals run back to back, in an order
that turns question by question, with the default retriever at `similarity_top_k=10, llm=None`.
Reported per mode and filter: p50 and p90 latency, the median of the per-question ratio to the
unfiltered retrieval, Milvus calls per retrieval, and whether every passage returned passes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional

from llama_index.core.schema import QueryBundle
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from benchmarks import server as milvus_server
from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding, Dataset, load_dataset
from llama_index_graphrag_milvus.embeddings import local_embed_model
from llama_index_graphrag_milvus.ingest.extract import exclude_from_content

#: The filters measured, by the share of the passages they pass: (key, buckets); passing: key == 0.
FILTERS = {"10%": ("bucket", 10), "1%": ("shard", 100)}


def tag(dataset: Dataset) -> None:
    """Give each passage its `bucket` and `shard` (from a hash of its id), out of its embedded text."""
    for node in dataset.nodes:
        digest = int(hashlib.sha1(node.node_id.encode()).hexdigest(), 16)
        for key, buckets in FILTERS.values():
            node.metadata[key] = digest % buckets
            exclude_from_content(node, key)


def one_filter(key: str) -> MetadataFilters:
    return MetadataFilters(filters=[MetadataFilter(key=key, value=0)])


def measure(
    store: MilvusGraphStore, questions: List[Dict[str, Any]], vectors: List[List[float]]
) -> Dict[str, Any]:
    """Each retriever's latencies and Milvus calls, the retrievals of a question back to back."""
    retrievers = {"none": GraphRAGRetriever(store=store, similarity_top_k=10, llm=None)}
    for name, (key, _) in FILTERS.items():
        retrievers[name] = GraphRAGRetriever(
            store=store, similarity_top_k=10, llm=None, filters=one_filter(key)
        )
    for retriever in retrievers.values():
        retriever.retrieve(QueryBundle("warm up", embedding=vectors[0]))
    ms: Dict[str, List[float]] = {name: [] for name in retrievers}
    calls: Dict[str, Counter] = {name: Counter() for name in retrievers}
    failing: Counter = Counter()
    returned: Counter = Counter()
    order = list(retrievers)
    for i, (question, vector) in enumerate(zip(questions, vectors)):
        for name in order if i % 2 == 0 else order[::-1]:
            before = Counter(store.collections.calls)
            start = time.perf_counter()
            hits = retrievers[name].retrieve(QueryBundle(question["question"], embedding=vector))
            ms[name].append(1000 * (time.perf_counter() - start))
            calls[name].update(store.collections.calls - before)
            returned[name] += len(hits)
            if name != "none":
                failing[name] += sum(h.node.metadata.get(FILTERS[name][0]) != 0 for h in hits)
    return {
        name: {
            "p50_ms": round(statistics.median(values), 1),
            "p90_ms": round(sorted(values)[int(0.9 * (len(values) - 1))], 1),
            "median_ratio_to_none": round(statistics.median(v / n for v, n in zip(values, ms["none"])), 2),
            "milvus_calls_per_retrieval": {
                k: round(v / len(questions), 2) for k, v in sorted(calls[name].items())
            },
            "passages_returned": returned[name],
            "passages_failing_the_filter": failing[name],
        }
        for name, values in ms.items()
    }


def run(data: str, uri: str, embed: Any, limit: Optional[int], index: Optional[str] = None) -> Dict[str, Any]:
    dataset = load_dataset(data)
    tag(dataset)
    questions = dataset.questions[:limit] if limit else dataset.questions
    vectors = [embed.get_query_embedding(q["question"]) for q in questions]
    options: Dict[str, Any] = {"index_config": {"index_type": index}} if index else {}
    store = MilvusGraphStore(
        uri=uri, embed_model=embed, collection_prefix="filters", overwrite=True, **options
    )
    start = time.perf_counter()
    GraphRAGTransform(store=store, llm=None)(dataset.nodes)
    counts = store.count()
    print(
        f"{dataset.name}: ingested {counts} in {time.perf_counter() - start:.0f} s",
        file=sys.stderr,
        flush=True,
    )
    report: Dict[str, Any] = {
        "dataset": dataset.name,
        "questions": len(questions),
        "stored": counts,
        "index": index or "the store's default",
        "passing": {
            name: sum(n.metadata[key] == 0 for n in dataset.nodes) for name, (key, _) in FILTERS.items()
        },
    }
    store.close()
    for mode in ("memory", "milvus"):
        store = MilvusGraphStore(
            uri=uri, embed_model=embed, collection_prefix="filters", adjacency=mode, **options
        )
        report[mode] = measure(store, questions, vectors)
        store.close()
        print(
            f"{mode}: "
            + "; ".join(
                f"{name} p50 {r['p50_ms']} ms (x{r['median_ratio_to_none']}), "
                f"failing {r['passages_failing_the_filter']}"
                for name, r in report[mode].items()
            ),
            file=sys.stderr,
            flush=True,
        )
    return report


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a dataset directory (corpus.jsonl, questions.jsonl)")
    parser.add_argument("--limit", type=int, default=0, help="questions (0: all)")
    parser.add_argument("--server", action="store_true", help="on a Milvus 2.3.5 server (private namespace)")
    parser.add_argument(
        "--index", default=None, help="the vector index type, e.g. FLAT (default: the store's)"
    )
    parser.add_argument("--cache", default=os.environ.get("GRAPHRAG_CACHE", ".cache/graphrag-milvus"))
    parser.add_argument("--out", default=None, help="write the report (JSON) here")
    args = parser.parse_args(argv)
    if args.server and not milvus_server.inside():
        sys.exit(milvus_server.rerun_inside(["-m", "benchmarks.filters", *(argv or sys.argv[1:])]))
    embed = CachedEmbedding(local_embed_model(), Path(args.cache) / "embeddings.sqlite")
    if args.server:
        with milvus_server.server() as uri:
            report = {"server": run(args.data, uri, embed, args.limit, args.index)}
    else:
        with tempfile.TemporaryDirectory(prefix="graphrag-filters-") as directory:
            report = {
                "lite": run(args.data, str(Path(directory) / "filters.db"), embed, args.limit, args.index)
            }
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
