"""Retrievals per second under concurrent clients, on one retriever over one store: serial `retrieve`,
`retrieve` from 2 and 4 threads, and `asyncio.gather` of `aretrieve`; every concurrent answer is checked
equal to the serial one.

    python -m benchmarks.serving --data DIR [--questions 40] [--rounds 4] [--repeats 5] [--out FILE]

The passages of `DIR/corpus.jsonl` are ingested from their text alone (the free extractor, no LLM) into a
Milvus Lite database in a temporary directory, adjacency in memory (the defaults); the questions
(`DIR/questions.jsonl`, the first `--questions`) are embedded beforehand (cached in `$GRAPHRAG_CACHE`,
default `.cache/graphrag-milvus`), so the figures are the retrieval's alone: the default retriever,
`similarity_top_k=10`, `llm=None`. A run is `--rounds` passes over the questions; every way of calling
runs once a round, in turn, for `--repeats` rounds; the rates and their ratios to serial are medians over
the rounds, and the best round of each way is given too. On a machine shared with other work, more
threads also take a larger share of its cores from the other processes: the load average is recorded
beside the figures. Results go to `--out` (default
`benchmarks/results/serving.json`).

What holds the GIL: a retrieval is Python and numpy work on its candidates (the question's names matched
against the known entities, the expansion over the adjacency, the four rankings' loops over the candidate
relations and passages, the passages mapped to nodes), in this process; numpy releases the GIL only inside
its larger array operations. With the vector cache of Milvus Lite, the only waits are the few Milvus
calls of a retrieval (reading the chosen relations' texts and the passages). The benchmark prints the
share of a serial retrieval's wall time spent waiting on Milvus (`milvus_wait_share`): threads can overlap
only that share, so 2 or 4 threads serve about as many retrievals as one, and so does an event loop (a
retrieval with no LLM call never waits on anything the loop could overlap: `aretrieve` runs its steps on
the loop, where threads would only contend for the GIL). A multi-process deployment
(one retriever per process, e.g. `uvicorn --workers N`, or gunicorn) multiplies the serial rate by about
the number of cores it is given: each process holds its own caches (the adjacency and vectors, rebuilt
from Milvus on open), and they share one Milvus server (Milvus Lite is one process per database file).
With an LLM, a retrieval mostly waits on it (NER, then rerank), each call in a daemon thread that holds
no GIL while it waits: those waits overlap, from threads or under `asyncio.gather` (not measured here).

Measurements to come plug in beside `throughput`: e.g. the p50 of a retrieval with a metadata filter
passing ~10% of the passages against none (`p50_ms` with the retriever's filter arguments).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence

from llama_index.core.schema import QueryBundle

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding, load_dataset
from llama_index_graphrag_milvus.embeddings import local_embed_model

OUT = Path(__file__).resolve().parent / "results" / "serving.json"

#: A run's answers: each retrieval's (passage id, score) pairs, in order.
Answers = List[List[tuple]]


def answers(hits_per_retrieval: Sequence[Sequence[Any]]) -> Answers:
    return [[(h.node.node_id, round(h.score, 9)) for h in hits] for hits in hits_per_retrieval]


def serial(retriever: GraphRAGRetriever, work: List[QueryBundle]) -> Answers:
    return answers([retriever.retrieve(bundle) for bundle in work])


def threads(n: int) -> Callable[[GraphRAGRetriever, List[QueryBundle]], Answers]:
    def run(retriever: GraphRAGRetriever, work: List[QueryBundle]) -> Answers:
        with ThreadPoolExecutor(max_workers=n) as pool:
            return answers(list(pool.map(retriever.retrieve, work)))

    return run


def gathered(retriever: GraphRAGRetriever, work: List[QueryBundle]) -> Answers:
    async def run() -> list:
        return await asyncio.gather(*(retriever.aretrieve(bundle) for bundle in work))

    return answers(asyncio.run(run()))


WAYS: Dict[str, Callable[[GraphRAGRetriever, List[QueryBundle]], Answers]] = {
    "serial": serial, "threads_2": threads(2), "threads_4": threads(4), "asyncio_gather": gathered,
}


def throughput(retriever: GraphRAGRetriever, work: List[QueryBundle], repeats: int) -> Dict[str, Any]:
    """Retrievals per second of each way of calling and its ratio to serial, each the median over
    `repeats` rounds (a round runs every way once, in turn, so that a ratio compares runs close in time);
    whether its answers equal the serial ones; the share of the serial runs' time spent waiting on Milvus."""
    expected = serial(retriever, work)  # also warms every cache
    rates: Dict[str, List[float]] = {name: [] for name in WAYS}
    equal = {name: True for name in WAYS}
    waiting = []
    for _ in range(repeats):
        for name, way in WAYS.items():
            wall, milvus = time.perf_counter(), _milvus_seconds(retriever)
            got = way(retriever, work)
            wall, milvus = time.perf_counter() - wall, _milvus_seconds(retriever) - milvus
            rates[name].append(len(work) / wall)
            equal[name] = equal[name] and got == expected
            if name == "serial":
                waiting.append(milvus / wall)
    return {
        "retrievals_per_s": {name: round(statistics.median(r), 1) for name, r in rates.items()},
        "ratio_to_serial": {
            name: round(statistics.median(a / b for a, b in zip(r, rates["serial"])), 3) for name, r in rates.items()
        },
        # the best round of each way: on a shared machine, its rate with the least interference
        "best_retrievals_per_s": {name: round(max(r), 1) for name, r in rates.items()},
        "best_ratio_to_serial": {name: round(max(r) / max(rates["serial"]), 3) for name, r in rates.items()},
        "answers_equal_serial": equal,
        "milvus_wait_share": round(statistics.median(waiting), 3),
    }


