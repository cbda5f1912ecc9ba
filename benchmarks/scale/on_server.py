"""`adjacency="milvus"` at scale on a real Milvus server (2.3.5 standalone, in a private network
namespace): retrieval p50 / p90, Milvus calls per retrieval and the client's memory, at 10^4, 10^5 and
10^6 relations of the synthetic corpus (`corpus.py`, hash embedding of dim 32, so that the embedder is not
what is measured); the same store in memory mode beside it.

    python -m benchmarks.scale.on_server --sizes 1e4,1e5,1e6 --out benchmarks/results/scale_milvus_mode.json
    python -m benchmarks.scale.on_server --data-dir /tmp/kept --modes milvus   # again, on the same data
    python -m benchmarks.scale.on_server --index FLAT --modes milvus,memory,milvus  # exact search, run twice
    python -m benchmarks.scale.on_server --sizes 1e4,1e6 --modes milvus --rounds 5 --data-dir /tmp/kept  # interleaved

Each size is ingested once (memory mode, the default transform), unless `--data-dir` already holds it;
before it is measured, the server is left to finish building its indexes (no pending index rows: a
server still indexing serves searches and lookups at half speed or worse). Each mode is then measured
in a fresh process, so that its resident memory (RSS) is its own: first with a store opened on an empty
prefix (the baseline: Python, LlamaIndex, pymilvus), then on the corpus, after 100 retrievals.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
from llama_index.core.schema import QueryBundle

from benchmarks import server as milvus_server
from benchmarks.scale.common import DIM, fmt_size
from benchmarks.scale.corpus import make_corpus, questions
from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding

QUESTIONS = 100


def _rss_mb() -> float:
    """This process's resident memory now, in MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def prefix_of(size: int, index: str) -> str:
    """The collections' prefix of a corpus size under a vector index type (AUTOINDEX: the default)."""
    return f"s{fmt_size(size)}" + ("" if index == "AUTOINDEX" else f"_{index.lower()}")


def ingest(uri: str, size: int, index: str, batch: int = 2000) -> Dict[str, Any]:
    corpus = make_corpus(size)
    store = MilvusGraphStore(uri=uri, embed_model=HashEmbedding(DIM), collection_prefix=prefix_of(size, index),
                             index_config={"index_type": index}, overwrite=True)
    transform = GraphRAGTransform(store=store, llm=None, text_links=False)  # the corpus is its triplets
    start = time.perf_counter()
    for first in range(0, corpus.n_passages, batch):
        transform([corpus.node(p) for p in range(first, min(first + batch, corpus.n_passages))])
    seconds = time.perf_counter() - start
    counts = store.count()
    store.close()
    print(f"{size}: ingested {counts} in {seconds:.0f} s", file=sys.stderr, flush=True)
    return {"seconds": round(seconds, 1), "relations_per_s": round(counts["relations"] / seconds), "counts": counts}


def settle(uri: str, prefix: str, timeout_s: float = 1800) -> float:
    """Wait until the server has indexed every row of the prefix's collections; the seconds waited."""
    from pymilvus import MilvusClient

    client, start = MilvusClient(uri), time.perf_counter()
    names = [n for n in client.list_collections() if n.startswith(prefix + "_")]
    while time.perf_counter() - start < timeout_s:
        if not any(client.describe_index(n, "embedding").get("pending_index_rows", 0) for n in names):
            break
        time.sleep(20)
    client.close()
    return round(time.perf_counter() - start, 1)


def stored(uri: str, prefix: str) -> bool:
    """Whether the server already holds the prefix's corpus (a kept `--data-dir`)."""
    from pymilvus import MilvusClient

    client = MilvusClient(uri)
    found = f"{prefix}_relations" in client.list_collections()
    client.close()
    return found


def measure(uri: str, size: int, adjacency: str, index: str) -> Dict[str, Any]:
    """In this process: the baseline RSS, then retrieval on the corpus in one mode."""
    embed = HashEmbedding(DIM)
    empty = MilvusGraphStore(uri=uri, embed_model=embed, collection_prefix="empty_baseline", adjacency=adjacency)
    GraphRAGRetriever(store=empty, llm=None).retrieve("warm up")
    empty.close()
    baseline = _rss_mb()
    opened = time.perf_counter()
    store = MilvusGraphStore(uri=uri, embed_model=embed, collection_prefix=prefix_of(size, index), adjacency=adjacency)
    open_s = time.perf_counter() - opened
    retriever = GraphRAGRetriever(store=store, similarity_top_k=10, llm=None)
    texts = questions(make_corpus(size), np.random.default_rng(7), QUESTIONS)
    vectors = [embed.get_query_embedding(t) for t in texts]
    retriever.retrieve(QueryBundle("warm up", embedding=vectors[0]))
    ms, calls, read, tops, seconds = [], Counter(), Counter(), [], Counter()
    for text, vector in zip(texts, vectors):
        before, read_before = Counter(store.collections.calls), Counter(store.collections.ids_read)
        seconds_before = Counter(store.collections.seconds)
        start = time.perf_counter()
        tops.append([n.node.node_id for n in retriever.retrieve(QueryBundle(text, embedding=vector))])
        ms.append(1000 * (time.perf_counter() - start))
        calls.update(store.collections.calls - before)
        read.update(store.collections.ids_read - read_before)
        seconds.update(store.collections.seconds - seconds_before)
    rss = _rss_mb()
    store.close()
    ms.sort()
    return {
        "p50_ms": round(statistics.median(ms), 1), "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 1),
        "open_s": round(open_s, 2), "rss_mb_above_empty_store": round(rss - baseline, 1), "rss_mb": round(rss, 1),
        "calls_per_retrieval": round(sum(calls.values()) / len(texts), 1),
        "calls_by_kind": {k: round(v / len(texts), 2) for k, v in sorted(calls.items())},
        "ids_read_by_primary_key": {k: round(v / len(texts)) for k, v in sorted(read.items())},
        "ms_by_kind": {k: round(1000 * v / len(texts), 1) for k, v in sorted(seconds.items())},
        "top10": tops,
    }


