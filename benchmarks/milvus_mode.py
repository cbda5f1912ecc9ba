"""The two adjacency modes side by side on the dev sets: the same store opened with the adjacency in
memory (the default) and with `adjacency="milvus"`; per question, whether the top 10 agree, and the
retrieval latency (question embedded) and Milvus calls of each mode.

    GRAPHRAG_DATA=$DATA python -m benchmarks.milvus_mode            # Milvus Lite -> benchmarks/results/milvus_mode.json
    GRAPHRAG_DATA=$DATA python -m benchmarks.milvus_mode --server   # Milvus 2.3.5 standalone, same file

The default retriever (`similarity_top_k=10`, `llm=None`). On Lite the store is ingested once per
data set into `--db-root` (default `$GRAPHRAG_CACHE/modes`) and reused (`--reingest` to redo it); on the
server each run ingests afresh, inside a private network namespace (`benchmarks/server.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

from llama_index.core.schema import QueryBundle

from benchmarks import server as milvus_server
from benchmarks.devsets import RESULTS, cached_embed_model, data_dirs
from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.bench.evaluation import load_dataset


def run_mode(store: MilvusGraphStore, questions: List[Dict[str, Any]], vectors: List[List[float]]) -> Dict[str, Any]:
    """Each question's top 10, the latency of each retrieval and the Milvus calls it made."""
    retriever = GraphRAGRetriever(store=store, similarity_top_k=10, llm=None)
    retriever.retrieve(QueryBundle("warm up", embedding=vectors[0]))
    rankings, ms, calls = [], [], Counter()
    for question, vector in zip(questions, vectors):
        before = Counter(store.collections.calls)
        start = time.perf_counter()
        hits = retriever.retrieve(QueryBundle(question["question"], embedding=vector))
        ms.append(1000 * (time.perf_counter() - start))
        calls.update(store.collections.calls - before)
        rankings.append([h.node.node_id for h in hits])
    ms_sorted = sorted(ms)
    return {
        "rankings": rankings, "ms": [round(m, 1) for m in ms],
        "p50_ms": round(statistics.median(ms), 1), "p90_ms": round(ms_sorted[int(0.9 * (len(ms) - 1))], 1),
        "calls_per_retrieval": {k: round(v / len(questions), 2) for k, v in sorted(calls.items())},
    }


def compare(data: Path, uri: str, embed: Any, limit: int, reingest: bool, prefix: str = "modes", **options: Any) -> Dict[str, Any]:
    dataset = load_dataset(data)
    questions = dataset.questions[:limit] if limit else dataset.questions
    vectors = [embed.get_query_embedding(q["question"]) for q in questions]
    fresh = reingest or "://" in uri or not Path(uri).exists()
    store = MilvusGraphStore(uri=uri, embed_model=embed, collection_prefix=prefix, overwrite=fresh, **options)
    if fresh:
        start = time.perf_counter()
        GraphRAGTransform(store=store, llm=None)(dataset.nodes)
        print(f"{dataset.name}: ingested {store.count()} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    results = {"memory": run_mode(store, questions, vectors)}
    store.close()
    store = MilvusGraphStore(uri=uri, embed_model=embed, collection_prefix=prefix, adjacency="milvus", **options)
    results["milvus"] = run_mode(store, questions, vectors)
    store.close()
    pairs = list(zip(results["memory"]["rankings"], results["milvus"]["rankings"]))
    differ = [q["id"] for q, (a, b) in zip(questions, pairs) if a != b]
    report = {
        "dataset": dataset.name, "questions": len(questions), "top10_differ": len(differ), "differing": differ,
        "p50_ratio": round(results["milvus"]["p50_ms"] / results["memory"]["p50_ms"], 2),
        **{mode: {k: v for k, v in r.items() if k != "rankings"} for mode, r in results.items()},
        "rankings": {mode: r["rankings"] for mode, r in results.items()},
    }
    print(f"{dataset.name}: top 10 differ on {len(differ)} of {len(questions)}; p50 memory "
          f"{results['memory']['p50_ms']} ms, milvus {results['milvus']['p50_ms']} ms ({report['p50_ratio']}x); "
          f"p90 {results['memory']['p90_ms']} / {results['milvus']['p90_ms']} ms; milvus calls "
          f"{results['milvus']['calls_per_retrieval']}", flush=True)
    return report


def main(argv: List[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="*", help="data directories (default: $GRAPHRAG_DATA's dev sets)")
    parser.add_argument("--server", action="store_true", help="on a Milvus 2.3.5 server (private namespace)")
    parser.add_argument("--limit", type=int, default=0, help="questions a set (0: all)")
    parser.add_argument("--db-root", default=str(Path(os.environ.get("GRAPHRAG_CACHE", ".cache/graphrag-milvus")) / "modes"))
    parser.add_argument("--reingest", action="store_true")
    parser.add_argument("--prefix", default="modes")
    parser.add_argument("--consistency", default=None, help="the stores' consistency_level (default: the store's)")
    parser.add_argument("--out", default=str(RESULTS / "milvus_mode.json"))
    args = parser.parse_args(argv)
    if args.server and not milvus_server.inside():
        sys.exit(milvus_server.rerun_inside(["-m", "benchmarks.milvus_mode", *(argv or sys.argv[1:])]))
    sets, embed = data_dirs(args.data), cached_embed_model()
    where = "server" if args.server else "lite"
    options = {"consistency_level": args.consistency} if args.consistency else {}
    out = Path(args.out)
    report = json.loads(out.read_text()) if out.exists() else {}
    if args.server:
        with milvus_server.server() as uri:
            report[where] = [compare(d, uri, embed, args.limit, True, args.prefix, **options) for d in sets]
    else:
        Path(args.db_root).mkdir(parents=True, exist_ok=True)
        report[where] = [
            compare(d, f"{args.db_root}/{Path(d).name}.db", embed, args.limit, args.reingest, args.prefix, **options)
            for d in sets
        ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
