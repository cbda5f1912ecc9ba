"""Per-question top-10 passage ids and retrieval p50 of dense retrieval and of each retriever
configuration on the dev sets: run it on two versions of the package and compare the JSON files, to show
that a change keeps every ranking (not only the recall) and to measure latency side by side.

    python -m benchmarks.identity OUT.json [DATA_DIR ...]          # default: $GRAPHRAG_DATA/{musique,hotpotqa,wiki2}
    PYTHONPATH=/path/to/other/checkout python benchmarks/identity.py OTHER.json   # the other checkout's package
    python -m benchmarks.identity --compare OUT.json OTHER.json     # rankings that differ, per set

Each set is ingested into a temporary store (`--db-dir DIR` keeps the stores there, for
`benchmarks.llm_trust --db-dir DIR`). Embeddings are cached in `$GRAPHRAG_CACHE`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from llama_index.core.schema import QueryBundle

from llama_index_graphrag_milvus import GraphRAGRetriever
from llama_index_graphrag_milvus.bench.scripted import random_llm

if __package__:
    from benchmarks.devsets import cached_embed_model, data_dirs, dev_store
else:  # run as a file, to measure the package another checkout puts on PYTHONPATH
    from devsets import cached_embed_model, data_dirs, dev_store

METHODS = {
    "graphrag": {},
    "graphrag_chain": {"reranker": "chain"},
    "graphrag_no_synonyms": {"use_synonyms": False},
    "graphrag_ppr": {"reranker": "ppr"},
    "graphrag_similarity": {"reranker": "similarity"},
    "graphrag_d2": {"expansion_degree": 2},
    "llm_random3": {"llm": "random3"},
}


def rankings(retrieve, questions, vectors):
    """Each question's ranked passage ids, and the median milliseconds a retrieval took."""
    rows, ms = [], []
    for question, vector in zip(questions, vectors):
        start = time.perf_counter()
        ids = retrieve(QueryBundle(question["question"], embedding=vector))
        ms.append(1000 * (time.perf_counter() - start))
        rows.append(ids)
    return rows, statistics.median(ms)


def recall(questions, rows, k):
    return sum(len(set(q["gold_ids"]) & set(r[:k])) / len(q["gold_ids"]) for q, r in zip(questions, rows)) / len(rows)


def measure(data: Path, embed, db_dir: Path) -> dict:
    dataset, store = dev_store(data, embed, db_dir)
    vectors = [embed.get_query_embedding(q["question"]) for q in dataset.questions]
    found = {"dense": rankings(lambda b: [n.node.node_id for n in store.search_passages(b.embedding, 10)], dataset.questions, vectors)}
    for name, kwargs in METHODS.items():
        kwargs = {**kwargs, "llm": random_llm(3)} if kwargs.get("llm") == "random3" else kwargs
        retriever = GraphRAGRetriever(store=store, similarity_top_k=10, **{"llm": None, **kwargs})
        retriever.retrieve(QueryBundle("warm up", embedding=vectors[0]))
        found[name] = rankings(lambda b, r=retriever: [h.node.node_id for h in r.retrieve(b)], dataset.questions, vectors)
    store.close()
    for name, (rows, p50) in found.items():
        print(dataset.name, name, [round(recall(dataset.questions, rows, k), 3) for k in (2, 5, 10)], f"{p50:.1f} ms")
    return {"rankings": {n: r for n, (r, _) in found.items()}, "p50": {n: p for n, (_, p) in found.items()}}


def compare(a_path: str, b_path: str) -> None:
    """Print, per set and method, how many questions' top 10 differ between two runs."""
    a, b = json.loads(Path(a_path).read_text()), json.loads(Path(b_path).read_text())
    for data in a:
        for name, rows in a[data]["rankings"].items():
            other = b.get(data, {}).get("rankings", {}).get(name)
            differ = "missing" if other is None else sum(x[:10] != y[:10] for x, y in zip(rows, other))
            print(f"{Path(data).name:10s} {name:22s} differ: {differ} of {len(rows)}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the JSON to write (with --compare: the first of two to compare)")
    parser.add_argument("data", nargs="*", help="data directories (default: $GRAPHRAG_DATA's dev sets)")
    parser.add_argument("--compare", metavar="OTHER", help="compare OUT with OTHER instead of measuring")
    parser.add_argument("--db-dir", help="keep the stores in this directory (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.compare:
        compare(args.out, args.compare)
        return
    sets, embed = data_dirs(args.data), cached_embed_model()
    with tempfile.TemporaryDirectory(prefix="graphrag-identity-") as tmp:
        db_dir = Path(args.db_dir or tmp)
        db_dir.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({str(data): measure(data, embed, db_dir) for data in sets}))


if __name__ == "__main__":
    main()
