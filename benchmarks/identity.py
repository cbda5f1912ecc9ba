"""Per-question top-10 passage ids and retrieval p50 of dense retrieval and of each retriever
configuration on a dataset: run it on two versions of the package and compare the JSON files, to show
that a change keeps every ranking (not only the recall) and to measure latency side by side.

    python -m benchmarks.identity OUT.json [DATA_DIR ...]          # default: the three dev sets
    PYTHONPATH=/path/to/other/checkout python benchmarks/identity.py OTHER.json
    python -m benchmarks.identity --compare A.json B.json           # rankings that differ, per set

The embeddings are cached in `$GRAPHRAG_CACHE` (default `.cache/graphrag-milvus`), so a second run
embeds nothing.
"""

import json
import os
import statistics
import sys
import time
from pathlib import Path

from llama_index.core.schema import QueryBundle

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import local_embed_model

try:  # the package's layout since issue 19
    from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding, load_dataset
    from llama_index_graphrag_milvus.bench.scripted import random_llm
except ImportError:  # the flat layout before it
    from llama_index_graphrag_milvus.evaluation import CachedEmbedding, load_dataset
    from llama_index_graphrag_milvus.scripted import random_llm

DEV_SETS = ("../shared/data/musique", "../shared/data/hotpotqa", "../shared/data/wiki2")

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


def measure(data: str, embed) -> dict:
    dataset = load_dataset(data)
    store = MilvusGraphStore(uri=f"/tmp/identity_{Path(data).name}.db", embed_model=embed, collection_prefix="bench", overwrite=True)
    GraphRAGTransform(store=store, llm=None)(dataset.nodes)
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


def main() -> None:
    if sys.argv[1] == "--compare":
        compare(sys.argv[2], sys.argv[3])
        return
    out, sets = sys.argv[1], sys.argv[2:] or DEV_SETS
    cache = Path(os.environ.get("GRAPHRAG_CACHE", ".cache/graphrag-milvus"))
    embed = CachedEmbedding(local_embed_model(), cache / "embeddings.sqlite")
    Path(out).write_text(json.dumps({data: measure(data, embed) for data in sets}))


if __name__ == "__main__":
    main()