def _milvus_seconds(retriever: GraphRAGRetriever) -> float:
    """The seconds the store's Milvus calls took so far (waits, with the GIL released)."""
    return sum(retriever.store.collections.seconds.values())


def p50_ms(retriever: GraphRAGRetriever, work: List[QueryBundle]) -> float:
    """The median milliseconds of one serial retrieval."""
    ms = []
    for bundle in work:
        start = time.perf_counter()
        retriever.retrieve(bundle)
        ms.append(1000 * (time.perf_counter() - start))
    return round(statistics.median(ms), 2)


def main(argv: Sequence[str] | None = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a dataset directory: corpus.jsonl, questions.jsonl")
    parser.add_argument("--questions", type=int, default=40, help="questions used (the first N)")
    parser.add_argument("--rounds", type=int, default=4, help="passes over the questions in one run")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of every way of calling (medians are kept)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    cache = Path(os.environ.get("GRAPHRAG_CACHE", ".cache/graphrag-milvus"))
    embed = CachedEmbedding(local_embed_model(), cache / "embeddings.sqlite")
    dataset = load_dataset(args.data, triples=False)
    questions = dataset.questions[: args.questions]
    bundles = [QueryBundle(q["question"], embedding=embed.get_query_embedding(q["question"])) for q in questions]
    work = bundles * args.rounds
    with tempfile.TemporaryDirectory() as tmp:
        store = MilvusGraphStore(uri=str(Path(tmp) / "serving.db"), embed_model=embed, collection_prefix="serving")
        try:
            GraphRAGTransform(store=store)(dataset.nodes)
            retriever = GraphRAGRetriever(store=store, similarity_top_k=10, llm=None)
            result = {
                "data": Path(args.data).name, "passages": len(dataset.nodes), "questions": len(questions),
                "retrievals_per_run": len(work), "milvus": "Lite, adjacency in memory",
                "p50_ms": p50_ms(retriever, bundles),
                **throughput(retriever, work, args.repeats),
                "load_average": [round(x, 2) for x in os.getloadavg()],  # of the machine, as the run ends
            }
        finally:
            store.close()
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