def main(argv: List[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1e4,1e5,1e6")
    parser.add_argument("--out", default="benchmarks/results/scale_milvus_mode.json")
    parser.add_argument("--data-dir", help="the server's data directory, kept (default: a temporary one)")
    parser.add_argument("--modes", default="milvus,memory",
                        help="adjacency modes, each measured in its own process; one named twice is measured twice")
    parser.add_argument("--index", default="AUTOINDEX", help="the vector index type of the corpus' collections")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure the sizes interleaved this many times in one server session (the ratio of each round, "
                        "and their median: this shared machine's load moves a single run's p50 by a third)")
    parser.add_argument("--measure", nargs=4, metavar=("URI", "SIZE", "MODE", "INDEX"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        uri, size, mode, index = args.measure
        print("RESULT " + json.dumps(measure(uri, int(float(size)), mode, index)), flush=True)
        return
    if not milvus_server.inside():
        sys.exit(milvus_server.rerun_inside(["-m", "benchmarks.scale.on_server", *(argv or sys.argv[1:])]))
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    report: Dict[str, Any] = {"server": "Milvus 2.3.5 standalone", "index": args.index, "questions": QUESTIONS, "dim": DIM,
                              "sizes": {}}
    runs = _run_names(args.modes.split(","))
    with milvus_server.server(args.data_dir) as uri:
        for size in sizes:
            prefix = prefix_of(size, args.index)
            entry = report["sizes"][str(size)] = {"ingest": "kept" if stored(uri, prefix) else ingest(uri, size, args.index)}
            entry["settle_s"] = settle(uri, prefix)
        tops: Dict[tuple, Any] = {}
        for round_ in range(args.rounds):  # the sizes interleaved: each round measures every size once
            for size in sizes:
                entry = report["sizes"][str(size)]
                for run, mode in runs:
                    result = _measured(uri, size, mode, args.index)
                    tops[size, run, round_] = result.pop("top10", None)
                    if round_ == 0:
                        entry[run] = result
                    entry.setdefault("rounds", {}).setdefault(run, []).append(
                        {k: result.get(k) for k in ("p50_ms", "p90_ms", "calls_per_retrieval", "rss_mb_above_empty_store")})
                    print(f"{size} {run} round {round_ + 1}: { {k: v for k, v in result.items()} }", file=sys.stderr, flush=True)
                Path(args.out).write_text(json.dumps(report, indent=1))
        for size in sizes:
            entry = report["sizes"][str(size)]
            entry["top10_identical"] = _identical(tops, size, runs, args.rounds)
            print(f"{size}: top 10 identical (of {QUESTIONS}): {entry['top10_identical']}", file=sys.stderr, flush=True)
    first, last = str(sizes[0]), str(sizes[-1])
    rounds = [report["sizes"][size].get("rounds", {}).get("milvus", []) for size in (first, last)]
    if len(sizes) > 1 and all(rounds) and all("p50_ms" in r and r["p50_ms"] for r in rounds[0] + rounds[1]):
        ratios = [b["p50_ms"] / a["p50_ms"] for a, b in zip(*rounds)]
        report["milvus_p50_ratio_largest_to_smallest"] = round(ratios[0], 2)
        report["milvus_p50_ratio_by_round"] = [round(r, 2) for r in ratios]
        report["milvus_p50_ratio_median_of_rounds"] = round(statistics.median(ratios), 2)
    Path(args.out).write_text(json.dumps(report, indent=1))


def _measured(uri: str, size: int, mode: str, index: str) -> Dict[str, Any]:
    """`measure` in a fresh process, so that its resident memory is its own."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale.on_server", "--measure", uri, str(size), mode, index],
        capture_output=True, text=True, check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][7:]) if lines else {"error": done.stderr[-2000:]}


def _identical(tops: Dict[tuple, Any], size: int, runs: List[tuple], rounds: int) -> Dict[str, int]:
    """Questions whose top 10 agree: between the runs of the first round, and each run between a round and
    the next (on a server's approximate index the first run after a start can differ from later ones)."""
    pairs = [((a, 0), (b, 0)) for i, (a, _) in enumerate(runs) for b, _ in runs[i + 1 :]]
    pairs += [((run, r - 1), (run, r)) for run, _ in runs for r in range(1, rounds)]
    found = {}
    for (a, ra), (b, rb) in pairs:
        x, y = tops.get((size, a, ra)), tops.get((size, b, rb))
        if x and y:
            name = f"{a} / {b}" if ra == rb else f"{a} round {ra + 1} / round {rb + 1}"
            found[name] = sum(p == q for p, q in zip(x, y))
    return found


def _run_names(modes: List[str]) -> List[tuple]:
    """(run name, mode) for each mode asked: a mode asked again is run again, as "milvus#2"."""
    seen: Counter = Counter()
    named = []
    for mode in modes:
        seen[mode] += 1
        named.append((mode if seen[mode] == 1 else f"{mode}#{seen[mode]}", mode))
    return named


if __name__ == "__main__":
    main()
